/// The points in a run where observers are called (CF's `CFRunLoopActivity`,
/// same bit values).
public struct RunLoopActivity: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let entry = RunLoopActivity(rawValue: 1 << 0)
    public static let beforeTimers = RunLoopActivity(rawValue: 1 << 1)
    public static let beforeSources = RunLoopActivity(rawValue: 1 << 2)
    public static let beforeWaiting = RunLoopActivity(rawValue: 1 << 5)
    public static let afterWaiting = RunLoopActivity(rawValue: 1 << 6)
    public static let exit = RunLoopActivity(rawValue: 1 << 7)
    public static let allActivities: RunLoopActivity = [.entry, .beforeTimers, .beforeSources, .beforeWaiting, .afterWaiting, .exit]

    public var description: String {
        switch self {
        case .entry: "entry"
        case .beforeTimers: "beforeTimers"
        case .beforeSources: "beforeSources"
        case .beforeWaiting: "beforeWaiting"
        case .afterWaiting: "afterWaiting"
        case .exit: "exit"
        default: "activities(\(rawValue))"
        }
    }
}

/// A run loop observer (CF's `CFRunLoopObserver`): called at the activities it
/// asks for, in order among the observers of the running mode. A one-shot
/// observer is invalidated after its first call.
public final class RunLoopObserver: @unchecked Sendable {
    public let activities: RunLoopActivity
    public let repeats: Bool
    public let order: Int
    let handler: (RunLoopObserver, RunLoopActivity) -> Void
    @exclusivity(unchecked) var item = ItemState()
    /// Set while its handler runs: a nested run does not call it again.
    @exclusivity(unchecked) var isFiring = false
    let remote = RemoteRequests()

    public init(
        activities: RunLoopActivity, repeats: Bool = true, order: Int = 0,
        handler: @escaping (RunLoopObserver, RunLoopActivity) -> Void
    ) {
        self.activities = activities
        self.repeats = repeats
        self.order = order
        self.handler = handler
    }

    public var isValid: Bool { !item.invalidated && !remote.invalidationRequested }
    public var runLoop: BoardRunLoop? { item.loop }

    /// Removes the observer from every mode. Safe from any thread: from
    /// another thread, the observer is not called once the loop has checked
    /// for the invalidation — a loop already past that check may call it
    /// once more (use `invalidateAndWait()` to rule that out).
    public func invalidate() { invalidateFromAnyThread { $0.invalidateItem(self) } }

    /// `invalidate()`, and from a thread other than the loop's, waits until
    /// the loop has applied it: when this returns, the handler is not
    /// running and will never be called again. On the loop's own thread,
    /// and for an observer on no loop, it is `invalidate()`. Do not wait for
    /// a loop whose thread is waiting for you. Returns false if `timeout`
    /// passed first (the invalidation stays requested).
    @discardableResult
    public func invalidateAndWait(timeout: Duration? = nil) -> Bool {
        invalidateAndWaitFromAnyThread(timeout: timeout) { $0.invalidateItem(self) }
    }
}

extension BoardRunLoop {
    /// The union of the activities of the mode's observers (`notify` checks it first).
    func recomputeObserverMask(_ ms: ModeState) {
        var mask: UInt32 = 0
        for i in 0..<ms.observers.count { mask |= observers[ms.observers[i]]!.activities.rawValue }
        ms.observerMask = mask
    }
}

extension RunLoopObserver: RegisteredItem {
    static var kindName: String { "RunLoopObserver" }
    static var capacity: RunLoopCapacity { .observers }

    func takeSlot(in loop: BoardRunLoop) -> (slot: Int32, generation: UInt32)? { loop.observers.insert(self) }

    func freeSlot(in loop: BoardRunLoop) { loop.observers.remove(item.slot) }

    func enter(_ ms: ModeState, of loop: BoardRunLoop) throws(RunLoopError) {
        item.modeMask |= ms.bit
        let order = self.order
        ms.observers.insert(item.slot) { other in loop.observers[other]!.order > order }
        loop.recomputeObserverMask(ms)
    }

    func leave(_ ms: ModeState, of loop: BoardRunLoop) {
        ms.observers.remove(item.slot)
        loop.recomputeObserverMask(ms)
    }
}
