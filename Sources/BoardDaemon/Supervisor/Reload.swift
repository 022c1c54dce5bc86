import Boardloop
import BoardloopGPIO

// A reload swaps a new program into each loop between passes. What is in
// flight follows one rule (docs/daemon.md, "Reload"):
// - a sequence whose definition did not change (same steps, mode and
//   policy, naming the same lines, sequences and commands) runs on to its
//   end under the new config, its `wait` ending when it would have;
// - a sequence that changed or is gone stops, and the outputs it sets go
//   to their `safe:` value (one log line each);
// - a pulse in flight ends when it would have if its line is kept and the
//   new config still pulses it; otherwise the line is set off now;
// - an output line the new config drops is set to its `safe:` value
//   before it is released.

/// The reload read off the main loop, who waits for its outcome, and who
/// asked for a reload while it was read (served by the next read).
struct ReloadQueue {
    var read: ReloadRead?
    var waiting: [((Daemon.ReloadOutcome) -> Void)?] = []
    var next: [((Daemon.ReloadOutcome) -> Void)?] = []
}

/// What one loop did in a reload, summed over the loops for the log line.
struct SwapResult {
    var kept = 0, requested = 0, released = 0
    /// Outputs whose new settings were applied in their request.
    var reconfigured = 0
    mutating func add(_ o: SwapResult) {
        kept += o.kept
        reconfigured += o.reconfigured
        requested += o.requested
        released += o.released
    }
}

extension Daemon {
    /// What a reload did: applied, or refused with the errors it logged
    /// (a control `reload` returns them).
    public struct ReloadOutcome: Sendable, Equatable {
        public var applied: Bool
        public var errors: [String]
    }

    /// What a reload asked for while boardd stops gets.
    static let stoppingOutcome = ReloadOutcome(applied: false, errors: ["boardd is stopping; the reload was not applied"])

    /// Loads the config file again (or, from `boardd test`, the file
    /// `path` names) on this thread and swaps it in, or keeps the running
    /// one when the new one has errors (each is logged with line:column).
    /// The daemon's own reloads (SIGHUP, the control socket) read off the
    /// main loop instead (`requestReload`).
    @discardableResult
    public func reload(from path: String? = nil) -> ReloadOutcome {
        let file = path ?? config.file
        announceReload(file, offLoop: false)
        return apply(ConfigLoader.load(path: file, options: options.loadOptions), file: file)
    }

    /// Asks for a reload of the config file without holding up the main
    /// loop: the file is read and checked on a thread of its own
    /// (`ReloadRead`), and the checked config swapped in on the main loop
    /// once it is there. `done` gets the outcome on the main loop. A
    /// request while a read is in flight is served by one more read once
    /// that one is applied (the file may have changed since it was read):
    /// requests coalesce, and none is lost. A stop does not wait for a read.
    public func requestReload(_ done: ((ReloadOutcome) -> Void)? = nil) {
        guard !stopRequested else {
            done?(Self.stoppingOutcome)
            return
        }
        if let read = reloadQueue.read {
            if reloadQueue.next.isEmpty { logger.notice("reload: asked for again while \(read.file) is read; read once more after that") }
            reloadQueue.next.append(done)
            return
        }
        startRead(waiting: [done])
    }

    private func startRead(waiting: [((ReloadOutcome) -> Void)?]) {
        let file = config.file
        announceReload(file, offLoop: true)
        let started = ReloadRead.start(file, options: options.loadOptions, on: loop, before: options.reloadReadStarts) { [weak self] in
            self?.readFinished()
        }
        switch started {
        case let .success(read):
            reloadQueue.read = read
            reloadQueue.waiting = waiting
        case let .failure(e):
            logger.warning("reload: \(e); reading \(file) on the main loop")
            let outcome = apply(ConfigLoader.load(path: file, options: options.loadOptions), file: file)
            for w in waiting { w?(outcome) }
        }
    }

    /// On the main loop, when the read in flight has its result.
    private func readFinished() {
        guard let read = reloadQueue.read, let result = read.take() else { return }
        reloadQueue.read = nil
        let waiting = reloadQueue.waiting
        reloadQueue.waiting = []
        let outcome = stopRequested ? Self.stoppingOutcome : apply(result, file: read.file)
        for w in waiting { w?(outcome) }
        let next = reloadQueue.next
        reloadQueue.next = []
        if !next.isEmpty && !stopRequested { startRead(waiting: next) } else { for w in next { w?(Self.stoppingOutcome) } }
    }

