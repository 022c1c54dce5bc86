@testable import BoardDaemon
import Boardloop
import BoardSupport
import BoardloopGPIOMock
import Logging
import XCTest

/// A stopped daemon, once let go, lets go of everything it made: its
/// loops, their runtimes, ports and programs. (A loop holds its port, the
/// port's handler the loop's box, and the box the loop and its runtime:
/// without the stop's release every boardd held its whole graph at exit,
/// which LeakSanitizer reported as leaked.)
final class StopReleaseTests: XCTestCase {
    static let config = """
        board: demo
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true } }
          door: { pin: MOCK0_3, input: { edge: both } }
          led: { pin: LED, output: { initial: off, safe: off } }
        workers:
          w: { lines: [door] }
        tasks:
          printer:
            every: 1s
            do: [ log: "tick" ]
        reactions:
          - name: light
            on: { line: button, press: true }
            do: [ set: { led: on } ]
          - name: opened
            on: { line: door, edge: rising }
            do: [ log: "opened" ]
        """

    private struct Watched {
        weak var daemon: Daemon?
        weak var mainLoop: BoardRunLoop?
        weak var mainRuntime: LoopRuntime?
        weak var program: Program?
        weak var workerLoop: BoardRunLoop?
        weak var workerRuntime: LoopRuntime?
        weak var port: BoardMessagePort?
        weak var workerPort: BoardMessagePort?
        weak var traceLog: TraceLog?

        var alive: [String] {
            [("daemon", daemon != nil), ("main loop", mainLoop != nil), ("main runtime", mainRuntime != nil),
             ("program", program != nil), ("worker loop", workerLoop != nil), ("worker runtime", workerRuntime != nil),
             ("main port", port != nil), ("worker port", workerPort != nil), ("trace log", traceLog != nil)]
                .filter(\.1).map(\.0)
        }
    }

    private func startAndStop(inlineWorkers: Bool, _ watched: inout Watched) throws {
        let result = ConfigLoader.load(text: Self.config, file: "stop-release.yaml", options: Fixtures.options())
        var config = try XCTUnwrap(result.config, "\(result.errors.map(\.description))")
        config.board.backend = .mock
        let clock = ManualClock()
        let mock = try MockBoard.chips(config.board.chips, clock: .manual(clock))
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        var options = Daemon.Options(
            logger: logger, clock: .manual(clock), modeDriver: .external, summaryInterval: nil, watchdog: nil, mock: mock)
        options.inlineWorkers = inlineWorkers
        let d = try Daemon(config: config, options: options)
        try d.settle()
        XCTAssertEqual(d.boxes.count, 2)
        watched.daemon = d
        watched.mainLoop = d.loop
        watched.mainRuntime = d.main
        watched.program = d.main.program
        watched.workerLoop = d.boxes[1].loop
        watched.workerRuntime = d.boxes[1].rt
        watched.port = d.ports[0]
        watched.workerPort = d.ports[1]
        watched.traceLog = d.traceLog
        XCTAssertNotNil(watched.workerRuntime)
        XCTAssertTrue(d.shutdown())
    }

    func testAStoppedDaemonLetsGoOfItsLoopsRuntimesAndPrograms() throws {
        var watched = Watched()
        try startAndStop(inlineWorkers: false, &watched)
        XCTAssertEqual(watched.alive, [])
    }

    func testAStoppedDaemonWithInlineWorkersLetsGoOfThemToo() throws {
        var watched = Watched()
        try startAndStop(inlineWorkers: true, &watched)
        XCTAssertEqual(watched.alive, [])
    }
}
