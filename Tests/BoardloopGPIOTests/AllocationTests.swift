import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import BoardloopTestSupport
import XCTest

/// No heap allocation per event in steady state: from the mock chip's fd
/// through epoll, the port source, the read into the reserved buffer, loss
/// detection and debouncing, to the handler — and output writes. Counted
/// for real by the CAllocationCounter malloc interposer on this thread.
final class GPIOAllocationTests: XCTestCase {
    func testEdgeEventsAllocateNothingInSteadyState() throws {
        try XCTSkipUnless(AllocationCounter.isActive, "malloc interposer not linked: a sanitizer build (TSan, ASan) owns malloc; the normal test run counts")
        let loop = try RunLoop()
        let chip = try MockChip(label: "alloc", lineCount: 8)
        let gpio = try chip.open()
        let req = try gpio.request([1, 2], .input(edges: .both))
        let led = try gpio.request(3, .output(false))
        var delivered = 0
        var latencySum = Duration.zero
        try req.schedule(on: loop) { batch in
            for e in batch {
                delivered += Int(e.offset)
                latencySum += batch.latency(of: e)
            }
        }
        var level = false
        func round() throws {
            level.toggle()
            try chip.setLevel(1, level)
            try chip.setLevel(2, level)
            try led.setValue(level)
            _ = try loop.run(mode: .default, timeout: .zero)
        }
        for _ in 0..<200 { try round() } // warm up
        delivered = 0
        let rounds = 5_000
        let m = try AllocationCounter.measure { () throws in
            for _ in 0..<rounds { try round() }
        }
        XCTAssertEqual(delivered, rounds * 3, "every event was delivered")
        XCTAssertEqual(m.allocations, 0, "allocations over \(rounds * 2) events: \(m.allocations) (\(m.bytes) bytes)")
        XCTAssertEqual(req.statistics.lostEvents, 0)
        print("GPIO steady state: \(m.allocations) allocations for \(rounds * 2) edge events and \(rounds) output writes")
    }

    func testDebouncedEventsAllocateNothingInSteadyState() throws {
        try XCTSkipUnless(AllocationCounter.isActive, "malloc interposer not linked: a sanitizer build (TSan, ASan) owns malloc; the normal test run counts")
        let clock = ManualClock()
        let loop = try RunLoop(clock: .manual(clock))
        let chip = try MockChip(label: "alloc", lineCount: 8, eventModel: .v1, clock: .manual(clock))
        let req = try chip.open().request(1, .input(edges: .both, debounce: .milliseconds(5)))
        var reported = 0
        try req.schedule(on: loop) { batch in reported += batch.count }
        // Moving a ManualClock is test scaffolding (it wakes its loops through
        // an array it builds), so the clock moves with counting paused; every
        // loop pass — dispatching the bouncy edges, firing the debounce
        // timers, delivering — is counted.
        func moveClock(_ d: Duration) {
            AllocationCounter.endCountingOnThisThread()
            clock.advance(by: d)
            AllocationCounter.beginCountingOnThisThread()
        }
        func press() throws {
            // A bouncy press and a bouncy release: 5 edges each.
            try chip.burst(1, edges: 5, spacing: .microseconds(100))
            _ = try loop.run(mode: .default, timeout: .zero)
            moveClock(.milliseconds(10))
            _ = try loop.run(mode: .default, timeout: .zero)
            try chip.burst(1, edges: 5, spacing: .microseconds(100))
            _ = try loop.run(mode: .default, timeout: .zero)
            moveClock(.milliseconds(10))
            _ = try loop.run(mode: .default, timeout: .zero)
        }
        for _ in 0..<50 { try press() }
        reported = 0
        let presses = 1_000
        let m = try AllocationCounter.measure { () throws in
            for _ in 0..<presses { try press() }
        }
        XCTAssertEqual(reported, presses * 2, "one debounced edge per bouncy press and per release")
        XCTAssertEqual(req.statistics.debounced, UInt64(1_050 * 8), "8 of every 10 raw edges swallowed")
        XCTAssertEqual(m.allocations, 0, "allocations over \(presses * 10) raw edges: \(m.allocations)")
        print("GPIO software debounce: \(m.allocations) allocations for \(presses * 10) raw edges, \(presses * 2) reported")
    }
}
