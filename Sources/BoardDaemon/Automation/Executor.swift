import Boardloop
import BoardloopGPIO
import Logging
import Synchronization

/// What caused an action: carried to commands (`BOARDD_*`) and across loops.
struct Context: BitwiseCopyable, Sendable {
    var line: Int32 = -1
    /// 1 rising, 0 falling, -1 none.
    var edge: Int8 = -1
    /// Who asked for the actions. Each origin calls the same executor; a
    /// sequence's steps carry the origin of the start that runs them.
    /// (Beside `edge`, in its padding: a post still fits a port slot.)
    var origin: Origin = .reaction
    var timestamp: UInt64 = 0
    var reaction: Int32 = -1
    var task: Int32 = -1
    /// A hold's fires: 0 at the hold, 1 at its first repeat, …; -1 for
    /// other triggers (`BOARDD_REPEAT`, `{repeat}` in a log message).
    var repeatCount: Int32 = -1
}

/// An action posted to the loop that owns its line or sequence.
struct Post: BitwiseCopyable, Sendable {
    var generation: Int32
    var op: Int32
    var ctx: Context
}

/// Where an action list comes from.
enum Origin: UInt8, BitwiseCopyable, Sendable {
    case reaction, task
    /// A request on the control socket (`ControlServer`).
    case control
    /// A command from the MQTT broker (`MQTTBridge`).
    case mqtt

    /// As a command sees it (`BOARDD_ORIGIN`).
    var name: String {
        switch self {
        case .reaction: "reaction"
        case .task: "task"
        case .control: "control"
        case .mqtt: "mqtt"
        }
    }
}

/// Message ids on a loop's port.
enum PortMessage: Int32 {
    case action = 1
    /// The watchdog's "are you running passes?"
    case ping = 2
}

/// What a loop's thread is running, for a stop that finds the loop stuck:
/// stored in `LoopRuntime.activity` as the kind in the high half and the
/// index (reaction, task, sequence) in the low half; 0 when the loop is
/// between the daemon's handlers.
enum Activity: Int64 {
    case reaction = 1, task, sequence, message

    @inline(__always) func code(_ index: Int) -> Int64 { rawValue << 32 | Int64(index) }
}

/// The executor: runs the ops the program compiled (`Program`) for a
/// reaction, a task or a sequence's run, on the loop that owns each target
/// (an action on another loop's line or sequence is posted to that loop's
/// port and performed there). Every origin of actions calls it.
extension LoopRuntime {
    /// Runs one action list (a reaction's or a task's) to its end.
    @inline(__always)
    func execute(_ range: OpRange, _ ctx: Context) {
        var wait: Int64 = -1
        _ = run(from: range.start, to: range.end, ctx, wait: &wait)
    }

    /// Runs ops from `pc` until a `wait` (its duration in `wait`, the next
    /// pc returned) or `end`.
    ///
    /// The program is borrowed for the run, not retained: a reload that
    /// swaps it keeps the previous one alive (`retiredProgram`) until the
    /// next reload, and an action list never spans a reload. Retaining the
    /// program's ops cost a retain and a release per action list.
    @inline(__always)
    func run(from start: Int32, to end: Int32, _ ctx: Context, wait: inout Int64) -> Int32 {
        Unmanaged.passUnretained(program)._withUnsafeGuaranteedRef { run(from: start, to: end, ctx, wait: &wait, $0) }
    }

    private func run(from start: Int32, to end: Int32, _ ctx: Context, wait: inout Int64, _ program: Program) -> Int32 {
        var pc = start
        let ops = program.ops
        // One check of the range's end (0...count, compared unsigned), then
        // each op read unchecked: `pc` stays in 0..<end (compared unsigned,
        // a negative one ends the run).
        precondition(UInt(bitPattern: Int(end)) <= UInt(ops.count), "ops \(start)..<\(end) of \(ops.count)")
        while UInt32(bitPattern: pc) < UInt32(bitPattern: end) {
            switch ops.withUnsafeBufferPointer({ $0[Int(pc)] }) {
            case let .wait(ns):
                wait = ns
                return pc + 1
            case let .branch(c, target):
                if !program.holds(program.conditions[Int(c)], mode: ModeID(effectiveMode)) {
                    pc = target
                    continue
                }
            case let .jump(target):
                pc = target
                continue
            case let op:
                // A write to one of this loop's outputs (most ops) inline;
                // the rest, and a write to another loop's, in `perform`.
                if !writeHere(op) { perform(op, pc, ctx) }
            }
            pc &+= 1
        }
        return end
    }

