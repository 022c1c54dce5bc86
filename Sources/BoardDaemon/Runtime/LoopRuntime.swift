import Boardloop
import BoardloopGPIO
import Glibc
import Logging
import Synchronization

/// What caused an action: carried to commands (`BOARDD_*`) and across loops.
struct Context: BitwiseCopyable, Sendable {
    var line: Int32 = -1
    /// 1 rising, 0 falling, -1 none.
    var edge: Int8 = -1
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

/// How long the daemon's run calls last: CF's "forever" (1e10 s, as
/// `BoardRunLoop.run()`), which the engine treats as no deadline at all, so
/// a pass does not read the clock to check one. The runs end by `stop()`.
let runWithoutDeadline = Duration.seconds(10_000_000_000)

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

/// How a loop enters a sequence's (or a `mode:` action's) mode.
public enum ModeDriver: Sendable {
    /// A nested run of the loop in the mode, started from a perform request
    /// and stopped when the mode ends (as Cocoa runs a modal panel).
    case nestedRuns
    /// The caller runs the loop in `effectiveMode` (tests on a manual clock).
    case external
}

/// One run loop of the daemon and everything it owns: its lines, the tasks
/// and sequences that run on it, the executor of actions, its message port.
/// Used only on the loop's thread, except for what says otherwise.
///
/// Stored properties skip the run-time exclusivity check
/// (`@exclusivity(unchecked)`), as the engine's do: the runtime lives on its
/// loop's thread and the check would cost about 76 instructions per access
/// on the event path.
final class LoopRuntime: @unchecked Sendable {
    let id: LoopID
    let name: String
    let loop: BoardRunLoop
    @exclusivity(unchecked) var program: Program
    let logger: Logger
    /// `logger`'s level, read once: the logger is a constant, and reading a
    /// swift-log level costs an exclusivity check and an existential copy
    /// (about 110 instructions), which the event path asks up to three
    /// times per edge.
    let logLevel: Logger.Level
    let driver: ModeDriver
    /// Every loop's port, by loop index (posts across loops).
    let ports: [BoardMessagePort]
    weak var commands: CommandRunner?
    /// This loop's trace ring: the per-event lines (a reaction fired, an
    /// edge, an output write) as records the log writer formats.
    let trace: TraceRing

    @exclusivity(unchecked) var inputs: [InputLine?] = []
    @exclusivity(unchecked) var outputs: [OutputLine?] = []
    @exclusivity(unchecked) var tasks: [TaskRunner] = []
    @exclusivity(unchecked) var sequences: [SequenceRunner?] = []
    @exclusivity(unchecked) var runModes: [RunLoopMode] = []
    /// Per mode, the priorities it admits (bit per priority).
    @exclusivity(unchecked) var admitMask: [UInt64] = []
    @exclusivity(unchecked) var baseMode = 0
    @exclusivity(unchecked) var sequenceModes: [(sequence: Int, mode: Int)] = []
    @exclusivity(unchecked) var effectiveMode = 0
    @exclusivity(unchecked) private var runningNested = 0
    @exclusivity(unchecked) var driving = false
    @exclusivity(unchecked) var driveItem: PerformWorkItem?
    @exclusivity(unchecked) var replayTimer: RunLoopTimer?
    @exclusivity(unchecked) private var summaryTimer: RunLoopTimer?
    @exclusivity(unchecked) var stopping = false
    /// Answers to the watchdog's pings (any thread reads it).
    let pings = Atomic<UInt64>(0)
    /// What the loop runs now (`Activity.code`, 0: none); any thread reads it.
    let activity = Atomic<Int64>(0)
    /// This loop's outputs that have a safe value, for the main thread to
    /// set when a stop finds the loop stuck.
    let safeOutputs = LockedValue<[SafeOutput]>([])

    // Counters.
    /// The level a reaction's firing is traced at (`Program.traceLevels`).
    @exclusivity(unchecked) var traceLevels: [Logger.Level] = []
    @exclusivity(unchecked) var reactionFires: [UInt64] = []
    @exclusivity(unchecked) var reactionSkipped: [UInt64] = []
    /// Per reaction of this loop: the time from its trigger (the edge's
    /// kernel timestamp, or the deadline of a hold or gesture) to the end of
    /// its actions' synchronous part (outputs written, commands spawned, up
    /// to a `wait`). Nil for the reactions of other loops.
    @exclusivity(unchecked) var reactionTimes: [LatencyHistogram?] = []
    @exclusivity(unchecked) private var summarizedFires: [UInt64] = []
    @exclusivity(unchecked) var postsSent: UInt64 = 0
    @exclusivity(unchecked) var postsFailed: UInt64 = 0
    @exclusivity(unchecked) var postsStale: UInt64 = 0
    @exclusivity(unchecked) var writeFailures: UInt64 = 0

