import Boardloop
import BoardDaemon
import XCTest

/// Sequences in custom modes, held events, the e-stop, policies and tasks
/// in modes, on the manual clock.
final class SequenceTests: XCTestCase {
    static func config(policy: String = "single", drain: Bool = false, chatter: String? = nil, pour: String = "150ms") -> String {
        """
        board: demo
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true }, priority: low }
          estop: { pin: ESTOP, input: { edge: falling }, priority: high }
          chatter: { pin: CHATTER, input: { edge: both\(chatter ?? (drain ? ", drain: 4096" : "")) }, priority: low }
          led: { pin: LED, output: { safe: off } }
          valve: { pin: VALVE, output: { safe: off } }
          fan: { pin: FAN, output: {} }
        modes:
          critical: { admits: [high] }
        tasks:
          tick: { every: 10ms, in_modes: [critical], do: [ toggle: fan ] }
        sequences:
          pour:
            mode: critical
            policy: \(policy)
            steps: [ set: { valve: on }, wait: \(pour), set: { valve: off } ]
        reactions:
          - { name: start, on: { line: button, press: true }, do: [ sequence: pour ] }
          - { name: count, on: { line: chatter, edge: both }, do: [ toggle: led ] }
          - { name: estop, on: { line: estop, edge: falling }, do: [ set: { valve: off }, stop: pour ] }
        """
    }

    func testSequenceHoldsLowPriorityEventsAndDeliversThemInOrderAfterwards() throws {
        let h = try Harness(Self.config())
        try h.press()
        XCTAssertEqual(h.daemon.mainMode, "critical")
        XCTAssertEqual(try h.writes("VALVE"), [true])
        // 10 chatter edges during the sequence: held (not dispatched).
        for i in 0..<10 {
            try h.setLevel("CHATTER", i % 2 == 0)
            try h.advance(5)
        }
        XCTAssertEqual(h.fires("count"), 0, "held while the sequence runs")
        XCTAssertEqual(try h.writes("LED"), [])
        try h.advance(100)  // 150 ms after the start
        XCTAssertEqual(h.daemon.mainMode, "default")
        XCTAssertEqual(try h.writes("VALVE"), [true, false], "the valve was on for the sequence's duration")
        try h.advance(1)
        XCTAssertEqual(h.fires("count"), 10, "every held edge delivered after the sequence")
        XCTAssertEqual(try h.writes("LED"), [true, false, true, false, true, false, true, false, true, false])
        XCTAssertEqual(h.counters.lines["chatter"]?.lost, 0)
        // Trigger to actions done: the press reacted at once (the manual
        // clock stands still within a pass); the held edges, at 0, 5, ... 45 ms
        // of the sequence, waited for its end (delivered as it ends, at 150 ms).
        let start = try XCTUnwrap(h.counters.reactionTimes["start"])
        XCTAssertEqual([start.count], [1])
        XCTAssertEqual([start.p50, start.p99, start.max], [.zero, .zero, .zero])
        let held = try XCTUnwrap(h.counters.reactionTimes["count"])
        XCTAssertEqual(held.count, 10)
        XCTAssertEqual(held.max, .milliseconds(150))
        XCTAssertTrue((.milliseconds(125)...(.milliseconds(145))).contains(held.p50), "p50 \(held.p50) (125-130 ms, within the histogram's 12.5 %)")
    }

    func testAFloodLongerThanTheKernelBufferIsHeldWithNothingLostWithDrain() throws {
        let h = try Harness(Self.config(drain: true))
        try h.press()
        for i in 0..<300 {  // 300 edges in 75 ms: the mock kernel keeps 16
            try h.setLevel("CHATTER", i % 2 == 0)
            if i % 4 == 3 { try h.advance(1) }
        }
        XCTAssertEqual(h.fires("count"), 0)
        try h.advance(80)
        XCTAssertEqual(h.daemon.mainMode, "default")
        try h.advance(1)
        XCTAssertEqual(h.fires("count"), 300, "all 300 delivered after the sequence")
        XCTAssertEqual(h.counters.lines["chatter"]?.lost, 0)
        XCTAssertEqual(h.counters.lines["chatter"]?.heldInRing, 300)
    }

    func testADrainTimerCollectsAFloodLongerThanTheKernelBufferWhileHeldWithNothingLost() throws {
        // The mock kernel keeps 16 events; the timer reads every 5 ms (at most
        // 2.5 ms late): 300 edges at one a millisecond never fill it.
        let h = try Harness(Self.config(chatter: ", drain: 4096, drain_every: 5ms", pour: "400ms"))
        try h.press()
        XCTAssertEqual(h.daemon.mainMode, "critical")
        for i in 0..<300 {
            try h.setLevel("CHATTER", i % 2 == 0)
            try h.advance(1)
        }
        XCTAssertEqual(h.fires("count"), 0, "held: nothing dispatched during the sequence")
        let during = h.counters.lines["chatter"]!
        XCTAssertEqual(during.heldInRing, 300, "every edge read into the ring during the sequence")
        XCTAssertTrue(
            (38...61).contains(during.drainReads),
            "read by the timer, up to 8 events at a time (one read per 5 ms period at most): \(during.drainReads) reads")
        try h.advance(101)
        XCTAssertEqual(h.daemon.mainMode, "default")
        try h.advance(1)
        XCTAssertEqual(h.fires("count"), 300, "all 300 delivered after the sequence")
        XCTAssertEqual(try h.writes("LED").count, 300)
        XCTAssertEqual(h.counters.lines["chatter"]?.lost, 0)
        // Back in the default mode the timer is out of the running mode: edges are dispatched as they come.
        let reads = h.counters.lines["chatter"]!.drainReads
        try h.setLevel("CHATTER", true)
        try h.advance(20)
        XCTAssertEqual(h.fires("count"), 301)
        XCTAssertEqual(h.counters.lines["chatter"]?.drainReads, reads)
    }

