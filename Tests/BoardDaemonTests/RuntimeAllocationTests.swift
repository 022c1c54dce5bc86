import Boardloop
import BoardDaemon
import BoardloopTestSupport
import XCTest

/// The daemon's event path allocates nothing: after warm-up, 10,000 edges
/// through reactions that set, toggle and pulse outputs, with a task
/// toggling meanwhile, counted by the malloc interposer on the loop thread.
/// At boardd's default log level, `info`: each reaction is traced, as a
/// record in the loop's trace ring that the log writer's thread formats.
final class RuntimeAllocationTests: XCTestCase {
    func testEdgesThroughReactionsAndATaskAllocateNothing() throws {
        try XCTSkipUnless(AllocationCounter.isActive, "malloc interposer not linked (ThreadSanitizer build)")
        let h = try Harness(
            """
            board: demo
            lines:
              button: { pin: BUTTON, input: { edge: both, active_low: true } }
              chatter: { pin: CHATTER, input: { edge: both } }
              led: { pin: LED, output: {} }
              valve: { pin: VALVE, output: {} }
              fan: { pin: FAN, output: {} }
            tasks:
              blink: { every: 1ms, do: [ toggle: fan ] }
            reactions:
              - { on: { line: button, press: true }, do: [ set: { led: on }, toggle: valve ] }
              - { on: { line: button, release: true }, do: [ set: { led: off } ] }
              - { on: { line: chatter, edge: both }, do: [ pulse: { valve: 2ms }, toggle: led ] }
            """, level: .info)
        let clock = h.clock
        let loop = h.daemon.loop
        var level = false
        func round() throws {
            level.toggle()
            try h.chip.setLevel(17, level)
            try h.chip.setLevel(23, level)
            _ = try loop.run(mode: .default, timeout: .zero)
            advanceUncounted(clock, by: .microseconds(500))
            _ = try loop.run(mode: .default, timeout: .zero)
        }
        AllocationCounter.beginCountingOnThisThread()
        for _ in 0..<500 { try round() }
        AllocationCounter.endCountingOnThisThread()
        let before = h.counters
        let rounds = 5_000
        let m = try AllocationCounter.measure { () throws in
            for _ in 0..<rounds { try round() }
        }
        let after = h.counters
        let edges = (after.lines["button"]!.events - before.lines["button"]!.events)
            + (after.lines["chatter"]!.events - before.lines["chatter"]!.events)
        XCTAssertEqual(edges, UInt64(rounds * 2), "10,000 edges went through")
        XCTAssertEqual(after.tasks["blink"]!.runs - before.tasks["blink"]!.runs, UInt64(rounds / 2), "the task ran every 1 ms meanwhile")
        XCTAssertEqual(m.allocations, 0, "allocations over \(edges) edges: \(m.allocations) (\(m.bytes) bytes)")
        print("daemon event path: \(m.allocations) allocations for \(edges) edges, reactions and task runs")
        h.daemon.shutdown()  // the last records are drained
        let log = h.log
        XCTAssertTrue(log.contains("info button: press -> "), "the reactions' trace lines, at info")
        XCTAssertTrue(log.contains("info chatter: both edge -> "), "the reactions' trace lines, at info")
    }

    func testADrainTimerReadingAHeldFloodAllocatesNothing() throws {
        try XCTSkipUnless(AllocationCounter.isActive, "malloc interposer not linked (ThreadSanitizer build)")
        let h = try Harness(SequenceTests.config(chatter: ", drain: 65536, drain_every: 5ms", pour: "60s"))
        let clock = h.clock
        var level = false
        func millisecond() throws {
            level.toggle()
            try h.chip.setLevel(23, level)  // one held edge a millisecond; the 10 ms task runs in the mode
            advanceUncounted(clock, by: .milliseconds(1))
            try h.daemon.settle()  // passes in the running (critical) mode
        }
        try h.press()
        XCTAssertEqual(h.daemon.mainMode, "critical")
        AllocationCounter.beginCountingOnThisThread()
        for _ in 0..<100 { try millisecond() }
        AllocationCounter.endCountingOnThisThread()
        let before = h.counters.lines["chatter"]!
        let m = try AllocationCounter.measure { () throws in
            for _ in 0..<5_000 { try millisecond() }
        }
        let after = h.counters.lines["chatter"]!
        XCTAssertEqual(after.heldInRing - before.heldInRing, 5_000, "every edge read into the ring")
        XCTAssertEqual(after.drainReads - before.drainReads, 1_000, "by the timer, every 5 ms")
        XCTAssertEqual(h.fires("count"), 0, "held")
        XCTAssertEqual(m.allocations, 0, "allocations over 5,000 held edges: \(m.allocations) (\(m.bytes) bytes)")
    }

    /// A sequence with a mode, started by a press, run to its end, at
    /// steady state: its steps, the mode switches and their lines (the
    /// sequence's and the mode's, records for the log writer's thread)
    /// allocate nothing on the loop's thread.
    func testASequenceAndItsModeSwitchesAllocateNothing() throws {
        try XCTSkipUnless(AllocationCounter.isActive, "malloc interposer not linked (ThreadSanitizer build)")
        let h = try Harness(SequenceTests.config(pour: "5ms"), level: .info)
        let clock = h.clock
        let loop = h.daemon.loop
        let critical = RunLoopMode("boardd.critical")
        func pass() throws {
            _ = try loop.run(mode: h.daemon.mainMode == "default" ? .default : critical, timeout: .zero)
        }
        func cycle() throws {
            try h.chip.setLevel(17, false)  // press (active low): the sequence starts, the mode is critical
            try pass()
            for _ in 0..<8 {
                advanceUncounted(clock, by: .milliseconds(1))
                try pass()
            }
            try h.chip.setLevel(17, true)  // release, once the sequence ended and the mode is back
            try pass()
        }
        AllocationCounter.beginCountingOnThisThread()
        for _ in 0..<20 { try cycle() }
        AllocationCounter.endCountingOnThisThread()
        let before = h.counters.sequence["pour"]!
        let m = try AllocationCounter.measure { () throws in
            for _ in 0..<200 { try cycle() }
        }
        let after = h.counters.sequence["pour"]!
        XCTAssertEqual(after.started - before.started, 200, "a run per press")
        XCTAssertEqual(after.completed - before.completed, 200, "each to its end")
        XCTAssertEqual(h.daemon.mainMode, "default")
        XCTAssertEqual(m.allocations, 0, "allocations over 200 sequence runs: \(m.allocations) (\(m.bytes) bytes)")
        h.daemon.flushEvents()
        XCTAssertTrue(h.log.contains("sequence pour: started"), h.log)
        XCTAssertTrue(h.log.contains("mode default -> critical (sequence pour); holding button, chatter"), h.log)
        XCTAssertTrue(h.log.contains("mode critical -> default (sequence pour ended)"), h.log)
    }
}

/// Moves a manual clock outside the allocation count: it is test scaffolding
/// (the clock wakes its loops through an array), not the event path.
private func advanceUncounted(_ clock: ManualClock, by d: Duration) {
    AllocationCounter.endCountingOnThisThread()
    clock.advance(by: d)
    AllocationCounter.beginCountingOnThisThread()
}
