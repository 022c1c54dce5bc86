import Boardloop
@testable import BoardDaemon
import Testing

/// On the manual clock (`boardd test --run-commands`, replay) a real child
/// that ends on SIGTERM is given its `kill_after` in real time: the clock
/// jumping past `kill_after` at once made it "killed by SIGKILL (timeout)".
@Suite struct ManualClockCommandTests {
    @Test func aChildThatEndsOnSIGTERMIsNotKilledWhenTheClockJumps() throws {
        let yaml = """
            board: demo
            lines:
              button: { pin: CHATTER, input: { edge: both } }
            commands:
              polite: { argv: ["/bin/sh", "-c", "trap 'exit 3' TERM; while :; do sleep 0.02; done"], timeout: 1s, kill_after: 5s }
            reactions:
              - { name: go, on: { line: button, edge: rising }, do: [ run: polite ] }
            """
        let config = try #require(ConfigLoader.load(text: yaml, file: "t.yaml", options: Fixtures.options()).config)
        let sim = try Simulation(config: config, loadOptions: Fixtures.options(), runCommands: true)
        defer { sim.daemon.shutdown() }
        let (chip, selector, _) = try sim.pin("button")
        try sim.advance(to: .milliseconds(10))
        try chip.injectEdge(selector, .rising, at: sim.instant(.milliseconds(10)))
        try sim.daemon.settle()
        try sim.advance(to: .seconds(8))
        let log = sim.log.map(\.text).joined(separator: "\n")
        #expect(log.contains("SIGTERM"), "\(log)")
        #expect(!log.contains("SIGKILL"), "\(log)")
        // Ended by the SIGTERM: through its trap, or (when the signal came
        // before the shell had set the trap: no real time passes on the
        // manual clock) by the signal itself.
        #expect(log.contains("exited with status 3") || log.contains("killed by SIGTERM"), "\(log)")
    }
}
