import Synchronization

/// A custom input source (CF's version-0 `CFRunLoopSource`): another thread
/// hands it work, calls `signal()`, and wakes the loop with `BoardRunLoop.wakeUp()`;
/// on the loop's next pass its `perform` callback runs.
///
/// `signal()` is safe from any thread (an atomic flag). As in CF it does not
/// wake the loop by itself: call `wakeUp()` on the loop after signalling, or
/// use `signalAndWakeUp()`. Everything else is for the owning loop's thread.
public final class CustomSource: @unchecked Sendable {
    /// Lower orders perform first among sources ready in the same pass.
    public let order: Int
    let scheduleCallback: ((BoardRunLoop, RunLoopMode) -> Void)?
    let cancelCallback: ((BoardRunLoop, RunLoopMode) -> Void)?
    let performCallback: () -> Void
    /// 0 while not signalled; otherwise when it was signalled, as a stamp from
    /// a process-wide counter, so that sources of equal order perform in the
    /// order they were signalled (as in CF).
    let signalStamp = Atomic<UInt64>(0)
    let remote = RemoteRequests()
    @exclusivity(unchecked) var item = ItemState()
    @exclusivity(unchecked) var limiter = RateLimiter()
    /// How many calls of `perform` are running (more than one only when it
    /// runs the loop again).
    @exclusivity(unchecked) var performDepth: UInt32 = 0
    /// How many times `perform` was called.
    @exclusivity(unchecked) public internal(set) var performCount: UInt64 = 0

    /// - Parameters:
    ///   - schedule: called on the loop's thread each time the source is added to a mode.
    ///   - cancel: called on the loop's thread each time it leaves a mode (also on invalidate).
    ///   - perform: called on the loop's thread when the source is signalled and its mode runs.
    public init(
        order: Int = 0,
        schedule: ((BoardRunLoop, RunLoopMode) -> Void)? = nil,
        cancel: ((BoardRunLoop, RunLoopMode) -> Void)? = nil,
        perform: @escaping () -> Void
    ) {
        self.order = order
        scheduleCallback = schedule
        cancelCallback = cancel
        performCallback = perform
    }

    /// Marks the source ready to perform. Safe from any thread.
    @inline(__always)
    public func signal() {
        guard signalStamp.load(ordering: .relaxed) == 0 else { return }
        let stamp = customSignalClock.add(1, ordering: .relaxed).newValue
        if signalStamp.compareExchange(expected: 0, desired: stamp, ordering: .acquiringAndReleasing).exchanged {
            // After the stamp: a loop that sees the new epoch sees the stamp.
            customSignalEpoch.add(1, ordering: .releasing)
        }
    }

    /// `signal()`, then wakes the loop the source is scheduled on (if any).
    /// Safe from any thread while the loop is alive.
    public func signalAndWakeUp() {
        signal()
        itemBindingLock.withLock { item.loop }?.wakeUp()
    }

    /// Whether the source is signalled and has not performed since.
    public var isSignalled: Bool { signalStamp.load(ordering: .acquiring) != 0 }

    /// Whether the source can still be scheduled and performed.
    public var isValid: Bool { !item.invalidated && !remote.invalidationRequested }

    /// The loop the source is scheduled on, if any.
    public var runLoop: BoardRunLoop? { item.loop }

    /// At most `count` performs per interval; a signalled source over its limit
    /// stays signalled and performs in the next interval. Owner thread only.
    public var rateLimit: RateLimit? {
        get { limiter.limit }
        set { limiter = RateLimiter(limit: newValue, holds: limiter.holds) }
    }

    /// How many times the source hit its rate limit and was held.
    public var rateLimitHolds: UInt64 { limiter.holds }

    /// Removes the source from every mode (calling `cancel` for each, on the
    /// loop's thread) and makes it unusable. Safe from any thread: from
    /// another thread, the loop removes the source at the start of its next
    /// pass, and `perform` is not started once the loop has checked for the
    /// invalidation — a loop already past that check may start it once more
    /// (use `invalidateAndWait()` to rule that out).
    public func invalidate() { invalidateFromAnyThread { $0.invalidateItem(self) } }

    /// `invalidate()`, and from a thread other than the loop's, waits until
    /// the loop has applied it: when this returns, `perform` is not running
    /// and will never start again (its cancel callbacks have run). On the
    /// loop's own thread, and for a source on no loop, it is `invalidate()`.
    /// The owner applies it at the start of its next pass, or when it next
    /// runs, or when it ends: do not wait for a loop whose thread is waiting
    /// for you. Returns false if `timeout` passed first (the invalidation
    /// stays requested).
    @discardableResult
    public func invalidateAndWait(timeout: Duration? = nil) -> Bool {
        invalidateAndWaitFromAnyThread(timeout: timeout) { $0.invalidateItem(self) }
    }
}

/// Stamps for `CustomSource.signal()`: a process-wide order of signals.
let customSignalClock = Atomic<UInt64>(0)

/// Moves on after every signal, once the source's stamp is stored: a pass
/// walks a mode's custom sources only when a signal came since its last
/// walk (or that walk left some signalled), instead of reading every
/// source's stamp on every pass. Process-wide (a signal does not know its
/// loop without a lock), so a signal elsewhere costs a loop one walk.
let customSignalEpoch = Atomic<UInt64>(0)

extension CustomSource: RegisteredItem {
    static var kindName: String { "CustomSource" }
    static var capacity: RunLoopCapacity { .sources }

    func takeSlot(in loop: BoardRunLoop) -> (slot: Int32, generation: UInt32)? {
        loop.sourceCount >= loop.capacities.sources ? nil : loop.customs.insert(self)
    }

    func freeSlot(in loop: BoardRunLoop) { loop.customs.remove(item.slot) }

    func enter(_ ms: ModeState, of loop: BoardRunLoop) throws(RunLoopError) {
        item.modeMask |= ms.bit
        let order = self.order
        ms.customs.insert(item.slot) { other in loop.customs[other]!.order > order }
        // It may have been signalled already: the mode's next pass walks.
        ms.customsLeftSignalled = true
        scheduleCallback?(loop, ms.mode!)
    }

    func leave(_ ms: ModeState, of loop: BoardRunLoop) {
        ms.customs.remove(item.slot)
        cancelCallback?(loop, ms.mode!)
    }
}
