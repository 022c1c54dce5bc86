import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import XCTest

/// A chip that vanishes, and events lost to overflow: reported on the
/// source, never hidden; the loop keeps running.
final class FaultTests: XCTestCase {
    func testAVanishingChipIsReportedOnTheSourceAndTheLoopGoesOn() throws {
        let rig = try ManualRig()
        let button = try rig.gpio.request(17, .input(edges: .both))
        let led = try rig.gpio.request(27, .output(false))
        let log = EventLog()
        try button.schedule(on: rig.loop) { log.record($0) }
        var ticks = 0
        try rig.loop.add(RunLoopTimer(fireAt: rig.at(ms: 10), interval: .milliseconds(10)) { _ in ticks += 1 }, mode: .default)

        try rig.chip.setLevel(17, true, at: rig.at(ms: 1))
        try rig.advance(ms: 5)
        rig.chip.vanish()
        try rig.advance(ms: 50)

        XCTAssertEqual(log.edges, [.rising], "the event before the chip went was delivered")
        XCTAssertEqual(log.faults.count, 1)
        guard case .chipVanished(let chip, _)? = log.faults.first else { return XCTFail("\(log.faults)") }
        XCTAssertEqual(chip, "gpiochip7 [test-chip]")
        guard case .vanished = button.state else { return XCTFail("state \(button.state)") }
        XCTAssertNil(button.eventSource, "the request left the loop")
        XCTAssertEqual(ticks, 5, "the loop kept running its timers")
        // Other requests on the chip fail with the same typed error.
        assertGPIOError(try led.setValue(true)) {
            if case .chipVanished = $0 { return true }
            return false
        }
        XCTAssertTrue(log.faults[0].description.contains("vanished"))
        assertGPIOError(try GPIOChip("test-chip", backend: rig.board)) {
            if case .chipNotFound = $0 { return true }
            return false
        }

        // The chip comes back: it can be opened and requested anew.
        rig.chip.reappear()
        let again = try GPIOChip("test-chip", backend: rig.board).request(17, .input(edges: .both))
        let log2 = EventLog()
        try again.schedule(on: rig.loop) { log2.record($0) }
        try rig.chip.setLevel(17, false, at: rig.at(ms: 60))
        try rig.advance(ms: 10)
        XCTAssertEqual(log2.edges, [.falling])
    }

    func testVanishingIsFoundByPollingWhenTheKernelDoesNotWakeUs() throws {
        // Linux before 6.6 does not wake a line request's pollers when its
        // chip goes; the request polls (vanishCheckInterval). Here the mock
        // is told to stay silent to show that path.
        let rig = try ManualRig()
        let req = try rig.gpio.request(17, .input(edges: .both))
        req.vanishCheckInterval = .milliseconds(100)
        let log = EventLog()
        try req.schedule(on: rig.loop) { log.record($0) }
        rig.chip.vanishSilently()
        try rig.advance(ms: 50)
        XCTAssertEqual(log.faults.count, 0, "not noticed before the next check")
        try rig.advance(ms: 100)
        XCTAssertEqual(log.faults.count, 1)
        guard case .vanished = req.state else { return XCTFail("\(req.state)") }
    }

    func testAnOverflowShowsAsASequenceGap() throws {
        // v2: a buffer of 16 keeps the newest 16 of 40 edges; the sequence
        // numbers show the 24 that were dropped.
        let rig = try ManualRig(eventBufferSize: 16)
        let req = try rig.gpio.request(17, .input(edges: .both))
        let log = EventLog()
        try req.schedule(on: rig.loop) { log.record($0) }
        try rig.chip.setLevel(17, true, at: rig.at(ms: 0))
        try rig.settle() // seen #1
        try rig.chip.burst(17, edges: 40, spacing: .microseconds(10), from: rig.at(ms: 1))
        try rig.settle()
        XCTAssertEqual(log.events.count, 17)
        XCTAssertEqual(log.lost, 24)
        XCTAssertEqual(req.statistics.lostEvents, 24)
        XCTAssertEqual(log.events.last?.globalSequence, 41)
        XCTAssertEqual(log.events.dropFirst().first?.globalSequence, 26)
    }

    func testAnOverflowBeforeTheFirstReadIsReported() throws {
        // Edges held while nothing reads (the request's mode not running):
        // the buffer keeps the newest 16 of 50, and the first event read
        // already carries sequence number 35. Sequence numbers start at 1,
        // so the 34 before it were lost (found by the benchmarks: a gap
        // before the first read used to go unreported).
        let rig = try ManualRig(eventBufferSize: 16)
        let req = try rig.gpio.request(17, .input(edges: .both))
        let log = EventLog()
        try req.schedule(on: rig.loop) { log.record($0) }
        try rig.chip.burst(17, edges: 50, spacing: .microseconds(10), from: rig.at(ms: 1))
        try rig.settle()
        XCTAssertEqual(log.events.count, 16)
        XCTAssertEqual(log.events.first?.globalSequence, 35)
        XCTAssertEqual(log.lost, 34)
        XCTAssertEqual(req.statistics.lostEvents, 34)
        XCTAssertEqual(UInt64(log.events.count) + req.statistics.lostEvents, 50, "every edge delivered or reported lost")
    }

    /// Edges held while nothing reads: a v2 request keeps the buffer it
    /// asks for, as the kernel sizes it.
    func heldBurst(asking capacity: Int, edges: Int, eventModel: MockChip.EventModel = .v2) throws -> (kept: Int, lost: UInt64) {
        let rig = try ManualRig(eventModel: eventModel)
        let req = try rig.gpio.request(17, .input(edges: .both), eventBufferCapacity: capacity)
        let log = EventLog()
        try rig.chip.burst(17, edges: edges, spacing: .microseconds(250), from: rig.at(ms: 1))
        try req.schedule(on: rig.loop) { log.record($0) }
        try rig.settle()
        return (log.events.count, req.statistics.lostEvents)
    }

