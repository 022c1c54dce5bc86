/// Where an item is scheduled: its loop, its slot there, and its modes. Every
/// item kind embeds one; only the owning loop's thread changes it.
struct ItemState {
    unowned(unsafe) var loop: RunLoop?
    var slot: Int32 = -1
    var generation: UInt32 = 0
    /// Bit i set: the item is in the loop's mode i.
    var modeMask: UInt64 = 0
    /// Added to the common-modes pseudo-mode: joins modes added to the common set later.
    var inCommonModes = false
    /// Insertion sequence, breaking ties between equal orders (first added first).
    var seq: UInt64 = 0
    var invalidated = false

    @inline(__always) func isIn(mode m: Int) -> Bool { modeMask & (1 &<< UInt64(m)) != 0 }

    /// Leaves the loop (slot freed by the caller); keeps `invalidated`.
    mutating func detach() {
        let wasInvalidated = invalidated
        self = ItemState()
        invalidated = wasInvalidated
    }
}

/// At most `count` dispatches in each `interval`. Beyond that a source is not
/// dispatched: it stays ready (a port's fd keeps its readiness in the kernel,
/// a custom source stays signalled) and is held until the next interval, so a
/// storm of events cannot starve the loop and nothing is lost.
///
/// Windows are fixed: a window opens at the first dispatch after the previous
/// one ended and lasts `interval`.
public struct RateLimit: Equatable, Sendable {
    public let count: Int
    public let interval: Duration

    public init(count: Int, per interval: Duration) {
        precondition(count > 0, "RateLimit count must be positive")
        precondition(interval > .zero, "RateLimit interval must be positive")
        self.count = count
        self.interval = interval
    }
}

/// The per-source state of a `RateLimit`.
struct RateLimiter {
    var limit: RateLimit?
    var windowStart: UInt64 = 0
    var dispatched = 0
    /// Non-zero while held: the time the hold ends.
    var heldUntil: UInt64 = 0
    /// How many times the source hit its limit and was held.
    var holds: UInt64 = 0

    /// Whether a dispatch at `now` is within the limit; counts it if so.
    @inline(__always)
    mutating func admit(now: UInt64) -> Bool {
        guard let limit else { return true }
        let interval = UInt64(max(limit.interval.nanosecondsClamped, 1))
        if dispatched == 0 || now &- windowStart >= interval {
            windowStart = now
            dispatched = 0
            heldUntil = 0
        }
        if dispatched < limit.count {
            dispatched += 1
            return true
        }
        if heldUntil == 0 { holds &+= 1 }
        heldUntil = windowStart &+ interval
        return false
    }

    /// Whether a dispatch at `now` would be admitted (does not count it).
    @inline(__always)
    func wouldAdmit(now: UInt64) -> Bool {
        guard let limit else { return true }
        let interval = UInt64(max(limit.interval.nanosecondsClamped, 1))
        return dispatched < limit.count || now &- windowStart >= interval
    }
}
