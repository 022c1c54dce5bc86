import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import Glibc
import Logging

/// A loop's runtime, reachable from its port's handler (set on the loop's
/// thread before the port is scheduled) and from the main thread.
final class RuntimeBox: @unchecked Sendable {
    /// Set once, before its loop runs; cleared only when the daemon that
    /// made it goes, once its loop has ended (`release`).
    var rt: LoopRuntime? {
        didSet { rtRef = rt.map(Unmanaged.passUnretained) }
    }
    /// `rt` unretained: the port's handler borrows the runtime for each
    /// message (`_withUnsafeGuaranteedRef`) where reading `rt` would retain
    /// and release it. `rt` keeps it alive.
    private var rtRef: Unmanaged<LoopRuntime>?
    var loop: BoardRunLoop?
    /// The tables a worker's counters are read into (main loop only; `workerCounters`).
    var figures: LoopFigures?

    /// Lets go of the loop and its runtime. The loop holds its port, the
    /// port's handler this box, and this box the loop and the runtime: a
    /// cycle only this breaks. Only for a loop that has ended (its thread
    /// joined, or the main loop once its daemon is gone).
    func release() {
        rt = nil
        loop = nil
        figures = nil
    }

    /// A message on the loop's port, to its runtime (none yet: dropped).
    func received(_ m: BoardMessagePort.Message) {
        rtRef?._withUnsafeGuaranteedRef { $0.received(m) }
    }
}

/// A worker loop: on a thread of its own, or (`Options.inlineWorkers`)
/// made and run on the daemon's thread, which `advance` drives.
struct WorkerHandle {
    let name: String
    /// nil: inline.
    let thread: LoopThread?

    func stop() { thread?.stop() }
    func join(timeout: Duration) -> Bool { thread?.join(timeout: timeout) ?? true }
}

/// The daemon: a config running on the main loop and its workers. Build it
/// on the thread that will run it (the main loop is that thread's), then
/// `run()`. Signals, reload, shutdown, systemd notify and the watchdog
/// live here; the automation lives in the loops' runtimes.
public final class Daemon: @unchecked Sendable {
    public struct Options {
        public var logger: Logger
        public var clock: RunLoopClock
        public var modeDriver: ModeDriver
        /// How often each loop logs its tasks' lateness and held/lost counts (nil: never).
        public var summaryInterval: Duration?
        public var notifier: SystemdNotifier?
        public var watchdog: Duration?
        /// How a reload loads the config file again.
        public var loadOptions: LoadOptions
        /// The mock chips to use for a mock board (default: made from the board's chips).
        public var mock: MockGPIO?
        /// Install SIGTERM/SIGINT (stop) and SIGHUP (reload) sources; they must be blocked first.
        public var handleSignals: Bool
        /// The caller runs the demo's script on the main loop (its timers are counted there).
        public var demo = false
        /// Where the control socket listens, when the config's `control:` is
        /// enabled (nil: no control socket; tests leave it off).
        public var control: ControlServer.Options?
        /// How long a stop may take in all (keep it below systemd's
        /// `TimeoutStopSec=`): half of it for the loops to set their outputs
        /// safe, the rest for child processes and the loops' ends. Past it,
        /// a loop that has not stopped is reported and left behind, and the
        /// stop is not clean (`boardd` exits 1).
        public var stopTimeout: Duration = .seconds(10)
        /// Every worker loop made on the daemon's thread, on the same
        /// manual clock as the main loop, instead of on a thread of its
        /// own: `advance` and `settle` run all the loops in turn, so a run
        /// is deterministic (`boardd test` and `boardd replay`). Needs a
        /// manual clock and the `.external` mode driver; real-time
        /// settings are not applied.
        public var inlineWorkers = false
        /// Whether the config's `mqtt:` client runs (never with inline
        /// workers: `boardd test` and `replay` reach no broker).
        public var mqtt = true
        /// Set: `run` actions are handed to it instead of started.
        public var commandRecorder: (@Sendable (CommandRun) -> Void)?
        /// Where the safe table of the running config is written, at the
        /// start and after every applied reload (`SafeTable`; nil: nowhere).
        public var safeTable: String?
        /// Run on a reload's read thread before it reads (tests hold a read there).
        var reloadReadStarts: (@Sendable () -> Void)?

