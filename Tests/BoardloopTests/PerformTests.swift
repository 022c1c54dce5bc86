import Boardloop
import BoardloopTestSupport
import Glibc
import Synchronization
import BoardloopXCTestSupport
import XCTest

final class PerformTests: XCTestCase {
    final class Recorder: @unchecked Sendable {
        let lock = Locked<[Int]>([])
        func add(_ i: Int) { lock.withLock { $0.append(i) } }
        var values: [Int] { lock.withLock { $0 } }
    }

    func testFIFOAndAllQueuedRunInOnePass() throws {
        let loop = try makeLoop()
        try loop.add(farTimer(), mode: .default)
        let r = Recorder()
        var pass = 0
        try loop.add(RunLoopObserver(activities: .beforeTimers) { _, _ in pass += 1 }, mode: .default)
        for i in 0..<100 {
            try loop.perform { r.add(i) }
        }
        _ = try loop.run(mode: .default, timeout: .zero)
        XCTAssertEqual(r.values, Array(0..<100))
        XCTAssertEqual(pass, 1)
    }

    func testPerformPostedDuringPerformRunsInALaterStep() throws {
        let loop = try makeLoop()
        try loop.add(farTimer(), mode: .default)
        let log = Log()
        try loop.perform {
            log.add("first")
            try! loop.perform { log.add("posted by first") }
            log.add("first done")
        }
        _ = try loop.run(mode: .default, timeout: .zero)
        XCTAssertEqual(log.entries, ["first", "first done", "posted by first"])
    }

    func testModes() throws {
        let loop = try makeLoop()
        let other: RunLoopMode = "boardloop.other"
        try loop.add(farTimer(), mode: .default)
        // A mode exists once something was added to it (an observer, which
        // alone leaves it empty); running a mode that never existed finishes.
        try loop.add(RunLoopObserver(activities: .entry) { _, _ in }, mode: other)
        let log = Log()
        try loop.perform(inModes: [other]) { log.add("other") }
        try loop.perform(inModes: [.common]) { log.add("common") }
        try loop.perform(inModes: [.default, other]) { log.add("both") }
        _ = try loop.run(mode: .default, timeout: .zero)
        XCTAssertEqual(log.entries, ["common", "both"])
        // A mode with nothing but a pending perform is not empty: the run performs it.
        XCTAssertEqual(try loop.run(mode: other, timeout: .zero), .timedOut)
        XCTAssertEqual(log.entries, ["common", "both", "other"])
        XCTAssertEqual(try loop.run(mode: other, timeout: .zero), .finished)
    }

    func testDelayOnManualClock() throws {
        let clock = ManualClock()
        let loop = try makeLoop(clock: .manual(clock))
        try loop.add(farTimer(), mode: .default)
        let start = loop.now
        let ranAt = Cell<MonotonicInstant?>(nil)
        try loop.perform(after: .milliseconds(50)) { ranAt.value = loop.now }
        try loop.advanceManualClock(by: .milliseconds(49))
        XCTAssertNil(ranAt.value)
        try loop.advanceManualClock(by: .milliseconds(10))
        XCTAssertEqual(ranAt.value, start + .milliseconds(50))
    }

    func testZeroNegativeAndSubNanosecondDelaysRunAtOnceAndLongOnesWait() throws {
        let clock = ManualClock()
        let loop = try makeLoop(clock: .manual(clock))
        try loop.add(farTimer(), mode: .default)
        let log = Log()
        try loop.perform(after: .zero) { log.add("zero") }
        try loop.perform(after: .nanoseconds(-5)) { log.add("negative") }
        try loop.perform(after: .seconds(-3_000_000_000)) { log.add("very negative") }
        try loop.perform(after: Duration(secondsComponent: 0, attosecondsComponent: 1)) { log.add("one attosecond") }
        try loop.perform(after: .nanoseconds(1)) { log.add("one ns") }
        try loop.perform(after: .seconds(3_000_000_000)) { log.add("never") }
        _ = try loop.run(mode: .default, timeout: .zero)
        XCTAssertEqual(log.entries, ["zero", "negative", "very negative", "one attosecond"])
        try loop.advanceManualClock(by: .nanoseconds(1))
        XCTAssertEqual(log.entries, ["zero", "negative", "very negative", "one attosecond", "one ns"])
    }

