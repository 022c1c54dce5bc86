import XCTest

@testable import BoardDaemon

/// A task's figures count what ran: a fire that comes once the stop has
/// begun (its timer due in the pass the stop starts in) runs nothing, and
/// is not counted as a run, so the stop's "N runs" matches the runs' work
/// (a `log:` task's lines, one per run).
final class TaskStopTests: XCTestCase {
    func testAFireOnceTheStopBeganIsNotARun() throws {
        let h = try Harness(
            """
            board: demo
            lines:
              led: { pin: LED, output: { initial: off } }
            tasks:
              tick: { every: 10ms, do: [ toggle: led ] }
            """)
        try h.advance(30)
        XCTAssertEqual(h.counters.tasks["tick"]?.runs, 3)
        let led = try XCTUnwrap(h.daemon.config.line(named: "led"))
        let value = h.daemon.main.program.cells[led.index].value.load(ordering: .relaxed)
        // The stop has begun on the loop (as `stopAutomation` marks it),
        // and the task's timer is still due.
        h.daemon.main.stopping = true
        try h.advance(20)
        XCTAssertEqual(h.counters.tasks["tick"]?.runs, 3, "fires after the stop began are not runs")
        XCTAssertEqual(h.daemon.main.program.cells[led.index].value.load(ordering: .relaxed), value, "and they did nothing")
        h.daemon.main.stopping = false
        try h.advance(10)
        XCTAssertEqual(h.counters.tasks["tick"]?.runs, 4)
    }
}
