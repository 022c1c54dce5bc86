import Boardloop
import BoardloopGPIO
import CLinux
import Glibc
import Logging
import Synchronization

/// How long the daemon's run calls last: CF's "forever" (1e10 s, as
/// `BoardRunLoop.run()`), which the engine treats as no deadline at all, so
/// a pass does not read the clock to check one. The runs end by `stop()`.
let runWithoutDeadline = Duration.seconds(10_000_000_000)

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
    /// The program it runs (a reload swaps it; the event sink names what
    /// happens by the new one from then on).
    @exclusivity(unchecked) var program: Program {
        didSet {
            retiredProgram = oldValue
            events.use(program)
            tracer?.generation = program.generation
        }
    }
    /// The program before the last reload, kept until the next one: what
    /// the executor borrows stays alive even if a reload came in the middle
    /// of an action list (`run`).
    @exclusivity(unchecked) private var retiredProgram: Program?
    let logger: Logger
    /// `logger`'s handler when it is boardd's own (`BoarddLogHandler.direct`):
    /// a `log:` action then asks the level and its rate limit before it
    /// formats its line.
    let directLog: BoarddLogHandler?
    let driver: ModeDriver
    /// Every loop's port, by loop index (posts across loops).
    let ports: [BoardMessagePort]
    /// `ports` unretained: a post borrows its port (`_withUnsafeGuaranteedRef`)
    /// where reading `ports` would retain and release it. `ports` keeps
    /// them alive.
    let portRefs: [Unmanaged<BoardMessagePort>]
    weak var commands: CommandRunner?
    /// Where this loop's components report what happened.
    let events: EventSink

    @exclusivity(unchecked) var inputs: [InputLine?] = []
    /// Lines of output requests no output uses now (see `IdleOutput`).
    @exclusivity(unchecked) var idleOutputs: [IdleOutput] = []
    @exclusivity(unchecked) var outputs: [OutputLine?] = [] {
        didSet { outputRefs = outputs.map { $0.map(Unmanaged.passUnretained) } }
    }
    /// `outputs` unretained, for the executor: a write borrows its line
    /// (`_withUnsafeGuaranteedRef`) where reading `outputs` would retain and
    /// release it. `outputs` keeps them alive.
    @exclusivity(unchecked) private(set) var outputRefs: [Unmanaged<OutputLine>?] = []
    @exclusivity(unchecked) var tasks: [TaskRunner] = []
    @exclusivity(unchecked) var sequences: [SequenceRunner?] = []
    @exclusivity(unchecked) var runModes: [RunLoopMode] = []
    /// Per mode, the priorities it admits (bit per priority).
    @exclusivity(unchecked) var admitMask: [UInt64] = [] {
        didSet { admitsNow = effectiveMode < admitMask.count ? admitMask[effectiveMode] : 0 }
    }
    @exclusivity(unchecked) var baseMode = 0
    @exclusivity(unchecked) var sequenceModes: [(sequence: Int, mode: Int)] = []
    @exclusivity(unchecked) var effectiveMode = 0 {
        didSet { admitsNow = effectiveMode < admitMask.count ? admitMask[effectiveMode] : 0 }
    }
    /// `admitMask[effectiveMode]`, kept with both: what every edge asks
    /// (`admits`) is one load.
    @exclusivity(unchecked) private(set) var admitsNow: UInt64 = 0
    @exclusivity(unchecked) var driving = false
    @exclusivity(unchecked) var driveItem: PerformWorkItem?
    @exclusivity(unchecked) var replayTimer: RunLoopTimer?
    @exclusivity(unchecked) var summaryTimer: RunLoopTimer?
    @exclusivity(unchecked) var stopping = false
    /// Answers to the watchdog's pings (any thread reads it).
    let pings = Atomic<UInt64>(0)
    /// What the loop runs now (`Activity.code`, 0: none); any thread reads it.
    let activity = Atomic<Int64>(0)
    /// The loop's tracer while a trace runs (`startTracing`): each daemon
    /// handler checks it once (a load and a branch when no trace runs).
    @exclusivity(unchecked) var tracer: LoopTracer?
    /// This loop's outputs that have a safe value, for the main thread to
    /// set when a stop finds the loop stuck.
    let safeOutputs = LockedValue<[SafeOutput]>([])

    // Counters.
    @exclusivity(unchecked) var reactionFires = Tally(count: 0)
    @exclusivity(unchecked) var reactionSkipped = Tally(count: 0)
    /// Per reaction of this loop: the time from its trigger (the edge's
    /// kernel timestamp, or the deadline of a hold or gesture) to the end of
    /// its actions' synchronous part (outputs written, commands spawned, up
    /// to a `wait`). Nil for the reactions of other loops.
    @exclusivity(unchecked) var reactionTimes: [LatencyHistogram?] = []
    /// Whether each reaction has a condition (`if:`): the config's own
    /// entry is read only for those.
    @exclusivity(unchecked) var reactionConditional: [Bool] = []
    @exclusivity(unchecked) var summarizedFires: [UInt64] = []
    /// The longest a reaction has held the loop so far, from the start of
    /// the handler that fired it (a batch of edges read, a deadline's
    /// timer) to its actions' end, and which reaction (`status`); -1 before
    /// the first.
    @exclusivity(unchecked) var slowestReaction: Int64 = -1
    @exclusivity(unchecked) var slowestReactionIndex = -1
    @exclusivity(unchecked) var postsStale: UInt64 = 0

    init(
        id: LoopID, loop: BoardRunLoop, program: Program, logger: Logger, driver: ModeDriver, ports: [BoardMessagePort],
        trace: TraceRing
    ) {
        self.id = id
        events = EventSink(ring: trace, logger: logger, loop: loop)
        events.use(program)
        name = program.config.loops[id.index].name
        self.loop = loop
        onManualClock = loop.manualClock != nil
        self.program = program
        self.logger = logger
        directLog = BoarddLogHandler.direct(logger)
        self.driver = driver
        self.ports = ports
        portRefs = ports.map(Unmanaged.passUnretained)
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
        reactionFires = Tally(count: c.reactions.count)
        reactionSkipped = Tally(count: c.reactions.count)
        reactionTimes = c.reactions.map { $0.loop == id ? LatencyHistogram() : nil }
        reactionConditional = c.reactions.map { $0.condition != nil }
        summarizedFires = Array(repeating: 0, count: c.reactions.count)
        slowestReaction = -1
        slowestReactionIndex = -1
        topInputPriority = c.lines.lazy.filter { $0.isInput && $0.loop == self.id }.map(\.priority.index).max() ?? 0
    }

    /// The highest priority of this loop's inputs (a line below it handles
    /// a small batch per dispatch: `InputLine.schedule`).
    @exclusivity(unchecked) private(set) var topInputPriority = 0

    var config: DaemonConfig { program.config }
    var nowNanoseconds: UInt64 { loop.now.nanoseconds }

    /// `nowNanoseconds` read without the call into the engine, for the end
    /// of each reaction's actions (its time, on every fire).
    @inline(__always) var reactionEndNanoseconds: UInt64 {
        // (A manual clock through the loop: read here, it would be retained.)
        if onManualClock { return loop.now.nanoseconds }
        // The engine's clock (CLOCK_MONOTONIC, through the vDSO), read by
        // the engine's inline C reader (`MonotonicClock` would be a call
        // from this module).
        return bl_monotonic_ns()
    }
    private let onManualClock: Bool
    var isMain: Bool { id == .main }

    // MARK: Set-up (on the loop's thread)

    /// Modes, the port, the daemon's own timers. Lines come separately
    /// (`adopt`/`request`) so a reload can keep them.
    func setUpLoop(summaryInterval: Duration?) throws {
        try setUpModes()
        try setUpModeItems()
        try ports[id.index].schedule(on: loop, mode: .common)
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
        for (i, s) in config.sequences.enumerated() where s.loop == id {
            let r = SequenceRunner(
                index: i, config: s, runtime: self, range: program.sequences[i], stopRange: program.sequenceStops[i])
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
}
