import Boardloop
import BoardloopTestSupport
import Glibc
import Synchronization
import BoardloopXCTestSupport
import XCTest

/// The activity sequence of a pass for each case in the run loop guide,
/// asserted as exact ordered lists. Every scenario ends through an event the
/// test controls (a stop from a handler, a deadline with nothing else
/// pending), so the lists hold on a loaded machine.
final class ObserverSequenceTests: XCTestCase {
    func testTimerPass() throws {
        let (loop, log) = try observedLoop()
        let timer = RunLoopTimer(fireAt: loop.now + .milliseconds(5)) { _ in
            log.add("timer")
            loop.stop()
        }
        try loop.add(timer, mode: .default)
        try loop.add(farTimer(), mode: .default)
        let result = try loop.run(mode: .default, timeout: testDeadline)
        XCTAssertEqual(result, .stopped)
        XCTAssertEqual(log.entries, ["entry", "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting", "timer", "exit"])
    }

    func testCustomSourcePass() throws {
        let (loop, log) = try observedLoop()
        let source = CustomSource { log.add("source") }
        try loop.add(source, mode: .default)
        source.signal()
        let result = try loop.run(mode: .default, timeout: testDeadline, returnAfterSourceHandled: true)
        XCTAssertEqual(result, .handledSource)
        // A handled custom source makes the rest of the pass a poll: no sleep, no wait notifications.
        XCTAssertEqual(log.entries, ["entry", "beforeTimers", "beforeSources", "source", "exit"])
    }

    func testPortPassReadyBeforeSleep() throws {
        let (loop, log) = try observedLoop()
        let pipe = Pipe()
        let port = PortSource(fd: pipe.readEnd) { _, events in
            log.add("port \(events)")
            _ = pipe.readByte()
        }
        try loop.add(port, mode: .default)
        pipe.write([1])
        let result = try loop.run(mode: .default, timeout: testDeadline, returnAfterSourceHandled: true)
        XCTAssertEqual(result, .handledSource)
        // Guide step 5: a ready port goes straight to step 9, skipping 6-8.
        XCTAssertEqual(log.entries, ["entry", "beforeTimers", "beforeSources", "port [readable]", "exit"])
    }

    func testPortPassDuringSleep() throws {
        let (loop, log) = try observedLoop()
        let pipe = Pipe()
        let port = PortSource(fd: pipe.readEnd) { _, _ in
            log.add("port")
            _ = pipe.readByte()
        }
        try loop.add(port, mode: .default)
        let writer = JoinableThread { [writeEnd = pipe.writeEnd] in
            XCTAssertTrue(waitUntil { loop.isWaiting })
            var b: UInt8 = 7
            _ = write(writeEnd, &b, 1)
        }
        let result = try loop.run(mode: .default, timeout: testDeadline, returnAfterSourceHandled: true)
        writer.join()
        XCTAssertEqual(result, .handledSource)
        XCTAssertEqual(log.entries, ["entry", "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting", "port", "exit"])
    }

    func testWakeUpPass() throws {
        let (loop, log) = try observedLoop()
        try loop.add(farTimer(), mode: .default)
        let sleeps = Atomic<Int>(0)
        try loop.add(RunLoopObserver(activities: .beforeWaiting, order: 100) { _, _ in sleeps.add(1, ordering: .relaxed) }, mode: .default)
        let waker = JoinableThread {
            XCTAssertTrue(waitUntil { loop.isWaiting })
            loop.wakeUp()
            // The woken pass finds nothing to do and goes back to sleep.
            XCTAssertTrue(waitUntil { sleeps.load(ordering: .relaxed) == 2 && loop.isWaiting })
            loop.stop()
        }
        let result = try loop.run(mode: .default, timeout: testDeadline)
        waker.join()
        XCTAssertEqual(result, .stopped)
        XCTAssertEqual(log.entries, [
            "entry", "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting",
            "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting", "exit",
        ])
    }

