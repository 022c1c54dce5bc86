import BoardDaemon
import Boardloop
import BoardSupport
import BoardloopGPIOMock
import Foundation
import Logging
import XCTest

/// `boardd --check` and the start agree: a config the check accepts
/// starts, and what the start would refuse the check refuses first.
final class CheckAgreesWithStartTests: XCTestCase {
    /// A worker that owns only an input line (its reaction acts on the main
    /// loop): the worker's loop has a source for the line, one for its
    /// message port and one for its thread's exit; it starts and the press
    /// reaches the main loop's output.
    func testAWorkerOwningOnlyAnInputStartsAndItsPressWorks() throws {
        let h = try Harness(
            """
            board: demo
            lines:
              button: { pin: BUTTON, input: { edge: both, active_low: true } }
              led: { pin: LED, output: { initial: off } }
            workers:
              w: { lines: [button] }
            reactions:
              - name: light
                on: { line: button, press: true }
                do: [ set: { led: on } ]
            """)
        try h.press()
        // The worker reacts on its own thread and posts the set to the main
        // loop: run the main loop until it arrives (bounded).
        let end = Date().addingTimeInterval(20)
        while try h.writes("LED").isEmpty && Date() < end {
            try h.advance(1)
            usleep(1000)
        }
        XCTAssertEqual(try h.writes("LED"), [true])
    }

    /// Every config the check accepts among the good fixtures and the
    /// examples starts on mock chips (a board with kernel chips is run on
    /// mock chips made from its board file, with the same labels). The
    /// demo's script (`.script.yaml`) is not a config.
    func testEveryConfigTheCheckAcceptsStarts() throws {
        let paths = try Fixtures.configPaths()
        XCTAssertGreaterThanOrEqual(paths.count, 6)
        for path in paths {
            let result = ConfigLoader.load(path: path, options: Fixtures.options())
            guard let config = result.config else {
                XCTFail("\(path): the check refuses it: \(result.errors.map(\.description))")
                continue
            }
            if let error = Self.start(config) {
                XCTFail("\((path as NSString).lastPathComponent): the check accepts it but it does not start: \(error)")
            }
        }
    }

    /// Configs past a limit of the start (the engine's 256 MiB a loop, the
    /// kernel's debounce range): the check refuses them, or they start.
    func testWhatTheStartRefusesTheCheckRefuses() throws {
        for name in ["loop-reservation-too-large", "debounce-above-limit"] {
            let result = ConfigLoader.load(path: Fixtures.bad(name), options: Fixtures.options())
            guard let config = result.config else {
                XCTAssertFalse(result.errors.isEmpty)
                XCTAssertTrue(result.errors.allSatisfy { $0.line > 0 && $0.column > 0 }, "\(name): errors have a position")
                continue
            }
            if let error = Self.start(config) {
                XCTFail("\(name): the check accepts it, the start refuses it: \(error)")
            }
        }
    }

    /// Starts `config` on mock chips and a manual clock (with the systemd
    /// watchdog on), settles and stops it: the error if it does not start.
    static func start(_ given: DaemonConfig) -> Error? {
        var config = given
        config.board.backend = .mock
        let clock = ManualClock()
        do {
            let mock = try MockBoard.chips(config.board.chips, clock: .manual(clock))
            var logger = Logger(label: "test")
            logger.logLevel = .critical
            let options = Daemon.Options(
                logger: logger, clock: .manual(clock), modeDriver: .external, summaryInterval: nil, watchdog: .seconds(10), mock: mock)
            let d = try Daemon(config: config, options: options)
            try d.settle()
            _ = d.shutdown()
            return nil
        } catch {
            return error
        }
    }
}