    init(
        id: LoopID, loop: BoardRunLoop, program: Program, logger: Logger, driver: ModeDriver, ports: [BoardMessagePort],
        trace: TraceRing
    ) {
        self.id = id
        self.trace = trace
        name = program.config.loops[id.index].name
        self.loop = loop
        self.program = program
        self.logger = logger
        logLevel = logger.logLevel
        self.driver = driver
        self.ports = ports
        sizeForProgram()
    }

    /// Every per-config table sized for `program` and empty: the lines',
    /// sequences' and reactions' slots, counters and histograms (at the
    /// start, and again at a reload).
    func sizeForProgram() {
        let c = program.config
        inputs = Array(repeating: nil, count: c.lines.count)
        outputs = Array(repeating: nil, count: c.lines.count)
        sequences = Array(repeating: nil, count: c.sequences.count)
        reactionFires = Array(repeating: 0, count: c.reactions.count)
        reactionSkipped = Array(repeating: 0, count: c.reactions.count)
        reactionTimes = c.reactions.map { $0.loop == id ? LatencyHistogram() : nil }
        summarizedFires = Array(repeating: 0, count: c.reactions.count)
        topInputPriority = c.lines.lazy.filter { $0.isInput && $0.loop == self.id }.map(\.priority.index).max() ?? 0
    }

    /// The highest priority of this loop's inputs (a line below it handles
    /// a small batch per dispatch: `InputLine.schedule`).
    @exclusivity(unchecked) private(set) var topInputPriority = 0

    var config: DaemonConfig { program.config }
    var nowNanoseconds: UInt64 { loop.now.nanoseconds }
    var isMain: Bool { id == .main }

    // MARK: Set-up (on the loop's thread)

    /// Modes, the port, the daemon's own timers. Lines come separately
    /// (`adopt`/`request`) so a reload can keep them.
    func setUpLoop(summaryInterval: Duration?) throws {
        try setUpModes()
        try ports[id.index].schedule(on: loop, mode: .common)
        driveItem = PerformWorkItem(modes: [.common]) { [unowned self] in self.drive() }
        let replay = RunLoopTimer.rearmable(order: -1) { [unowned self] _ in
            self.replayHeld()
        }
        try loop.add(replay, mode: .common)
        replayTimer = replay
        if let every = summaryInterval, every > .zero {
            let s = RunLoopTimer(fireAt: loop.now + every, interval: every, tolerance: every / 10) { [unowned self] _ in
                self.logSummary()
            }
            try loop.add(s, mode: .common)
            summaryTimer = s
        }
    }

    /// The automation of the current program: tasks, sequences, triggers.
    func setUpAutomation() throws {
        traceLevels = program.traceLevels()
        for (i, s) in config.sequences.enumerated() where s.loop == id {
            let r = SequenceRunner(index: i, config: s, runtime: self, range: program.sequences[i])
            try r.makeTimers()
            sequences[i] = r
        }
        for (i, t) in config.tasks.enumerated() where t.loop == id {
            let r = TaskRunner(index: i, config: t, runtime: self, range: program.tasks[i])
            try r.start()
            tasks.append(r)
        }
    }

    /// Starts the inputs' filters once the loop's lines and automation are
    /// set up (`InputLine.start`: an active line at start, a change in
    /// flight at a reload).
    func startInputs() {
        for case let i? in inputs { i.start() }
    }

    /// The config's modes as the loop's modes, each in the common set (so
    /// the daemon's own sources and every sequence's timers are in it).
    func setUpModes() throws {
        runModes = config.modes.enumerated().map { i, m in i == 0 ? .default : RunLoopMode("boardd.\(m.name)") }
        admitMask = config.modes.map { m in m.admits.reduce(0) { $0 | (UInt64(1) << UInt64($1.index)) } }
        admitMask[0] = ~0
        for m in runModes.dropFirst() where !loop.commonModes.contains(m) { try loop.addCommonMode(m) }
    }

    func runLoopMode(_ m: ModeID) -> RunLoopMode { runModes[m.index] }

    /// The modes that admit a priority's sources.
    func modes(admitting p: PriorityID) -> [RunLoopMode] { modes(of: p, admitted: true) }

    /// The modes that hold a priority's sources (the rest).
    func modes(holding p: PriorityID) -> [RunLoopMode] { modes(of: p, admitted: false) }

