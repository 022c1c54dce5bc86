import Boardloop
import Glibc

/// A started, joinable pthread for tests and examples (no Foundation).
public final class JoinableThread: @unchecked Sendable {
    private var handle = pthread_t()
    private let body: @Sendable () -> Void
    private var joined = false

    /// Starts a thread running `body` at once.
    public init(_ body: @escaping @Sendable () -> Void) {
        self.body = body
        let box = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(&handle, nil, { p in
            let t = Unmanaged<JoinableThread>.fromOpaque(p!).takeRetainedValue()
            t.body()
            return nil
        }, box)
        precondition(rc == 0, "pthread_create failed: \(rc)")
    }

    /// Waits for the thread to finish.
    public func join() {
        guard !joined else { return }
        joined = true
        pthread_join(handle, nil)
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