        public init(
            logger: Logger, clock: RunLoopClock = .monotonic, modeDriver: ModeDriver = .nestedRuns,
            summaryInterval: Duration? = .seconds(60), notifier: SystemdNotifier? = nil, watchdog: Duration? = nil,
            loadOptions: LoadOptions = LoadOptions(), mock: MockGPIO? = nil, handleSignals: Bool = false
        ) {
            self.logger = logger
            self.clock = clock
            self.modeDriver = modeDriver
            self.summaryInterval = summaryInterval
            self.notifier = notifier
            self.watchdog = watchdog
            self.loadOptions = loadOptions
            self.mock = mock
            self.handleSignals = handleSignals
        }
    }

    public internal(set) var config: DaemonConfig
    public let loop: BoardRunLoop
    public let gpio: any GPIOBackend
    /// The mock chips, on a mock board.
    public let mock: MockGPIO?
    let options: Options
    var logger: Logger { options.logger }
    var generation: Int32 = 1
    let main: LoopRuntime
    let boxes: [RuntimeBox]
    var workers: [WorkerHandle] = []
    let ports: [BoardMessagePort]
    /// The loops' trace rings and the programs their records refer to.
    let traceLog: TraceLog
    var commands: CommandRunner?
    var signalSource: SignalSource?
    var watchdogTimer: RunLoopTimer?
    var lastPings: [UInt64] = []
    var watchdogPingsSent = false
    public internal(set) var stopRequested = false
    var stopResult: Bool?
    /// The workers the stop found stuck, with their boxes: their threads
    /// may still run, so their boxes are kept when the daemon goes.
    var stuckWorkers: [(box: Int, worker: WorkerHandle)] = []
    public internal(set) var reloads = (applied: 0, refused: 0)
    /// A reload read off the main loop, and the requests waiting for it.
    var reloadQueue = ReloadQueue()
    /// Why the last refused reload was refused.
    public internal(set) var lastReloadError: String?
    /// The control socket's server (`Options.control`).
    public internal(set) var control: ControlServer?
    /// The MQTT client and what it publishes (the config's `mqtt:`).
    var mqtt: MQTTBridge?
    /// The commands the control socket and MQTT take, and their pulses'
    /// ends (made when either runs).
    var remote: RemoteCommands?
    /// The services beside the loops, in the order they started
    /// (`SupervisedService`).
    var services: [any SupervisedService] = []

    deinit {
        // Each box holds its loop in a cycle (`RuntimeBox.release`): let go
        // of every one whose loop no thread may still run. Those are the
        // workers on threads of their own a stop never ended (none after a
        // stop, which empties `workers`) and the stuck ones still running.
        _ = joinStuckWorkers(within: .zero)
        let running = stuckWorkers.map(\.box) + workers.indices.filter { workers[$0].thread != nil }.map { $0 + 1 }
        for (i, box) in boxes.enumerated() where !running.contains(i) { box.release() }
    }

    /// After a stop that found workers stuck: waits at most `limit` for
    /// their threads to end (a stuck handler that returns lets its stopped
    /// loop end), and joins those that did, so their loops are let go with
    /// the daemon. Returns whether none is left running.
    public func joinStuckWorkers(within limit: Duration) -> Bool {
        let deadline = MonotonicInstant.now + limit
        stuckWorkers.removeAll { $0.worker.join(timeout: max(deadline - MonotonicInstant.now, .zero)) }
        return stuckWorkers.isEmpty
    }