    private func modes(of p: PriorityID, admitted: Bool) -> [RunLoopMode] {
        var out: [RunLoopMode] = []
        for (i, mask) in admitMask.enumerated() where (mask & (UInt64(1) << UInt64(p.index)) != 0) == admitted {
            out.append(runModes[i])
        }
        return out
    }

    @inline(__always) func admits(_ p: PriorityID) -> Bool {
        admitMask[effectiveMode] & (UInt64(1) << UInt64(p.index)) != 0
    }

    // MARK: Executor

    /// Runs one action list (a reaction's or a task's) to its end.
    func execute(_ range: OpRange, _ ctx: Context) {
        var wait: Int64 = -1
        _ = run(from: range.start, to: range.end, ctx, wait: &wait)
    }

    /// Runs ops from `pc` until a `wait` (its duration in `wait`, the next
    /// pc returned) or `end`.
    func run(from start: Int32, to end: Int32, _ ctx: Context, wait: inout Int64) -> Int32 {
        var pc = start
        let ops = program.ops
        while pc < end {
            switch ops[Int(pc)] {
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
            default:
                perform(pc, ctx)
            }
            pc += 1
        }
        return end
    }

    /// Performs one op here, or posts it to the loop that owns its target.
    func perform(_ pc: Int32, _ ctx: Context) {
        switch program.ops[Int(pc)] {
        case let .set(l, v):
            if let o = outputs[Int(l)] { o.set(v) } else { post(pc, ctx, to: config.lines[Int(l)].loop) }
        case let .toggle(l):
            if let o = outputs[Int(l)] { o.toggle() } else { post(pc, ctx, to: config.lines[Int(l)].loop) }
        case let .pulse(l, ns):
            if let o = outputs[Int(l)] { o.pulse(ns) } else { post(pc, ctx, to: config.lines[Int(l)].loop) }
        case let .run(site):
            if isMain, let commands { commands.run(site: Int(site), ctx) } else { post(pc, ctx, to: .main) }
        case let .log(site):
            let s = program.logSites[Int(site)]
            logger.log(level: s.level, s.message(ctx), source: s.source)
        case let .mode(m):
            setBaseMode(Int(m))
        case let .start(s):
            if let r = sequences[Int(s)] { r.start(ctx) } else { post(pc, ctx, to: config.sequences[Int(s)].loop) }
        case let .stop(s):
            if let r = sequences[Int(s)] { r.stop() } else { post(pc, ctx, to: config.sequences[Int(s)].loop) }
        case .wait, .branch, .jump:
            break
        }
    }

    private func post(_ pc: Int32, _ ctx: Context, to target: LoopID) {
        do {
            try ports[target.index].send(
                id: PortMessage.action.rawValue, value: Post(generation: program.generation, op: pc, ctx: ctx), timeout: .zero)
            postsSent &+= 1
        } catch {
            postsFailed &+= 1
            logger.error("\(name): could not post an action to loop '\(config.loops[target.index].name)': \(error)")
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
            activity.store(Activity.message.rawValue << 32, ordering: .relaxed)
            perform(p.op, p.ctx)
            activity.store(0, ordering: .relaxed)
        case .ping:
            pings.add(1, ordering: .releasing)
        case nil:
            break
        }
    }

    // MARK: Reactions and tasks

    func fire(reaction r: Int, line: InputLine, rising: Bool, at t: UInt64, repeat count: Int32 = -1) {
        guard !stopping else { return }
        if let c = config.reactions[r].condition, !program.holds(c, mode: ModeID(effectiveMode)) {
            reactionSkipped[r] &+= 1
            if logLevel <= .debug {
                trace.push(TraceRecord(kind: .skipped, line: Int32(line.id), index: Int32(r), generation: program.generation))
            }
            return
        }
        reactionFires[r] &+= 1
        activity.store(Activity.reaction.code(r), ordering: .relaxed)
        execute(program.reactions[r], Context(line: Int32(line.id), edge: rising ? 1 : 0, timestamp: t, reaction: Int32(r), repeatCount: count))
        activity.store(0, ordering: .relaxed)
        let done = nowNanoseconds
        let took = done > t ? done - t : 0
        reactionTimes[r]?.record(nanoseconds: took)
        // Traced after the actions (the output is not delayed by logging):
        // a record in the loop's ring, formatted by the log writer.
        if logLevel <= traceLevels[r] {
            trace.push(
                TraceRecord(
                    kind: .reaction, line: Int32(line.id), index: Int32(r), repeatCount: count, generation: program.generation,
                    nanoseconds: took))
        }
    }

