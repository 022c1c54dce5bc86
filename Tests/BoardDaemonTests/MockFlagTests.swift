import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import BoardDaemon
import BoardSupport
import BoardloopTestSupport
import Foundation
import Logging
import XCTest

/// `boardd --config FILE --mock`: any config on mock chips made from its
/// board, with the board's chip labels, line counts, names and pins.
final class MockFlagTests: XCTestCase {
    /// A Pi 4 config: a pulled-up button on GPIO17 toggles an LED on GPIO27.
    static let pi4Config = """
        board: raspberry-pi-4
        lines:
          button:
            pin: GPIO17
            input: { edge: both, bias: pull-up, active_low: true }
          led:
            pin: GPIO27
            output: { initial: off, safe: off }
        reactions:
          - name: flip
            on: { line: button, press: true }
            do: [ toggle: led ]
        """

    static func load(_ yaml: String, mock: Bool = true, board: String? = nil) -> LoadResult {
        var options = Fixtures.options(board: board)
        options.mock = mock
        return ConfigLoader.load(text: yaml, file: "mock.yaml", options: options)
    }

    static var quiet: Logger {
        var l = Logger(label: "test")
        l.logLevel = .critical
        return l
    }

    func testAPi4ConfigRunsOnMockChipsWithThePi4sLabelsOffsetsAndNames() throws {
        let result = Self.load(Self.pi4Config)
        let config = try XCTUnwrap(result.config, "\(result.errors.map(\.description))")
        XCTAssertTrue(config.board.mock)
        XCTAssertEqual(config.board.backend, .kernel, "the board is the Pi 4's; --mock only serves it with mock chips")
        let pi4 = try XCTUnwrap(Fixtures.options().catalog.board(named: "raspberry-pi-4", log: DiagnosticLog(file: "test")))
        let (label, offset) = try XCTUnwrap(pi4.pin(named: "GPIO17")?.chipLine)
        let (_, ledOffset) = try XCTUnwrap(pi4.pin(named: "GPIO27")?.chipLine)

        let clock = ManualClock()
        let mock = try MockBoard.chips(MockBoard.layout(config), clock: .manual(clock))
        let chip = try XCTUnwrap(mock.chip(label), "a mock chip labelled \(label)")
        XCTAssertEqual(mock.chips.count, 1)
        XCTAssertEqual(chip.lineCount, pi4.chips[0].lines)
        XCTAssertEqual(try chip.offset(.name("GPIO17")), offset, "the line carries the board's name at the board's offset")
        XCTAssertEqual(try chip.offset(.name("GPIO2")), 2, "the mock line has the name a current Raspberry Pi OS kernel gives it")
        XCTAssertThrowsError(try chip.offset(.name("SDA1")), "not mainline's name")
        XCTAssertEqual(try chip.offset(.name("STATUS_LED_G_CLK")), 42, "every line is named, not only the header's")
        XCTAssertEqual(try chip.offset(.name("ID_SDA")), 0)
        XCTAssertTrue(try chip.level(.offset(offset)), "the active-low button rests high (released)")
        XCTAssertFalse(try chip.level(.offset(ledOffset)))

        let options = Daemon.Options(logger: Self.quiet, clock: .manual(clock), modeDriver: .external, summaryInterval: nil, mock: mock)
        let daemon = try Daemon(config: config, options: options)
        defer { _ = daemon.shutdown() }
        try daemon.settle()
        try daemon.checkLoopBudgets("mock.yaml")
        XCTAssertEqual(daemon.counters.reactionFires["flip"] ?? 0, 0, "nothing fires at start")
        XCTAssertEqual(try chip.outputHistory(.offset(ledOffset)).map(\.value), [false], "the LED's initial value only")

        // Press (low), release, press again: the LED toggles on each press.
        for high in [false, true, false] {
            try chip.setLevel(.offset(offset), high)
            try daemon.settle()
            try daemon.advance(by: .milliseconds(50))
        }
        XCTAssertEqual(daemon.counters.reactionFires["flip"], 2)
        XCTAssertEqual(try chip.outputHistory(.offset(ledOffset)).map(\.value), [false, true, false])
    }

    /// Without given chips the daemon makes them from the board (no libgpiod);
    /// without --mock the same config is the Pi 4's kernel chips, as before.
    func testTheBackendIsChosenByTheFlag() throws {
        let mocked = try XCTUnwrap(Self.load(Self.pi4Config).config)
        let backend = try MockBoard.backend(for: mocked)
        XCTAssertEqual(backend.gpio.backendName, "mock")
        XCTAssertEqual(backend.mock?.chips.map(\.label), ["pinctrl-bcm2711"])
        XCTAssertEqual(MockBoard.backendName(mocked.board, backend.gpio), "mock chips, --mock")

        let real = try XCTUnwrap(Self.load(Self.pi4Config, mock: false).config)
        XCTAssertFalse(real.board.mock)
        let kernel = try MockBoard.backend(for: real)
        XCTAssertNil(kernel.mock)
        XCTAssertNotEqual(kernel.gpio.backendName, "mock")
    }