    public init(config: DaemonConfig, options: Options) throws {
        if options.inlineWorkers {
            guard case .manual = options.clock, options.modeDriver == .external else {
                throw DaemonError.setup("inline workers need a manual clock and the external mode driver")
            }
        }
        self.config = config
        self.options = options
        let backend = try MockBoard.backend(for: config, given: options.mock, clock: options.clock)
        gpio = backend.gpio
        mock = backend.mock
        let program = Program(config: config, generation: 1)
        traceLog = TraceLog(loops: config.loops.count, program: program, logger: options.logger, writer: .shared)
        boxes = config.loops.map { _ in RuntimeBox() }
        let boxes = self.boxes
        ports = try config.loops.map { plan in
            let box = boxes[config.loops.firstIndex(of: plan)!]
            return try BoardMessagePort(label: "boardd.\(plan.name)", slots: 256, slotSize: 48) { m in box.received(m) }
        }
        loop = try BoardRunLoop(capacities: Self.capacities(config, loop: 0, gpio: gpio, options: options), clock: options.clock)
        main = LoopRuntime(id: .main, loop: loop, program: program, logger: options.logger, driver: options.modeDriver, ports: ports,
            trace: traceLog.rings[0])
        boxes[0].rt = main
        boxes[0].loop = loop
        try main.setUpLoop(summaryInterval: options.summaryInterval)
        if LoopBudget.Extras(options).frontEnds(config) {
            let r = RemoteCommands(daemon: self)
            try r.start()
            remote = r
            supervise(r)
        }
        // The control socket before any line is requested or worker runs: a
        // socket that cannot be made stops the start with nothing driven.
        if let c = options.control, config.control.enabled {
            let server = try ControlServer.start(self, c)
            control = server
            supervise(server)
        }
        // libmosquitto before any line is requested: a config whose mqtt:
        // block cannot run stops the start with nothing driven.
        if options.mqtt && !options.inlineWorkers && config.mqtt != nil, let why = MQTTLibrary.load() {
            stopServices(beforeOutputsAreSafe: true, by: .now)
            throw DaemonError.setup("mqtt: \(why)")
        }
        do {
            try startLinesAndLoops()
        } catch {
            stopServices(beforeOutputsAreSafe: true, by: .now)
            throw error
        }
        logger.info("\(startLine)")
        if options.mqtt && !options.inlineWorkers, let m = config.mqtt {
            let b = MQTTBridge(daemon: self, config: m)
            do { try b.start() } catch {
                // The lines are driven by now: the outputs go safe and the
                // lines are released, as at any stop.
                b.stop()
                shutdown()
                throw DaemonError.setup("mqtt: \(error)")
            }
            mqtt = b
            supervise(b)
        }
        // Once the daemon runs: what `boardd --safe-outputs` falls back to.
        writeSafeTable()
        traceLog.writer.rateLimit = config.log.rateLimit
        // Inline, the records are logged on this thread only (`flushEvents`
        // after each settle), so a run's log is the same every time.
        if !options.inlineWorkers { traceLog.writer.attach(traceLog) }
    }

    /// The rest of the start: commands, lines, automation, workers, signals,
    /// the watchdog.
    private func startLinesAndLoops() throws {
        if !config.commands.isEmpty {
            let c = CommandRunner(runtime: main, logger: options.logger)
            c.recorder = options.commandRecorder
            commands = c
            main.commands = c
            supervise(c)
        }
        let memoryLockRefused = try Self.lockMemory(config)
        try main.attachLines(gpio: gpio, kept: [:])
        try main.setUpAutomation()
        main.startInputs()
        try startWorkers(main.program, memoryLockRefused: memoryLockRefused)
        if options.handleSignals {
            let s = try SignalSource(signals: Self.takenSignals(logger)) { [unowned self] info in
                self.signal(info)
            }
            try s.add(to: loop, mode: .common)
            signalSource = s
        }
        if let w = options.watchdog {
            let t = RunLoopTimer(fireAt: loop.now + w / 2, interval: w / 2, tolerance: w / 20) { [unowned self] _ in
                self.watchdogTick()
            }
            try loop.add(t, mode: .common)
            watchdogTimer = t
        }
    }

    private var startLine: String {
        let inputs = config.lines.filter(\.isInput).count
        let outputs = config.lines.count - inputs
        return
            "running \(config.file) on \(config.board.name) (\(MockBoard.backendName(config.board, gpio))): \(count(inputs, "input")), \(count(outputs, "output")), \(count(config.tasks.count, "task")), \(count(config.reactions.count, "reaction")), \(count(config.sequences.count, "sequence")), loops \(config.loops.map(\.name).joined(separator: ", "))"
    }

    private func startWorkers(_ program: Program, memoryLockRefused: String?) throws {
        if options.inlineWorkers {
            try startInlineWorkers(program)
            return
        }
        for (i, plan) in config.loops.enumerated().dropFirst() {
            let settings = LoopThread.Settings(
                capacities: capacities(for: config, loop: i), cpuAffinity: plan.cpus.isEmpty ? nil : plan.cpus,
                fifoPriority: plan.realtimePriority.map { Int32($0) }, timerSlack: plan.timerSlack,
                realtimeRequired: plan.realtime == .required)
            let box = boxes[i]
            let logger = options.logger
            let driver = options.modeDriver
            let ports = self.ports
            let gpio = self.gpio
            let summary = options.summaryInterval
            let trace = traceLog.rings[i]
            let w = LoopThread(name: plan.name, settings: settings) { loop in
                let rt = LoopRuntime(id: LoopID(i), loop: loop, program: program, logger: logger, driver: driver, ports: ports, trace: trace)
                box.rt = rt
                box.loop = loop
                try rt.setUpLoop(summaryInterval: summary)
                try rt.attachLines(gpio: gpio, kept: [:])
                try rt.setUpAutomation()
                rt.startInputs()
            }
            do { try w.start() } catch {
                throw Self.workerStartError(plan.name, error)
            }
            warnRefused(plan, w.refused + (plan.lockMemory ? memoryLockRefused.map { [$0] } ?? [] : []))
            workers.append(WorkerHandle(name: plan.name, thread: w))
        }
        lastPings = Array(repeating: 0, count: workers.count)
    }

