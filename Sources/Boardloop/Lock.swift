import Glibc

/// A pthread mutex for the few places the engine shares state across
/// threads (the perform queue, the manual clock's loop list). pthread rather
/// than `Synchronization.Mutex`: ThreadSanitizer intercepts pthread locks and
/// so sees the ordering they create; the standard library's futex-based
/// mutex is opaque to it and reports false races. Uncontended, both cost the
/// same; neither allocates after creation.
final class Lock: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

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
    func withLock<R>(_ body: () throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
