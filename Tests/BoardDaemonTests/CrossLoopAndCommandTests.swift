import BoardDaemon
import BoardloopGPIOMock
import Foundation
import Glibc
import XCTest

final class CrossLoopAndCommandTests: XCTestCase {
    /// Actions on lines a worker owns, issued one after another by a
    /// reaction on the main loop, are posted to the worker and applied in
    /// the order issued (interleaved across two lines, press after press).
    func testCrossLoopActionsAreAppliedInIssueOrder() throws {
        let h = try Harness(
            """
            board: demo
            lines:
              button: { pin: BUTTON, input: { edge: both, active_low: true }, priority: low }
              valve: { pin: VALVE, output: { initial: off } }
              fan: { pin: FAN, output: { initial: off } }
            workers:
              io: { lines: [valve, fan] }
            reactions:
              - name: burst
                on: { line: button, press: true }
                do:
                  - set: { valve: on }
                  - set: { valve: off }
                  - toggle: valve
                  - set: { fan: on }
                  - set: { valve: off }
                  - toggle: valve
                  - toggle: valve
                  - toggle: fan

            """)
        let valve: UInt32 = 5, fan: UInt32 = 6
        let one: [(UInt32, Bool)] = [
            (valve, true), (valve, false), (valve, true), (fan, true), (valve, false), (valve, true), (valve, false), (fan, false),
        ]
        let presses = 20
        let initial = h.chip.allOutputChanges().count
        for _ in 0..<presses {
            try h.press()
            try h.advance(20)
            try h.press(false)
            try h.advance(20)
        }
        XCTAssertEqual(h.fires("burst"), UInt64(presses))
        // The worker applies them on its own thread: wait (bounded) for all.
        let want = one.count * presses
        let end = Date().addingTimeInterval(20)
        var got: [MockChip.OutputChange] = []
        repeat {
            got = Array(h.chip.allOutputChanges().dropFirst(initial).filter { $0.offset == valve || $0.offset == fan })
            if got.count >= want { break }
            usleep(5000)
        } while Date() < end
        XCTAssertEqual(got.count, want, "all \(want) actions applied")
        let expected = (0..<presses).flatMap { _ in one }
        XCTAssertEqual(got.map(\.offset), expected.map(\.0), "lines in issue order")
        XCTAssertEqual(got.map(\.value), expected.map(\.1), "values in issue order")
    }

    /// A reaction's command gets BOARDD_LINE, BOARDD_EDGE,
    /// BOARDD_TIMESTAMP_NS (the edge's kernel timestamp) and BOARDD_REACTION.
    func testReactionCommandEnvironment() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("boardd-env-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("env").path
        let h = try Harness(
            """
            board: demo
            lines:
              button: { pin: BUTTON, input: { edge: both, active_low: true }, priority: low }
              led: { pin: LED, output: {} }
            commands:
              dump: { argv: ["/bin/sh", "-c", "env > \(out).tmp && mv \(out).tmp \(out)"] }
            reactions:
              - name: door opened
                on: { line: button, release: true }
                do: [ run: dump ]

            """)
        try h.press()
        try h.advance(30)
        try h.press(false)  // the release: a rising physical edge, logical off
        XCTAssertEqual(h.fires("door opened"), 1)
        let end = Date().addingTimeInterval(20)
        while !FileManager.default.fileExists(atPath: out) && Date() < end {
            try h.daemon.settle()  // the child's pidfd and pipes are sources of the main loop
            usleep(5000)
        }
        let env = try String(contentsOfFile: out, encoding: .utf8).split(separator: "\n").map(String.init)
        let boardd = env.filter { $0.hasPrefix("BOARDD_") }.sorted()
        XCTAssertTrue(boardd.contains("BOARDD_LINE=button"), "\(boardd)")
        XCTAssertTrue(boardd.contains("BOARDD_REACTION=door opened"), "\(boardd)")
        XCTAssertTrue(boardd.contains("BOARDD_ORIGIN=reaction"), "\(boardd)")
        let edge = boardd.first { $0.hasPrefix("BOARDD_EDGE=") }
        XCTAssertEqual(edge, "BOARDD_EDGE=falling", "a release of an active-low button is the logical falling edge: \(boardd)")
        let ts = try XCTUnwrap(boardd.first { $0.hasPrefix("BOARDD_TIMESTAMP_NS=") }.flatMap { UInt64($0.dropFirst(20)) }, "\(boardd)")
        XCTAssertGreaterThan(ts, 0)
        XCTAssertFalse(boardd.contains { $0.hasPrefix("BOARDD_TASK=") }, "no task for a reaction: \(boardd)")
        XCTAssertTrue(env.contains { $0.hasPrefix("PATH=") }, "the daemon's environment is passed on")
        // Reaped: no zombie of ours is left.
        let end2 = Date().addingTimeInterval(10)
        while h.counters.commandsRunning > 0 && Date() < end2 {
            try h.daemon.settle()
            usleep(5000)
        }
        XCTAssertEqual(h.counters.commandsRunning, 0)
    }
}