    /// Performs the op at `pc` here, or posts it to the loop that owns its target.
    func perform(_ pc: Int32, _ ctx: Context) { perform(program.ops[Int(pc)], pc, ctx) }

    /// A `set` or `toggle` of one of this loop's outputs, done; false for
    /// any other op, and for a write to another loop's output.
    @inline(__always) private func writeHere(_ op: Op) -> Bool {
        switch op {
        case let .set(l, v):
            guard let o = outputRefs[Int(l)] else { return false }
            o._withUnsafeGuaranteedRef { $0.set(v) }
        case let .toggle(l):
            guard let o = outputRefs[Int(l)] else { return false }
            o._withUnsafeGuaranteedRef { $0.toggle() }
        default:
            return false
        }
        return true
    }

    /// `perform` with the op already read (`run` has it: reading it again
    /// costs a retain and a release of the program's ops).
    func perform(_ op: Op, _ pc: Int32, _ ctx: Context) {
        if writeHere(op) { return }
        switch op {
        case let .set(l, _), let .toggle(l):
            post(pc, ctx, to: config.lines[Int(l)].loop)
        case let .setMany(first, count):
            let writes = program.writes
            let l = Int(writes[Int(first)].line)
            if outputs[l] != nil { setMany(writes[Int(first)..<Int(first + count)]) } else { post(pc, ctx, to: config.lines[l].loop) }
        case let .setSafe(l):
            guard let safe = config.lines[Int(l)].safeValue else { break }
            if let o = outputs[Int(l)] {
                if o.value != safe { o.set(safe) }
            } else {
                post(pc, ctx, to: config.lines[Int(l)].loop)
            }
        case let .pulse(l, ns):
            if let o = outputRefs[Int(l)] { o._withUnsafeGuaranteedRef { $0.pulse(ns) } } else { post(pc, ctx, to: config.lines[Int(l)].loop) }
        case let .run(site):
            if isMain, let commands { commands.run(site: Int(site), ctx) } else { post(pc, ctx, to: .main) }
        case let .log(site):
            let s = program.logSites[Int(site)]
            if let h = directLog {
                // Level and rate limit first: a line not written is not made.
                guard s.level >= h.logLevel, h.writer.admits(source: s.source, level: s.level) else { break }
                h.writer.submit(h.format(s.level, "\(s.message(ctx))"), source: s.source, level: s.level, admitted: true)
            } else {
                logger.log(level: s.level, s.message(ctx), source: s.source)
            }
        case let .mode(m):
            setBaseMode(Int(m))
        case let .start(s):
            if let r = sequences[Int(s)] { r.start(ctx) } else { post(pc, ctx, to: config.sequences[Int(s)].loop) }
        case let .stop(s):
            if let r = sequences[Int(s)] { r.stop(ctx) } else { post(pc, ctx, to: config.sequences[Int(s)].loop) }
        case .wait, .branch, .jump:
            break
        }
    }

    /// Sets this loop's outputs `writes` names: each line's write staged on
    /// its request, then each request written in one kernel call, and each
    /// line reported as a `set` of it would be. A line taken off its loop
    /// (a stop, a reload) is set on its own.
    private func setMany(_ writes: ArraySlice<Program.Write>) {
        for w in writes {
            guard let o = outputs[Int(w.line)] else { continue }
            if o.stages { o.stage(w.value) } else { o.set(w.value) }
        }
        for w in writes {
            guard let o = outputs[Int(w.line)], o.pending else { continue }
            let r = o.request
            var failure: GPIOError?
            do { try r.commitStaged() } catch { failure = error }
            for x in writes {
                if let p = outputs[Int(x.line)], p.pending, p.request === r { p.committed(x.value, failure) }
            }
        }
    }