    /// `Options.inlineWorkers`: each worker's loop and runtime made here,
    /// on this thread and the daemon's clock.
    private func startInlineWorkers(_ program: Program) throws {
        for (i, plan) in config.loops.enumerated().dropFirst() {
            let loop = try BoardRunLoop(capacities: capacities(for: config, loop: i), clock: options.clock)
            let rt = LoopRuntime(
                id: LoopID(i), loop: loop, program: program, logger: options.logger, driver: options.modeDriver, ports: ports,
                trace: traceLog.rings[i])
            boxes[i].rt = rt
            boxes[i].loop = loop
            workers.append(WorkerHandle(name: plan.name, thread: nil))
            do {
                try rt.setUpLoop(summaryInterval: options.summaryInterval)
                try rt.attachLines(gpio: gpio, kept: [:])
                try rt.setUpAutomation()
                rt.startInputs()
            } catch {
                throw Self.workerStartError(plan.name, error)
            }
        }
        lastPings = Array(repeating: 0, count: workers.count)
    }

    /// Runs `body` with worker `i`'s runtime on the worker's thread when
    /// its loop gets to it, without waiting (a worker that is stuck runs
    /// it once it is not); false if it could not be posted.
    @discardableResult
    func postToWorker(_ i: Int, _ body: @escaping @Sendable (LoopRuntime) -> Void) -> Bool {
        let box = boxes[i + 1]
        guard let loop = box.loop else { return false }
        do {
            try loop.perform(inModes: [.common]) {
                guard let rt = box.rt else { return }
                body(rt)
            }
            return true
        } catch {
            return false
        }
    }

    /// Runs `body` with worker `i`'s runtime on the worker's thread and
    /// waits at most `timeout`: its value, or why there is none (the wait
    /// timed out, the loop ended, the body threw).
    func onWorker<T>(_ i: Int, timeout: Duration, _ body: @escaping @Sendable (LoopRuntime) throws -> T) -> Result<T, any Error> {
        let box = boxes[i + 1]
        if workers[i].thread == nil {
            // Inline: this is the worker's thread.
            guard let rt = box.rt else { return .failure(DaemonError.setup("worker '\(workers[i].name)' has no runtime")) }
            return Result { try body(rt) }
        }
        let got = LockedValue<Result<T, any Error>?>(nil)
        do {
            guard let loop = box.loop else { throw DaemonError.setup("worker '\(workers[i].name)' has no loop") }
            try loop.performAndWait(inModes: [.common], timeout: timeout) {
                guard let rt = box.rt else { return }
                got.set(Result { try body(rt) })
            }
        } catch {
            return .failure(error)
        }
        return got.get() ?? .failure(DaemonError.setup("worker '\(workers[i].name)' has no runtime"))
    }

    // MARK: Running

    /// Runs until SIGTERM/SIGINT (or `requestStop`), then shuts down:
    /// tasks and sequences stop, outputs go to their safe values, lines are
    /// released. On the thread that made the daemon.
    @discardableResult
    public func run(for limit: Duration? = nil) throws -> Bool {
        var deadline: RunLoopTimer?
        if let limit {
            let t = RunLoopTimer(fireAt: loop.now + limit) { [unowned self] _ in self.requestStop("the run time is up") }
            try loop.add(t, mode: .common)
            deadline = t
        }
        let ready = PerformWorkItem(modes: [.common]) { [unowned self] in self.announceReady() }
        try loop.perform(ready)
        while !stopRequested {
            _ = try loop.run(mode: .default, timeout: runWithoutDeadline)
        }
        deadline?.invalidate()
        return shutdown()
    }

    private func announceReady() {
        logger.notice("ready: every loop is running (\(config.loops.map(\.name).joined(separator: ", ")))")
        options.notifier?.send("READY=1\nSTATUS=\(status)\nMAINPID=\(getpid())")
    }

    var status: String {
        "\(config.lines.count) lines, \(config.tasks.count) tasks, \(config.reactions.count) reactions; mode \(config.modes[main.effectiveMode].name)"
    }

    /// Asks the daemon to stop (from the main loop's thread).
    public func requestStop(_ why: String) {
        guard !stopRequested else { return }
        stopRequested = true
        logger.notice("stopping (\(why)): stopping tasks and sequences, outputs to their safe values, releasing lines")
        options.notifier?.send("STOPPING=1\nSTATUS=stopping")
        main.stopping = true
        loop.stop()
    }

