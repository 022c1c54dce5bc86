import Synchronization

/// Where an item is scheduled: its loop, its slot there, and its modes. Every
/// item kind embeds one. Only the owning loop's thread changes it; `loop` and
/// `invalidated` change under `itemBindingLock` as well, so any thread can ask
/// which loop an item is on (see `RemoteRequests`).
struct ItemState {
    /// The loop, not retained (as `unowned(unsafe)`: a loop detaches its
    /// items in its deinit).
    private var loopRef: Unmanaged<BoardRunLoop>?
    var loop: BoardRunLoop? {
        @inline(__always) get { loopRef?.takeUnretainedValue() }
        @inline(__always) set { loopRef = newValue.map { Unmanaged.passUnretained($0) } }
    }
    var slot: Int32 = -1
    var generation: UInt32 = 0
    /// Bit i set: the item is in the loop's mode i.
    var modeMask: UInt64 = 0
    /// Added to the common-modes pseudo-mode: joins modes added to the common set later.
    var inCommonModes = false
    /// Insertion sequence, breaking ties between equal orders (first added first).
    var seq: UInt64 = 0
    var invalidated = false
    /// The item was invalidated while one of its callouts ran on the owner
    /// thread: `RemoteRequests.settle()` is due when that callout ends.
    var settlePending = false

    @inline(__always) func isIn(mode m: Int) -> Bool { modeMask & (1 &<< UInt64(m)) != 0 }

    /// Whether the item is on `loop`, comparing addresses: `loop === l`
    /// would load a strong reference from the unowned one (a retain and a
    /// release) just to compare it.
    @inline(__always) func isOn(_ l: BoardRunLoop) -> Bool {
        loopRef?.toOpaque() == Unmanaged.passUnretained(l).toOpaque()
    }

    /// Leaves the loop (slot freed by the caller); keeps `invalidated`.
    mutating func detach() {
        let (wasInvalidated, wasPending) = (invalidated, settlePending)
        self = ItemState()
        invalidated = wasInvalidated
        settlePending = wasPending
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

    /// - Throws: `.invalidArgument` when `count` is below 1 or `interval` is
    ///   not positive (a limit that admits nothing would hold a source forever).
    public init(count: Int, per interval: Duration) throws(RunLoopError) {
        guard count > 0 else { throw .invalidArgument("RateLimit count is \(count); it must be at least 1") }
        guard interval > .zero else { throw .invalidArgument("RateLimit interval is \(interval); it must be positive") }
        self.count = count
        self.interval = interval
        intervalNanoseconds = UInt64(max(interval.nanosecondsClamped, 1))
    }

    /// `interval` in nanoseconds (at least 1), so a dispatch checks the limit
    /// without Duration's 128-bit arithmetic.
    let intervalNanoseconds: UInt64
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
        let interval = limit.intervalNanoseconds
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
        let interval = limit.intervalNanoseconds
        return dispatched < limit.count || now &- windowStart >= interval
    }
}

/// Guards the link between items and loops (`ItemState.loop`,
/// `ItemState.invalidated`) and every loop's queue of remote requests. Taken
/// when an item is bound to or unbound from a loop and when another thread
/// changes an item — never on the dispatch path.
let itemBindingLock = Lock()

/// Changes another thread asked for, which the owner applies at the start of
/// its next pass (CF takes the loop's lock for these; this engine keeps its
/// run path free of locks and hands the change over instead). At most one
/// queue entry per item: the first request enqueues it, later ones only add
/// bits. The `invalidate` bit also stops callouts early: the loop checks it
/// before calling the item, so after `invalidate()` returned on another
/// thread the handler is not started again once the owner has made that
/// check — but an owner already past its check (between the check and the
/// call) may still start it once. `settled` closes that gap for
/// `invalidateAndWait()`: the owner sets it once the invalidation is
/// applied and no callout of the item is running, so from then on the
/// handler is neither running nor ever started again.
final class RemoteRequests: Sendable {
    static let invalidate: UInt32 = 1
    static let moveFireDate: UInt32 = 2
    static let changeInterest: UInt32 = 4
    /// With `invalidate`: a port source's handler found its fd closed.
    static let closedFD: UInt32 = 8

    let ops = Atomic<UInt32>(0)
    /// The fire date asked for with `moveFireDate` (timers).
    let fireDate = Atomic<UInt64>(0)
    /// The epoll events asked for with `changeInterest` (port sources).
    let interest = Atomic<UInt32>(0)

    /// Whether invalidation was asked for from another thread.
    @inline(__always) var invalidationRequested: Bool { ops.load(ordering: .acquiring) & Self.invalidate != 0 }

    /// Set by the owner once the item is invalidated and none of its
    /// callouts runs: its handler will not run again (see `invalidateAndWait`).
    let settled = Atomic<Bool>(false)

