import Glibc

/// A pthread mutex for the few places the engine shares state across
/// threads (the perform queue, the manual clock's loop list). pthread rather
/// than `Synchronization.Mutex`: ThreadSanitizer intercepts pthread locks and
/// so sees the ordering they create; the standard library's futex-based
/// mutex is opaque to it and reports false races. Uncontended, both cost the
/// same; neither allocates after creation.
class Lock: @unchecked Sendable {
    let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let rc = pthread_mutex_init(mutex, nil)
        precondition(rc == 0, "boardloop: pthread_mutex_init failed (\(rc))")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    @inline(__always)
    final func withLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}

/// A mutex with a condition variable on CLOCK_MONOTONIC, for the places a
/// thread must sleep until another changes shared state (a sender waiting for
/// a free message slot, a requester waiting for its reply, a worker's start).
final class Monitor: Lock, @unchecked Sendable {
    private let cond: UnsafeMutablePointer<pthread_cond_t>

    override init() {
        cond = .allocate(capacity: 1)
        cond.initialize(to: pthread_cond_t())
        var attr = pthread_condattr_t()
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        pthread_cond_init(cond, &attr)
        pthread_condattr_destroy(&attr)
        super.init()
    }

    deinit {
        pthread_cond_destroy(cond)
        cond.deallocate()
    }

    /// With the lock held: sleeps until signalled or `deadline` (CLOCK_MONOTONIC
    /// ns; nil = no deadline). Returns false when the deadline passed.
    func wait(until deadline: UInt64?) -> Bool {
        guard let deadline else {
            pthread_cond_wait(cond, mutex)
            return true
        }
        var ts = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        return pthread_cond_timedwait(cond, mutex, &ts) != ETIMEDOUT
    }

    /// Wakes every waiter (call with or without the lock held).
    func broadcast() { pthread_cond_broadcast(cond) }
}