    /// At a stop: a read in flight is left to end on its own, its result
    /// dropped; whoever waits for a reload is told it was not applied.
    func abandonReload() {
        guard let read = reloadQueue.read else { return }
        read.abandon()
        logger.notice("reload: the read of \(read.file) is abandoned (boardd stops)")
        let waiting = reloadQueue.waiting + reloadQueue.next
        reloadQueue = ReloadQueue()
        for w in waiting { w?(Self.stoppingOutcome) }
    }

    private func announceReload(_ file: String, offLoop: Bool) {
        options.notifier?.send("RELOADING=1\nSTATUS=reloading \(file)\nMONOTONIC_USEC=\(MonotonicInstant.now.nanoseconds / 1000)")
        logger.notice("reload: reading \(file)\(offLoop ? " (off the main loop)" : "")")
    }

    /// Swaps in the config `result` read from `file`, or keeps the running
    /// one; tells systemd the daemon is ready again either way.
    private func apply(_ result: LoadResult, file: String) -> ReloadOutcome {
        defer { options.notifier?.send("READY=1\nSTATUS=\(status)") }
        guard let new = result.config else {
            for d in result.errors { logger.error("\(d.description)") }
            reloads.refused += 1
            let why = "reload refused: \(result.errors.count) error(s) in \(file); the running config stays as it was"
            logger.error("\(why)")
            lastReloadError = why
            return ReloadOutcome(applied: false, errors: result.errors.map(\.description))
        }
        if new == config {
            logger.notice("reload: the config did not change")
            reloads.applied += 1
            return ReloadOutcome(applied: true, errors: [])
        }
        if let why = incompatibility(new) {
            reloads.refused += 1
            let text = "reload refused: \(why); restart boardd to apply this config (the running config stays)"
            logger.error("\(text)")
            lastReloadError = text
            return ReloadOutcome(applied: false, errors: [text])
        }
        generation += 1
        let program = Program(config: new, generation: generation)
        traceLog.register(program)
        if let r = removals(new) {
            if r.moreThanKept {
                logger.warning(
                    "reload: the new config removes more than it keeps: \(r.text) (if the file was saved half-written, write it to a new file and rename it over the old one)")
            } else {
                logger.notice("reload: removed \(r.text)")
            }
        }
        let (totals, failures) = swapAll(to: program, timeout: .seconds(5))
        let limitChanged = new.log != config.log
        config = new
        if limitChanged { traceLog.writer.rateLimit = new.log.rateLimit }
        writeSafeTable()
        for s in services { s.configApplied(new) }
        reloads.applied += 1
        logger.notice(
            "reloaded \(new.file): \(totals.kept) lines kept as they were, \(totals.requested) requested, \(totals.released) released\(totals.reconfigured > 0 ? ", \(totals.reconfigured) reconfigured in place" : "")\(failures > 0 ? " (with errors, see above)" : "")"
        )
        return ReloadOutcome(applied: true, errors: [])
    }

    /// Why `new` cannot be swapped in place, if it cannot.
    func incompatibility(_ new: DaemonConfig) -> String? {
        guard new.board.name == config.board.name else { return "the board changed (\(config.board.name) -> \(new.board.name))" }
        guard new.loops.map(\.name) == config.loops.map(\.name) else { return "the workers changed" }
        // The control socket is made once, at the start (its path, mode,
        // group and client limit).
        guard new.control == config.control else { return "the control: block changed" }
        // The MQTT client's parts of the main loop are made at the start;
        // its settings may change at a reload, not whether it runs.
        if (new.mqtt == nil) != (config.mqtt == nil) && options.mqtt && !options.inlineWorkers {
            return new.mqtt == nil ? "the mqtt: block was removed" : "an mqtt: block was added"
        }
        // A moved line first: it also changes both loops' capacities, and
        // the line is what the user changed.
        for l in new.lines {
            if let old = config.lines.first(where: { $0.name == l.name }), old.loop != l.loop {
                return "line '\(l.name)' moved from loop '\(config.loops[old.loop.index].name)' to '\(new.loops[l.loop.index].name)'"
            }
        }
        for (i, (a, b)) in zip(config.loops, new.loops).enumerated() {
            if a.cpus != b.cpus || a.realtimePriority != b.realtimePriority || a.timerSlack != b.timerSlack
                || a.lockMemory != b.lockMemory || a.realtime != b.realtime
            {
                return "worker '\(a.name)' settings changed"
            }
            let x = boxes[i].loop?.capacities ?? capacities(for: config, loop: i), y = capacities(for: new, loop: i)
            if y.sources > x.sources || y.timers > x.timers || y.modes > x.modes || y.pendingPerforms > x.pendingPerforms
                || y.eventsPerWait > x.eventsPerWait
            {
                return "loop '\(a.name)' needs larger capacities than it was made with"
            }
        }
        return nil
    }

