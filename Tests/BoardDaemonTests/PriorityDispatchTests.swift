import Boardloop
import BoardDaemon
import BoardloopGPIOMock
import Logging
import XCTest

/// A line's priority orders dispatch in every pass, not only in modes: a
/// flood on a low-priority line does not stand between a high-priority
/// e-stop and its reaction.
final class PriorityDispatchTests: XCTestCase {
    static let config = """
        board: demo
        priorities: [low, high]
        lines:
          chatter: { pin: CHATTER, input: { edge: both, debounce: 0ms, buffer: 256 }, priority: low }
          estop: { pin: ESTOP, input: { edge: falling, debounce: 0ms }, priority: high }
          valve: { pin: VALVE, output: { initial: on, safe: off } }
        reactions:
          - on: { line: estop, edge: falling }
            do: [{ set: { valve: off } }]

        """

    /// 200 edges wait on the low line, then the e-stop trips: the first pass
    /// dispatches the e-stop (valve off) and no more than one small batch of
    /// the flood has been handled by then; the flood is delivered in full
    /// after it, none lost.
    func testTheEStopIsDispatchedBeforeALowPriorityFlood() throws {
        let clock = ManualClock()
        // The demo board's chips (the e-stop rests high), each request's
        // buffer as the config's `buffer: 256` asks a v2 kernel for.
        let mock = try Demo.makeChips(clock: .manual(clock), eventBufferSize: 256)
        let chip = mock.chips[0]
        let loaded = ConfigLoader.load(text: Self.config, file: "test.yaml")
        let config = try XCTUnwrap(loaded.config, "\(loaded.errors)")
        var logger = Logger(label: "test") { l in BoarddLogHandler(label: l, level: .critical, journal: false) }
        logger.logLevel = .critical
        let daemon = try Daemon(
            config: config,
            options: .init(logger: logger, clock: .manual(clock), modeDriver: .external, summaryInterval: nil, mock: mock))
        defer { daemon.shutdown() }
        _ = try daemon.loop.run(mode: .default, timeout: .zero)

        var high = false
        for _ in 0..<200 {
            high.toggle()
            try chip.setLevel(23, high)
        }
        try chip.setLevel(22, false)  // the e-stop trips

        _ = try daemon.loop.run(mode: .default, timeout: .zero)  // one pass
        let valve = try chip.outputHistory(.offset(5)).map(\.value)
        XCTAssertEqual(valve.last, false, "the e-stop's reaction ran in the first pass")
        let seen = daemon.counters.lines["chatter"]?.events ?? 0
        XCTAssertLessThanOrEqual(seen, 16, "at most one small batch of the flood before the e-stop (\(seen))")

        for _ in 0..<64 { _ = try daemon.loop.run(mode: .default, timeout: .zero) }
        XCTAssertEqual(daemon.counters.lines["chatter"]?.events, 200, "the flood is delivered in full")
        XCTAssertEqual(daemon.counters.lines["chatter"]?.lost, 0)
    }
}
