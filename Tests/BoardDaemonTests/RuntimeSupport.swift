import Boardloop
import BoardloopGPIOMock
import BoardDaemon
import BoardloopTestSupport
import Logging
import XCTest

/// A daemon on the demo board's mock chips and a manual clock, driven by
/// the test (`.external` mode driver): nothing sleeps, time moves only
/// when `advance` says.
final class Harness {
    let clock = ManualClock()
    let mock: MockGPIO
    let daemon: Daemon
    var chip: MockChip { mock.chips[0] }

    /// A demo board pin's offset on its first chip (boards/demo.yaml).
    static func offset(_ pin: String) -> UInt32 { Demo.board.pin(named: pin)!.chipLine!.offset }

    /// Every line the daemon logged at `notice` and above (or at the level
    /// asked), when the harness made the logger.
    var log: String { logText.withLock { $0 } }
    private let logText = Locked("")

    /// `eventModel`: the kind of kernel the mock chips imitate; `load`: the
    /// options the config is checked with; `logger`: where the daemon logs
    /// (default: kept in `log`, at `level` or `notice`, whichever says more).
    convenience init(
        _ yaml: String, level: Logger.Level = .critical, eventModel: MockChip.EventModel = .v2, load: LoadOptions = LoadOptions(),
        logger given: Logger? = nil, stopTimeout: Duration = .seconds(10), levels: [String: Bool] = [:],
        control: ControlServer.Options? = nil, file: StaticString = #filePath, line: UInt = #line
    ) throws {
        try self.init(
            result: ConfigLoader.load(text: yaml, file: "test.yaml", options: load), level: level, eventModel: eventModel,
            logger: given, stopTimeout: stopTimeout, levels: levels, control: control, file: file, line: line)
    }

    /// A daemon on a config file (a reload reads it again).
    /// `safeTable`: where the daemon writes its safe table (nil: nowhere).
    convenience init(
        path: String, level: Logger.Level = .notice, levels: [String: Bool] = [:], safeTable: String? = nil,
        file: StaticString = #filePath, line: UInt = #line
    ) throws {
        try self.init(
            result: ConfigLoader.load(path: path), level: level, eventModel: .v2, logger: nil, stopTimeout: .seconds(10),
            levels: levels, safeTable: safeTable, file: file, line: line)
    }

    init(
        result: LoadResult, level: Logger.Level, eventModel: MockChip.EventModel, logger given: Logger?, stopTimeout: Duration,
        levels: [String: Bool] = [:], control: ControlServer.Options? = nil, safeTable: String? = nil,
        configure: (inout Daemon.Options) -> Void = { _ in }, file: StaticString, line: UInt
    ) throws {
        guard let config = result.config else {
            XCTFail("config errors: \(result.errors.map(\.description))", file: file, line: line)
            throw XCTSkip("bad config")
        }
        mock = try Demo.makeChips(clock: .manual(clock), eventModel: eventModel)
        // Pins at a level before the daemon starts (a line already active at start).
        for (pin, high) in levels { try mock.chips[0].setLevel(.offset(Self.offset(pin)), high) }
        let text = logText
        let captured = min(level, .notice)
        var logger = given ?? Logger(label: "test") { _ in CapturingLogHandler(text: text, level: captured) }
        if given == nil { logger.logLevel = captured }
        var options = Daemon.Options(logger: logger, clock: .manual(clock), modeDriver: .external, summaryInterval: nil, mock: mock)
        options.stopTimeout = stopTimeout
        // No control socket unless the test asks for one (then in the path it gives).
        options.control = control
        options.safeTable = safeTable
        configure(&options)
        daemon = try Daemon(config: config, options: options)
        // Every test's config: each loop holds what its plan counts.
        try daemon.checkLoopBudgets("test.yaml", file: file, line: line)
    }

    deinit { daemon.shutdown() }

    func advance(_ ms: Int) throws { try daemon.advance(by: .milliseconds(ms)) }

    /// Physical level of a demo pin: true is high.
    func setLevel(_ pin: String, _ high: Bool) throws {
        try chip.setLevel(.offset(Self.offset(pin)), high)
        try daemon.settle()
    }

    /// Press an active-low button (low), or release it.
    func press(_ down: Bool = true) throws { try setLevel("BUTTON", !down) }

    func click(hold ms: Int = 100) throws {
        try press()
        try advance(ms)
        try press(false)
    }

    /// The logical values written to an output, in order (after the initial one).
    func writes(_ pin: String) throws -> [Bool] {
        Array(try chip.outputHistory(.offset(Self.offset(pin))).map(\.value).dropFirst())
    }

    /// Waits, polling, until an output's writes are `expected` (an output
    /// a worker's thread writes), for at most `seconds`.
    func waitForWrites(_ pin: String, _ expected: [Bool], within seconds: Double = 30) throws {
        let end = Date().addingTimeInterval(seconds)
        while try writes(pin) != expected && Date() < end { usleep(2000) }
    }

    var counters: Daemon.Counters { daemon.counters }
    func fires(_ reaction: String) -> UInt64 { counters.reactionFires[reaction] ?? 0 }
}

/// A log handler that keeps every line in memory (tests read `Harness.log`).
struct CapturingLogHandler: LogHandler {
    let text: Locked<String>
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]

    init(text: Locked<String>, level: Logger.Level) {
        self.text = text
        logLevel = level
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let line = "\(event.level.rawValue) \(event.message)\n"
        text.withLock { $0 += line }
    }
}