    /// What `new` drops of the running config, by kind ("lines a, b; tasks
    /// t"), and whether that is more than it keeps (a file read half-written
    /// looks like that).
    func removals(_ new: DaemonConfig) -> (text: String, moreThanKept: Bool)? {
        func gone(_ old: [String], _ now: [String]) -> [String] { old.filter { !now.contains($0) } }
        let kinds: [(String, [String], [String])] = [
            ("lines", config.lines.map(\.name), new.lines.map(\.name)),
            ("tasks", config.tasks.map(\.name), new.tasks.map(\.name)),
            ("reactions", config.reactions.map(\.name), new.reactions.map(\.name)),
            ("sequences", config.sequences.map(\.name), new.sequences.map(\.name)),
            ("commands", config.commands.filter(\.declared).map(\.name), new.commands.filter(\.declared).map(\.name)),
        ]
        var parts: [String] = []
        var removed = 0, kept = 0
        for (kind, old, now) in kinds {
            let g = gone(old, now)
            removed += g.count
            kept += old.count - g.count
            if !g.isEmpty { parts.append("\(kind) \(g.joined(separator: ", "))") }
        }
        return parts.isEmpty ? nil : (parts.joined(separator: "; "), removed > kept)
    }
}

extension DaemonConfig {
    /// A sequence's definition in words, with every reference by name: two
    /// configs run "the same sequence" when these are equal.
    func definition(of s: SequenceConfig) -> String {
        "mode \(s.mode.map { modes[$0.index].name } ?? "-") policy \(s.policy) loop \(loops[s.loop.index].name) steps \(describe(s.steps)) on_stop \(s.onStop.map(describe) ?? "safe")"
    }

    private func describe(_ actions: [Action]) -> String {
        actions.map(describe).joined(separator: "; ")
    }

    private func describe(_ a: Action) -> String {
        switch a {
        case let .set(l, v): "set \(lines[l.index].name) \(v)"
        case let .toggle(l): "toggle \(lines[l.index].name)"
        case let .pulse(l, d): "pulse \(lines[l.index].name) \(d)"
        case let .wait(d): "wait \(d)"
        case let .run(c, argv): "run \(commands[c.index].name) \(argv)"
        case let .log(level, text): "log \(level) \(text)"
        case let .mode(m): "mode \(modes[m.index].name)"
        case let .startSequence(s): "start \(sequences[s.index].name)"
        case let .stopSequence(s): "stop \(sequences[s.index].name)"
        case let .ifThen(c, t, e): "if \(describe(c)) then [\(describe(t))] else [\(describe(e))]"
        }
    }

    private func describe(_ c: Condition) -> String {
        switch c {
        case let .line(l, v): "\(lines[l.index].name)=\(v)"
        case let .mode(m): "mode=\(modes[m.index].name)"
        case let .not(c): "not(\(describe(c)))"
        case let .all(cs): "all(\(cs.map(describe).joined(separator: ",")))"
        case let .any(cs): "any(\(cs.map(describe).joined(separator: ",")))"
        }
    }

    /// What a stopped run sets when the sequence has no `on_stop:`: each
    /// output its steps write that has a `safe:` value, to it.
    func safeStop(of s: SequenceConfig) -> [LineID] {
        outputs(of: s).compactMap { name in line(named: name).flatMap { self[$0].safeValue != nil ? $0 : nil } }
    }

