import Glibc

/// A value behind a pthread mutex, for test and example code shared between
/// threads. pthread rather than `Synchronization.Mutex`: ThreadSanitizer
/// intercepts pthread locks and sees the ordering they create, while the
/// standard library's futex-based mutex is opaque to it, so code that uses
/// it reports false races under `--sanitize=thread`.
public final class Locked<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    public init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the lock held and the value lent to it.
    public func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
