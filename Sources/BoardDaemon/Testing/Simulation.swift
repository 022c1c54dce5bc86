import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import BoardSupport
import Logging

/// A config running on mock chips and one manual clock, every loop on
/// this thread (`Daemon.Options.inlineWorkers`): what `boardd test` and
/// `boardd replay` drive. Nothing sleeps; time moves only when the caller
/// advances it, and the same inputs give the same run, byte for byte.
/// Commands are recorded, not run, unless `runCommands`.
public final class Simulation {
    /// A log line and when (from the start) it was logged.
    public struct LogLine: Sendable {
        public var at: Duration
        public var level: Logger.Level
        public var text: String
    }

    /// An output write after the line's initial value: when, and the
    /// logical value.
    public struct Write: Sendable, Equatable {
        public var at: Duration
        public var value: Bool
    }

    public let clock: ManualClock
    public let start: MonotonicInstant
    public let daemon: Daemon
    public let mock: MockGPIO
    private let logged: LockedValue<[LogLine]>
    private let runsRecorded: LockedValue<[CommandRun]>
    /// Each chip's output changes read so far, by line, and how many the
    /// chip had recorded then: each look reads only the changes since the
    /// last (`sync`), not the chip's whole history again.
    private var seen: [ObjectIdentifier: (count: UInt64, lines: [UInt32: Writes])] = [:]

    /// One output's changes as read: its initial value, its writes after it.
    private struct Writes {
        var initial: Bool?
        var writes: [Write] = []
    }

    /// Every input starts driven to the level it rests at (inactive: a
    /// button not pressed; high where the board file says the line rests
    /// high), or to the logical level `initial` gives it;
    /// `levels`, physical levels by line, win over both (a replay's
    /// recorded levels). `historyCapacity`: output writes the mock chips
    /// keep (per chip).
    public init(
        config: DaemonConfig, loadOptions: LoadOptions, runCommands: Bool = false, logLevel: Logger.Level = .info,
        initial: [String: Bool] = [:], levels: [String: Bool] = [:], historyCapacity: Int = 1 << 16
    ) throws {
        let clock = ManualClock()
        self.clock = clock
        start = clock.now
        let chips: MockGPIO
        if config.board.mock {
            chips = try MockBoard.chips(MockBoard.layout(config), clock: .manual(clock), historyCapacity: historyCapacity)
        } else if config.board.backend == .mock {
            chips = try MockBoard.chips(config.board.chips, clock: .manual(clock), historyCapacity: historyCapacity)
        } else {
            throw DaemonError.setup("board '\(config.board.name)' is not served by mock chips (load the config with --mock)")
        }
        mock = chips
        for l in config.lines where l.isInput {
            let (chip, selector) = try Self.pin(l, chips)
            // Driven, so a bias does not decide it: where it rests
            // (`MockBoard.restLevel`) unless the caller says otherwise.
            let rest = try MockBoard.restLevel(l, chip, selector)
            try chip.setLevel(selector, levels[l.name] ?? initial[l.name].map { $0 != l.settings.activeLow } ?? rest)
        }
        let logged = LockedValue<[LogLine]>([])
        self.logged = logged
        let runs = LockedValue<[CommandRun]>([])
        runsRecorded = runs
        let start = self.start
        var logger = Logger(label: "boardd") { _ in
            SimulationLogHandler { level, text in
                let at = clock.now.nanoseconds &- start.nanoseconds
                logged.update { $0.append(LogLine(at: .nanoseconds(Int64(at)), level: level, text: text)) }
            }
        }
        logger.logLevel = logLevel
        var options = Daemon.Options(
            logger: logger, clock: .manual(clock), modeDriver: .external, summaryInterval: nil, loadOptions: loadOptions, mock: chips)
        options.inlineWorkers = true
        if !runCommands { options.commandRecorder = { run in runs.update { $0.append(run) } } }
        daemon = try Daemon(config: config, options: options)
        try daemon.settle()
    }

    deinit { daemon.shutdown() }

    /// Loads a config to run on mock chips: a real board's as `--mock`
    /// makes them from its board file, a board of mock chips (the demo's)
    /// on its own. Returns the options a reload must load with.
    public static func load(_ path: String, _ given: LoadOptions) -> (LoadResult, LoadOptions) {
        var options = given
        options.mock = true
        let loaded = ConfigLoader.load(path: path, options: options)
        guard loaded.config?.board.backend == .mock && loaded.config?.board.mock == true else { return (loaded, options) }
        options.mock = false
        return (ConfigLoader.load(path: path, options: options), options)
    }

    /// Time since the start.
    public var now: Duration { .nanoseconds(Int64(clock.now.nanoseconds &- start.nanoseconds)) }

    public func instant(_ d: Duration) -> MonotonicInstant { start + d }

    /// Runs every loop until `t` from the start (nothing when that is past).
    public func advance(to t: Duration) throws {
        if t > now { try daemon.advance(by: t - now) }
    }

    public var log: [LogLine] { logged.get() }
    public var runs: [CommandRun] { runsRecorded.get() }

    // MARK: Lines

    /// The mock chip and line that serve a config line (in the running config).
    public func pin(_ name: String) throws -> (MockChip, GPIOLineSelector, LineConfig) {
        let config = daemon.config
        guard let id = config.line(named: name) else { throw DaemonError.setup("no line named '\(name)'") }
        let (chip, selector) = try Self.pin(config[id], mock)
        return (chip, selector, config[id])
    }