    func testDelayOnRealClockWakesTheLoop() throws {
        let loop = try makeLoop()
        try loop.add(farTimer(), mode: .default)
        let start = loop.now
        let ranAt = Cell<MonotonicInstant?>(nil)
        try loop.perform(after: .milliseconds(20)) {
            ranAt.value = loop.now
            loop.stop()
        }
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .stopped)
        XCTAssertGreaterThanOrEqual(ranAt.value! - start, .milliseconds(20))
    }

    func testCancel() throws {
        let loop = try makeLoop()
        try loop.add(farTimer(), mode: .default)
        let log = Log()
        let a = try loop.perform { log.add("a") }
        let b = try loop.perform { log.add("b") }
        try loop.perform { log.add("c") }
        XCTAssertTrue(loop.cancel(b))
        XCTAssertFalse(loop.cancel(b), "cancelling twice")
        _ = try loop.run(mode: .default, timeout: .zero)
        XCTAssertEqual(log.entries, ["a", "c"])
        XCTAssertFalse(loop.cancel(a), "already ran")
        // A stale token does not cancel the slot's next request.
        let d = try loop.perform { log.add("d") }
        XCTAssertFalse(loop.cancel(a))
        _ = d
        _ = try loop.run(mode: .default, timeout: .zero)
        XCTAssertEqual(log.entries, ["a", "c", "d"])
    }

    func testCancelFromAnotherThread() throws {
        let loop = try makeLoop()
        try loop.add(farTimer(), mode: .default)
        let log = Log()
        let token = try loop.perform(after: .seconds(3600)) { log.add("never") }
        let t = JoinableThread { XCTAssertTrue(loop.cancel(token)) }
        t.join()
        XCTAssertEqual(try loop.run(mode: .default, timeout: .zero), .timedOut)
        XCTAssertEqual(log.entries, [])
    }

    func testPerformAndWaitAcrossThreads() throws {
        let loop = try makeLoop()
        try loop.add(farTimer(), mode: .default)
        let value = Atomic<Int>(0)
        let ranOnOwner = Atomic<Bool>(false)
        let owner = loop.ownerThread
        let poster = JoinableThread {
            for _ in 0..<50 {
                try! loop.performAndWait {
                    value.add(1, ordering: .relaxed)
                    ranOnOwner.store(loop.isOwnedByCurrentThread, ordering: .relaxed)
                }
            }
            // Each wait returned only after its block ran.
            XCTAssertEqual(value.load(ordering: .relaxed), 50)
            loop.stop()
        }
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .stopped)
        poster.join()
        XCTAssertEqual(value.load(ordering: .relaxed), 50)
        XCTAssertTrue(ranOnOwner.load(ordering: .relaxed))
        _ = owner
    }

    func testPerformAndWaitTimesOutAndFreesItsSlot() throws {
        let loop = try makeLoop(capacities: .init(pendingPerforms: 2))
        try loop.add(farTimer(), mode: .default)
        let ran = Atomic<Int>(0)
        let t = JoinableThread {
            for _ in 0..<5 {
                do {
                    try loop.performAndWait(timeout: .milliseconds(5)) { ran.add(1, ordering: .relaxed) }
                    XCTFail("the loop is not running: the wait cannot succeed")
                } catch let error as RunLoopError {
                    XCTAssertEqual(error, .waitTimedOut(operation: "BoardRunLoop.performAndWait"))
                } catch {
                    XCTFail("\(error)")
                }
            }
        }
        t.join()
        // Five timed-out waits on a queue of two: every slot was given back.
        XCTAssertNoThrow(try loop.perform {})
        XCTAssertNoThrow(try loop.perform {})
        _ = try loop.run(mode: .default, timeout: .zero)
        XCTAssertEqual(ran.load(ordering: .relaxed), 0, "a timed-out request must not run later")
    }

    func testPerformAndWaitOnOwnThread() throws {
        let loop = try makeLoop()
        try loop.add(farTimer(), mode: .default)
        XCTAssertThrows(.wouldDeadlock(operation: "BoardRunLoop.performAndWait", mode: "kCFRunLoopDefaultMode", running: nil)) {
            () throws(RunLoopError) in try loop.performAndWait {}
        }
        let inline = Cell(false)
        var error: RunLoopError?
        let s2 = CustomSource {
            try! loop.performAndWait { inline.value = true }
            do throws(RunLoopError) { try loop.performAndWait(inModes: ["boardloop.other"]) {} } catch let e { error = e }
        }
        try loop.add(s2, mode: .default)
        s2.signal()
        _ = try loop.run(mode: .default, timeout: .zero)
        XCTAssertTrue(inline.value)
        XCTAssertEqual(error, .wouldDeadlock(operation: "BoardRunLoop.performAndWait", mode: "boardloop.other", running: "kCFRunLoopDefaultMode"))
        XCTAssertTrue(error!.description.contains("would wait forever"))
    }

    /// Several threads post as fast as they can into a small queue, retrying
    /// when it is full; every request runs exactly once, each poster's in order.
    func testStressSeveralPostersLoseNothing() throws {
        let posters = 4
        let perPoster = 5_000
        let loop = try makeLoop(capacities: .init(pendingPerforms: 64))
        try loop.add(farTimer(), mode: .default)
        let seen = UnsafeMutablePointer<Int>.allocate(capacity: posters)
        seen.initialize(repeating: 0, count: posters)
        defer { seen.deallocate() }
        nonisolated(unsafe) let counters = seen
        let outOfOrder = Atomic<Int>(0)
        let refused = Atomic<Int>(0)
        let finished = Atomic<Int>(0)
        var threads: [JoinableThread] = []
        for p in 0..<posters {
            threads.append(JoinableThread {
                // A loop that stopped taking requests ends the test at the
                // run's own deadline (its counts then fail), not never.
                let end = MonotonicInstant.now + .seconds(120)
                for i in 0..<perPoster {
                    while MonotonicInstant.now < end {
                        do {
                            try loop.perform {
                                // Runs on the loop's thread only: no lock needed.
                                if counters[p] != i { outOfOrder.add(1, ordering: .relaxed) }
                                counters[p] = i + 1
                            }
                            break
                        } catch {
                            XCTAssertTrue((error as? RunLoopError)?.isCapacity == true, "\(error)")
                            refused.add(1, ordering: .relaxed)
                            sched_yield()
                        }
                    }
                }
                if finished.add(1, ordering: .acquiringAndReleasing).newValue == posters {
                    // FIFO: the stop runs after every request posted before it.
                    while (try? loop.perform { loop.stop() }) == nil && MonotonicInstant.now < end { sched_yield() }
                }
            })
        }
        XCTAssertEqual(try loop.run(mode: .default, timeout: .seconds(120)), .stopped)
        for t in threads { t.join() }
        for p in 0..<posters { XCTAssertEqual(seen[p], perPoster, "poster \(p)") }
        XCTAssertEqual(outOfOrder.load(ordering: .relaxed), 0)
    }

    func testWorkItemPostsWithoutRebuilding() throws {
        let loop = try makeLoop()
        try loop.add(farTimer(), mode: .default)
        let count = Atomic<Int>(0)
        let item = PerformWorkItem { count.add(1, ordering: .relaxed) }
        for _ in 0..<10 { try loop.perform(item) }
        _ = try loop.run(mode: .default, timeout: .zero)
        XCTAssertEqual(count.load(ordering: .relaxed), 10)
    }

    // MARK: Posts from the owner thread

    func testAWorkItemRepostingItselfWritesNoWakeUpAndRunsEveryTime() throws {
        let loop = try makeLoop()
        try loop.add(RunLoopTimer(fireAt: .distantFuture) { _ in }, mode: .default)
        final class State: @unchecked Sendable { var runs = 0; var item: PerformWorkItem? }
        let st = State()
        st.item = PerformWorkItem {
            st.runs += 1
            if st.runs == 100 { loop.stop() } else { _ = try? loop.perform(st.item!) }
        }
        try loop.perform(st.item!)
        let writes = loop.wakeUpWriteCount
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .stopped)
        XCTAssertEqual(st.runs, 100)
        XCTAssertEqual(loop.wakeUpWriteCount - writes, 0, "the owner's own posts during a run need no wake-up")
        st.item = nil
    }

    func testARequestPostedByABeforeWaitingObserverRunsWithoutSleeping() throws {
        let loop = try makeLoop()
        try loop.add(RunLoopTimer(fireAt: .distantFuture) { _ in }, mode: .default)
        var posted = false
        let observer = RunLoopObserver(activities: .beforeWaiting) { _, _ in
            guard !posted else { return }
            posted = true
            _ = try? loop.perform { loop.stop() }
        }
        try loop.add(observer, mode: .default)
        // Were the request left for a wake-up that never comes, the run
        // would sleep to its deadline and time out.
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .stopped)
        XCTAssertTrue(posted)
    }

    func testARequestPostedForTheOuterRunDuringANestedRunIsNotSleptThrough() throws {
        let loop = try makeLoop()
        try loop.add(RunLoopTimer(fireAt: .distantFuture) { _ in }, mode: .default)
        try loop.add(RunLoopTimer(fireAt: .distantFuture) { _ in }, mode: "inner")
        final class Order: @unchecked Sendable { var steps: [String] = [] }
        let order = Order()
        try loop.perform {
            _ = try? loop.perform { order.steps.append("outer request"); loop.stop() }
            order.steps.append("nested run")
            // The nested run's passes must not hide the post above from
            // the outer pass that is about to decide whether to sleep.
            _ = try? loop.run(mode: "inner", timeout: .zero)
        }
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .stopped)
        XCTAssertEqual(order.steps, ["nested run", "outer request"])
    }
}