    fileprivate func post(_ pc: Int32, _ ctx: Context, to target: LoopID) {
        let post = Post(generation: program.generation, op: pc, ctx: ctx)
        let failure = portRefs[target.index]._withUnsafeGuaranteedRef { port -> BoardMessagePortError? in
            do throws(BoardMessagePortError) { try port.send(id: PortMessage.action.rawValue, value: post) } catch { return error }
            return nil
        }
        if let failure {
            logger.error("\(name): could not post an action to loop '\(config.loops[target.index].name)': \(failure)")
        }
    }

    /// A message on this loop's port.
    func received(_ m: BoardMessagePort.Message) {
        switch PortMessage(rawValue: m.id) {
        case .action:
            guard m.payload.count >= MemoryLayout<Post>.size else { return }
            let p = m.payload.loadUnaligned(as: Post.self)
            guard p.generation == program.generation, !stopping else {
                postsStale &+= 1
                return
            }
            let tr = tracer
            let t0 = tr == nil ? 0 : nowNanoseconds
            activity.store(Activity.message.rawValue << 32, ordering: .relaxed)
            let was = events.writing(p.ctx)
            perform(p.op, p.ctx)
            events.restore(was)
            activity.store(0, ordering: .relaxed)
            if let tr { tr.slice(.message, Int(p.op), from: t0, to: nowNanoseconds) }
        case .ping:
            pings.add(1, ordering: .releasing)
        case nil:
            break
        }
    }

    // MARK: Reactions and tasks

    func fire(reaction r: Int, line: InputLine, rising: Bool, at t: UInt64, repeat count: Int32 = -1) {
        guard !stopping else { return }
        // One check of `r` for every per-reaction table: each is sized for
        // the program's reactions (`sizeForProgram`, with the program).
        precondition(UInt(bitPattern: r) < UInt(bitPattern: reactionFires.count), "reaction \(r) of \(reactionFires.count)")
        if reactionConditional.withUnsafeBufferPointer({ $0[r] }), let c = config.reactions[r].condition,
            !program.holds(c, mode: ModeID(effectiveMode))
        {
            reactionSkipped[r] &+= 1
            events.skipped(reaction: r, line: line.id)
            return
        }
        reactionFires.increment(checked: r)
        activity.store(Activity.reaction.code(r), ordering: .relaxed)
        let was = events.writing(.reaction, r)
        defer { events.restore(was) }
        execute(program.reactions.withUnsafeBufferPointer { $0[r] }, Context(
                line: Int32(truncatingIfNeeded: line.id), edge: rising ? 1 : 0, origin: .reaction, timestamp: t,
                reaction: Int32(truncatingIfNeeded: r), repeatCount: count))
        activity.store(0, ordering: .relaxed)
        let done = reactionEndNanoseconds
        let took = done > t ? done - t : 0
        reactionTimes.withUnsafeBufferPointer { $0[r]?.record(nanoseconds: took) }
        let handler = Int64(bitPattern: done &- min(line.handlerStart, done))
        if handler > slowestReaction {
            slowestReaction = handler
            slowestReactionIndex = r
        }
        // Reported after the actions (the output is not delayed by logging).
        events.fired(reaction: r, line: line.id, repeat: count, trigger: t, took: took)
    }

    /// Runs a task's actions; returns when they ended (the loop's clock).
    func runTask(_ task: TaskRunner) -> UInt64 {
        guard !stopping else { return 0 }
        activity.store(Activity.task.code(task.index), ordering: .relaxed)
        let was = events.writing(.task, task.index)
        execute(task.range, Context(origin: .task, task: Int32(task.index)))
        events.restore(was)
        activity.store(0, ordering: .relaxed)
        return nowNanoseconds
    }

    /// What `activity` says, in words ("reaction 'bell'"), for a stuck loop.
    func describeActivity(_ code: Int64) -> String {
        let i = Int(code & 0xffff_ffff)
        switch Activity(rawValue: code >> 32) {
        case .reaction where i < config.reactions.count: return "reaction '\(config.reactions[i].name)'"
        case .task where i < config.tasks.count: return "task '\(config.tasks[i].name)'"
        case .sequence where i < config.sequences.count: return "sequence '\(config.sequences[i].name)'"
        case .message: return "an action posted from another loop"
        default: return "none of the daemon's handlers (a perform or an engine callout)"
        }
    }

}