    static func pin(_ l: LineConfig, _ mock: MockGPIO) throws -> (MockChip, GPIOLineSelector) {
        guard let p = MockBoard.pin(l, in: mock) else { throw DaemonError.setup("line '\(l.name)': no mock chip serves it") }
        return p
    }

    /// Sets an input's physical level now, and lets the loops read it.
    public func setLevel(_ name: String, high: Bool) throws {
        let (chip, selector, _) = try pin(name)
        try chip.setLevel(selector, high)
        try daemon.settle()
    }

    /// Sets an input to its logical level (`active`: pressed, on).
    public func setActive(_ name: String, _ active: Bool) throws {
        let (_, _, l) = try pin(name)
        try setLevel(name, high: active != l.settings.activeLow)
    }

    /// An input's physical level now.
    public func level(_ name: String) throws -> Bool {
        let (chip, selector, _) = try pin(name)
        return try chip.level(selector)
    }

    /// A line's logical value now: an output's last write, an input's level.
    public func value(_ name: String) throws -> Bool {
        let (chip, selector, l) = try pin(name)
        if l.isOutput, let last = try chip.lastOutputChange(selector) { return last.value }
        return try chip.level(selector) != l.settings.activeLow
    }

    /// An output's initial value and its writes after it, in order. (The
    /// writes a chip's history dropped between two looks are not there.)
    public func writes(_ name: String) throws -> (initial: Bool?, writes: [Write]) {
        let (chip, selector, _) = try pin(name)
        let w = try sync(chip)[chip.offset(selector)] ?? Writes()
        return (w.initial, w.writes)
    }

    /// An output's writes from `from` to `to` (both included): found by a
    /// binary search, so a window costs its own writes, not the line's all.
    public func writes(_ name: String, from: Duration, to: Duration) throws -> ArraySlice<Write> {
        let all = try writes(name).writes
        func first(_ after: (Duration) -> Bool) -> Int {
            var lo = all.startIndex
            var hi = all.endIndex
            while lo < hi {
                let mid = (lo + hi) / 2
                if after(all[mid].at) { hi = mid } else { lo = mid + 1 }
            }
            return lo
        }
        let lo = first { $0 >= from }
        return all[lo..<max(lo, first { $0 > to })]
    }

    /// Reads what each chip recorded since the last look once that is
    /// `slack` changes or more: a long replay looks only at its end, and a
    /// chip's ring keeps its last changes only (tens of thousands).
    public func keepUp(slack: UInt64 = 1024) {
        for chip in mock.chips where chip.outputChangeCount &- (seen[ObjectIdentifier(chip)]?.count ?? 0) >= slack {
            _ = sync(chip)
        }
    }

    /// Reads the chip's changes since the last look into `seen`; its lines' writes.
    private func sync(_ chip: MockChip) -> [UInt32: Writes] {
        let id = ObjectIdentifier(chip)
        // Taken out while it grows, so its arrays are not shared (and copied).
        var s = seen.removeValue(forKey: id) ?? (0, [:])
        let (changes, count) = chip.outputChanges(since: s.count)
        s.count = count
        for c in changes {
            let at = Duration.nanoseconds(Int64(c.timestamp.nanoseconds &- start.nanoseconds))
            if s.lines[c.offset] == nil {
                s.lines[c.offset] = Writes(initial: c.value)
            } else {
                s.lines[c.offset]!.writes.append(Write(at: at, value: c.value))
            }
        }
        seen[id] = s
        return s.lines
    }

    // MARK: Loops

    /// Every loop's counters, merged: each line, task and reaction is
    /// counted by the loop that owns it.
    public func counters() -> Daemon.Counters {
        var all = daemon.counters
        for i in daemon.workers.indices {
            guard case let .success(c) = daemon.workerCounters(i, timeout: .seconds(1)) else { continue }
            let loop = i + 1
            let config = daemon.config
            for (k, v) in c.lines where config.line(named: k).map({ config[$0].loop.index == loop }) == true { all.lines[k] = v }
            for (k, v) in c.tasks where config.tasks.first(where: { $0.name == k })?.loop.index == loop { all.tasks[k] = v }
            for (k, v) in c.reactionFires { all.reactionFires[k, default: 0] += v }
            for (k, v) in c.reactionSkipped { all.reactionSkipped[k, default: 0] += v }
            for (k, v) in c.sequence where v.started > 0 || v.running > 0 { all.sequence[k] = v }
        }
        return all
    }

    /// Each loop's name and the mode it is in now.
    public func modes() -> [(loop: String, mode: String)] {
        daemon.boxes.enumerated().compactMap { i, b in
            guard let rt = b.rt else { return nil }
            return (daemon.config.loops[i].name, rt.config.modes[rt.effectiveMode].name)
        }
    }
}

/// Hands each log line, as boardd would print it, to a closure.
struct SimulationLogHandler: LogHandler {
    let sink: @Sendable (Logger.Level, String) -> Void
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]

    init(_ sink: @escaping @Sendable (Logger.Level, String) -> Void) { self.sink = sink }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) { sink(event.level, "\(event.message)") }
}
