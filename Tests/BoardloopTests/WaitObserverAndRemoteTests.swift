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

/// `invalidateAndWait()` from another thread: once it returns, the handler
/// never starts again. Plain `invalidate()` cannot promise that: a loop
/// between its check for the invalidation and the call starts the handler
/// once more.
final class InvalidateAndWaitTests: XCTestCase {
    /// What one item's handler saw: whether it started after the
    /// invalidating thread's call returned.
    final class Probe: @unchecked Sendable {
        let returned = Atomic<Bool>(false)
        let starts = Atomic<Int>(0)
    }

    enum Kind: CaseIterable { case port, custom, timer }

    /// The worker's loop spins on the item (an always-readable fd, a source
    /// that signals itself again, a timer always due), so it is often
    /// between its check and the call when the other thread invalidates.
    func lateStarts(_ kind: Kind, rounds: Int) throws -> (late: Int, timedOut: Int) {
        let worker = try LoopThread.start(name: "invalidate") { loop in try loop.add(farTimer(), mode: .default) }
        defer { worker.stopAndJoin() }
        let loop = try XCTUnwrap(worker.loop)
        let pipe = Pipe()
        pipe.write([1])  // readable until read; never read
        let ready = pipe.readEnd
        let late = Atomic<Int>(0)
        var timedOut = 0
        for _ in 0..<rounds {
            let probe = Probe()
            let made = Locked<(() -> Bool)?>(nil)
            try loop.performAndWait {
                @Sendable func record() {
                    if probe.returned.load(ordering: .acquiring) { late.add(1, ordering: .relaxed) }
                    probe.starts.add(1, ordering: .relaxed)
                }
                do {
                    switch kind {
                    case .port:
                        let s = PortSource(fd: ready) { _, _ in record() }
                        try loop.add(s, mode: .default)
                        made.withLock { $0 = { s.invalidateAndWait(timeout: testDeadline) } }
                    case .custom:
                        let box = Cell<CustomSource?>(nil)
                        let s = CustomSource {
                            record()
                            box.value?.signal()
                        }
                        box.value = s
                        try loop.add(s, mode: .default)
                        s.signal()
                        made.withLock {
                            $0 = {
                                defer { box.value = nil }  // (after the wait: the loop no longer reads it)
                                return s.invalidateAndWait(timeout: testDeadline)
                            }
                        }
                    case .timer:
                        let t = RunLoopTimer(fireAt: loop.now, interval: .nanoseconds(1)) { _ in record() }
                        try loop.add(t, mode: .default)
                        made.withLock { $0 = { t.invalidateAndWait(timeout: testDeadline) } }
                    }
                } catch { XCTFail("\(error)") }
            }
            let invalidate = try XCTUnwrap(made.withLock { $0 })
            XCTAssertTrue(waitUntil { probe.starts.load(ordering: .relaxed) > 0 })
            if !invalidate() { timedOut += 1 }
            probe.returned.store(true, ordering: .releasing)
        }
        // The last item gets its chance to start late too.
        try loop.performAndWait {}
        return (late.load(ordering: .relaxed), timedOut)
    }

    func testNoHandlerStartsAfterInvalidateAndWaitReturns() throws {
        for kind in Kind.allCases {
            let r = try lateStarts(kind, rounds: 4000)
            XCTAssertEqual(r.late, 0, "\(kind): handler started after invalidateAndWait() returned")
            XCTAssertEqual(r.timedOut, 0, "\(kind)")
        }
    }

    /// On the owner's thread it is `invalidate()`: it returns at once, even
    /// from the item's own handler.
    func testOnTheOwnerThreadItIsInvalidate() throws {
        let loop = try makeLoop()
        try loop.add(farTimer(), mode: .default)
        var calls = 0
        let timer = RunLoopTimer(fireAt: loop.now, interval: .milliseconds(1)) { t in
            calls += 1
            XCTAssertTrue(t.invalidateAndWait())
            XCTAssertFalse(t.isValid)
        }
        try loop.add(timer, mode: .default)
        _ = try loop.run(mode: .default, timeout: .milliseconds(20))
        XCTAssertEqual(calls, 1)
        let unscheduled = farTimer()
        XCTAssertTrue(unscheduled.invalidateAndWait())
        XCTAssertFalse(unscheduled.isValid)
    }

    /// A loop that never runs again: the wait gives up at its timeout and
    /// says so; the loop's end releases a waiter without one.
    func testWaitEndsAtTimeoutOrAtTheLoopsEnd() throws {
        let started = Atomic<Bool>(false)
        let release = Atomic<Bool>(false)
        let holder = Locked<RunLoopTimer?>(nil)
        let owner = JoinableThread {
            let loop = try! BoardRunLoop()
            let t = farTimer()
            try! loop.add(t, mode: .default)
            holder.withLock { $0 = t }
            started.store(true, ordering: .releasing)
            let end = MonotonicInstant.now + testDeadline
            while !release.load(ordering: .acquiring) && MonotonicInstant.now < end { usleep(1000) }
            // The thread exits without running the loop again: its loop ends.
        }
        XCTAssertTrue(waitUntil { started.load(ordering: .acquiring) })
        let timer = try XCTUnwrap(holder.withLock { $0 })
        XCTAssertFalse(timer.invalidateAndWait(timeout: .milliseconds(20)))
        let waiter = JoinableThread { XCTAssertTrue(timer.invalidateAndWait()) }
        usleep(10_000)
        release.store(true, ordering: .releasing)
        owner.join()
        XCTAssertTrue(waiter.join(within: testDeadline))
        XCTAssertFalse(timer.isValid)
    }
}
