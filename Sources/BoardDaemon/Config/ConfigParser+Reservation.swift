import Boardloop
import BoardSupport
import Yams

extension ConfigParser {
    /// What a part of the config adds to its loop.
    private struct Share {
        var at: Position
        var node: Node
        var path: String
        var sources = 0
        var timers = 0
        var performs = 0
    }

    /// The capacities the daemon makes loop `i` with at start, at most: the
    /// config's, plus what the daemon and the GPIO layer add (`Daemon.init`
    /// and `Daemon.startWorkers`): the held-event replay and summary timers,
    /// a vanish-check timer per input (kernels before 6.6), on the main loop
    /// the systemd watchdog's timer, a run-time limit's timer and the signal
    /// source, on a worker its thread's exit source.
    func startCapacities(loop i: Int) -> BoardRunLoop.Capacities {
        var c = loops[i].capacities
        let inputs = loops[i].lines.filter { lines[$0.index].isInput }.count
        c.timers += Daemon.ownTimers + inputs
        if i == 0 {
            c.timers += 2
            c.sources += 1
        } else {
            c.sources += LoopThread.ownSources
        }
        return c
    }

    /// What the engine refuses to make a loop with (`BoardRunLoop.init`):
    /// a capacity above its maximum, or more than 256 MiB reserved. The
    /// error is at the key whose share takes the loop over the limit, the
    /// shares counted in the order they appear in the file.
    func checkReservation(loop i: Int, root: Node) {
        guard loops[i].capacities.modes <= Self.maxModes else { return }  // reported as too many modes
        let name = loops[i].name
        let start = startCapacities(loop: i)
        var shares: [Share] = []
        for id in loops[i].lines where id.index < lineNodes.count {
            let l = lines[id.index]
            let node = lineNodes[id.index]
            var s = Share(at: YAMLReader.position(node), node: node, path: "lines.\(l.name)", sources: 1)
            if l.isInput {
                s.timers = 1  // the vanish check
                if l.settings.debounce > .zero { s.timers += 1 }
                if !l.filters.isEmpty { s.timers += 1 }
                if l.gestures != nil { s.timers += 1 }
                if l.rateLimit != nil { s.timers += 1 }
                if l.held.drainsOnTimer {
                    s.timers += 1
                    s.performs += 1
                }
            }
            shares.append(s)
        }
        for q in sequences where q.loop == LoopID(i) {
            guard case .parallel = q.policy, let (node, path) = sequenceMaxNodes[q.name] else { continue }
            shares.append(Share(at: YAMLReader.position(node), node: node, path: path, timers: q.policy.concurrentRuns))
        }
        if i == 0 {
            for c in commands {
                guard let (node, path) = commandNodes[c.name] else { continue }
                shares.append(Share(at: YAMLReader.position(node), node: node, path: path, sources: 3 * c.maxRunning, timers: c.maxRunning))
            }
        }
        shares.sort { ($0.at.line, $0.at.column) < ($1.at.line, $1.at.column) }
        var c = start
        c.sources -= shares.map(\.sources).reduce(0, +)
        c.timers -= shares.map(\.timers).reduce(0, +)
        c.pendingPerforms -= shares.map(\.performs).reduce(0, +)
        guard let first = problem(c, loop: name) else {
            for s in shares {
                c.sources += s.sources
                c.timers += s.timers
                c.pendingPerforms += s.performs
                if let p = problem(c, loop: name) {
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
            node == root ? Position(line: 1, column: 1) : YAMLReader.position(node), i == 0 ? "" : "workers.\(name)",
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
