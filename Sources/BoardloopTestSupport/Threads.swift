import Boardloop
import Glibc

/// A started, joinable pthread for tests and examples (no Foundation): the
/// one thread helper of the tests, benchmarks and the gpio-sim guest. Its
/// end can be awaited with a deadline (`join(within:)`), so a body that hangs
/// (a deadlocked mock, a loop that never returns) fails a test in seconds
/// instead of hanging the suite.
public final class JoinableThread: @unchecked Sendable {
    private var handle = pthread_t()
    private let body: @Sendable () -> Void
    private var joined = false
    private let finished = Locked(false)

    /// Starts a thread running `body` at once.
    public init(_ body: @escaping @Sendable () -> Void) {
        self.body = body
        let box = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(&handle, nil, { p in
            let t = Unmanaged<JoinableThread>.fromOpaque(p!).takeRetainedValue()
            t.body()
            t.finished.withLock { $0 = true }
            return nil
        }, box)
        precondition(rc == 0, "pthread_create failed: \(rc)")
    }

    /// Whether the body has returned.
    public var isFinished: Bool { finished.withLock { $0 } }

    /// Waits for the thread to finish.
    public func join() {
        guard !joined else { return }
        joined = true
        pthread_join(handle, nil)
    }

    /// Joins the thread if it finishes within `limit`; otherwise returns
    /// false and leaves it running (it cannot be joined).
    @discardableResult
    public func join(within limit: Duration) -> Bool {
        guard waitUntil(timeout: limit, { isFinished }) else { return false }
        join()
        return true
    }
}

/// Polls `condition` until it holds or `timeout` passes; returns whether it
/// held. For waiting on another thread's progress (a loop reaching its sleep,
/// say) — the bound is generous and only matters when something is broken.
public func waitUntil(timeout: Duration = .seconds(20), _ condition: () -> Bool) -> Bool {
    let deadline = MonotonicInstant.now + timeout
    while !condition() {
        if MonotonicInstant.now >= deadline { return false }
        usleep(200)
    }
    return true
}
