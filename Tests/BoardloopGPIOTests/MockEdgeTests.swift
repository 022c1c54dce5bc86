import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import BoardloopTestSupport
import Glibc
import BoardloopXCTestSupport
import XCTest

/// Edge events from a mock chip reach the run loop through a real eventfd
/// and the engine's port-source path, in order, with their timestamps.
final class MockEdgeTests: XCTestCase {
    func testEdgesArriveInOrderWithTheirTimestamps() throws {
        let rig = try ManualRig()
        let button = try rig.gpio.request(17, .input(edges: .both))
        let log = EventLog()
        try button.schedule(on: rig.loop) { log.record($0) }

        try rig.chip.setLevel(17, true, at: rig.at(ms: 1))
        try rig.chip.setLevel(17, false, at: rig.at(ms: 2))
        try rig.chip.setLevel(17, true, at: rig.at(ms: 3))
        try rig.settle()

        XCTAssertEqual(log.edges, [.rising, .falling, .rising])
        XCTAssertEqual(log.offsets, [17, 17, 17])
        XCTAssertEqual(log.timestamps, [rig.at(ms: 1), rig.at(ms: 2), rig.at(ms: 3)].map(\.nanoseconds))
        XCTAssertEqual(log.events.map(\.globalSequence), [1, 2, 3])
        XCTAssertEqual(log.events.map(\.lineSequence), [1, 2, 3])
        XCTAssertEqual(log.lost, 0)
        XCTAssertEqual(button.statistics.delivered, 3)
        // They came by the port source (one dispatch read all three).
        XCTAssertEqual(button.eventSource?.dispatchCount, 1)
        XCTAssertEqual(log.batchSizes, [3])
    }

    func testTheEventFdIsARealPollableFd() throws {
        let rig = try ManualRig()
        let button = try rig.gpio.request(17, .input(edges: .both))
        try button.schedule(on: rig.loop) { _ in }
        let fd = try XCTUnwrap(button.eventSource?.fd)
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        XCTAssertEqual(poll(&pfd, 1, 0), 0, "nothing pending: not readable")
        try rig.chip.setLevel(17, true)
        XCTAssertEqual(poll(&pfd, 1, 0), 1, "an edge makes the fd readable")
        try rig.settle()
        pfd.revents = 0
        XCTAssertEqual(poll(&pfd, 1, 0), 0, "reading the events clears it")
    }

    /// `hasPendingEvents` says what a poll of the request's fd says, on the
    /// mock as on the kernel: false with nothing waiting, true after an
    /// edge until the loop reads it, false once the request is released.
    func testHasPendingEventsFollowsTheFdsReadability() throws {
        let rig = try ManualRig()
        let button = try rig.gpio.request(17, .input(edges: .both))
        try button.schedule(on: rig.loop) { _ in }
        let fd = try XCTUnwrap(button.eventSource?.fd)
        func readable() -> Bool {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            return poll(&pfd, 1, 0) == 1
        }
        XCTAssertFalse(button.hasPendingEvents)
        XCTAssertFalse(readable())
        try rig.chip.setLevel(17, true)
        XCTAssertTrue(button.hasPendingEvents, "an edge waits")
        XCTAssertTrue(readable())
        try rig.settle()
        XCTAssertFalse(button.hasPendingEvents, "read by the loop")
        XCTAssertFalse(readable())
        try rig.chip.setLevel(17, false)
        XCTAssertTrue(button.hasPendingEvents)
        button.release()
        XCTAssertFalse(button.hasPendingEvents, "a released request has none")
    }

    /// A request whose lines detect no edges never has events waiting.
    func testAnOutputHasNoPendingEvents() throws {
        let rig = try ManualRig()
        let led = try rig.gpio.request(27, .output(false))
        try led.setValue(true)
        XCTAssertFalse(led.hasPendingEvents)
    }

    func testSeveralLinesInOneRequestKeepTheirOrder() throws {
        let rig = try ManualRig()
        let req = try rig.gpio.request([4, 17, 22], .input(edges: .both))
        let log = EventLog()
        try req.schedule(on: rig.loop) { log.record($0) }
        try rig.chip.setLevel(22, true, at: rig.at(ms: 1))
        try rig.chip.setLevel(4, true, at: rig.at(ms: 2))
        try rig.chip.setLevel(17, true, at: rig.at(ms: 3))
        try rig.chip.setLevel(4, false, at: rig.at(ms: 4))
        try rig.settle()
        XCTAssertEqual(log.offsets, [22, 4, 17, 4])
        XCTAssertEqual(log.edges, [.rising, .rising, .rising, .falling])
        XCTAssertEqual(log.events.map(\.globalSequence), [1, 2, 3, 4])
        XCTAssertEqual(log.events.map(\.lineSequence), [1, 1, 1, 2])
    }

