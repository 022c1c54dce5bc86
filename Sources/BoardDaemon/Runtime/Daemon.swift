import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import Glibc
import Logging

/// A loop's runtime, reachable from its port's handler (set on the loop's
/// thread before the port is scheduled) and from the main thread.
final class RuntimeBox: @unchecked Sendable {
    var rt: LoopRuntime?
    var loop: BoardRunLoop?
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
        /// How long a stop may take in all (keep it below systemd's
        /// `TimeoutStopSec=`): half of it for the loops to set their outputs
        /// safe, the rest for child processes and the loops' ends. Past it,
        /// a loop that has not stopped is reported and left behind, and the
        /// stop is not clean (`boardd` exits 1).
        public var stopTimeout: Duration = .seconds(10)

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

    public private(set) var config: DaemonConfig
    public let loop: BoardRunLoop
    public let gpio: any GPIOBackend
    /// The mock chips, on a mock board.
    public let mock: MockGPIO?
    let options: Options
    var logger: Logger { options.logger }
    private var generation: Int32 = 1
    let main: LoopRuntime
    let boxes: [RuntimeBox]
    var workers: [LoopThread] = []
    private let ports: [BoardMessagePort]
    /// The loops' trace rings and the programs their records refer to.
    let traceLog: TraceLog
    var commands: CommandRunner?
    var signalSource: SignalSource?
    var watchdogTimer: RunLoopTimer?
    private var lastPings: [UInt64] = []
    public internal(set) var stopRequested = false
    var stopResult: Bool?
    public private(set) var reloads = (applied: 0, refused: 0)

    public init(config: DaemonConfig, options: Options) throws {
        self.config = config
        self.options = options
        if config.board.backend == .mock {
            let m: MockGPIO
            if let given = options.mock {
                m = given
            } else {
                m = try MockGPIO(
                    config.board.chips.enumerated().map { i, c in
                        try MockChip(
                            name: "gpiochip\(i)", label: c.label, lineCount: c.lines ?? 32, lineNames: c.names,
                            clock: options.clock)
                    })
            }
            mock = m
            gpio = m
        } else {
            mock = nil
            gpio = LibgpiodBackend.shared
        }
        let program = Program(config: config, generation: 1)
        traceLog = TraceLog(loops: config.loops.count, program: program, logger: options.logger, writer: .shared)
        boxes = config.loops.map { _ in RuntimeBox() }
        let boxes = self.boxes
        ports = try config.loops.map { plan in
            let box = boxes[config.loops.firstIndex(of: plan)!]
            return try BoardMessagePort(label: "boardd.\(plan.name)", slots: 256, slotSize: 48) { m in box.rt?.received(m) }
        }
        loop = try BoardRunLoop(capacities: Self.capacities(config, loop: 0, gpio: gpio, options: options), clock: options.clock)
        main = LoopRuntime(id: .main, loop: loop, program: program, logger: options.logger, driver: options.modeDriver, ports: ports,
            trace: traceLog.rings[0])
        boxes[0].rt = main
        boxes[0].loop = loop
        try main.setUpLoop(summaryInterval: options.summaryInterval)
        if !config.commands.isEmpty {
            let c = CommandRunner(runtime: main, logger: options.logger)
            commands = c
            main.commands = c
        }
        let memoryLockRefused = try Self.lockMemory(config)
        try Self.attachLines(main, gpio: gpio, kept: [:])
        try main.setUpAutomation()
        main.startInputs()
        try startWorkers(program, memoryLockRefused: memoryLockRefused)
        if options.handleSignals {
            let s = try SignalSource(signals: Self.handledSignals) { [unowned self] info in
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
        logger.info("\(startLine)")
        traceLog.writer.attach(traceLog)
    }

    private var startLine: String {
        let inputs = config.lines.filter(\.isInput).count
        let outputs = config.lines.count - inputs
        return
            "running \(config.file) on \(config.board.name) (\(gpio.backendName)): \(count(inputs, "input")), \(count(outputs, "output")), \(count(config.tasks.count, "task")), \(count(config.reactions.count, "reaction")), \(count(config.sequences.count, "sequence")), loops \(config.loops.map(\.name).joined(separator: ", "))"
    }

    private func startWorkers(_ program: Program, memoryLockRefused: String?) throws {
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
                try Daemon.attachLines(rt, gpio: gpio, kept: [:])
                try rt.setUpAutomation()
                rt.startInputs()
            }
            do { try w.start() } catch {
                throw Self.workerStartError(plan.name, error)
            }
            warnRefused(plan, w.refused + (plan.lockMemory ? memoryLockRefused.map { [$0] } ?? [] : []))
            workers.append(w)
        }
        lastPings = Array(repeating: 0, count: workers.count)
    }