    private func signal(_ info: SignalSource.Info) {
        if info.signal == SIGHUP {
            requestReload()
        } else if Self.stopSignals.contains(info.signal) {
            requestStop("\(info.name) from pid \(info.senderPID)")
        } else {
            logger.warning("\(info.name) from pid \(info.senderPID) ignored (boardd stops on SIGTERM, SIGINT, SIGQUIT, SIGPWR, SIGXCPU or SIGXFSZ and reloads on SIGHUP)")
        }
    }

    /// Signals that stop the daemon as SIGTERM does: outputs to their safe
    /// values first. Each would otherwise end the process with outputs as
    /// they are (SIGQUIT, SIGXCPU and SIGXFSZ with a core dump).
    public static let stopSignals: [Int32] = [SIGTERM, SIGINT, SIGQUIT, SIGPWR, SIGXCPU, SIGXFSZ]
    /// Signals whose default action would end the daemon without safe
    /// values but that ask for nothing a board daemon does: each is logged
    /// and ignored (the real-time signals too).
    public static let ignoredSignals: [Int32] =
        [SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGIO, SIGSTKFLT] + Array(SignalMask.realtimeRange)
    /// Every signal the daemon takes through its signal source (the launcher
    /// blocks them before any thread starts).
    public static var handledSignals: [Int32] { [SIGHUP] + stopSignals + ignoredSignals }

    /// The handled signals the signal source takes: all of them, less the
    /// ignored ones this platform would not let the launcher block
    /// (qemu-user keeps the top real-time signals for itself), which are
    /// named once in a warning. SIGHUP and the stop signals are never left
    /// out: a signal source without them fails to start, naming the signal.
    static func takenSignals(_ logger: Logger) -> [Int32] {
        let refused = ignoredSignals.filter { !SignalMask.isBlocked($0) }
        if !refused.isEmpty {
            logger.warning(
                "signals \(refused.map(SignalMask.name).joined(separator: ", ")) could not be blocked here (an emulator such as qemu-user keeps them for itself): boardd does not take them, and each would end it with its default action")
        }
        return handledSignals.filter { !refused.contains($0) }
    }

    // MARK: For tests and the demo

    /// Advances a manual clock by `d`, running the main loop in whichever
    /// mode it is in (the `.external` mode driver); then the loops' event
    /// lines are logged (`flushEvents`).
    public func advance(by d: Duration, step: Duration = .milliseconds(1)) throws {
        if options.inlineWorkers {
            try advanceAll(by: d)
            flushEvents()
            return
        }
        var left = d
        while left > .zero {
            let s = min(step, left)
            try loop.advanceManualClock(by: s, mode: main.runModes[main.effectiveMode])
            left -= s
        }
        flushEvents()
    }

    /// Runs zero-timeout passes of the main loop in its mode; then the
    /// loops' event lines are logged (`flushEvents`).
    public func settle() throws {
        if options.inlineWorkers {
            try settleAll()
            flushEvents()
            return
        }
        for _ in 0..<8 { _ = try loop.run(mode: main.runModes[main.effectiveMode], timeout: .zero) }
        flushEvents()
    }

    /// Logs what the loops' event sinks recorded so far (the log writer's
    /// thread does it a moment later anyway): a caller that reads the log
    /// right after driving the loops sees every line.
    public func flushEvents() {
        if traceLog.pending { traceLog.drain() }
    }

    public var mainMode: String { config.modes[main.effectiveMode].name }

    /// A worker's loop by its config name, once the worker runs (tests use
    /// it to stall a worker and see the watchdog stop pinging).
    public func workerLoop(_ name: String) -> BoardRunLoop? {
        guard let i = config.loops.firstIndex(where: { $0.name == name }), i > 0, i - 1 < workers.count else { return nil }
        return boxes[i].loop
    }

    /// The main loop's counters.
    public var counters: Counters { main.counters(commands) }

    /// Every loop's counters (a worker is asked, for at most a second; one
    /// that does not answer is left out): the control socket's `lines` and
    /// MQTT's stats summary.
    func allCounters() -> [Counters] {
        var out = [counters]
        for i in workers.indices {
            if case let .success(c) = workerCounters(i, timeout: .seconds(1)) { out.append(c) }
        }
        return out
    }
}

public enum DaemonError: Error, CustomStringConvertible {
    case setup(String)
    case line(String, GPIOError)

    public var description: String {
        switch self {
        case let .setup(s): s
        case let .line(name, e): "line '\(name)': \(e)"
        }
    }
}

/// "1 task", "2 tasks".
private func count(_ n: Int, _ noun: String) -> String { n == 1 ? "1 \(noun)" : "\(n) \(noun)s" }
