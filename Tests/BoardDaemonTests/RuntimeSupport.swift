import Boardloop
import BoardloopGPIOMock
import BoardDaemon
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

    static let offsets: [String: UInt32] = ["BUTTON": 17, "ESTOP": 22, "CHATTER": 23, "LED": 27, "VALVE": 5, "FAN": 6]

    convenience init(_ yaml: String, level: Logger.Level = .critical, file: StaticString = #filePath, line: UInt = #line) throws {
        try self.init(loaded: ConfigLoader.load(text: yaml, file: "test.yaml"), level: level, file: file, line: line)
    }

    /// From a config file on disk (`daemon.reload()` reads it again).
    convenience init(path: String, level: Logger.Level = .critical, file: StaticString = #filePath, line: UInt = #line) throws {
        try self.init(loaded: ConfigLoader.load(path: path), level: level, file: file, line: line)
    }

    private init(loaded result: LoadResult, level: Logger.Level, file: StaticString, line: UInt) throws {
        guard let config = result.config else {
            XCTFail("config errors: \(result.errors.map(\.description))", file: file, line: line)
            throw XCTSkip("bad config")
        }
        mock = try Demo.makeChips(clock: .manual(clock))
        var logger = Logger(label: "test") { l in BoarddLogHandler(label: l, level: level, journal: false) }
        logger.logLevel = level
        daemon = try Daemon(
            config: config,
            options: .init(logger: logger, clock: .manual(clock), modeDriver: .external, summaryInterval: nil, mock: mock))
    }

    deinit { daemon.shutdown() }

    func advance(_ ms: Int) throws { try daemon.advance(by: .milliseconds(ms)) }

    /// Physical level of a demo pin: true is high.
    func setLevel(_ pin: String, _ high: Bool) throws {
        try chip.setLevel(.offset(Self.offsets[pin]!), high)
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
        Array(try chip.outputHistory(.offset(Self.offsets[pin]!)).map(\.value).dropFirst())
    }

    var counters: Daemon.Counters { daemon.counters }
    func fires(_ reaction: String) -> UInt64 { counters.reactionFires[reaction] ?? 0 }
}
