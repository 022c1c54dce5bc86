import Boardloop
import BoardloopTestSupport
import CLinux
import Glibc
import Synchronization
import BoardloopXCTestSupport
import XCTest

/// The engine makes no heap allocation while running. Counted for real: the
/// CAllocationCounter interposer replaces malloc & co. in the test process
/// and counts calls made on the threads that opt in (the loop's thread and the
/// thread poking it from outside).
final class AllocationTests: XCTestCase {
    @inline(never) func blackHole<T>(_ x: T) { withExtendedLifetime(x) {} }

    func testCounterIsRealAndCountsAllocations() throws {
        try XCTSkipUnless(AllocationCounter.isActive, "malloc interposer not linked: a sanitizer build (TSan, ASan) owns malloc; the normal test run counts")
        let m = AllocationCounter.measure {
            for i in 0..<10 { blackHole([Int](repeating: i, count: 64 + i)) }
        }
        XCTAssertGreaterThanOrEqual(m.allocations, 10, "the counter must see ordinary Swift allocations")
    }

    func testSteadyStatePassesAllocateNothing() throws {
        try XCTSkipUnless(AllocationCounter.isActive, "malloc interposer not linked: a sanitizer build (TSan, ASan) owns malloc; the normal test run counts")
        let loop = try makeLoop()
        let other: RunLoopMode = "boardloop.alloc.other"

        // Every kind of item, everything the run path does.
        var passes = 0
        var target = 0
        var activities = 0
        let observer = RunLoopObserver(activities: .allActivities) { _, a in
            activities &+= 1
            if a == .beforeTimers {
                passes += 1
                if passes == target { loop.stop() }
            }
        }
        try loop.add(observer, mode: .common)

        let efd = bl_eventfd(0, 0)
        XCTAssertGreaterThanOrEqual(efd, 0)
        defer { close(efd) }
        var portDispatches = 0
        let custom = CustomSource(order: 1) {}
        let source2 = CustomSource(order: 2) {}
        var tick = 0
        let work = PerformWorkItem(modes: [.default, other]) {}
        let moved = RunLoopTimer(fireAt: .distantFuture) { _ in }
        let port = PortSource(fd: efd) { _, _ in
            var v: UInt64 = 0
            _ = bl_eventfd_read(efd, &v)
            portDispatches += 1
            custom.signal()
            // Re-arm: the port becomes ready again a few passes later via the timer.
        }
        let timer = RunLoopTimer(fireAt: loop.now, interval: .microseconds(50)) { _ in
            tick += 1
            _ = bl_eventfd_write(efd, 1)
            moved.fireDate = loop.now + .seconds(3600) // reschedule another timer
            // The poker thread posts too: on a loaded machine it can fill
            // the queue before the loop runs it, and a refusal is no failure.
            if tick % 4 == 0 { _ = try? loop.perform(work) }
            if tick % 16 == 0 {
                // A nested run in another mode, and back.
                _ = try! loop.run(mode: other, timeout: .zero)
            }
        }
        try loop.add(port, mode: .default)
        try loop.add(custom, mode: .common)
        try loop.add(source2, mode: .default)
        try loop.add(timer, mode: .default)
        try loop.add(moved, mode: .default)
        try loop.add(farTimer(), mode: other)
        let oneShots = RunLoopTimer(fireAt: loop.now, interval: .zero) { _ in }
        _ = oneShots

        // Another thread signals, wakes and posts from outside, counted too.
        let running = Atomic<Bool>(true)
        let counting = Atomic<Bool>(false)
        let otherDone = Atomic<Bool>(false)
        let poker = JoinableThread {
            var counted = false
            var n = 0
            while running.load(ordering: .acquiring) {
                if !counted && counting.load(ordering: .acquiring) {
                    AllocationCounter.beginCountingOnThisThread()
                    counted = true
                }
                source2.signal()
                loop.wakeUp()
                n &+= 1
                if n % 64 == 0 { _ = try? loop.perform(work) }
                sched_yield()
            }
            if counted { AllocationCounter.endCountingOnThisThread() }
            otherDone.store(true, ordering: .releasing)
        }

        // Warm up (first use of everything), then count 10,000 passes.
        target = 500
        XCTAssertEqual(try loop.run(mode: .default, timeout: .seconds(120)), .stopped)
        counting.store(true, ordering: .releasing)
        let warmTicks = tick, warmPorts = portDispatches, warmCustom = custom.performCount, warm2 = source2.performCount
        passes = 0
        target = 10_000
        AllocationCounter.reset()
        AllocationCounter.beginCountingOnThisThread()
        let result = try loop.run(mode: .default, timeout: .seconds(300))
        AllocationCounter.endCountingOnThisThread()
        let count = AllocationCounter.count
        running.store(false, ordering: .releasing)
        poker.join()

        XCTAssertEqual(result, .stopped)
        XCTAssertEqual(passes, 10_000)
        // Everything was exercised during the counted passes.
        XCTAssertGreaterThan(tick - warmTicks, 100, "timer fires")
        XCTAssertGreaterThan(portDispatches - warmPorts, 100, "port dispatches")
        XCTAssertGreaterThan(custom.performCount - warmCustom, 100, "custom source performs")
        XCTAssertGreaterThan(source2.performCount - warm2, 0, "cross-thread signals")
        XCTAssertGreaterThan(activities, 20_000, "observer callouts")
        XCTAssertEqual(count, 0, "heap allocations during 10,000 steady-state passes")
    }
}
