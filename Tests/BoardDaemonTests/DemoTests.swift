import Boardloop
import BoardDaemon
import BoardloopGPIOMock
import BoardloopTestSupport
import BoardSupport
import Foundation
import Logging
import Testing

/// `boardd --demo`: the files built into boardd are the repository's files,
/// the demo board's mock chips are its board file, and the script plays the
/// story.
@Suite struct DemoTests {
    static func bytes(_ path: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: Fixtures.packageRoot + "/" + path)))
    }

    /// The built-in copies cannot drift from the files: they are the files' bytes.
    @Test func theBuiltInFilesAreTheRepositorysFilesByteForByte() throws {
        #expect(Array(Demo.configText.utf8) == (try Self.bytes("examples/demo.yaml")))
        #expect(Array(Demo.scriptText.utf8) == (try Self.bytes("examples/demo.script.yaml")))
        #expect(Array(Demo.boardText.utf8) == (try Self.bytes("boards/demo.yaml")))
    }

    /// The built-in demo board is the one the checkout's catalog finds, and
    /// its mock chips are what the file says: labels, sizes, names, and the
    /// button and e-stop resting high.
    @Test func theDemoChipsAreTheBoardFile() throws {
        let log = DiagnosticLog(file: "test")
        var file = try #require(Fixtures.options().catalog.board(named: "demo", log: log), "\(log.items)")
        file.file = Demo.board.file
        #expect(Demo.board == file)
        let mock = try Demo.makeChips()
        #expect(mock.chips.map(\.label) == ["boardloop-mock0", "boardloop-mock1"])
        #expect(mock.chips.map(\.lineCount) == Demo.board.chips.map { $0.lines ?? 0 })
        for (chip, described) in zip(mock.chips, Demo.board.chips) {
            for (offset, name) in described.names { #expect(try chip.offset(.name(name)) == offset) }
        }
        #expect(Demo.board.chips[0].idleHigh == [17, 22])
        let chip = mock.chips[0]
        #expect(try chip.level("BUTTON") && chip.level("ESTOP"))
        #expect(try !chip.level("CHATTER") && !chip.level(0))
    }

    @Test func theBuiltInConfigChecksOnTheBuiltInBoard() throws {
        let r = ConfigLoader.load(text: Demo.configText, file: Demo.configFile, options: LoadOptions(catalog: Demo.catalog))
        let c = try #require(r.config, "\(r.diagnostics)")
        #expect(r.warnings.isEmpty, "\(r.warnings)")
        #expect(c.board.name == "demo" && c.board.backend == .mock && c.board.file == "boards/demo.yaml (built in)")
    }

    @Test func theBuiltInScriptReadsAsTheStory() throws {
        let s = try Demo.ScriptFile.builtIn()
        #expect(s.cycle == .seconds(12))
        let first = try #require(s.steps.first)
        #expect(first.at == .milliseconds(300))
        #expect(first.action == .set([.init(chip: "boardloop-mock0", offset: 17, high: false)]))
        let floods = s.steps.compactMap { step -> Int? in
            if case let .flood(chip, offset, edges) = step.action, chip == "boardloop-mock0", offset == 23 { return edges }
            return nil
        }
        #expect(floods == [300, 40])
        #expect(s.steps.contains { $0.action == .set([.init(chip: "boardloop-mock0", offset: 22, high: false)]) })
    }

    @Test func aBrokenScriptIsReportedWhereItIsBroken() {
        let text = """
            cycle: 1s
            steps:
              - { at: 300ms, set: { NOSUCH: low } }
              - { at: 200ms, set: { BUTTON: sideways } }
              - { say: "no time" }
              - { at: 2s, flood: { line: CHATTER } }

            """
        let log = DiagnosticLog(file: "bad.script.yaml")
        #expect(Demo.ScriptFile.parse(text, board: Demo.board, log: log) == nil)
        let messages = log.errors.map(\.description).joined(separator: "\n")
        for s in [
            "bad.script.yaml:3:", "the demo board has no GPIO line 'NOSUCH'", "bad.script.yaml:4:",
            "is before the step above it", "a step needs 'at'", "a flood needs a line and a number of edges",
            "is not within the cycle",
        ] {
            #expect(messages.contains(s), "missing \(s) in:\n\(messages)")
        }
    }

    /// The script on a manual clock, the demo config on the main loop alone
    /// (its worker's lines moved to main, so every reaction runs as time is
    /// advanced): pour holds the 300-edge flood and the double click and
    /// delivers them after it, none lost; the hold stops the fan; the e-stop
    /// stops the second pour at once.
    @Test func theScriptPlaysTheStory() throws {
        let text = Demo.configText.replacingOccurrences(of: "  io: { lines: [estop, valve] }\n", with: "")
        #expect(text != Demo.configText)
        let r = ConfigLoader.load(
            text: text.replacingOccurrences(of: "workers:\n", with: ""), file: "demo.yaml", options: LoadOptions(catalog: Demo.catalog))
        let config = try #require(r.config, "\(r.diagnostics)")
        let clock = ManualClock()
        let mock = try Demo.makeChips(clock: .manual(clock))
        var logger = Logger(label: "test") { l in BoarddLogHandler(label: l, level: .critical, journal: false) }
        logger.logLevel = .critical
        var options = Daemon.Options(logger: logger, clock: .manual(clock), modeDriver: .external, summaryInterval: nil, mock: mock)
        options.demo = true
        let daemon = try Daemon(config: config, options: options)
        defer { daemon.shutdown() }
        let script = Demo.Script(try Demo.ScriptFile.builtIn(), gpio: mock, loop: daemon.loop, logger: logger)
        try script.start()
        defer { script.stop() }
        let chip = mock.chips[0]
        func writes(_ pin: String) throws -> [Bool] { Array(try chip.outputHistory(.name(pin)).map(\.value).dropFirst()) }

        try daemon.advance(by: .milliseconds(1100))  // pour runs; the flood and the double click are held
        #expect(daemon.mainMode == "critical")
        #expect(try writes("VALVE") == [true])
        #expect((daemon.counters.reactionFires["contact"] ?? 0) == 0, "the flood is held, not handled")
        #expect(try writes("FAN") == [])

        try daemon.advance(by: .milliseconds(400))  // pour is over: everything held is delivered
        #expect(daemon.mainMode == "default")
        #expect(try writes("VALVE") == [true, false])
        let chatter = try #require(daemon.counters.lines["chatter"])
        #expect(chatter.events == 300 && chatter.heldInRing == 300 && chatter.lost == 0)
        #expect(daemon.counters.reactionFires["contact"] == 300)
        #expect(try writes("FAN") == [true], "the held double click toggled the fan after pour")

        try daemon.advance(by: .milliseconds(3600))  // a double click, then the hold
        #expect(try writes("FAN").prefix(2) == [true, false])
        #expect(daemon.counters.reactionFires["hold stops the fan"] == 1)

        try daemon.advance(by: .milliseconds(2000))  // the chatter, a second pour and the e-stop in it
        let pour = try #require(daemon.counters.sequence["pour"])
        #expect(pour.started == 2 && pour.completed == 1 && pour.stopped == 1)
        #expect(daemon.counters.reactionFires["e-stop"] == 1)
        #expect(try writes("VALVE").suffix(2) == [true, false])
        #expect(daemon.counters.lines["chatter"]?.events == 340 && daemon.counters.lines["chatter"]?.lost == 0)

        try daemon.advance(by: .milliseconds(12_000))  // the story again
        #expect(daemon.counters.sequence["pour"]?.started == 4)
        #expect(daemon.counters.lines["chatter"]?.events == 680 && daemon.counters.lines["chatter"]?.lost == 0)
    }
}
