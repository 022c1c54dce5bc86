import Boardloop
import BoardloopGPIOMock
import BoardDaemon
import Logging
import XCTest

/// One rule for where an input rests on mock chips, the same for `--mock`,
/// a `backend: mock` board and `boardd test`: at its inactive level (high
/// for an `active_low` line, else low), or high where the board file says
/// the line rests high; a `bias:` does not move a mock pin.
final class InputRestTests: XCTestCase {
    static func daemon(_ yaml: String, mock: Bool) throws -> Daemon {
        var load = Fixtures.options()
        load.mock = mock
        let result = ConfigLoader.load(text: yaml, file: "rest.yaml", options: load)
        let config = try XCTUnwrap(result.config, "\(result.errors.map(\.description))")
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        // No chips given: made as boardd makes them.
        let options = Daemon.Options(logger: logger, clock: .manual(ManualClock()), modeDriver: .external, summaryInterval: nil)
        let d = try Daemon(config: config, options: options)
        try d.settle()
        return d
    }

    func level(_ d: Daemon, _ name: String) throws -> Bool {
        let l = try XCTUnwrap(d.config.lines.first { $0.name == name })
        let (chip, selector) = try XCTUnwrap(MockBoard.pin(l, in: try XCTUnwrap(d.mock)))
        return try chip.level(selector)
    }

    /// `--mock` on a Pi 4: a pulled-up switch without `active_low` rests
    /// low (inactive), not at its pull; the active-low button high.
    func testOnMockAPullUpInputWithoutActiveLowRestsInactive() throws {
        let d = try Self.daemon(
            """
            board: raspberry-pi-4
            lines:
              switch: { pin: GPIO22, input: { edge: both, bias: pull-up } }
              button: { pin: GPIO17, input: { edge: both, bias: pull-up, active_low: true } }
              led: { pin: GPIO27, output: {} }
            reactions:
              - { name: s, on: { line: switch, edge: both }, do: [ toggle: led ] }
            """, mock: true)
        defer { _ = d.shutdown() }
        XCTAssertFalse(try level(d, "switch"), "inactive: low")
        XCTAssertTrue(try level(d, "button"), "an active-low button at rest: high (released)")
        XCTAssertEqual(d.counters.reactionFires["s"] ?? 0, 0)
    }

    /// The demo board (`backend: mock`): an active-low input on a pin the
    /// board does not list as resting high rests high (released), not low
    /// (pressed).
    func testOnTheDemoBoardAnActiveLowInputRestsReleased() throws {
        let d = try Self.daemon(
            """
            board: demo
            lines:
              door: { pin: MOCK0_3, input: { edge: both, active_low: true } }
              led: { pin: LED, output: {} }
            """, mock: false)
        defer { _ = d.shutdown() }
        XCTAssertTrue(try level(d, "door"), "released: high")
    }

    /// `boardd test`'s simulation: the same rule.
    func testBoarddTestStartsAnActiveLowInputReleased() throws {
        let result = ConfigLoader.load(
            text: "board: demo\nlines:\n  door: { pin: MOCK0_3, input: { edge: both, bias: pull-up, active_low: true } }\n  led: { pin: LED, output: {} }\n",
            file: "rest.yaml", options: Fixtures.options())
        let config = try XCTUnwrap(result.config)
        let sim = try Simulation(config: config, loadOptions: Fixtures.options())
        defer { _ = sim.daemon.shutdown() }
        XCTAssertFalse(try sim.value("door"), "not pressed at the start")
        XCTAssertTrue(try sim.level("door"), "high: released")
    }
}