    // MARK: Lines

    /// A request a reload keeps: the line's config, the request, an output's value.
    struct Kept {
        var config: LineConfig
        var request: GPIOLineRequest
        var value: Bool
        /// When a pulse in flight ends (it goes on under the new config).
        var pulseEnd: MonotonicInstant?
    }

    /// Requests (or takes over) the loop's lines and schedules its inputs. On the loop's thread.
    static func attachLines(
        _ rt: LoopRuntime, gpio: any GPIOBackend, kept: [String: Kept], filters: [String: InputLine.FilterState] = [:]
    ) throws {
        let config = rt.config
        let chips = ChipCache(gpio)
        defer { chips.close() }
        defer { rt.noteSafeOutputs() }
        for (i, line) in config.lines.enumerated() where line.loop == rt.id {
            let request: GPIOLineRequest
            var value = line.settings.outputValue
            var pulseEnd: MonotonicInstant?
            if let k = kept[line.name] {
                request = k.request
                value = k.value
                pulseEnd = k.pulseEnd
            } else {
                request = try Self.request(line, line.settings, consumer: "boardd", chips: chips)
            }
            let cell = rt.program.cells[i]
            if line.isInput {
                let reactions = config.reactions.indices.filter { config.reactions[$0].line.index == i }
                let input = try InputLine(id: i, config: line, runtime: rt, request: request, cell: cell, reactions: reactions)
                if let state = filters[line.name] { input.carry(state) }
                try input.schedule()
                rt.inputs[i] = input
            } else {
                let out = OutputLine(id: i, config: line, runtime: rt, request: request, cell: cell, value: value)
                if rt.program.pulsedLines.contains(i) { try out.makePulseTimer() }
                if let pulseEnd { try out.resumePulse(until: pulseEnd) }
                rt.outputs[i] = out
            }
        }
    }

    /// The chips a set of requests is made on, each opened once.
    final class ChipCache {
        let gpio: any GPIOBackend
        private var open: [String: GPIOChip] = [:]
        init(_ gpio: any GPIOBackend) { self.gpio = gpio }

        func chip(_ ref: ChipRef) throws -> GPIOChip {
            if let c = open[ref.text] { return c }
            let c = try GPIOChip.open(ref.text, backend: gpio)
            open[ref.text] = c
            return c
        }

        func close() { for c in open.values { c.close() } }
    }

    /// Requests one line of the config with `settings`, on the chip its
    /// address names.
    static func request(
        _ line: LineConfig, _ settings: GPIOLineSettings, consumer: String, chips: ChipCache
    ) throws -> GPIOLineRequest {
        let c: GPIOChip
        let selector: GPIOLineSelector
        switch line.address {
        case let .offset(ref, o):
            c = try chips.chip(ref)
            selector = .offset(o)
        case let .named(ref?, n):
            c = try chips.chip(ref)
            selector = .name(n)
        case let .named(nil, n):
            let found = try GPIOChip.findLine(named: n, backend: chips.gpio)
            c = try chips.chip(.path(found.chip.path))
            selector = .offset(found.offset)
        }
        do {
            return try c.request(
                selector, settings, consumer: consumer, eventBufferCapacity: line.isInput ? line.held.kernelBuffer : 2)
        } catch {
            throw DaemonError.line(line.name, error)
        }
    }

