import CLinux
import Glibc

/// A pthread mutex for the places the engine shares state across threads
/// off the hot path (the manual clock's loop list, the item binding lock,
/// the message port registry), and the base of `Monitor`'s condition
/// variable. pthread rather than `Synchronization.Mutex`: ThreadSanitizer
/// intercepts pthread locks and so sees the ordering they create; the
/// standard library's futex-based mutex is opaque to it (its atomics are in
/// the uninstrumented standard library) and reports false races. Neither
/// allocates after creation. The perform queue takes `FutexLock`, below.
/// The daemon and the mock chips use it too (package access), so the
/// package has one lock for shared state off the hot path. The mutex lives
/// on the heap: a `pthread_mutex_t` stored inline in a Swift object has no
/// address Swift promises to keep.
package class Lock: @unchecked Sendable {
    /// The mutex (package access: a module that takes the lock on a hot path
    /// wraps it in a `withLock` of its own, which the compiler specialises
    /// there; this generic one is not inlined across modules).
    package let mutex: UnsafeMutablePointer<pthread_mutex_t>

    /// A recursive lock may be taken again by the thread that holds it (the
    /// mock chips' callbacks re-enter them).
    package init(recursive: Bool = false) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        var attr = pthread_mutexattr_t()
        pthread_mutexattr_init(&attr)
        if recursive { pthread_mutexattr_settype(&attr, Int32(PTHREAD_MUTEX_RECURSIVE)) }
        let rc = pthread_mutex_init(mutex, &attr)
        pthread_mutexattr_destroy(&attr)
        precondition(rc == 0, "boardloop: pthread_mutex_init failed (\(rc))")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    @inline(__always)
    package final func withLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}

/// A value behind a `Lock`, for state the package's other layers share
/// between threads off the hot path (the daemon's results handed back from a
/// loop's thread, its safe outputs). Package access: the package's one home
/// for a locked value, so no module wraps a pthread mutex of its own.
package final class LockedValue<T>: @unchecked Sendable {
    private let lock = Lock()
    private var value: T
    package init(_ v: T) { value = v }
    package func get() -> T { lock.withLock { value } }
    package func set(_ v: T) { lock.withLock { value = v } }
    package func update(_ body: (inout T) -> Void) { lock.withLock { body(&value) } }
    /// Runs `body` with the lock held and the value lent to it.
    package func withLock<R, E: Error>(_ body: (inout T) throws(E) -> R) throws(E) -> R {
        try lock.withLock { () throws(E) -> R in try body(&value) }
    }
}

/// A mutex with a condition variable on CLOCK_MONOTONIC, for the places a
/// thread must sleep until another changes shared state (a sender waiting for
/// a free message slot, a requester waiting for its reply, a worker's start).
///
/// It declares no initializer: it inherits `Lock`'s (`Monitor()` is a
/// non-recursive one), its condition made as its property's initial value.
/// An initializer of its own would make the compiler add a trapping stub
/// for the inherited one, which the compiler's recursion check then
/// reports, wrongly, as infinite recursion.
final class Monitor: Lock, @unchecked Sendable {
    private let cond: UnsafeMutablePointer<pthread_cond_t> = Monitor.makeCondition()

    private static func makeCondition() -> UnsafeMutablePointer<pthread_cond_t> {
        let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
        cond.initialize(to: pthread_cond_t())
        var attr = pthread_condattr_t()
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        pthread_cond_init(cond, &attr)
        pthread_condattr_destroy(&attr)
        return cond
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

/// A mutex on one futex word, for the lock a cross-thread hand-off takes on
/// every request (the perform queue's): uncontended, taking it is one
/// compare-and-swap and releasing it one exchange, inline, where a pthread
/// mutex costs two library calls. A contended lock spins briefly, then
/// sleeps in the kernel. ThreadSanitizer sees the ordering it creates: the
/// acquire and release are atomics in instrumented code (C11 atomics inlined
/// into this module), not in an uninstrumented library. No condition
/// variable: where a thread must sleep until state changes, use
/// `FutexMonitor` (or `Monitor`).
final class FutexLock: @unchecked Sendable {
    private let word: UnsafeMutablePointer<UInt32>

    init() {
        word = .allocate(capacity: 1)
        word.initialize(to: 0)
    }

    deinit { word.deallocate() }

    /// Whether a thread found the lock held and marked it (it sleeps, or is
    /// about to, until the holder's unlock wakes it). For tests.
    var isContended: Bool { Futex.load(word) == 2 }

    @inline(__always)
    func withLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        bl_lock(word)
        defer { bl_unlock(word) }
        return try body()
    }
}

/// `FutexLock`'s lock with a condition to sleep on, for a lock taken on
/// every message (a message port's ring): uncontended, lock and unlock are
/// one atomic each, inline, where `Monitor`'s pthread mutex costs two
/// library calls. A waiting thread sleeps on a second word that
/// `broadcast()` changes, so a change made between the waiter's unlock and
/// its sleep is not missed (the kernel finds the word changed and returns
/// at once). ThreadSanitizer sees the lock's atomics, and both words'
/// plain accesses are made with the lock held.
struct FutexMonitor: ~Copyable {
    /// The lock word, then the change count.
    private let words: UnsafeMutablePointer<UInt32>

    init() {
        words = .allocate(capacity: 2)
        words.initialize(repeating: 0, count: 2)
    }

    deinit { words.deallocate() }

    @inline(__always) func lock() { bl_lock(words) }
    @inline(__always) func unlock() { bl_unlock(words) }

    @inline(__always)
    func withLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        bl_lock(words)
        defer { bl_unlock(words) }
        return try body()
    }

    /// With the lock held: releases it, sleeps until `broadcast()` or
    /// `deadline` (CLOCK_MONOTONIC ns) and takes it again. May return early
    /// (a signal, a broadcast about something else): callers check their
    /// condition in a loop.
    func wait(until deadline: UInt64) {
        let changes = words + 1
        let seen = changes.pointee
        bl_unlock(words)
        let now = MonotonicClock.nanoseconds
        if deadline > now { Futex.wait(changes, whileEqualTo: seen, timeoutNanoseconds: Int64(clamping: deadline - now)) }
        bl_lock(words)
    }

    /// With the lock held: wakes every waiting thread.
    func broadcast() {
        let changes = words + 1
        changes.pointee &+= 1
        Futex.wakeAll(changes)
    }
}