    /// The output lines a sequence's steps set, toggle or pulse, by name.
    func outputs(of s: SequenceConfig) -> [String] {
        var names: [String] = []
        func walk(_ actions: [Action]) {
            for a in actions {
                switch a {
                case let .set(l, _), let .toggle(l), let .pulse(l, _):
                    if !names.contains(lines[l.index].name) { names.append(lines[l.index].name) }
                case let .ifThen(_, t, e):
                    walk(t)
                    walk(e)
                default: break
                }
            }
        }
        walk(s.steps)
        return names
    }

    /// A context of `old`'s indices in this config's (by name; -1 where
    /// the line, reaction or task is gone).
    func translate(_ ctx: Context, from old: DaemonConfig) -> Context {
        var c = ctx
        if ctx.line >= 0 { c.line = line(named: old.lines[Int(ctx.line)].name).map { Int32($0.index) } ?? -1 }
        if ctx.reaction >= 0 {
            let n = old.reactions[Int(ctx.reaction)].name
            c.reaction = reactions.firstIndex { $0.name == n }.map(Int32.init) ?? -1
        }
        if ctx.task >= 0 {
            let n = old.tasks[Int(ctx.task)].name
            c.task = tasks.firstIndex { $0.name == n }.map(Int32.init) ?? -1
        }
        return c
    }
}

extension LoopRuntime {
    /// The first step of a reload, on every loop before any swaps: each
    /// running sequence of this loop that `p` does not run the same way is
    /// stopped. Returns the outputs those sequences set (by name), which
    /// every loop then sets to their safe values in `swap`.
    func stopAbandonedSequences(for p: Program) -> [String] {
        var outputs: [String] = []
        for case let s? in sequences where s.progress != nil {
            let name = s.config.name
            let why: String
            if let n = p.config.sequence(named: name) {
                if p.config.definition(of: p.config[n]) == config.definition(of: s.config) { continue }
                why = "its definition changed"
            } else {
                why = "the new config has no such sequence"
            }
            s.abandon()
            if s.config.onStop != nil {
                // Its own stop actions, from the program it ran under.
                logger.notice("sequence \(name): stopped by the reload (\(why)); its on_stop runs")
                s.runStopActions(Context())
                continue
            }
            let touched = config.outputs(of: s.config)
            logger.notice(
                "sequence \(name): stopped by the reload (\(why))\(touched.isEmpty ? "" : "; its outputs \(touched.joined(separator: ", ")) go to their safe values")")
            outputs += touched
        }
        return outputs
    }

    /// Before the requests a reload does not keep are released: where
    /// every line of one is held, what its kernel buffer holds is read
    /// into the lines' rings (and carried from there), not released with
    /// the request.
    private func readHeldBeforeRelease(keeping requestKept: [ObjectIdentifier: Bool]) {
        var held: [ObjectIdentifier: (request: GPIOLineRequest, all: Bool)] = [:]
        for case let i? in inputs where requestKept[ObjectIdentifier(i.request)] != true {
            let key = ObjectIdentifier(i.request)
            let isHeld = !admits(i.config.priority)
            held[key] = (i.request, (held[key]?.all ?? true) && isHeld)
        }
        for (_, r) in held where r.all && r.request.eventSource != nil && r.request.hasPendingEvents {
            r.request.readPendingEvents()
        }
    }

