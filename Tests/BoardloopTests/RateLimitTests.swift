import Boardloop
import BoardloopTestSupport
import Glibc
import BoardloopXCTestSupport
import XCTest

final class RateLimitTests: XCTestCase {
    /// A port flooded with data, limited to 5 dispatches per 100 ms: each
    /// interval gets exactly 5, the rest stays in the kernel, nothing is lost
    /// or reordered, and the loop keeps serving its other sources meanwhile.
    func testPortHeldOverLimitLosesNothing() throws {
        let clock = ManualClock()
        let loop = try makeLoop(clock: .manual(clock))
        let pipe = Pipe()
        pipe.write(Array(1...20))
        var got: [UInt8] = []
        let port = PortSource(fd: pipe.readEnd) { _, _ in got.append(pipe.readByte()!) }
        port.rateLimit = try RateLimit(count: 5, per: .milliseconds(100))
        try loop.add(port, mode: .default)
        var ticks = 0
        try loop.add(RunLoopTimer(fireAt: loop.now + .milliseconds(10), interval: .milliseconds(10)) { _ in ticks += 1 }, mode: .default)

        try loop.advanceManualClock(by: .zero)
        XCTAssertEqual(got, [1, 2, 3, 4, 5])
        XCTAssertEqual(port.rateLimitHolds, 1)
        try loop.advanceManualClock(by: .milliseconds(99))
        XCTAssertEqual(got.count, 5, "held until the interval ends")
        XCTAssertEqual(ticks, 9, "the timer kept its schedule while the port was held")
        try loop.advanceManualClock(by: .milliseconds(1))
        XCTAssertEqual(got.count, 10)
        try loop.advanceManualClock(by: .milliseconds(300))
        XCTAssertEqual(got, Array(1...20))
        XCTAssertEqual(port.dispatchCount, 20)

        // Lifting the limit releases a held port at once.
        pipe.write(Array(21...40))
        try loop.advanceManualClock(by: .zero)
        XCTAssertEqual(got.count, 25)
        port.rateLimit = nil
        try loop.advanceManualClock(by: .zero)
        XCTAssertEqual(got, Array(1...40))
    }

    func testCustomSourceStaysSignalledWhileHeld() throws {
        let clock = ManualClock()
        let loop = try makeLoop(clock: .manual(clock))
        var performs: [MonotonicInstant] = []
        var source: CustomSource!
        source = CustomSource {
            performs.append(loop.now)
            source.signal() // always more work
        }
        source.rateLimit = try RateLimit(count: 2, per: .milliseconds(50))
        try loop.add(source, mode: .default)
        source.signal()
        let start = loop.now
        try loop.advanceManualClock(by: .milliseconds(120))
        XCTAssertEqual(performs, [start, start, start + .milliseconds(50), start + .milliseconds(50), start + .milliseconds(100), start + .milliseconds(100)])
        XCTAssertTrue(source.isSignalled)
        XCTAssertEqual(source.rateLimitHolds, 3)
        source = nil // its perform closure refers to it
    }

    // A pass walks a mode's custom sources only after a signal or when its
    // last walk left some signalled: the three ways a source stays or
    // becomes signalled without a new signal.

    func testCustomSourceHeldByItsRateLimitPerformsOnceReleasedWithoutANewSignal() throws {
        let clock = ManualClock()
        let loop = try makeLoop(clock: .manual(clock))
        var performs: [MonotonicInstant] = []
        let source = CustomSource { performs.append(loop.now) }
        source.rateLimit = try RateLimit(count: 1, per: .milliseconds(50))
        try loop.add(source, mode: .default)
        let start = loop.now
        source.signal()
        XCTAssertEqual(try loop.run(mode: .default, timeout: .zero), .timedOut)
        source.signal()  // over the limit: held, and no signal follows
        XCTAssertEqual(try loop.run(mode: .default, timeout: .zero), .timedOut)
        XCTAssertEqual(performs, [start])
        try loop.advanceManualClock(by: .milliseconds(60))
        XCTAssertEqual(performs, [start, start + .milliseconds(50)])
        XCTAssertFalse(source.isSignalled)
    }

    func testSourcesLeftSignalledByAReturnAfterOneHandledPerformOnTheNextRun() throws {
        let loop = try makeLoop()
        var order: [Int] = []
        let first = CustomSource(order: 1) { order.append(1) }
        let second = CustomSource(order: 2) { order.append(2) }
        try loop.add(first, mode: .default)
        try loop.add(second, mode: .default)
        first.signal()
        second.signal()
        XCTAssertEqual(try loop.run(mode: .default, timeout: .zero, returnAfterSourceHandled: true), .handledSource)
        XCTAssertEqual(order, [1])
        XCTAssertEqual(try loop.run(mode: .default, timeout: .zero, returnAfterSourceHandled: true), .handledSource)
        XCTAssertEqual(order, [1, 2])
    }

    func testASourceSignalledBeforeItJoinsAModePerformsOnThatModesNextPass() throws {
        let loop = try makeLoop()
        var performed = 0
        try loop.add(CustomSource {}, mode: .default)
        let late = CustomSource { performed += 1 }
        late.signal()
        // This pass walks the mode's sources after the signal; `late` is not one yet.
        XCTAssertEqual(try loop.run(mode: .default, timeout: .zero), .timedOut)
        try loop.add(late, mode: .default)
        XCTAssertEqual(try loop.run(mode: .default, timeout: .zero), .timedOut)
        XCTAssertEqual(performed, 1)
    }

    /// On the real clock, a port that is always ready: dispatches stay within
    /// the limit for the time that passed, and the loop still times out.
    func testRealClockStormIsBounded() throws {
        let loop = try makeLoop()
        let pipe = Pipe()
        pipe.write([UInt8](repeating: 1, count: 4096))
        let port = PortSource(fd: pipe.readEnd) { _, _ in _ = pipe.readByte() }
        port.rateLimit = try RateLimit(count: 10, per: .milliseconds(50))
        try loop.add(port, mode: .default)
        let start = loop.now
        XCTAssertEqual(try loop.run(mode: .default, timeout: .milliseconds(120)), .timedOut)
        let elapsed = (loop.now - start).nanosecondsClamped
        let windows = UInt64(elapsed / 50_000_000) + 1
        XCTAssertGreaterThanOrEqual(port.dispatchCount, 10)
        XCTAssertLessThanOrEqual(port.dispatchCount, 10 * windows)
    }
}