    func testTheMockKeepsTheBufferTheRequestAsksFor() throws {
        let big = try heldBurst(asking: 256, edges: 200)
        XCTAssertEqual(big.kept, 200, "a buffer of 256 keeps 200 held edges")
        XCTAssertEqual(big.lost, 0)
        let small = try heldBurst(asking: 16, edges: 200)
        XCTAssertEqual(small.kept, 16, "a buffer of 16 keeps the newest 16")
        XCTAssertEqual(small.lost, 184, "the rest counted lost")
        // Rounded up to a power of two, as kfifo_alloc() does: 100 -> 128.
        let rounded = try heldBurst(asking: 100, edges: 200)
        XCTAssertEqual(rounded.kept, 128)
        XCTAssertEqual(rounded.lost, 72)
        // Capped at the kernel's 1024 a request.
        XCTAssertEqual(MockChip.kernelEventBuffer(lines: 1, eventBufferCapacity: 5000), 1024)
        XCTAssertEqual(MockChip.kernelEventBuffer(lines: 1, eventBufferCapacity: 1), 2)
        XCTAssertEqual(MockChip.kernelEventBuffer(lines: 3, eventBufferCapacity: 0), 64, "0: 16 per line")
        XCTAssertEqual(MockChip.kernelEventBuffer(lines: 1, eventBufferCapacity: 48), 64)
        // The v1 uAPI (libgpiod 1.6) keeps 16 a line whatever is asked.
        let v1 = try heldBurst(asking: 256, edges: 200, eventModel: .v1)
        XCTAssertEqual(v1.kept, 16)
    }

    func testDroppedEventsAreCountedExactly() throws {
        let rig = try ManualRig()
        let req = try rig.gpio.request([4, 17], .input(edges: .both))
        let log = EventLog()
        try req.schedule(on: rig.loop) { log.record($0) }
        try rig.chip.setLevel(4, true)
        try rig.chip.dropEvents(17, count: 3)
        try rig.chip.setLevel(17, true)
        try rig.settle()
        XCTAssertEqual(log.offsets, [4, 17])
        XCTAssertEqual(log.lost, 3)
    }

    func testOn16StyleChipsAFullFifoIsReportedAndAWrongLevelProvesLoss() throws {
        // v1 (libgpiod 1.6): no sequence numbers; a line's FIFO keeps 16 and
        // drops newer edges without a trace. What can be seen: the FIFO was
        // full (suspected overflow), and if the last kept edge disagrees with
        // the line's level, at least one edge was certainly lost.
        let rig = try ManualRig(eventModel: .v1)
        XCTAssertFalse(rig.board.capabilities.contains(.sequenceNumbers))
        let req = try rig.gpio.request(17, .input(edges: .both))
        let log = EventLog()
        try req.schedule(on: rig.loop) { log.record($0) }
        try rig.chip.burst(17, edges: 41, spacing: .microseconds(10), from: rig.at(ms: 0)) // ends high
        try rig.settle()
        XCTAssertEqual(log.events.count, 16, "the FIFO kept 16 of 41")
        XCTAssertEqual(log.overflowSuspected, 1)
        XCTAssertEqual(req.statistics.suspectedOverflows, 1)
        XCTAssertGreaterThanOrEqual(log.lost, 1, "the last kept edge is falling but the line is high")
        XCTAssertEqual(log.events.map(\.globalSequence), Array(repeating: 0, count: 16))

        // An even burst ends where the kept events say: only the suspicion remains.
        let rig2 = try ManualRig(eventModel: .v1)
        let req2 = try rig2.gpio.request(17, .input(edges: .both))
        let log2 = EventLog()
        try req2.schedule(on: rig2.loop) { log2.record($0) }
        try rig2.chip.burst(17, edges: 40, spacing: .microseconds(10), from: rig2.at(ms: 0))
        try rig2.settle()
        XCTAssertEqual(log2.events.count, 16)
        XCTAssertEqual(log2.overflowSuspected, 1, "never silent: the full FIFO is reported")
        XCTAssertEqual(log2.lost, 0)
    }

    func testOn16StyleChipsARepeatedEdgeMeansOneWasLost() throws {
        let rig = try ManualRig(eventModel: .v1)
        let req = try rig.gpio.request(17, .input(edges: .both))
        let log = EventLog()
        try req.schedule(on: rig.loop) { log.record($0) }
        try rig.chip.injectEdge(17, .rising, at: rig.at(ms: 1))
        try rig.chip.injectEdge(17, .rising, at: rig.at(ms: 2)) // the falling between was lost
        try rig.chip.injectEdge(17, .falling, at: rig.at(ms: 3))
        try rig.settle()
        XCTAssertEqual(log.edges, [.rising, .rising, .falling])
        XCTAssertEqual(log.lost, 1)
    }

    func testDebounceFollowsTheRealLevelAfterAnOverflow() throws {
        let rig = try ManualRig(eventModel: .v1)
        let req = try rig.gpio.request(17, .input(edges: .both, debounce: .milliseconds(10)))
        let log = EventLog()
        try req.schedule(on: rig.loop) { log.record($0) }
        try rig.chip.burst(17, edges: 41, spacing: .microseconds(10), from: rig.at(ms: 0)) // ends high
        try rig.advance(ms: 50)
        XCTAssertEqual(log.edges, [.rising], "the line ends high: one rising edge, even though the FIFO lost the end")
        XCTAssertEqual(try req.value(), true)
    }
}