    func testTimeout() throws {
        let (loop, log) = try observedLoop()
        try loop.add(farTimer(), mode: .default)
        let start = loop.now
        let result = try loop.run(mode: .default, timeout: .milliseconds(20))
        XCTAssertEqual(result, .timedOut)
        XCTAssertGreaterThanOrEqual(loop.now - start, .milliseconds(20))
        XCTAssertEqual(log.entries, ["entry", "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting", "exit"])
    }

    func testZeroTimeoutPolls() throws {
        let (loop, log) = try observedLoop()
        try loop.add(farTimer(), mode: .default)
        XCTAssertEqual(try loop.run(mode: .default, timeout: .zero), .timedOut)
        XCTAssertEqual(log.entries, ["entry", "beforeTimers", "beforeSources", "exit"])
    }

    func testStopFromEntryObserver() throws {
        let (loop, log) = try observedLoop()
        try loop.add(farTimer(), mode: .default)
        try loop.add(RunLoopObserver(activities: .entry, order: 1) { _, _ in loop.stop() }, mode: .default)
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .stopped)
        XCTAssertEqual(log.entries, ["entry", "exit"])
    }

    func testStopWhileNotRunningIsForgottenAsInCF() throws {
        let (loop, log) = try observedLoop()
        try loop.add(farTimer(), mode: .default)
        loop.stop()
        XCTAssertEqual(try loop.run(mode: .default, timeout: .zero), .timedOut)
        XCTAssertEqual(log.entries, ["entry", "beforeTimers", "beforeSources", "exit"])
    }

    func testEmptyModeFinishesWithoutNotifications() throws {
        let loop = try makeLoop()
        let log = Log()
        // Observers alone do not make a mode non-empty.
        try recordActivities(loop, mode: "empty", into: log)
        XCTAssertEqual(try loop.run(mode: "empty", timeout: testDeadline), .finished)
        XCTAssertEqual(try loop.run(mode: "never-used", timeout: testDeadline), .finished)
        XCTAssertEqual(log.entries, [])
    }

    func testModeEmptiedByOneShotTimerFinishes() throws {
        let (loop, log) = try observedLoop()
        let timer = RunLoopTimer(fireAt: loop.now + .milliseconds(2)) { _ in log.add("timer") }
        try loop.add(timer, mode: .default)
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .finished)
        XCTAssertFalse(timer.isValid)
        XCTAssertEqual(log.entries, ["entry", "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting", "timer", "exit"])
    }

    func testObserverOrderSubsetsAndOneShot() throws {
        let loop = try makeLoop()
        let log = Log()
        try loop.add(farTimer(), mode: .default)
        let late = RunLoopObserver(activities: [.entry, .exit], order: 10) { _, a in log.add("late \(a)") }
        let early = RunLoopObserver(activities: [.entry, .exit], order: -1) { _, a in log.add("early \(a)") }
        let once = RunLoopObserver(activities: .allActivities, repeats: false) { _, a in log.add("once \(a)") }
        let sources = RunLoopObserver(activities: .beforeSources) { _, a in log.add("only \(a)") }
        for o in [late, early, once, sources] { try loop.add(o, mode: .default) }
        _ = try loop.run(mode: .default, timeout: .zero)
        _ = try loop.run(mode: .default, timeout: .zero)
        XCTAssertFalse(once.isValid)
        XCTAssertEqual(log.entries, [
            "early entry", "once entry", "late entry", "only beforeSources", "early exit", "late exit",
            "early entry", "late entry", "only beforeSources", "early exit", "late exit",
        ])
    }

    func testObserverRemovedDuringNotificationIsNotCalled() throws {
        let loop = try makeLoop()
        let log = Log()
        try loop.add(farTimer(), mode: .default)
        var second: RunLoopObserver!
        let first = RunLoopObserver(activities: .entry, order: 0) { _, _ in
            log.add("first")
            second.invalidate()
        }
        second = RunLoopObserver(activities: .entry, order: 1) { _, _ in log.add("second") }
        try loop.add(first, mode: .default)
        try loop.add(second, mode: .default)
        _ = try loop.run(mode: .default, timeout: .zero)
        XCTAssertEqual(log.entries, ["first"])
    }
}
