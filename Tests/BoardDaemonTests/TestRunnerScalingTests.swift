import BoardSupport
import BoardloopGPIOMock
import Foundation
import Testing

@testable import BoardDaemon

/// A long `boardd test` costs in proportion to its steps: reading an
/// output's value and its writes does not copy the mock chip's whole
/// write history at every expectation. Counted in history entries copied
/// out of the chips, not timed.
@Suite struct TestRunnerScalingTests {
    static let config = """
        board: demo
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true } }
          led: { pin: LED, output: { initial: off } }
          fan: { pin: FAN, output: { initial: off } }
        reactions:
          - name: follow
            on: { line: button, edge: both }
            do: [ toggle: led ]
        """

    /// `edges` steps, each an edge on the button and the LED's state
    /// now, and a window of the step's writes of the LED, and none of the fan.
    static func testFile(edges: Int) -> String {
        var s = "config: c.yaml\ntests:\n  - name: many edges\n    steps:\n"
        for i in 0..<edges {
            let on = i % 2 == 0 ? "on" : "off"
            s += "      - at: \(2 * i + 1)ms\n        input: { button: \(on) }\n        expect: { led: \(on) }\n"
            s += "      - between: [\(2 * i + 1)ms, \(2 * i + 2)ms]\n        expect_writes: { led: [\(on)] }\n        expect_no: { writes: [fan] }\n"
        }
        return s
    }

    /// The failures and the history entries copied out of the chips.
    static func run(edges: Int) throws -> (failures: [String], copied: UInt64) {
        let dir = try TempDir("scaling")
        try config.write(toFile: dir.path + "/c.yaml", atomically: true, encoding: .utf8)
        let file = dir.path + "/t.test.yaml"
        let text = testFile(edges: edges)
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        let log = DiagnosticLog(file: file)
        let tests = try #require(ConfigTestFile.parse(text, file: file, log: log), "\(log.items)")
        let settings = ConfigTestRunner.Settings(file: file, loadOptions: Fixtures.options())
        let (loaded, options) = Simulation.load(dir.path + "/c.yaml", settings.loadOptions)
        let config = try #require(loaded.config, "\(loaded.errors)")
        let sim = try Simulation(config: config, loadOptions: options)
        let failures = ConfigTestRunner.run(tests.tests[0], sim, settings: settings)
        sim.daemon.shutdown()
        return (failures, sim.mock.chips.reduce(0) { $0 + $1.historyEntriesCopied })
    }

    @Test func aTestOfManyThousandStepsCopiesTheHistoryInProportionToItsSteps() throws {
        let edges = 5_000
        let (failures, copied) = try Self.run(edges: edges)
        #expect(failures == [])
        // Each edge is one LED write; each step reads its expectations'
        // new writes once. The whole history at every expectation would
        // be some 3 * edges * edges / 2 entries.
        #expect(copied <= UInt64(4 * edges), "history entries copied for \(edges) edges: \(copied)")
    }
}