    /// Swaps in a new program between passes: tasks stop; sequences the new
    /// program runs the same way go on, others were stopped by
    /// `stopAbandonedSequences`; outputs in `makeSafe` and outputs the new
    /// config drops go to their safe values; lines whose settings did not
    /// change keep their requests (outputs keep their values, pulses in
    /// flight their end), others are released or requested; automation
    /// starts again, in the mode the loop was in where it still exists.
    func swap(to p: Program, gpio: any GPIOBackend, makeSafe: Set<String>) throws -> SwapResult {
        var result = SwapResult()
        let old = config
        let oldMode = (name: old.modes[effectiveMode].name, mask: admitMask[effectiveMode])
        let oldBase = old.modes[baseMode].name
        for t in tasks { t.stop() }
        tasks = []
        var carried: [(Int, SequenceRunner.Progress)] = []
        for case let s? in sequences {
            if var progress = s.progress, let n = p.config.sequence(named: s.config.name) {
                for i in progress.runs.indices {
                    if let ctx = progress.runs[i]?.ctx { progress.runs[i]?.ctx = p.config.translate(ctx, from: old) }
                }
                progress.queue = progress.queue.map { p.config.translate($0, from: old) }
                carried.append((n.index, progress))
            }
            s.detach()
        }
        var kept: [String: Daemon.Kept] = [:]
        func same(_ a: LineConfig) -> LineConfig? {
            guard let b = p.config.lines.first(where: { $0.name == a.name }) else { return nil }
            return a.address == b.address && a.settings == b.settings && a.loop == b.loop && a.held == b.held ? b : nil
        }
        var filters: [String: InputLine.FilterState] = [:]
        // Inputs are kept by request: a request stays when the new config
        // groups the same lines in it (`Daemon.inputGroups`) and none of
        // them changed (the kernel can neither release one line of a
        // request nor add one); else each of its lines is requested again.
        let newInputs = p.config.lines.filter { $0.loop == id && $0.isInput }
        var newGroup: [String: Set<String>] = [:]
        for g in Daemon.inputGroups(newInputs) {
            let names = Set(g.map { newInputs[$0].name })
            for n in names { newGroup[n] = names }
        }
        var requestKept: [ObjectIdentifier: Bool] = [:]
        var oldGroup: [ObjectIdentifier: Set<String>] = [:]
        for case let i? in inputs { oldGroup[ObjectIdentifier(i.request), default: []].insert(i.config.name) }
        for case let i? in inputs {
            let key = ObjectIdentifier(i.request)
            let keeps = same(i.config) != nil && newGroup[i.config.name] == oldGroup[key]
            requestKept[key] = (requestKept[key] ?? true) && keeps
        }
        readHeldBeforeRelease(keeping: requestKept)
        for case let i? in inputs {
            i.unschedule()
            var state = i.filterState
            if let b = same(i.config), requestKept[ObjectIdentifier(i.request)] == true {
                kept[b.name] = Daemon.Kept(config: b, request: i.request, index: i.index, value: false, pulseEnd: nil)
                filters[b.name] = state
            } else {
                if let n = p.config.line(named: i.config.name), p.config[n].isInput, p.config[n].loop == id {
                    // Only how its held events are kept changed: the same
                    // line in a new request, its filters and ring go on.
                    let b = p.config[n]
                    let sameLine = b.address == i.config.address && b.settings == i.config.settings
                    if sameLine { state.rerequested = true } else { state.restart = true }
                    filters[i.config.name] = state
                } else if !state.held.isEmpty {
                    logger.warning(
                        "\(i.config.name): \(state.held.count) held events dropped by the reload (the new config has no such input on this loop); counted as lost")
                }
                i.request.release()
                result.released += 1
            }
        }
        // Outputs share a request per chip: a line that goes is released
        // with its request when no kept output is left in it; until then
        // it stays requested at its value (`idleOutputs`).
        var leaving: [OutputLine] = []
        var reconfigured = 0
        for case let o? in outputs {
            let name = o.config.name
            var pulseEnd = o.pulseEnd
            o.detach()
            var next = same(o.config)
            let pulsedThere = next.flatMap { p.config.line(named: $0.name) }.map { p.pulsedLines.contains($0.index) } ?? false
            if makeSafe.contains(name) || p.config.line(named: name) == nil {
                let why = makeSafe.contains(name) ? "a sequence setting it was stopped by the reload" : "the new config drops the line"
                if let v = o.config.safeValue {
                    o.set(v)
                    logger.notice("\(name) -> \(v ? "on" : "off") (safe value: \(why))")
                } else {
                    logger.warning("\(name) stays \(o.value ? "on" : "off"): \(why), and it has no safe: value")
                }
                pulseEnd = nil
            } else if pulseEnd != nil && !pulsedThere {
                o.set(false)
                logger.notice("\(name) -> off (its pulse ended by the reload: the new config does not pulse it)")
                pulseEnd = nil
            }
            var value = o.value
            if next == nil, let b = p.config.line(named: name).map({ p.config[$0] }), b.isOutput, b.address == o.config.address,
                b.loop == o.config.loop
            {
                // New settings on the same line: in place, as a line
                // requested anew starts (at its initial value); the
                // request's other lines are not touched.
                do {
                    try o.request.reconfigure(.offset(o.request.offsets[o.index]), b.settings)
                    next = b
                    value = b.settings.outputValue
                    pulseEnd = nil
                    reconfigured += 1
                } catch {
                    logger.error("\(name): cannot apply its new settings in place: \(error); it is requested again")
                }
            }
            if let b = next {
                kept[b.name] = Daemon.Kept(config: b, request: o.request, index: o.index, value: value, pulseEnd: pulseEnd)
            } else {
                leaving.append(o)
            }
        }
        for o in leaving {
            if kept.values.contains(where: { $0.request === o.request }) {
                idleOutputs.append(IdleOutput(name: o.config.name, request: o.request, index: o.index))
                logger.notice(
                    "\(o.config.name): stays requested at \(o.value ? "on" : "off") while other outputs of its request are kept (one line cannot leave a request); it is released with them")
            } else {
                o.request.release()
                result.released += 1
            }
        }
        idleOutputs.removeAll { idle in
            guard !kept.values.contains(where: { $0.request === idle.request }) else { return false }
            idle.request.release()
            result.released += 1
            return true
        }
        program = p
        sizeForProgram()
        try setUpModes()
        let mine = p.config.lines.filter { $0.loop == id }
        result.kept = mine.filter { kept[$0.name] != nil }.count - reconfigured
        let again = try attachLines(gpio: gpio, kept: kept, filters: filters)
        result.kept -= again
        result.requested = mine.count - result.kept - reconfigured
        result.reconfigured = reconfigured
        try setUpAutomation()
        if isMain, let c = commands { c.configChanged() }

        // The modes: sequences that go on keep theirs, a `mode:` action's
        // mode stays if the new config has it.
        sequenceModes.removeAll(keepingCapacity: true)
        for (i, progress) in carried {
            guard let r = sequences[i] else { continue }
            r.resume(progress)
            if let m = r.config.mode, r.isRunning { sequenceModes.append((i, m.index)) }
            logger.notice("sequence \(r.config.name): goes on under the new config (\(r.activeRuns) running, \(r.queued) queued)")
        }
        baseMode = p.config.mode(named: oldBase)?.index ?? 0
        let new = sequenceModes.isEmpty ? baseMode : sequenceModes[sequenceModes.count - 1].mode
        if p.config.modes[new].name == oldMode.name {
            effectiveMode = new
            replayTimer?.arm(at: loop.now)
        } else {
            enter(mode: new, from: -1, name: oldMode.name, mask: oldMode.mask, because: nil)
        }
        startInputs()
        return result
    }
}

