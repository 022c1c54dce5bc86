import Boardloop

/// A value behind a pthread mutex, for test and example code shared between
/// threads. pthread rather than `Synchronization.Mutex`: ThreadSanitizer
/// intercepts pthread locks and sees the ordering they create, while the
/// standard library's futex-based mutex is opaque to it, so code that uses
/// it reports false races under `--sanitize=thread`. Built on the package's
/// `LockedValue` (the engine's `Lock`).
public final class Locked<Value>: @unchecked Sendable {
    private let locked: LockedValue<Value>

    public init(_ value: Value) { locked = LockedValue(value) }

    /// Runs `body` with the lock held and the value lent to it.
    public func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        try locked.withLock(body)
    }
}
