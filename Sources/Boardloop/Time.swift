import CLinux
import Synchronization

/// A point in time on CLOCK_MONOTONIC, in nanoseconds: the clock timerfd is
/// armed on and the clock the kernel stamps GPIO edge events with.
public struct MonotonicInstant: Comparable, Hashable, Sendable, CustomStringConvertible {
    public var nanoseconds: UInt64

    public init(nanoseconds: UInt64) { self.nanoseconds = nanoseconds }

    /// The current CLOCK_MONOTONIC time (vDSO: no system call).
    public static var now: MonotonicInstant { MonotonicInstant(nanoseconds: MonotonicClock.nanoseconds) }

    /// Later than any deadline the engine will meet.
    public static let distantFuture = MonotonicInstant(nanoseconds: UInt64.max / 2)

    public static func < (a: MonotonicInstant, b: MonotonicInstant) -> Bool { a.nanoseconds < b.nanoseconds }

    /// `self + d`, saturating at zero and at `distantFuture`.
    public static func + (a: MonotonicInstant, d: Duration) -> MonotonicInstant {
        let delta = d.nanosecondsClamped
        if delta >= 0 {
            let room = distantFuture.nanoseconds &- min(a.nanoseconds, distantFuture.nanoseconds)
            return MonotonicInstant(nanoseconds: a.nanoseconds + min(UInt64(delta), room))
        }
        let back = UInt64(-delta)
        return MonotonicInstant(nanoseconds: back >= a.nanoseconds ? 0 : a.nanoseconds - back)
    }

    public static func - (a: MonotonicInstant, d: Duration) -> MonotonicInstant { a + (.zero - d) }

    /// The signed distance from `b` to `a`.
    public static func - (a: MonotonicInstant, b: MonotonicInstant) -> Duration {
        if a.nanoseconds >= b.nanoseconds { return .nanoseconds(Int64(a.nanoseconds - b.nanoseconds)) }
        return .zero - .nanoseconds(Int64(b.nanoseconds - a.nanoseconds))
    }

    public var description: String {
        let s = nanoseconds / 1_000_000_000
        let frac = nanoseconds % 1_000_000_000
        var digits = String(frac)
        while digits.count < 9 { digits = "0" + digits }
        return "\(s).\(digits)s"
    }
}

extension Duration {
    /// Whether the duration is longer than zero, without a call into the
    /// standard library (`> .zero` is two: `zero` and `<`): Duration is
    /// @frozen, its value the 128-bit attosecond count (`_high`, `_low`).
    @inline(__always)
    var isPositive: Bool { _high > 0 || (_high == 0 && _low != 0) }

    /// The duration in whole nanoseconds, clamped to Int64 (about 292 years):
    /// the package's one Duration-to-nanoseconds conversion. Inlinable, so
    /// the other modules' event paths get the one division too.
    @inlinable @inline(__always)
    public var nanosecondsClamped: Int64 {
        // From zero up to 2^64 attoseconds (18.4 s): one division by a
        // constant. `components` divides 128 bits in the standard library,
        // some 180 instructions, which every run call with a timeout paid.
        if _high == 0 { return Int64(_low / 1_000_000_000) }
        return nanosecondsClampedSlowly
    }

    @usableFromInline
    var nanosecondsClampedSlowly: Int64 {
        let (s, atto) = components
        let (ns, overflow) = s.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return s < 0 ? Int64.min : Int64.max }
        let (sum, overflow2) = ns.addingReportingOverflow(atto / 1_000_000_000)
        if overflow2 { return s < 0 ? Int64.min : Int64.max }
        return sum
    }
}

/// A clock that moves only when a test advances it, for deterministic tests
/// of timer-heavy logic (in the spirit of SwiftNIO's EmbeddedEventLoop).
///
/// Loops made on it read their time from it; `advance(by:)` moves time
/// forward and wakes every such loop, so a loop sleeping until a manual
/// deadline notices. `BoardRunLoop.advanceManualClock(by:mode:)` steps a loop
/// through every deadline in between instead, firing each timer at exactly its
/// scheduled time.
public final class ManualClock: Sendable {
    private let nanos: Atomic<UInt64>
    private let lock = Lock()
    /// The loops made on this clock, not retained: a loop leaves the list
    /// first thing in its deinit (`detach`), under `lock`, so a loop on the
    /// list is never freed while `wakeLoops` wakes it. (Weak references
    /// would give every loop a side table, and each retain and release of
    /// the loop would take the runtime's slow path: a loop on the manual
    /// clock would count instructions a loop on the real clock does not.)
    nonisolated(unsafe) private var loops: [Unmanaged<BoardRunLoop>] = []

    /// A manual clock starting at `start` (default: 1 s, so that "earlier than
    /// start" is representable).
    public init(start: MonotonicInstant = MonotonicInstant(nanoseconds: 1_000_000_000)) {
        nanos = Atomic(start.nanoseconds)
    }

    /// The clock's current time.
    public var now: MonotonicInstant { MonotonicInstant(nanoseconds: nanos.load(ordering: .acquiring)) }

    /// Moves the clock forward by `duration` (negative durations are ignored:
    /// a monotonic clock never goes back) and wakes the loops on it.
    public func advance(by duration: Duration) {
        let d = duration.nanosecondsClamped
        if d > 0 { nanos.add(UInt64(d), ordering: .acquiringAndReleasing) }
        wakeLoops()
    }

    /// Sets the clock to `instant` if that is later than now; wakes the loops.
    public func advance(to instant: MonotonicInstant) {
        var current = nanos.load(ordering: .acquiring)
        while current < instant.nanoseconds {
            let (exchanged, original) = nanos.compareExchange(
                expected: current, desired: instant.nanoseconds, ordering: .acquiringAndReleasing)
            if exchanged { break }
            current = original
        }
        wakeLoops()
    }

    func attach(_ loop: BoardRunLoop) {
        lock.withLock { loops.append(.passUnretained(loop)) }
    }

    /// From the loop's deinit: the clock no longer wakes it. A `wakeLoops`
    /// under way finishes first (the lock), while the loop's wake-up fd is
    /// still open.
    func detach(_ loop: BoardRunLoop) {
        let me = Unmanaged.passUnretained(loop).toOpaque()
        lock.withLock {
            if let i = loops.firstIndex(where: { $0.toOpaque() == me }) { loops.remove(at: i) }
        }
    }

    private func wakeLoops() {
        // wakeUp never blocks, so it is called under the lock: no list copy,
        // no allocation when a test advances the clock.
        lock.withLock {
            var i = 0
            while i < loops.count {
                loops[i]._withUnsafeGuaranteedRef { $0.wakeUp() }
                i += 1
            }
        }
    }
}

/// Where a loop reads its time.
public enum RunLoopClock: Sendable {
    /// CLOCK_MONOTONIC; deadlines are kept by the loop's timerfd.
    case monotonic
    /// A `ManualClock`; time moves only when it is advanced.
    case manual(ManualClock)
}