    /// Sets every output of `config` that has a `safe:` value to it, each
    /// requested, written and released in turn, with no loop: what
    /// `boardd --safe-outputs` does after the daemon died without a stop
    /// of its own (systemd's `ExecStopPost=`). Returns the lines set and
    /// the failures (each logged).
    public static func setSafeOutputs(_ config: DaemonConfig, gpio: any GPIOBackend, logger: Logger) -> (set: Int, failed: Int) {
        let chips = ChipCache(gpio)
        defer { chips.close() }
        var set = 0, failed = 0
        for line in config.lines where line.isOutput {
            guard let v = line.safeValue else { continue }
            var settings = line.settings
            settings.outputValue = v
            do {
                let r = try request(line, settings, consumer: "boardd-safe", chips: chips)
                try r.setValue(v)
                r.release()
                set += 1
                logger.notice("\(line.name) -> \(v ? "on" : "off") (safe value)")
            } catch {
                failed += 1
                logger.error("\(line.name): cannot set its safe value: \(error)")
            }
        }
        return (set, failed)
    }

    /// Runs `body` with worker `i`'s runtime on the worker's thread and
    /// waits at most `timeout`: its value, or why there is none (the wait
    /// timed out, the loop ended, the body threw).
    func onWorker<T>(_ i: Int, timeout: Duration, _ body: @escaping @Sendable (LoopRuntime) throws -> T) -> Result<T, any Error> {
        let box = boxes[i + 1]
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
            reload()
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

    // MARK: Reload

    /// Loads the config file again and swaps it in, or keeps the running
    /// one when the new one has errors (each is logged with line:column).
    public func reload() {
        options.notifier?.send("RELOADING=1\nSTATUS=reloading \(config.file)\nMONOTONIC_USEC=\(MonotonicInstant.now.nanoseconds / 1000)")
        defer { options.notifier?.send("READY=1\nSTATUS=\(status)") }
        logger.notice("reload: reading \(config.file)")
        let result = ConfigLoader.load(path: config.file, options: options.loadOptions)
        guard let new = result.config else {
            for d in result.errors { logger.error("\(d.description)") }
            reloads.refused += 1
            logger.error("reload refused: \(result.errors.count) error(s) in \(config.file); the running config stays as it was")
            return
        }
        if new == config {
            logger.notice("reload: the config did not change")
            reloads.applied += 1
            return
        }
        if let why = incompatibility(new) {
            reloads.refused += 1
            logger.error("reload refused: \(why); restart boardd to apply this config (the running config stays)")
            return
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
        config = new
        reloads.applied += 1
        logger.notice(
            "reloaded \(new.file): \(totals.kept) lines kept as they were, \(totals.requested) requested, \(totals.released) released\(failures > 0 ? " (with errors, see above)" : "")"
        )
    }

    /// Why `new` cannot be swapped in place, if it cannot.
    func incompatibility(_ new: DaemonConfig) -> String? {
        guard new.board.name == config.board.name else { return "the board changed (\(config.board.name) -> \(new.board.name))" }
        guard new.loops.map(\.name) == config.loops.map(\.name) else { return "the workers changed" }
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

    // MARK: Watchdog

    private func watchdogTick() {
        var stuck: [String] = []
        for (i, w) in workers.enumerated() {
            let p = boxes[i + 1].rt?.pings.load(ordering: .acquiring) ?? 0
            if p == lastPings[i] && watchdogPingsSent { stuck.append(w.name) }
            lastPings[i] = p
        }
        if stuck.isEmpty {
            options.notifier?.send("WATCHDOG=1")
        } else {
            logger.error("watchdog: loop(s) \(stuck.joined(separator: ", ")) completed no pass in \((options.watchdog ?? .zero) / 2); not pinging systemd")
        }
        for (i, _) in workers.enumerated() {
            try? ports[i + 1].send(id: PortMessage.ping.rawValue, value: UInt8(0), timeout: .zero)
        }
        watchdogPingsSent = true
    }
    private var watchdogPingsSent = false

    // MARK: For tests and the demo

    /// Advances a manual clock by `d`, running the main loop in whichever
    /// mode it is in (the `.external` mode driver).
    public func advance(by d: Duration, step: Duration = .milliseconds(1)) throws {
        var left = d
        while left > .zero {
            let s = min(step, left)
            try loop.advanceManualClock(by: s, mode: main.runModes[main.effectiveMode])
            left -= s
        }
    }

    /// Runs zero-timeout passes of the main loop in its mode.
    public func settle() throws {
        for _ in 0..<8 { _ = try loop.run(mode: main.runModes[main.effectiveMode], timeout: .zero) }
    }

    public var mainMode: String { config.modes[main.effectiveMode].name }

    /// A worker's loop by its config name, once the worker runs (tests use
    /// it to stall a worker and see the watchdog stop pinging).
    public func workerLoop(_ name: String) -> BoardRunLoop? {
        guard let i = config.loops.firstIndex(where: { $0.name == name }), i > 0, i - 1 < workers.count else { return nil }
        return workers[i - 1].loop
    }

    /// Counters of the main loop (read on its thread).
    public struct Counters: Sendable, Equatable {
        public var reactionFires: [String: UInt64] = [:]
        public var reactionSkipped: [String: UInt64] = [:]
        /// Trigger to actions done, per reaction that fired on this loop.
        public var reactionTimes: [String: LatencyFigures] = [:]
        public var sequence: [String: SequenceCounters] = [:]
        public var lines: [String: LineCounters] = [:]
        public var tasks: [String: TaskCounters] = [:]
        public var commandsRefused: [String: UInt64] = [:]
        public var commandsStarted: [String: UInt64] = [:]
        public var commandsRunning = 0
        public var postsStale: UInt64 = 0
    }
    public struct SequenceCounters: Sendable, Equatable {
        public var started: UInt64, completed: UInt64, ignored: UInt64, refused: UInt64, restarted: UInt64, stopped: UInt64
        public var running: Int, queued: Int
    }
    public struct LineCounters: Sendable, Equatable {
        public var events: UInt64, heldInRing: UInt64, lost: UInt64, rateLimitHolds: UInt64, suspectedOverflows: UInt64
        /// Drain timer fires (`drain_every`) that found events waiting in the kernel.
        public var drainReads: UInt64 = 0
    }
    public struct LatencyFigures: Sendable, Equatable {
        public var count: UInt64, p50: Duration, p99: Duration, max: Duration
    }
    public struct TaskCounters: Sendable, Equatable {
        public var runs: UInt64, skippedPeriods: UInt64
        public var p50: Duration, p99: Duration, max: Duration
    }

    /// The main loop's counters.
    public var counters: Counters { main.counters(commands) }
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

extension LoopRuntime {
    func counters(_ commands: CommandRunner?) -> Daemon.Counters {
        var c = Daemon.Counters()
        for (i, r) in config.reactions.enumerated() {
            c.reactionFires[r.name] = reactionFires[i]
            c.reactionSkipped[r.name] = reactionSkipped[i]
            if let h = reactionTimes[i], h.count > 0 {
                c.reactionTimes[r.name] = Daemon.LatencyFigures(
                    count: h.count, p50: h.percentile(0.5), p99: h.percentile(0.99), max: h.max)
            }
        }
        for case let s? in sequences {
            c.sequence[s.config.name] = Daemon.SequenceCounters(
                started: s.started, completed: s.completed, ignored: s.ignored, refused: s.refused, restarted: s.restarted,
                stopped: s.stopped, running: s.activeRuns, queued: s.queued)
        }
        for case let l? in inputs {
            c.lines[l.config.name] = Daemon.LineCounters(
                events: l.eventsSeen, heldInRing: l.heldInRing, lost: l.lost, rateLimitHolds: l.rateLimitHolds,
                suspectedOverflows: l.suspectedOverflows, drainReads: l.drainReads)
        }
        for t in tasks {
            c.tasks[t.config.name] = Daemon.TaskCounters(
                runs: t.runs, skippedPeriods: t.skippedPeriods, p50: t.lateness.percentile(0.5),
                p99: t.lateness.percentile(0.99), max: t.lateness.max)
        }
        if let commands {
            for (i, cmd) in config.commands.enumerated() where i < commands.refused.count {
                c.commandsRefused[cmd.name] = commands.refused[i]
                c.commandsStarted[cmd.name] = commands.started[i]
            }
            c.commandsRunning = commands.runningChildren
        }
        c.postsStale = postsStale
        return c
    }
}

/// "1 task", "2 tasks".
private func count(_ n: Int, _ noun: String) -> String { n == 1 ? "1 \(noun)" : "\(n) \(noun)s" }
