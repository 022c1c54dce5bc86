import Boardloop
import BoardloopTestSupport
import Glibc
import BoardloopXCTestSupport
import XCTest

/// Every capacity is checked at add/post time with a typed error that names
/// the capacity and its limit; nothing is changed by a refused call.
final class CapacityTests: XCTestCase {
    func testSources() throws {
        let loop = try makeLoop(capacities: .init(sources: 2))
        let pipe = Pipe()
        try loop.add(CustomSource {}, mode: .default)
        try loop.add(PortSource(fd: pipe.readEnd) { _, _ in }, mode: .default)
        // Custom and port sources share the limit.
        XCTAssertThrows(.capacityExceeded(.sources, limit: 2)) { () throws(RunLoopError) in try loop.add(CustomSource {}, mode: .default) }
        let extra = PortSource(fd: pipe.writeEnd, interest: .writable) { _, _ in }
        XCTAssertThrows(.capacityExceeded(.sources, limit: 2)) { () throws(RunLoopError) in try loop.add(extra, mode: .default) }
        XCTAssertNil(extra.runLoop)
        do throws(RunLoopError) {
            try loop.add(CustomSource {}, mode: .default)
            XCTFail("over capacity")
        } catch {
            XCTAssertEqual(error.description, "run loop capacity exceeded: sources (custom and port sources) is limited to 2 (raise BoardRunLoop.Capacities.sources when creating the loop)")
        }
    }

    func testFreedSlotsAreReused() throws {
        let loop = try makeLoop(capacities: .init(timers: 1))
        for _ in 0..<10 {
            let t = RunLoopTimer(fireAt: .distantFuture) { _ in }
            try loop.add(t, mode: .default)
            t.invalidate()
        }
    }

    func testTimers() throws {
        let loop = try makeLoop(capacities: .init(timers: 3))
        for _ in 0..<3 { try loop.add(farTimer(), mode: .default) }
        XCTAssertThrows(.capacityExceeded(.timers, limit: 3)) { () throws(RunLoopError) in try loop.add(farTimer(), mode: .default) }
    }

    func testObservers() throws {
        let loop = try makeLoop(capacities: .init(observers: 1))
        try loop.add(RunLoopObserver(activities: .entry) { _, _ in }, mode: .default)
        XCTAssertThrows(.capacityExceeded(.observers, limit: 1)) {
            () throws(RunLoopError) in try loop.add(RunLoopObserver(activities: .entry) { _, _ in }, mode: .default)
        }
    }

    func testModes() throws {
        let loop = try makeLoop(capacities: .init(modes: 2))
        try loop.add(farTimer(), mode: "second")
        let t = farTimer()
        XCTAssertThrows(.capacityExceeded(.modes, limit: 2)) { () throws(RunLoopError) in try loop.add(t, mode: "third") }
        XCTAssertNil(t.runLoop, "a refused add leaves the item untouched")
        XCTAssertThrows(.capacityExceeded(.modes, limit: 2)) { () throws(RunLoopError) in try loop.addCommonMode("third") }
        XCTAssertEqual(Set(loop.allModes), [.default, "second"])
    }

    func testPendingPerforms() throws {
        let loop = try makeLoop(capacities: .init(pendingPerforms: 4))
        try loop.add(farTimer(), mode: .default)
        for _ in 0..<4 { try loop.perform {} }
        XCTAssertThrows(.capacityExceeded(.pendingPerforms, limit: 4)) { () throws(RunLoopError) in try loop.perform {} }
        _ = try loop.run(mode: .default, timeout: .zero)
        for _ in 0..<4 { try loop.perform {} } // room again once they ran
    }

    /// More ready fds than one wait can report: nothing is lost, the rest are
    /// reported by the next waits.
    func testEventsPerWaitIsABatchSizeNotALimit() throws {
        let loop = try makeLoop(capacities: .init(eventsPerWait: 1))
        let pipes = (0..<6).map { _ in Pipe() }
        var got = 0
        for p in pipes {
            try loop.add(PortSource(fd: p.readEnd) { _, _ in
                _ = p.readByte()
                got += 1
            }, mode: .default)
            p.write([1])
        }
        XCTAssertTrue(try runUntil(loop, until: { got >= 6 }))
        XCTAssertEqual(got, 6)
    }

    func testInvalidCapacities() {
        XCTAssertThrows(.invalidArgument("BoardRunLoop.Capacities.sources is 0; it must be between 1 and 1048576")) {
            () throws(RunLoopError) in try makeLoop(capacities: .init(sources: 0))
        }
        XCTAssertThrows(.invalidArgument("BoardRunLoop.Capacities.modes is 65; it must be between 1 and 64")) {
            () throws(RunLoopError) in try makeLoop(capacities: .init(modes: 65))
        }
    }
}
