import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import BoardloopTestSupport
import XCTest

/// A GPIO source in a custom mode is held (by the kernel's level-triggered
/// readiness) while another mode runs, and delivers everything in order
/// when its mode runs.
final class GPIOModeTests: XCTestCase {
    let critical: RunLoopMode = "boardloop.test.critical"

    func testASourceOnlyInACustomModeGetsNothingWhileDefaultRuns() throws {
        let rig = try ManualRig()
        let req = try rig.gpio.request([4, 17], .input(edges: .both))
        let log = EventLog()
        try req.schedule(on: rig.loop, mode: critical) { log.record($0) }
        var defaultTicks = 0
        try rig.loop.add(RunLoopTimer(fireAt: rig.at(ms: 1), interval: .milliseconds(1)) { _ in defaultTicks += 1 }, mode: .default)

        // Fewer than the buffer holds, over time, on two lines.
        for k in 0..<10 {
            try rig.chip.setLevel(k % 2 == 0 ? 4 : 17, k % 4 < 2, at: rig.at(ms: Int64(k)))
        }
        try rig.advance(ms: 20, .default)
        XCTAssertGreaterThanOrEqual(defaultTicks, 20, "the default mode ran")
        XCTAssertEqual(log.events.count, 0, "no dispatch while the default mode runs")
        XCTAssertEqual(req.eventSource?.dispatchCount, 0)

        _ = try rig.loop.run(mode: critical, timeout: .zero)
        XCTAssertEqual(log.events.count, 10, "every held event, at once")
        XCTAssertEqual(log.timestamps, (0..<10).map { rig.at(ms: Int64($0)).nanoseconds })
        XCTAssertEqual(log.offsets, (0..<10).map { $0 % 2 == 0 ? 4 : 17 })
        XCTAssertEqual(log.events.map(\.globalSequence), Array(1...10))
        XCTAssertEqual(log.lost, 0)
    }

    func testReadPendingEventsCollectsAHeldSourcesEventsOnTheCallersSchedule() throws {
        let rig = try ManualRig()
        let req = try rig.gpio.request([4, 17], .input(edges: .both))
        let log = EventLog()
        try req.schedule(on: rig.loop, mode: critical) { log.record($0) }
        XCTAssertEqual(req.readPendingEvents(), 0, "nothing waits")
        // A timer of the default mode collects what the source (not in that
        // mode) would only get when its mode runs.
        var reads: [Int] = []
        let collector = RunLoopTimer(fireAt: rig.at(ms: 5), interval: .milliseconds(5)) { _ in reads.append(req.readPendingEvents()) }
        try rig.loop.add(collector, mode: .default)
        for k in 0..<12 {  // one event a millisecond, as time goes
            try rig.chip.setLevel(k % 2 == 0 ? 4 : 17, k % 4 < 2, at: rig.at(ms: Int64(k)))
            try rig.advance(ms: 1, .default)
        }
        try rig.advance(ms: 8, .default)
        XCTAssertEqual(req.eventSource?.dispatchCount, 0, "the source itself was never dispatched")
        XCTAssertEqual(log.events.count, 12, "every event, through the handler")
        XCTAssertEqual(log.timestamps, (0..<12).map { rig.at(ms: Int64($0)).nanoseconds }, "in order")
        XCTAssertEqual(log.events.map(\.globalSequence), Array(1...12))
        XCTAssertEqual(log.lost, 0)
        XCTAssertEqual(reads, [1, 1, 1, 0], "read at 5 (5 events), 10 (5) and 15 ms (2); nothing waited at 20")
        XCTAssertEqual(log.batchSizes, [5, 5, 2])
        // Only on the loop's thread.
        try rig.chip.setLevel(4, true)
        nonisolated(unsafe) let shared = req
        let offThread = Locked(-1)
        let other = JoinableThread { offThread.withLock { $0 = shared.readPendingEvents() } }
        XCTAssertTrue(other.join(within: .seconds(10)))
        XCTAssertEqual(offThread.withLock { $0 }, 0)
        XCTAssertEqual(log.events.count, 12)
        XCTAssertEqual(req.readPendingEvents(), 1)
        XCTAssertEqual(log.events.count, 13)
        req.unschedule()
        XCTAssertEqual(req.readPendingEvents(), 0, "not scheduled")
    }

    func testASourceInBothModesIsServedByEither() throws {
        let rig = try ManualRig()
        let req = try rig.gpio.request(4, .input(edges: .both))
        let log = EventLog()
        try req.schedule(on: rig.loop, mode: .default) { log.record($0) }
        try req.add(to: critical)
        XCTAssertEqual(req.scheduledModes, [.default, critical])
        try rig.chip.setLevel(4, true)
        _ = try rig.loop.run(mode: critical, timeout: .zero)
        try rig.chip.setLevel(4, false)
        _ = try rig.loop.run(mode: .default, timeout: .zero)
        XCTAssertEqual(log.edges, [.rising, .falling])
        try req.remove(from: .default)
        try rig.chip.setLevel(4, true)
        _ = try rig.loop.run(mode: .default, timeout: .zero)
        XCTAssertEqual(log.events.count, 2, "removed from default: held")
        _ = try rig.loop.run(mode: critical, timeout: .zero)
        XCTAssertEqual(log.events.count, 3)
    }

    func testCommonModesWork() throws {
        let rig = try ManualRig()
        try rig.loop.addCommonMode(critical)
        let req = try rig.gpio.request(4, .input(edges: .both))
        let log = EventLog()
        try req.schedule(on: rig.loop, mode: .common) { log.record($0) }
        try rig.chip.setLevel(4, true)
        _ = try rig.loop.run(mode: critical, timeout: .zero)
        XCTAssertEqual(log.edges, [.rising])
    }

    func testAHandlerThatRunsTheLoopAgainGetsANestedBatch() throws {
        // A handler may run the loop (nested); the same request can be
        // dispatched inside while the outer batch is still borrowed.
        let rig = try ManualRig()
        let req = try rig.gpio.request(4, .input(edges: .both), eventBufferCapacity: 1)
        var seen: [String] = []
        try req.schedule(on: rig.loop) { batch in
            let outer = batch.map(\.edge)
            seen.append("enter \(outer)")
            if seen.count == 1 { _ = try? rig.loop.run(mode: .default, timeout: .zero) }
            seen.append("leave \(batch.map(\.edge))") // the outer batch is intact
        }
        try rig.chip.setLevel(4, true)
        try rig.chip.setLevel(4, false)
        _ = try rig.loop.run(mode: .default, timeout: .zero)
        XCTAssertEqual(seen, ["enter [rising]", "enter [falling]", "leave [falling]", "leave [rising]"])
    }
}