    /// The generic board has no chips: the mock has the chips and the line
    /// names the config uses, and its inputs rest inactive.
    func testAGenericConfigGetsTheChipsAndNamedLinesItUses() throws {
        let yaml = """
            board: generic
            lines:
              a: { chip: gpiochip1, offset: 40, input: { edge: both, active_low: true } }
              b: { chip: my-expander, offset: 3, output: { initial: on } }
              c: { chip: /dev/gpiochip7, line_name: RELAY, output: {} }
              d: { line_name: DOOR, input: { edge: both, active_low: true } }
              e: { chip: my-expander, line_name: LAMP, output: {} }
              f: { chip: gpiochip0, offset: 0, input: { edge: both } }
            """
        let result = Self.load(yaml)
        let config = try XCTUnwrap(result.config, "\(result.errors.map(\.description))")
        let layout = MockBoard.layout(config)
        func chip(_ label: String) throws -> MockBoard.Layout { try XCTUnwrap(layout.first { $0.label == label }, label) }
        XCTAssertEqual(layout.count, 5)
        XCTAssertEqual(try chip("gpiochip1").name, "gpiochip1")
        XCTAssertEqual(try chip("gpiochip1").lines, 41)
        XCTAssertEqual(try chip("gpiochip1").high, [40], "an active-low input rests high")
        XCTAssertEqual(try chip("gpiochip0").high, [], "an input that is not active low rests low")
        XCTAssertEqual(try chip("/dev/gpiochip7").name, "gpiochip7")
        XCTAssertEqual(try chip("/dev/gpiochip7").names, [0: "RELAY"])
        XCTAssertEqual(try chip("my-expander").names, [0: "LAMP"], "a free offset, not the config's offset 3")
        XCTAssertEqual(try chip(MockBoard.namedLinesLabel).names, [0: "DOOR"])
        XCTAssertEqual(try chip(MockBoard.namedLinesLabel).high, [0])
        XCTAssertEqual(Set(layout.map(\.name)).count, layout.count, "every chip has a name of its own")

        // It starts: every line is found and requested.
        let clock = ManualClock()
        let mock = try MockBoard.chips(layout, clock: .manual(clock))
        let daemon = try Daemon(
            config: config, options: Daemon.Options(logger: Self.quiet, clock: .manual(clock), modeDriver: .external, summaryInterval: nil, mock: mock))
        defer { _ = daemon.shutdown() }
        try daemon.settle()
        XCTAssertEqual(try mock.chip("my-expander")?.consumer(.name("LAMP")), "boardd")
        XCTAssertEqual(try mock.chip(MockBoard.namedLinesLabel)?.consumer(.name("DOOR")), "boardd")
    }

    /// A line the board file says rests high (the demo's e-stop) stays high.
    func testABoardsIdleHighLineStaysHigh() throws {
        let config = try XCTUnwrap(ConfigLoader.load(path: Fixtures.examples + "/demo.yaml", options: {
            var o = Fixtures.options()
            o.mock = true
            return o
        }()).config)
        let estop = try XCTUnwrap(config.lines.first { $0.name == "estop" })
        XCTAssertFalse(estop.settings.activeLow)
        let mock = try MockBoard.chips(MockBoard.layout(config))
        XCTAssertTrue(try XCTUnwrap(mock.chip("boardloop-mock0")).level(.name("ESTOP")))
    }

    func testBoardAutoWithMockNeedsTheBoardNamed() throws {
        let yaml = Self.pi4Config.replacingOccurrences(of: "board: raspberry-pi-4", with: "board: auto")
        let refused = Self.load(yaml)
        XCTAssertNil(refused.config)
        XCTAssertEqual(
            refused.errors.map(\.description),
            [
                "mock.yaml:1:8: error: board: auto with --mock: detection reads this machine, not the board the config is for; name the board (board: raspberry-pi-4) or give --board NAME"
            ])
        let named = Self.load(yaml, board: "raspberry-pi-4")
        XCTAssertEqual(named.config?.board.name, "raspberry-pi-4", "\(named.errors.map(\.description))")
        XCTAssertEqual(named.config?.board.mock, true)
    }
}