    func testADrainTimerSlowerThanTheFloodCountsWhatTheKernelDropped() throws {
        // 20 edges at once between two reads: a kernel buffer of 16 keeps 16,
        // the v2 sequence numbers say exactly 4 were lost.
        let h = try Harness(Self.config(chatter: ", buffer: 16, drain: 4096, drain_every: 50ms", pour: "150ms"))
        try h.press()
        for i in 0..<20 { try h.setLevel("CHATTER", i % 2 == 0) }
        try h.advance(151)
        try h.advance(1)
        let c = h.counters.lines["chatter"]!
        XCTAssertEqual(c.lost, 4)
        XCTAssertEqual(h.fires("count"), 16)
    }

    func testWithDrainOffTheKernelBufferOverflowIsCountedExactly() throws {
        // drain: 0 opts out of the default ring; a kernel buffer of 16.
        let h = try Harness(Self.config(chatter: ", buffer: 16, drain: 0"))
        try h.press()
        for i in 0..<40 { try h.setLevel("CHATTER", i % 2 == 0) }
        try h.advance(151)
        try h.advance(1)
        let c = h.counters.lines["chatter"]!
        XCTAssertEqual(c.lost + UInt64(h.fires("count")), 40, "delivered + lost = every edge (v2 sequence numbers)")
        XCTAssertEqual(c.lost, 24, "the kernel buffer keeps 16")
    }

    func testEStopReactsDuringTheSequence() throws {
        let h = try Harness(Self.config())
        try h.press()
        try h.advance(50)
        try h.setLevel("ESTOP", false)
        XCTAssertEqual(try h.writes("VALVE"), [true, false], "off at once, during the sequence")
        XCTAssertEqual(h.daemon.mainMode, "default", "the stopped sequence left its mode")
        XCTAssertEqual(h.counters.sequence["pour"]?.stopped, 1)
        try h.advance(200)
        XCTAssertEqual(try h.writes("VALVE"), [true, false], "the stopped sequence's remaining steps never ran")
    }

    func testTasksRunOnlyInTheirModes() throws {
        let h = try Harness(Self.config())
        try h.advance(100)
        XCTAssertEqual(h.counters.tasks["tick"]?.runs, 0, "not in the default mode")
        try h.press()
        try h.advance(150)
        XCTAssertEqual(h.counters.tasks["tick"]?.runs, 15, "at 10, 20, ... 150 ms of the mode (the last shares its instant with the end)")
        try h.advance(100)
        XCTAssertEqual(h.counters.tasks["tick"]?.runs, 15)
        XCTAssertEqual(h.counters.tasks["tick"]?.skippedPeriods, 0)
    }

    func testPolicySingleIgnoresAndCounts() throws {
        let h = try Harness(Self.config(policy: "single"))
        try h.press()
        try h.press(false)
        try h.advance(20)
        try h.press()  // held: delivered after the sequence, then starts it again
        try h.advance(200)
        let s = h.counters.sequence["pour"]!
        XCTAssertEqual(s.started, 2)
        XCTAssertEqual(s.ignored, 0, "the second press was held, not refused")
        // Starts while running through a high-priority trigger: ignored.
        let h2 = try policyHarness("single")
        try h2.press()
        try trip(h2)
        try trip(h2)
        XCTAssertEqual(h2.counters.sequence["pour"]?.ignored, 2)
    }

    func policyHarness(_ policy: String) throws -> Harness {
        try Harness(Self.config(policy: policy).replacingOccurrences(of: "do: [ set: { valve: off }, stop: pour ]", with: "do: [ sequence: pour ]"))
    }

    func trip(_ h: Harness) throws {
        try h.setLevel("ESTOP", false)
        try h.setLevel("ESTOP", true)
    }

    func testPolicyRestart() throws {
        let h = try policyHarness("restart")
        try trip(h)
        try h.advance(100)
        try trip(h)  // restarts: the valve stays on 150 ms from now
        try h.advance(100)
        XCTAssertEqual(try h.writes("VALVE"), [true])
        try h.advance(50)
        XCTAssertEqual(try h.writes("VALVE"), [true, false])
        XCTAssertEqual(h.counters.sequence["pour"]?.restarted, 1)
    }

    func testPolicyQueuedBoundedAndRefusalsCounted() throws {
        let h = try policyHarness("queued\n    max: 2")
        for _ in 0..<4 { try trip(h) }  // 1 runs, 2 queue, 1 refused
        XCTAssertEqual(h.counters.sequence["pour"]?.queued, 2)
        XCTAssertEqual(h.counters.sequence["pour"]?.refused, 1)
        try h.advance(450)
        XCTAssertEqual(h.counters.sequence["pour"]?.completed, 3)
        XCTAssertEqual(try h.writes("VALVE"), [true, false, true, false, true, false])
    }

    func testPolicyParallelBoundedAndRefusalsCounted() throws {
        let h = try policyHarness("parallel\n    max: 2")
        for _ in 0..<3 { try trip(h) }
        XCTAssertEqual(h.counters.sequence["pour"]?.running, 2)
        XCTAssertEqual(h.counters.sequence["pour"]?.refused, 1)
        try h.advance(150)
        XCTAssertEqual(h.counters.sequence["pour"]?.completed, 2)
        XCTAssertEqual(h.daemon.mainMode, "default")
    }
}
