/// What happened at one firing of a timer.
public struct TimerFire: Equatable, Sendable {
    /// The fire time the timer was scheduled for.
    public let scheduled: MonotonicInstant
    /// When the handler was called.
    public let actual: MonotonicInstant
    /// Grid periods that passed without a fire of their own before this one
    /// (a repeating timer that missed periods fires once for all of them).
    public let skippedPeriods: UInt64

    /// `actual - scheduled`: how late the fire was (never negative).
    public var lateness: Duration { actual - scheduled }
}

/// Totals over a timer's life.
public struct TimerStatistics: Equatable, Sendable {
    public var fires: UInt64 = 0
    public var skippedPeriods: UInt64 = 0
    public var maxLateness: Duration = .zero
    public var totalLateness: Duration = .zero
}

/// A run loop timer (CF's `CFRunLoopTimer`): fires once at its fire date, or
/// repeatedly every `interval` on the grid fire date + k·interval. A
/// repeating timer is rescheduled from its scheduled fire time, not the actual
/// one: if it missed several periods it fires once, then stays on the grid.
/// `tolerance` lets the loop fire it up to that much late when that lets it
/// serve another timer with the same wake-up; a timer with nothing to share a
/// wake-up with fires at its fire date. Timer fires never make a run call
/// return.
public final class RunLoopTimer: @unchecked Sendable {
    public let interval: Duration
    let intervalNanoseconds: UInt64
    public let order: Int
    /// Made by `rearmable(tolerance:order:handler:)`: a fire disarms the
    /// timer instead of invalidating it (a boardloop extension).
    public let isRearmable: Bool
    let handler: (RunLoopTimer) -> Void
    @exclusivity(unchecked) var item = ItemState()
    @exclusivity(unchecked) var fireNanoseconds: UInt64
    @exclusivity(unchecked) var toleranceNanoseconds: UInt64
    @exclusivity(unchecked) var pendingSkipped: UInt64 = 0
    @exclusivity(unchecked) var isFiring = false
    /// Set when the fire date is changed while the handler runs.
    @exclusivity(unchecked) var movedDuringFire = false
    /// How many fires of this timer are under way (one at most: a nested
    /// run does not fire a firing timer). The loop fires a timer without
    /// retaining it: its timer table holds it. While this is not zero,
    /// leaving the loop moves the table's reference to `keptAlive` instead
    /// of releasing it, and the fire releases it when it ends.
    @exclusivity(unchecked) var fireDepth: UInt32 = 0
    @exclusivity(unchecked) var keptAlive: RunLoopTimer?
    let remote = RemoteRequests()

    /// The last fire, with its lateness and skipped periods.
    @exclusivity(unchecked) public internal(set) var lastFire: TimerFire?
    /// Totals over the timer's life.
    public var statistics: TimerStatistics {
        TimerStatistics(
            fires: fires, skippedPeriods: skippedPeriods,
            maxLateness: .nanoseconds(Int64(clamping: maxLatenessNanoseconds)),
            totalLateness: .nanoseconds(Int64(clamping: totalLatenessNanoseconds)))
    }
    // The statistics, in integer nanoseconds: a fire adds to them without
    // Duration's 128-bit arithmetic.
    @exclusivity(unchecked) var fires: UInt64 = 0
    @exclusivity(unchecked) var skippedPeriods: UInt64 = 0
    @exclusivity(unchecked) var maxLatenessNanoseconds: UInt64 = 0
    @exclusivity(unchecked) var totalLatenessNanoseconds: UInt64 = 0

    /// - Parameters:
    ///   - fireAt: the first fire time, on the loop's clock (`loop.now + delay`).
    ///   - interval: zero (or negative, as in CF) for a one-shot timer.
    ///   - tolerance: how late the loop may fire it to coalesce wake-ups
    ///     (negative counts as zero).
    public convenience init(
        fireAt: MonotonicInstant, interval: Duration = .zero, tolerance: Duration = .zero, order: Int = 0,
        handler: @escaping (RunLoopTimer) -> Void
    ) {
        self.init(fireAt: fireAt, interval: interval, tolerance: tolerance, order: order, rearmable: false, handler: handler)
    }

    init(
        fireAt: MonotonicInstant, interval: Duration, tolerance: Duration, order: Int, rearmable: Bool,
        handler: @escaping (RunLoopTimer) -> Void
    ) {
        self.interval = max(interval, .zero)
        intervalNanoseconds = UInt64(max(interval.nanosecondsClamped, 0))
        self.order = order
        isRearmable = rearmable
        self.handler = handler
        fireNanoseconds = fireAt.nanoseconds
        toleranceNanoseconds = UInt64(max(tolerance.nanosecondsClamped, 0))
    }

    public var repeats: Bool { intervalNanoseconds > 0 }
    public var isValid: Bool { !item.invalidated && !remote.invalidationRequested }
    public var runLoop: BoardRunLoop? { item.loop }

    /// The next scheduled fire time. Setting it moves a scheduled timer (in
    /// every mode it is in); the repeating grid restarts from the new date.
    /// From a thread other than the loop's, the owner applies the new date at
    /// the start of its next pass (read it back on the loop's thread). A
    /// re-armable timer reads `.distantFuture` (disarmed) from the start of
    /// its handler, unless the handler armed it again.
    public var fireDate: MonotonicInstant {
        get {
            if isRearmable && isFiring && !movedDuringFire { return .distantFuture }
            return MonotonicInstant(nanoseconds: fireNanoseconds)
        }
        set {
            let ns = newValue.nanoseconds
            remote.fireDate.store(ns, ordering: .releasing)
            let owner = routeChange(RemoteRequests.moveFireDate) {
                fireNanoseconds = ns
                pendingSkipped = 0
            }
            if let owner { setFireDate(ns, on: owner) }
        }
    }