/// The built `boardd` with `--mock`.
final class MockFlagCLITests: XCTestCase {
    /// A config file of the test's own (removed at the end).
    func write(_ yaml: String) throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("boardd-mock-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("pi4.yaml").path
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func testAPi4ConfigRunsForTwoSecondsOnMockChips() throws {
        let path = try write(MockFlagTests.pi4Config)
        let r = try Boardd.run(["--config", path, "--mock", "--for", "2s"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stderr.contains("running \(path) on raspberry-pi-4 (mock chips, --mock): 1 input, 1 output"), r.stderr)
        XCTAssertTrue(r.stderr.contains("mock chips (--mock): gpiochip0 [pinctrl-bcm2711] 58 lines"), r.stderr)
        XCTAssertTrue(r.stderr.contains("stopping (the run time is up)"), r.stderr)
    }

    func testBoardAutoWithMockIsRefusedUnlessBoardIsGiven() throws {
        let path = try write(MockFlagTests.pi4Config.replacingOccurrences(of: "board: raspberry-pi-4", with: "board: auto"))
        let r = try Boardd.run(["--config", path, "--mock", "--for", "1s"])
        XCTAssertEqual(r.status, 78, r.stderr)
        XCTAssertTrue(
            r.stderr.contains(
                "\(path):1:8: error: board: auto with --mock: detection reads this machine, not the board the config is for; name the board (board: raspberry-pi-4) or give --board NAME"
            ), r.stderr)
        XCTAssertTrue(r.stderr.contains("not started"), r.stderr)
        let named = try Boardd.run(["--config", path, "--mock", "--board", "raspberry-pi-4", "--for", "100ms"])
        XCTAssertEqual(named.status, 0, named.stderr)
        XCTAssertTrue(named.stderr.contains("on raspberry-pi-4 (mock chips, --mock)"), named.stderr)
    }

    func testMockNeedsAConfig() throws {
        let r = try Boardd.run(["--mock", "--for", "1s"])
        XCTAssertEqual(r.status, 64)
        XCTAssertTrue(r.stderr.contains("--mock runs a config on mock chips made from its board: give --config FILE"), r.stderr)
    }

    /// `--check --mock` is accepted and checks as `--check` does.
    func testCheckWithMockChangesNothing() throws {
        let plain = try Boardd.run(["--check", "--config", "examples/doorbell.yaml"])
        let mocked = try Boardd.run(["--check", "--mock", "--config", "examples/doorbell.yaml"])
        XCTAssertEqual(mocked.status, 0, mocked.stderr)
        XCTAssertEqual(mocked.stdout, plain.stdout)
        XCTAssertEqual(mocked.stderr, plain.stderr)
    }

    /// `--check --mock` checks what a `--mock` run would refuse: a config
    /// whose board is detected.
    func testCheckWithMockRefusesWhatAMockRunRefuses() throws {
        let dir = try ConfigFile("board: auto\nlines:\n  led: { line_name: X, output: {} }\n")
        let r = try Boardd.run(["--check", "--mock", "--config", dir.path])
        XCTAssertEqual(r.status, 1, r.stdout + r.stderr)
        XCTAssertTrue(r.stderr.contains("board: auto with --mock"), r.stderr)
    }

    /// `--safe-outputs --mock` sets the safe values on mock chips and says so.
    func testSafeOutputsWithMockSetsTheMock() throws {
        let r = try Boardd.run(["--safe-outputs", "--mock", "--config", "examples/doorbell.yaml"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stderr.contains("porch -> off (safe value)"), r.stderr)
        XCTAssertTrue(
            r.stderr.contains(
                "safe outputs: 1 set, 0 failed (examples/doorbell.yaml on raspberry-pi-4, mock chips, --mock: no GPIO of this machine changed)"),
            r.stderr)
    }

    /// Every example config starts on mock chips and stops cleanly.
    func testEveryExampleStartsWithMock() throws {
        let paths = try Fixtures.configPaths().filter { $0.hasPrefix(Fixtures.examples + "/") }
        XCTAssertGreaterThanOrEqual(paths.count, 4)
        for path in paths {
            let relative = String(path.dropFirst(Fixtures.packageRoot.count + 1))
            let r = try Boardd.run(["--config", relative, "--mock", "--for", "1s"])
            XCTAssertEqual(r.status, 0, "\(relative): \(r.stderr)")
            XCTAssertTrue(r.stderr.contains("running \(relative) on "), "\(relative): \(r.stderr)")
            XCTAssertTrue(r.stderr.contains("(mock chips, --mock)"), "\(relative): \(r.stderr)")
            XCTAssertTrue(r.stderr.contains("stopped: "), "\(relative): \(r.stderr)")
            XCTAssertFalse(r.stderr.contains(" error "), "\(relative): \(r.stderr)")
        }
    }
}