    /// On the owner thread (or in a loop's deinit): the item is invalidated
    /// and no callout of it is running. Wakes the threads waiting for it.
    /// Sequentially consistent with the waiter's count (`waitUntilSettled`):
    /// either this sees a waiter and broadcasts under the lock it waits
    /// with, or the waiter sees `settled` before it sleeps.
    func settle() {
        settled.store(true, ordering: .sequentiallyConsistent)
        if invalidationWaiters.load(ordering: .sequentiallyConsistent) > 0 {
            invalidationMonitor.withLock { invalidationMonitor.broadcast() }
        }
    }

    /// Blocks until `settle()` (or `deadline`, CLOCK_MONOTONIC ns); whether
    /// it was settled.
    func waitUntilSettled(deadline: UInt64?) -> Bool {
        if settled.load(ordering: .acquiring) { return true }
        return invalidationMonitor.withLock {
            invalidationWaiters.add(1, ordering: .sequentiallyConsistent)
            defer { invalidationWaiters.subtract(1, ordering: .relaxed) }
            while !settled.load(ordering: .sequentiallyConsistent) {
                if !invalidationMonitor.wait(until: deadline) { return settled.load(ordering: .acquiring) }
            }
            return true
        }
    }
}

/// Threads blocked in `invalidateAndWait()`, and the monitor they sleep on
/// (one for every loop: such waits are rare, and a broadcast wakes only
/// threads that are waiting).
let invalidationWaiters = Atomic<Int>(0)
let invalidationMonitor = Monitor()

/// An item a loop schedules: custom and port sources, timers, observers.
protocol LoopItem: AnyObject, Sendable {
    var item: ItemState { get set }
    var remote: RemoteRequests { get }
    /// Applies what `remote` asks for, on the owner thread of `loop`.
    func applyRemote(_ ops: UInt32, on loop: BoardRunLoop)
    /// Applies it to an item that left its loop before the owner got to it
    /// (under `itemBindingLock`; the item is on no loop, so nobody else owns it).
    func applyUnscheduled(_ ops: UInt32)
    /// Whether one of the item's callouts (its handler) is running on the
    /// owner thread. Owner thread only.
    var isInCallout: Bool { get }
}

extension LoopItem {
    /// Routes a change of a scheduled item. On the owner's thread, returns
    /// the loop: the caller applies the change at once. From another thread,
    /// records `op` for the owner (see `RemoteRequests`), wakes it, and
    /// returns nil. For an item on no loop, runs `unscheduled` (under the
    /// binding lock) and returns nil.
    func routeChange(_ op: UInt32, unscheduled: () -> Void = {}) -> BoardRunLoop? {
        itemBindingLock.withLock { () -> BoardRunLoop? in
            guard let loop = item.loop else {
                unscheduled()
                return nil
            }
            if loop.isOwnedByCurrentThread { return loop }
            let before = remote.ops.bitwiseOr(op, ordering: .acquiringAndReleasing).oldValue
            if before == 0 { loop.enqueueRemoteLocked(self) }
            return nil
        }
    }

    /// `invalidate()` for every item kind.
    func invalidateFromAnyThread(_ ownerPath: (BoardRunLoop) -> Void) {
        let owner = routeChange(RemoteRequests.invalidate) { item.invalidated = true }
        if let owner { ownerPath(owner) }
    }

    /// `invalidateAndWait(timeout:)` for every item kind: `invalidate()`,
    /// then, from a thread other than the owner's, waits until the owner
    /// has applied it and no callout of the item runs. Whether that
    /// happened before the timeout.
    func invalidateAndWaitFromAnyThread(timeout: Duration?, _ ownerPath: (BoardRunLoop) -> Void) -> Bool {
        var waits = false
        let owner = itemBindingLock.withLock { () -> BoardRunLoop? in
            guard let loop = item.loop else {
                item.invalidated = true
                return nil
            }
            if loop.isOwnedByCurrentThread { return loop }
            let before = remote.ops.bitwiseOr(RemoteRequests.invalidate, ordering: .acquiringAndReleasing).oldValue
            if before == 0 { loop.enqueueRemoteLocked(self) }
            waits = true
            return nil
        }
        if let owner {
            ownerPath(owner)
            return true
        }
        guard waits else { return true }
        var deadline: UInt64?
        if let timeout {
            let now = MonotonicClock.nanoseconds, ns = UInt64(max(timeout.nanosecondsClamped, 0))
            if ns < UInt64.max - now { deadline = now + ns }
        }
        return remote.waitUntilSettled(deadline: deadline)
    }

    /// On the owner thread, once the item's invalidation is applied: settles
    /// it now, or when its running callout ends.
    func settleOrDefer() {
        if isInCallout {
            item.settlePending = true
        } else {
            remote.settle()
        }
    }

    /// On the owner thread, after one of the item's callouts: settles an
    /// invalidation applied while it ran, once no callout of it runs.
    @inline(__always)
    func settleIfPending() {
        if item.settlePending && !isInCallout {
            item.settlePending = false
            remote.settle()
        }
    }
}
