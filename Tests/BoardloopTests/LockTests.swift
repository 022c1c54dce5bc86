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
}
