import Boardloop
import BoardSupport
import BoardloopGPIO

extension ConfigParser {
    /// What a part of the config adds to its loop, where the file gives it.
    private struct Share {
        var at: Position
        var node: Node
        var path: String
        var budget: LoopBudget
    }

    /// What the engine refuses to make a loop with (`BoardRunLoop.init`):
    /// a capacity above its maximum, or more than 256 MiB reserved, with the
    /// capacities the start makes it with (`loops[i].capacities`). The
    /// error is at the key whose share takes the loop over the limit, the
    /// shares (each part's `LoopBudget`) counted in the order they appear
    /// in the file.
    func checkReservation(loop i: Int, config: DaemonConfig, root: Node) {
        guard loops[i].capacities.modes <= Self.maxModes else { return }  // reported as too many modes
        let name = loops[i].name
        let id = LoopID(i)
        let caps = planningCapabilities
        let pulsed = Program(config: config, generation: 0).pulsedLines
        var shares: [Share] = []
        for l in loops[i].lines where l.index < lineNodes.count {
            let node = lineNodes[l.index]
            let b =
                lines[l.index].isInput
                ? InputLine.budget(l, in: config, capabilities: caps) : OutputLine.budget(pulsed: pulsed.contains(l.index))
            shares.append(Share(at: r.position(node), node: node, path: "lines.\(lines[l.index].name)", budget: b))
        }
        for q in sequences where q.loop == id {
            guard case .parallel = q.policy, let (node, path) = sequenceMaxNodes[q.name] else { continue }
            shares.append(Share(at: r.position(node), node: node, path: path, budget: SequenceRunner.budget(q)))
        }
        if i == 0 {
            for c in commands {
                guard let (node, path) = commandNodes[c.name] else { continue }
                shares.append(Share(at: r.position(node), node: node, path: path, budget: CommandRunner.budget(c)))
            }
        }
        shares.sort { ($0.at.line, $0.at.column) < ($1.at.line, $1.at.column) }
        let total = LoopBudget.total(config, loop: id, capabilities: caps, extras: .configStart)
        var b = shares.reduce(total) { rest, s in
            LoopBudget(
                sources: rest.sources - s.budget.sources, timers: rest.timers - s.budget.timers,
                observers: rest.observers - s.budget.observers, performs: rest.performs - s.budget.performs)
        }
        guard let first = problem(LoopBudget.capacities(b, modes: modes.count), loop: name) else {
            for s in shares {
                b += s.budget
                if let p = problem(LoopBudget.capacities(b, modes: modes.count), loop: name) {
                    r.error(s.node, s.path, "this makes " + p)
                    return
                }
            }
            return
        }
        // Too much before any share counted: the loop's other parts (tasks,
        // reactions, sequences) together.
        let node = (i == 0 ? nil : loopLineNodes[i]) ?? root
        log.error(
            node == root ? Position(line: 1, column: 1) : r.position(node), i == 0 ? "" : "workers.\(name)",
            "the tasks, reactions and sequences make " + first)
    }

    /// Why the engine would refuse a loop with `c`, if it would.
    private func problem(_ c: BoardRunLoop.Capacities, loop name: String) -> String? {
        let m = BoardRunLoop.Capacities.maxima
        for (what, n, max) in [
            ("sources", c.sources, m.sources), ("timers", c.timers, m.timers), ("pending performs", c.pendingPerforms, m.pendingPerforms),
        ] where n > max {
            return "the \(name) loop need \(n) \(what) at start; a run loop has at most \(max)"
        }
        guard c.reservedBytes > m.bytes else { return nil }
        let mib = (c.reservedBytes + (1 << 20) - 1) >> 20
        return
            "the \(name) loop reserve about \(mib) MiB at start (\(c.sources) sources, \(c.timers) timers, \(c.modes) modes); a run loop may reserve at most \(m.bytes >> 20) MiB"
    }
}