extension Daemon {
    /// Swaps `program` into every loop: first each loop stops the sequences
    /// the new program does not run the same way, then each swaps, setting
    /// the outputs those sequences set to their safe values. Workers first,
    /// each within `timeout`, then the main loop.
    func swapAll(to program: Program, timeout: Duration) -> (SwapResult, failures: Int) {
        let gpio = self.gpio
        var failures = 0
        var makeSafe = Set(main.stopAbandonedSequences(for: program))
        for (i, w) in workers.enumerated() {
            switch onWorker(i, timeout: timeout, { $0.stopAbandonedSequences(for: program) }) {
            case let .success(outputs): makeSafe.formUnion(outputs)
            case let .failure(error):
                failures += 1
                logger.error("reload: worker '\(w.name)' did not stop its sequences within \(timeout.short): \(error)")
            }
        }
        var totals = SwapResult()
        let safe = makeSafe
        for (i, w) in workers.enumerated() {
            switch onWorker(i, timeout: timeout, { try $0.swap(to: program, gpio: gpio, makeSafe: safe) }) {
            case let .success(r): totals.add(r)
            case let .failure(error):
                failures += 1
                logger.error("reload: worker '\(w.name)': \(error)")
            }
        }
        do { totals.add(try main.swap(to: program, gpio: gpio, makeSafe: safe)) } catch {
            failures += 1
            logger.error("reload: main loop: \(error)")
        }
        return (totals, failures)
    }
}