    func runTask(_ task: TaskRunner) {
        guard !stopping else { return }
        activity.store(Activity.task.code(task.index), ordering: .relaxed)
        execute(task.range, Context(task: Int32(task.index)))
        activity.store(0, ordering: .relaxed)
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

    // MARK: Traces (debug records in the trace ring, only when the level is on)

    func traceEdge(_ line: InputLine, rising: Bool, at t: UInt64) {
        if logLevel <= .debug {
            let now = nowNanoseconds
            trace.push(
                TraceRecord(kind: .edge, flag: rising, line: Int32(line.id), generation: program.generation, nanoseconds: now > t ? now - t : 0))
        }
    }

    func traceGesture(_ line: InputLine, _ g: GestureKind, at t: UInt64) {}

    func traceOutput(_ line: OutputLine, _ v: Bool) {
        if logLevel <= .debug { trace.push(TraceRecord(kind: .output, flag: v, line: Int32(line.id), generation: program.generation)) }
    }

    func writeFailed(_ line: OutputLine, _ e: GPIOError) {
        writeFailures &+= 1
        logger.error("\(line.config.name): write failed: \(e)")
    }

    /// Events the kernel dropped: `n` counted from sequence numbers
    /// (`exact`), or on libgpiod 1.6 at least `n` (inferred from two equal
    /// edges in a row, or a level that disagrees after a full FIFO).
    func noteLoss(_ line: InputLine, _ n: UInt64, exact: Bool, fifoFull: Bool) {
        if exact {
            logger.warning("\(line.config.name): the kernel dropped \(n) event(s) (its buffer was full; counted from sequence numbers)")
        } else if fifoFull {
            logger.warning(
                "\(line.config.name): the kernel's event FIFO was full: at least \(n) event(s) lost (libgpiod 1.6 cannot count; more may be); the line's level was read again")
        } else {
            logger.warning(
                "\(line.config.name): at least \(n) event(s) lost (libgpiod 1.6 cannot count; two equal edges in a row)")
        }
    }

    func noteRingOverflow(_ line: InputLine) {
        if line.lost == 1 || line.lost % 1000 == 0 {
            logger.warning("\(line.config.name): held-event ring full (\(line.ringCapacity) events); \(line.lost) lost so far")
        }
    }

    // MARK: Sequences and modes

    /// A sequence's line, under the sequence's own rate-limit source.
    private func log(_ s: SequenceRunner, _ level: Logger.Level, _ text: String) {
        logger.log(level: level, "sequence \(s.config.name): \(text)", source: "sequence \(s.config.name)")
    }

    func sequenceEntered(_ s: SequenceRunner) {
        log(s, .info, "started")
        if let m = s.config.mode, !sequenceModes.contains(where: { $0.sequence == s.index }) {
            sequenceModes.append((s.index, m.index))
            modeChanged(because: "sequence \(s.config.name)")
        }
    }
    func sequenceBegan(_ s: SequenceRunner) { log(s, .info, "another run started (\(s.activeRuns) running)") }
    func sequenceQueued(_ s: SequenceRunner) { log(s, .info, "start queued (\(s.queued) waiting)") }
    func sequenceRestarted(_ s: SequenceRunner) { log(s, .info, "restarted") }
    func sequenceStopped(_ s: SequenceRunner) { log(s, .notice, "stopped") }
    func sequenceRefused(_ s: SequenceRunner, _ why: String) { log(s, .notice, why) }
    func sequenceCompleted(_ s: SequenceRunner, next: Bool) { log(s, .info, "done\(next ? "; running the queued start" : "")") }
    func sequenceExited(_ s: SequenceRunner) {
        if let i = sequenceModes.firstIndex(where: { $0.sequence == s.index }) {
            sequenceModes.remove(at: i)
            modeChanged(because: "sequence \(s.config.name) ended")
        }
    }

    func setBaseMode(_ m: Int) {
        guard m != baseMode else { return }
        baseMode = m
        modeChanged(because: "mode action")
    }

    func modeChanged(because why: String) {
        let new = sequenceModes.last?.mode ?? baseMode
        guard new != effectiveMode else { return }
        enter(mode: new, from: effectiveMode, name: config.modes[effectiveMode].name, mask: admitMask[effectiveMode], because: why)
    }

    /// Makes `new` the effective mode: logs the switch, restarts the grids
    /// of tasks the mode starts, delivers held events the mode admits, and
    /// moves the nested run. `old` is the mode left (-1: one of a previous
    /// config, known by its name and admit mask).
    func enter(mode new: Int, from old: Int, name oldName: String, mask oldMask: UInt64, because why: String) {
        effectiveMode = new
        let held = inputs.compactMap { $0 }.filter { !admits($0.config.priority) }.map(\.config.name)
        logger.info(
            "mode \(oldName) -> \(config.modes[new].name) (\(why))\(held.isEmpty ? "" : "; holding \(held.joined(separator: ", "))")")
        for t in tasks { t.modeChanged(from: old, to: new) }
        if admitMask[new] & ~oldMask != 0 || new == 0 {
            replayTimer?.fireDate = loop.now
        }
        guard driver == .nestedRuns, !stopping else { return }
        if driving {
            loop.stop()  // the nested run ends; drive() runs the new mode
        } else if new != 0, let driveItem {
            _ = try? loop.perform(driveItem)
        }
    }

    /// Runs the loop in the effective mode while it is not the default
    /// (nested in the top-level run, which is in the default mode).
    private func drive() {
        guard !driving else { return }
        driving = true
        defer { driving = false }
        while !stopping && effectiveMode != 0 {
            runningNested = effectiveMode
            do { _ = try loop.run(mode: runModes[effectiveMode], timeout: runWithoutDeadline) } catch {
                logger.error("\(name): cannot run mode \(config.modes[effectiveMode].name): \(error)")
                break
            }
        }
        runningNested = 0
        if stopping { loop.stop() }  // the top-level run ends too
    }

    /// Delivers events held in the lines' rings once their mode is back.
    private func replayHeld() {
        for case let line? in inputs { line.catchUp() }
    }

    // MARK: Summary and shutdown

    /// The summary lines: at `info` from the summary timer, at `notice` at
    /// stop (so a daemon run at `--log-level notice`, without the per-reaction
    /// trace, still ends with its figures).
    func logSummary(level: Logger.Level = .info) {
        for (r, h) in reactionTimes.enumerated() where reactionFires[r] > summarizedFires[r] {
            guard let h else { continue }
            logger.log(
                level: level,
                "reaction \(config.reactions[r].name): \(reactionFires[r] - summarizedFires[r]) fires (\(reactionFires[r]) in all), trigger to actions done p50 \(h.percentile(0.5).short) p99 \(h.percentile(0.99).short) max \(h.max.short)")
            summarizedFires[r] = reactionFires[r]
        }
        for t in tasks where t.runs > t.summarizedRuns {
            let h = t.lateness
            logger.log(
                level: level,
                "task \(t.config.name): \(t.runs - t.summarizedRuns) runs (\(t.runs) in all), lateness p50 \(h.percentile(0.5).short) p99 \(h.percentile(0.99).short) max \(h.max.short), \(t.skippedPeriods) skipped periods")
            t.summarizedRuns = t.runs
        }
        for case let l? in inputs where l.heldInRing > 0 || l.lost > 0 || l.rateLimitHolds > 0 || l.suspectedOverflows > 0 {
            let lost = l.lossIsExact ? "\(l.lost) lost" : "at least \(l.lost) lost (libgpiod 1.6 cannot count)"
            let full = l.suspectedOverflows > 0 ? ", \(l.suspectedOverflows) full FIFO(s)" : ""
            logger.log(
                level: level,
                "line \(l.config.name): \(l.eventsSeen) events, \(l.heldInRing) held in its ring, \(l.rateLimitHolds) held by its rate limit, \(lost)\(full)")
        }
    }

    /// The first step of a stop: tasks and sequences stop (no new action
    /// starts), then every output that has a `safe:` value is set to it.
    /// Returns how many were. On the loop's thread.
    @discardableResult
    func stopAutomation() -> Int {
        logSummary(level: .notice)
        stopping = true
        for t in tasks { t.stop() }
        for case let s? in sequences { s.detach() }
        var safe = 0
        for case let o? in outputs {
            o.detach()
            if let v = o.config.safeValue {
                o.set(v)
                safe += 1
                logger.notice("\(o.config.name) -> \(v ? "on" : "off") (safe value)")
            }
        }
        return safe
    }

    /// The last step of a stop: every line is released, the loop's own
    /// sources end. On the loop's thread.
    func releaseLines() {
        for case let o? in outputs { o.request.release() }
        for case let i? in inputs {
            i.unschedule()
            i.request.release()
        }
        outputs = Array(repeating: nil, count: outputs.count)
        inputs = Array(repeating: nil, count: inputs.count)
        replayTimer?.invalidate()
        summaryTimer?.invalidate()
        ports[id.index].invalidate()
        if driving { loop.stop() }
    }
}
