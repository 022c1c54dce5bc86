@testable import Boardloop
import BoardloopTestSupport
import XCTest

/// The futex lock the perform queue takes on every post and take: mutual
/// exclusion under contention, and a waiter that went to sleep in the
/// kernel is woken by the unlock.
final class LockTests: XCTestCase {
    private final class Counter: @unchecked Sendable {
        let lock = FutexLock()
        var value = 0
        var flag = false
    }

    func testFutexLockKeepsACountExactWhenFourThreadsContend() {
        let c = Counter()
        let perThread = 50_000
        let threads = (0..<4).map { _ in
            JoinableThread {
                for _ in 0..<perThread { c.lock.withLock { c.value += 1 } }
            }
        }
        for t in threads { XCTAssertTrue(t.join(within: .seconds(60)), "a thread never finished: a lost wake-up") }
        XCTAssertEqual(c.lock.withLock { c.value }, 4 * perThread)
    }

    func testFutexLockWakesAWaiterThatFoundItHeld() {
        let c = Counter()
        var waiter: JoinableThread?
        c.lock.withLock {
            waiter = JoinableThread { c.lock.withLock { c.flag = true } }
            // The waiter marks the lock contended once it gave up spinning
            // and sleeps (or is about to) until the unlock below.
            XCTAssertTrue(waitUntil(timeout: .seconds(20)) { c.lock.isContended }, "the waiter never marked the lock")
            XCTAssertFalse(c.flag, "the waiter got in while the lock was held")
        }
        XCTAssertTrue(waiter!.join(within: .seconds(20)), "the unlock did not wake the sleeping waiter")
        XCTAssertTrue(c.lock.withLock { c.flag })
        XCTAssertFalse(c.lock.isContended, "the waiter's unlock left the lock marked")
    }

    // MARK: FutexMonitor (a message port's lock and condition)

    private final class Box: @unchecked Sendable {
        let monitor = FutexMonitor()
        var waiting = 0
        var flag = false
        var slot: Int? = nil
        var received = 0
    }

    private static func far() -> UInt64 { MonotonicClock.nanoseconds + 600 * 1_000_000_000 }

    func testFutexMonitorBroadcastWakesASleepingWaiter() {
        let b = Box()
        let waiter = JoinableThread {
            b.monitor.withLock {
                b.waiting += 1
                while !b.flag { b.monitor.wait(until: Self.far()) }
                b.waiting -= 1
            }
        }
        // Seen under the lock, the count means the waiter released it in
        // wait: it sleeps, or is about to with the change count it read.
        XCTAssertTrue(waitUntil { b.monitor.withLock { b.waiting == 1 } }, "the waiter never waited")
        b.monitor.withLock {
            b.flag = true
            b.monitor.broadcast()
        }
        XCTAssertTrue(waiter.join(within: .seconds(60)), "the broadcast did not wake the waiter")
    }

    /// A one-slot hand-off, 20,000 items each way through the slot, both
    /// sides waiting with a deadline ten minutes off: a lost wake-up would
    /// leave one of them asleep.
    func testFutexMonitorHandOffLosesNoWakeUp() {
        let b = Box()
        let n = 20_000
        let consumer = JoinableThread {
            for i in 0..<n {
                b.monitor.withLock {
                    while b.slot == nil { b.monitor.wait(until: Self.far()) }
                    if b.slot == i { b.received += 1 }
                    b.slot = nil
                    b.monitor.broadcast()
                }
            }
        }
        let producer = JoinableThread {
            for i in 0..<n {
                b.monitor.withLock {
                    while b.slot != nil { b.monitor.wait(until: Self.far()) }
                    b.slot = i
                    b.monitor.broadcast()
                }
            }
        }
        XCTAssertTrue(producer.join(within: .seconds(120)), "the producer never finished: a lost wake-up")
        XCTAssertTrue(consumer.join(within: .seconds(120)), "the consumer never finished: a lost wake-up")
        XCTAssertEqual(b.monitor.withLock { b.received }, n)
    }

    /// With nobody to broadcast, a wait returns by its deadline.
    func testFutexMonitorWaitWithoutABroadcastEndsAtItsDeadline() {
        let b = Box()
        let waiter = JoinableThread {
            b.monitor.withLock { b.monitor.wait(until: MonotonicClock.nanoseconds + 20_000_000) }
        }
        XCTAssertTrue(waiter.join(within: .seconds(60)), "the wait outlived its deadline")
    }
}