    func testBatchesAreBoundedByTheReservedBufferAndNothingIsLost() throws {
        let rig = try ManualRig(eventBufferSize: 256)
        let req = try rig.gpio.request(17, .input(edges: .both), eventBufferCapacity: 8)
        let log = EventLog()
        try req.schedule(on: rig.loop) { log.record($0) }
        try rig.chip.burst(17, edges: 20, spacing: .microseconds(10), from: rig.at(ms: 1))
        try rig.settle()
        XCTAssertEqual(log.batchSizes, [8, 8, 4], "a batch holds at most the reserved 8; the rest come next passes")
        XCTAssertEqual(log.events.count, 20)
        XCTAssertEqual(log.events.map(\.globalSequence), Array(1...20))
        XCTAssertEqual(log.edges, (0..<20).map { $0 % 2 == 0 ? .rising : .falling })
        XCTAssertTrue(zip(log.timestamps, log.timestamps.dropFirst()).allSatisfy { $0 < $1 })
        XCTAssertEqual(log.lost, 0)
    }

    func testEdgeFiltersReportOnlyTheAskedEdges() throws {
        let rig = try ManualRig()
        let rising = try rig.gpio.request(4, .input(edges: .rising))
        let falling = try rig.gpio.request(17, .input(edges: .falling))
        let logR = EventLog(), logF = EventLog()
        try rising.schedule(on: rig.loop) { logR.record($0) }
        try falling.schedule(on: rig.loop) { logF.record($0) }
        try rig.chip.burst(4, edges: 4, spacing: .milliseconds(1), from: rig.at(ms: 1))
        try rig.chip.burst(17, edges: 4, spacing: .milliseconds(1), from: rig.at(ms: 1))
        try rig.settle()
        XCTAssertEqual(logR.edges, [.rising, .rising])
        XCTAssertEqual(logF.edges, [.falling, .falling])
    }

    func testLatencyIsHandlerEntryMinusTheEdgeTimestamp() throws {
        let rig = try ManualRig()
        let req = try rig.gpio.request(17, .input(edges: .both))
        let log = EventLog()
        try req.schedule(on: rig.loop) { log.record($0) }
        // An edge stamped 5 ms ago, seen now.
        rig.clock.advance(by: .milliseconds(5))
        try rig.chip.setLevel(17, true, at: rig.start)
        try rig.settle()
        XCTAssertEqual(log.latencies, [.milliseconds(5)])
        XCTAssertEqual(req.statistics.maxLatency, .milliseconds(5))
    }

    func testRealClockEventsHaveBoundedPositiveLatency() throws {
        // Monotonic clock end to end (as with the kernel): only bounds, no exact timing.
        let loop = try makeLoop()
        let chip = try MockChip(label: "mono", lineCount: 8)
        let req = try chip.open().request(3, .input(edges: .both))
        let log = EventLog()
        try req.schedule(on: loop) { log.record($0) }
        let before = MonotonicInstant.now
        try chip.setLevel(3, true)
        _ = try loop.run(mode: .default, timeout: .seconds(3), returnAfterSourceHandled: true)
        XCTAssertEqual(log.events.count, 1)
        let e = try XCTUnwrap(log.events.first)
        XCTAssertGreaterThanOrEqual(e.timestamp, before)
        XCTAssertGreaterThanOrEqual(log.latencies[0], .zero)
        XCTAssertLessThan(log.latencies[0], .seconds(5))
    }

    func testEventsFromAnotherThreadWakeASleepingLoop() throws {
        let loop = try makeLoop()
        let chip = try MockChip(label: "threads", lineCount: 8)
        let req = try chip.open().request(1, .input(edges: .both))
        let log = EventLog()
        try req.schedule(on: loop) { batch in
            log.record(batch)
            if log.events.count >= 10 { loop.stop() }
        }
        let driver = JoinableThread {
            for i in 0..<10 {
                do { try chip.setLevel(1, i % 2 == 0) } catch { XCTFail("setLevel: \(error)") }
                usleep(200)
            }
        }
        // Deadlines: a broken wake-up fails in seconds, never hangs.
        let result = try loop.run(mode: .default, timeout: .seconds(5))
        XCTAssertTrue(driver.join(within: .seconds(5)), "the driver thread was still running after 5 s")
        XCTAssertEqual(result, .stopped)
        XCTAssertEqual(log.edges, (0..<10).map { $0 % 2 == 0 ? .rising : .falling })
        XCTAssertTrue(zip(log.timestamps, log.timestamps.dropFirst()).allSatisfy { $0 <= $1 })
    }
}
