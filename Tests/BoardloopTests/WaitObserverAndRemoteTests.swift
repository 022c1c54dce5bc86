import Boardloop
import BoardloopTestSupport
import BoardloopXCTestSupport
import Glibc
import Synchronization
import XCTest

/// Passes that do not sleep still notify the wait observers (as CF), and
/// a run applies what other threads asked for before it checks for an
/// empty mode.
final class WaitObserverAndRemoteTests: XCTestCase {
    /// A chain of perform requests, each posting the next from the loop's
    /// own thread: every pass has a request queued, so none sleeps, but
    /// each still calls beforeWaiting and afterWaiting (a chain of blocks
    /// must not starve the hooks that run before the loop would sleep).
    func testSelfRepostingBlocksDoNotStarveWaitObservers() throws {
        let loop = try makeLoop()
        try loop.add(farTimer(), mode: .default)
        let log = Log()
        try loop.add(RunLoopObserver(activities: [.beforeWaiting, .afterWaiting]) { _, a in log.add(a.description) }, mode: .default)
        let left = Cell(50)
        let waitsBefore = loop.waitCount
        @Sendable func step() {
            log.add("block")
            left.value -= 1
            if left.value == 0 {
                loop.stop()
            } else {
                _ = try? loop.perform(inModes: [.default], step)
            }
        }
        try loop.perform(inModes: [.default], step)
        let result = try loop.run(mode: .default, timeout: testDeadline)
        XCTAssertEqual(result, .stopped)
        XCTAssertEqual(left.value, 0)
        let before = log.entries.filter { $0 == "beforeWaiting" }.count
        let after = log.entries.filter { $0 == "afterWaiting" }.count
        XCTAssertGreaterThanOrEqual(before, 25, "beforeWaiting starved by a chain of blocks: \(log.entries.prefix(12))")
        XCTAssertEqual(before, after)
        // The observers come in CF's order: each beforeWaiting is followed by its afterWaiting.
        var open = false
        for e in log.entries where e != "block" {
            XCTAssertEqual(e == "beforeWaiting", !open, "out of order: \(log.entries.prefix(12))")
            open = e == "beforeWaiting"
        }
        // No pass slept: each wait was a zero-timeout poll (the run took one wait a pass at most).
        XCTAssertLessThanOrEqual(loop.waitCount - waitsBefore, UInt64(before + 2))
    }

    /// A stop from a beforeSources observer: the pass polls instead of
    /// sleeping, and notifies both wait observers first.
    func testStopPendingNotifiesWaitObservers() throws {
        let (loop, log) = try observedLoop()
        try loop.add(farTimer(), mode: .default)
        try loop.add(RunLoopObserver(activities: .beforeSources, order: 9) { _, _ in loop.stop() }, mode: .default)
        let start = MonotonicInstant.now
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .stopped)
        XCTAssertLessThan(MonotonicInstant.now - start, .seconds(5), "the pass slept with a stop pending")
        XCTAssertEqual(log.entries, ["entry", "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting", "exit"])
    }

    /// The mode's only source invalidated from another thread between two
    /// runs: the next run returns `.finished` without an entry or exit.
    func testModeEmptiedFromAnotherThreadFinishesWithoutObserverCalls() throws {
        let (loop, log) = try observedLoop()
        let pipe = Pipe()
        let port = PortSource(fd: pipe.readEnd) { _, _ in }
        try loop.add(port, mode: .default)
        JoinableThread { port.invalidate() }.join()
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .finished)
        XCTAssertEqual(log.entries, [])
        XCTAssertFalse(loop.contains(port, mode: .default))
    }
}