    /// Moves the timer on its loop (owner thread).
    func setFireDate(_ ns: UInt64, on loop: BoardRunLoop) {
        fireNanoseconds = ns
        pendingSkipped = 0
        if isFiring { movedDuringFire = true }
        loop.timerMoved(self)
    }

    /// How late the loop may fire the timer to serve another with the same
    /// wake-up. Set it on the loop's thread (or before adding the timer).
    public var tolerance: Duration {
        get { .nanoseconds(Int64(toleranceNanoseconds)) }
        set {
            toleranceNanoseconds = UInt64(max(newValue.nanosecondsClamped, 0))
            if let loop = itemBindingLock.withLock({ item.loop }), loop.isOwnedByCurrentThread { loop.timerMoved(self) }
        }
    }

    /// Removes the timer from every mode; it will not fire again. Safe inside
    /// its own handler, and from any thread: from another thread the loop
    /// removes it at the start of its next pass, and it does not fire once
    /// the loop has checked for the invalidation — a loop already past that
    /// check may fire it once more (use `invalidateAndWait()` to rule that out).
    public func invalidate() { invalidateFromAnyThread { $0.invalidateItem(self) } }

    /// `invalidate()`, and from a thread other than the loop's, waits until
    /// the loop has applied it: when this returns, the handler is not
    /// running and will never start again. On the loop's own thread, and
    /// for a timer on no loop, it is `invalidate()`. The owner applies it at
    /// the start of its next pass, or when it next runs, or when it ends: do
    /// not wait for a loop whose thread is waiting for you. Returns false if
    /// `timeout` passed first (the invalidation stays requested).
    @discardableResult
    public func invalidateAndWait(timeout: Duration? = nil) -> Bool {
        invalidateAndWaitFromAnyThread(timeout: timeout) { $0.invalidateItem(self) }
    }
}

// MARK: Re-armable one-shot timers (a boardloop extension)

extension RunLoopTimer {
    /// A one-shot timer that can be armed again and again: a boardloop
    /// extension, Core Foundation has no such timer (a CF one-shot timer is
    /// invalidated by its fire, so CF code keeps a repeating timer with a
    /// far-off fire date and moves it). It starts disarmed (its fire date is
    /// `.distantFuture`); `arm(at:)` or `arm(after:)` schedules one fire, and
    /// the fire disarms it before its handler runs, so the handler may arm
    /// it again. It stays on its loop until it is invalidated. Its fire,
    /// lateness and statistics are those of any timer.
    public static func rearmable(
        tolerance: Duration = .zero, order: Int = 0, handler: @escaping (RunLoopTimer) -> Void
    ) -> RunLoopTimer {
        RunLoopTimer(fireAt: .distantFuture, interval: .zero, tolerance: tolerance, order: order, rearmable: true, handler: handler)
    }

    /// Whether a fire is scheduled: the fire date is before `.distantFuture`.
    /// Read it on the loop's thread (as `fireDate`).
    public var isArmed: Bool { fireDate < .distantFuture }

    /// Schedules the next fire at `instant` (on the loop's clock), earlier or
    /// later than an armed one: the timer fires once, at the last date armed.
    /// A date already past fires at the loop's next pass. Any thread, as
    /// setting `fireDate`.
    public func arm(at instant: MonotonicInstant) { fireDate = instant }

    /// Schedules the next fire `delay` from now on the clock of the timer's
    /// loop (the monotonic clock for a timer on no loop).
    public func arm(after delay: Duration) {
        let loop = itemBindingLock.withLock { item.loop }
        fireDate = (loop?.now ?? .now) + delay
    }

    /// Cancels the scheduled fire, if any; the timer stays on its loop and
    /// can be armed again.
    public func disarm() { fireDate = .distantFuture }
}

extension RunLoopTimer: RegisteredItem {
    static var kindName: String { "RunLoopTimer" }
    static var capacity: RunLoopCapacity { .timers }

    func takeSlot(in loop: BoardRunLoop) -> (slot: Int32, generation: UInt32)? { loop.timers.insert(self) }

    func freeSlot(in loop: BoardRunLoop) {
        // A timer leaving its loop while it fires (its handler invalidated
        // it, or it fired once) stays alive until the fire ends (see `fireDepth`).
        if fireDepth > 0 {
            keptAlive = loop.timers.take(item.slot)
        } else {
            loop.timers.remove(item.slot)
        }
    }

    func joined(_ loop: BoardRunLoop) throws(RunLoopError) {
        loop.timerKeys[Int(item.slot)] = TimerKey(
            fire: fireNanoseconds, tolerance: toleranceNanoseconds, order: order, seq: item.seq, interval: intervalNanoseconds)
        loop.timersChanged()
    }

    func enter(_ ms: ModeState, of loop: BoardRunLoop) throws(RunLoopError) {
        item.modeMask |= ms.bit
        ms.timers.insert(item.slot, keys: loop.timerKeys)
        loop.timersChanged()
    }

    func leave(_ ms: ModeState, of loop: BoardRunLoop) {
        ms.timers.remove(item.slot, keys: loop.timerKeys)
        loop.timersChanged()
    }
}
