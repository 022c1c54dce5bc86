import CLinux
import Glibc
import Synchronization

/// Names one posted perform request, for `BoardRunLoop.cancel(_:)`.
public struct PerformToken: Hashable, Sendable {
    let slot: Int32
    let generation: UInt32
}

/// A perform request registered once and posted many times without any heap
/// allocation (posting a closure literal allocates its context; posting a
/// work item only retains it). The block runs on the target loop's thread.
public final class PerformWorkItem: Sendable {
    public let modes: [RunLoopMode]
    let block: @Sendable () -> Void

    public init(modes: [RunLoopMode] = [.default], _ block: @escaping @Sendable () -> Void) {
        self.modes = modes
        self.block = block
    }
}

extension BoardRunLoop {
    /// Queues `block` to run on this loop's thread, in FIFO order with other
    /// requests, during the loop's next pass in one of `modes` (`.common`
    /// matches every common mode), and wakes the loop. Every queued request
    /// whose mode is running runs in that pass. Safe from any thread.
    ///
    /// - Parameter delay: run no earlier than this long from now (on the loop's clock).
    /// - Throws: `.capacityExceeded(.pendingPerforms)` when the queue is full;
    ///   nothing is queued then.
    @discardableResult
    public func perform(
        inModes modes: [RunLoopMode] = [.default], after delay: Duration = .zero, _ block: @escaping @Sendable () -> Void
    ) throws(RunLoopError) -> PerformToken {
        try post(block, modes, delay: delay, waited: false)
    }

    /// Queues a pre-registered work item (no allocation). Safe from any thread.
    @discardableResult
    public func perform(_ item: PerformWorkItem) throws(RunLoopError) -> PerformToken {
        // (Without a delay: no Duration to read, and a due time of 0.)
        try posted(performs.post(item, due: 0))
    }

    /// Queues a pre-registered work item to run no earlier than `delay` from
    /// now (on the loop's clock). No allocation. Safe from any thread.
    @discardableResult
    public func perform(_ item: PerformWorkItem, after delay: Duration) throws(RunLoopError) -> PerformToken {
        try posted(performs.post(item, due: dueTime(after: delay)))
    }

    /// Cancels a request that has not started running. Returns false if it
    /// already ran, is running, or was cancelled. Safe from any thread.
    @discardableResult
    public func cancel(_ token: PerformToken) -> Bool {
        performs.cancel(token)
    }

    /// Runs `block` on this loop and waits until it has run.
    ///
    /// From another thread: posts it (FIFO with other requests) and blocks
    /// until the loop ran it; with a `timeout`, a request the loop has not
    /// started by then is cancelled and `.waitTimedOut` is thrown. If the
    /// loop's thread exits first, the request is dropped and `.loopEnded` is
    /// thrown (it never blocks forever on a loop that is gone).
    /// On the loop's own thread: runs it at once if the loop is running one of
    /// `modes`; otherwise the request could never run while this thread waits,
    /// so `.wouldDeadlock` is thrown.
    public func performAndWait(
        inModes modes: [RunLoopMode] = [.default], timeout: Duration? = nil, _ block: @escaping @Sendable () -> Void
    ) throws(RunLoopError) {
        if isOwnedByCurrentThread {
            guard let ms = runningMode, PerformQueue.matches(modes, ms) else {
                throw .wouldDeadlock(
                    operation: "BoardRunLoop.performAndWait", mode: modes.map(\.name).joined(separator: ", "),
                    running: runningMode?.mode?.name)
            }
            block()
            return
        }
        let token = try post(block, modes, delay: .zero, waited: true)
        let deadline = timeout.map { MonotonicClock.nanoseconds &+ UInt64(max($0.nanosecondsClamped, 0)) }
        switch performs.waitUntilDone(token, deadline: deadline) {
        case .done: return
        case .timedOut: throw .waitTimedOut(operation: "BoardRunLoop.performAndWait")
        case .loopEnded: throw .loopEnded(thread: ownerThread)
        }
    }

    private func post(_ block: @escaping @Sendable () -> Void, _ modes: [RunLoopMode], delay: Duration, waited: Bool) throws(RunLoopError) -> PerformToken {
        try posted(performs.post(block, modes, due: dueTime(after: delay), waited: waited))
    }

    /// When a request posted now with `delay` is due (0: at once).
    @inline(__always)
    private func dueTime(after delay: Duration) -> UInt64 {
        // (No delay is the common case: skip the clock and Duration's 128-bit arithmetic.)
        guard delay.isPositive else { return 0 }
        let ns = delay.nanosecondsClamped
        return ns > 0 ? nowNanoseconds &+ UInt64(ns) : 0
    }

    /// Wakes the loop for a posted request, or throws why it was not.
    @inline(__always)
    private func posted(_ result: PerformQueue.PostResult) throws(RunLoopError) -> PerformToken {
        switch result {
        case .posted(let token):
            // The owner posting during a run (a perform block re-posting,
            // an observer before the sleep) writes no wake-up: the pass
            // sees `ownerPosts` move and does not sleep. (runDepth is read
            // only on the owner thread.)
            if isOwnedByCurrentThread && runDepth > 0 {
                ownerPosts &+= 1
            } else {
                wakeUp()
            }
            return token
        case .full: throw .capacityExceeded(.pendingPerforms, limit: capacities.pendingPerforms)
        case .closed: throw .loopEnded(thread: ownerThread)
        }
    }

    /// Runs every queued request that is due and whose mode is `ms`; returns
    /// the earliest due time of the delayed ones left for this mode.
    @inline(__always)
    func runPerforms(_ ms: ModeState) -> UInt64 {
        performs.mayHavePending ? runPendingPerforms(ms) : .max
    }

    private func runPendingPerforms(_ ms: ModeState) -> UInt64 {
        var next = UInt64.max
        var taken = 0
        withSnapshot(performs.capacity, fill: { buffer in
            taken = performs.take(for: ms, clock: manualClock, into: buffer, nextDue: &next)
        }) { buffer in
            workCount &+= UInt64(taken)
            for i in 0..<taken { performs.run(buffer[i]) }
        }
        return next
    }
}

/// The queue of perform requests: fixed slots, a FIFO ring of posted slots,
/// guarded by a lock (posting comes from any thread). Each slot's state word
/// is also a futex, so `performAndWait` sleeps in the kernel until it changes.
final class PerformQueue: @unchecked Sendable {
    let capacity: Int
    private let lock = FutexLock()

    private static let free: UInt32 = 0
    private static let posted: UInt32 = 1
    private static let running: UInt32 = 2
    private static let done: UInt32 = 3
    private static let cancelled: UInt32 = 4
    /// Dropped because the loop ended.
    private static let refused: UInt32 = 5

    enum PostResult {
        case posted(PerformToken)
        case full
        case closed
    }

    enum WaitResult {
        case done, timedOut, loopEnded
    }

    /// generation << 3 | state; read without the lock by waiters.
    private let states: UnsafeMutablePointer<UInt32>
    /// Blocks are stored wrapped: a closure stored directly in generic
    /// storage is re-abstracted through a heap-allocated thunk on every store.
    struct Block {
        let run: @Sendable () -> Void
    }
    /// A closure request's block and modes, initialized from its post until
    /// it is emptied (taken to run, cancelled or dropped); a free slot's, and
    /// a work item's, are uninitialized memory, so posting stores without
    /// releasing anything.
    private let blocks: UnsafeMutablePointer<Block>
    private let modes: UnsafeMutablePointer<[RunLoopMode]>
    /// A work item request's item, with the one reference the queue holds
    /// (nil for a closure request). The item already holds its block and
    /// modes, so posting it retains one object, not its block and its modes
    /// array one by one, and releases one after it ran.
    private let workItems: UnsafeMutablePointer<Unmanaged<PerformWorkItem>?>
    private let due: UnsafeMutablePointer<UInt64>
    private let waited: UnsafeMutablePointer<Bool>
    private let freeList: UnsafeMutablePointer<Int32>
    @exclusivity(unchecked) private var freeCount: Int
    private let ring: UnsafeMutablePointer<Int32>
    @exclusivity(unchecked) private var queued = 0
    /// Queued requests with a delay (a due time other than 0): while there
    /// are none, taking does not read the clock.
    @exclusivity(unchecked) private var delayed = 0
    private let pendingCount = Atomic<Int>(0)
    /// Set when the loop ends: nothing more is accepted.
    @exclusivity(unchecked) private var closed = false
    /// Slots of requests the owner has run, on their way back to the free
    /// list: the owner pushes without the lock, and whoever next holds the
    /// lock (the owner's next take, or a post that found no free slot) moves
    /// them to the free list. One producer (the owner thread), one consumer
    /// at a time (the lock's holder); a slot is in it at most once, so it
    /// never holds more than `capacity`.
    private let ranRing: UnsafeMutablePointer<Int32>
    /// Pushed so far (the owner's, published with release), and where the
    /// next goes (the owner's alone).
    private let ranTail = Atomic<Int>(0)
    @exclusivity(unchecked) private var ranTailIndex = 0
    /// Moved back to the free list so far, and where the next is (under the lock).
    @exclusivity(unchecked) private var ranHead = 0
    @exclusivity(unchecked) private var ranHeadIndex = 0

    init(capacity: Int) {
        self.capacity = capacity
        states = .allocate(capacity: capacity)
        states.initialize(repeating: 0, count: capacity)
        blocks = .allocate(capacity: capacity)
        modes = .allocate(capacity: capacity)
        workItems = .allocate(capacity: capacity)
        workItems.initialize(repeating: nil, count: capacity)
        due = .allocate(capacity: capacity)
        due.initialize(repeating: 0, count: capacity)
        waited = .allocate(capacity: capacity)
        waited.initialize(repeating: false, count: capacity)
        freeList = .allocate(capacity: capacity)
        for i in 0..<capacity { freeList[i] = Int32(capacity - 1 - i) }
        freeCount = capacity
        ring = .allocate(capacity: capacity)
        ranRing = .allocate(capacity: capacity)
    }

    deinit {
        // Only queued requests hold a block (a taken one is the running
        // loop's, and a loop is not freed while it runs).
        for k in 0..<queued { _ = empty(ring[k]) }
        states.deallocate()
        blocks.deallocate()
        modes.deallocate()
        workItems.deallocate()
        due.deallocate()
        waited.deallocate()
        freeList.deallocate()
        ring.deallocate()
        ranRing.deallocate()
    }

    var mayHavePending: Bool { pendingCount.load(ordering: .acquiring) > 0 }

    /// Requests posted and not yet taken to run (or cancelled).
    var queuedCount: Int { pendingCount.load(ordering: .acquiring) }

    @inline(__always) private func state(_ slot: Int32) -> UInt32 { Futex.load(states + Int(slot)) & 7 }
    @inline(__always) private func generation(_ slot: Int32) -> UInt32 { Futex.load(states + Int(slot)) >> 3 }
    @inline(__always) private func setState(_ slot: Int32, _ s: UInt32) {
        Futex.store(states + Int(slot), (Futex.load(states + Int(slot)) & ~7) | s)
    }

    /// Whether the request in slot `i` runs in `ms`.
    @inline(__always) private func matches(_ i: Int, _ ms: ModeState) -> Bool {
        if let item = workItems[i] { return item._withUnsafeGuaranteedRef { Self.matches($0.modes, ms) } }
        return Self.matches(modes[i], ms)
    }

    /// Whether the request in slot `i` names `mode` itself (not through `.common`).
    private func names(_ i: Int, _ mode: RunLoopMode) -> Bool {
        if let item = workItems[i] { return item._withUnsafeGuaranteedRef { $0.modes.contains(mode) } }
        return modes[i].contains(mode)
    }

    static func matches(_ modes: [RunLoopMode], _ ms: ModeState) -> Bool {
        guard let running = ms.mode else { return false }
        // Indexed, not for-in: unspecialized iteration (debug builds) allocates
        // coroutine frames.
        var k = 0
        let n = modes.count
        while k < n {
            let m = modes[k]
            if m == running || (ms.isCommon && m == .common) { return true }
            k += 1
        }
        return false
    }

    func post(_ block: @escaping @Sendable () -> Void, _ m: [RunLoopMode], due d: UInt64, waited w: Bool) -> PostResult {
        post(due: d, waited: w) { i in
            (blocks + i).initialize(to: Block(run: block))
            (modes + i).initialize(to: m)
            workItems[i] = nil
        }
    }

    /// Posts a work item's block (never waited for).
    func post(_ item: PerformWorkItem, due d: UInt64) -> PostResult {
        post(due: d, waited: false) { i in
            workItems[i] = .passRetained(item)
        }
    }

    /// Takes a free slot, has `store` fill slot i with the request (a work
    /// item, or a block and its modes), and queues it; all under the lock.
    @inline(__always)
    private func post(due d: UInt64, waited w: Bool, store: (Int) -> Void) -> PostResult {
        lock.withLock { () -> PostResult in
            if closed { return .closed }
            if freeCount == 0 { reclaimRanSlots() }
            guard freeCount > 0 else { return .full }
            freeCount -= 1
            let slot = freeList[freeCount]
            let i = Int(slot)
            let gen = ((states[i] >> 3) &+ 1) & 0x1FFF_FFFF
            Futex.store(states + i, gen << 3 | Self.posted)
            store(i)
            due[i] = d
            if d != 0 { delayed += 1 }
            waited[i] = w
            ring[queued] = slot
            queued += 1
            pendingCount.wrappingAdd(1, ordering: .releasing)
            return .posted(PerformToken(slot: slot, generation: gen))
        }
    }

    /// Refuses every queued request and everything posted later (the loop
    /// ended): waiters are woken and told, the blocks are released.
    func close() {
        var dropped: [Emptied] = []
        lock.withLock {
            closed = true
            delayed = 0
            dropped.reserveCapacity(queued)
            for k in 0..<queued {
                let slot = ring[k]
                dropped.append(empty(slot))
                finish(slot, tellingWaiter: Self.refused)
            }
            queued = 0
        }
        // The blocks (and what they capture) are released outside the lock.
        dropped.removeAll()
    }

    /// Whether a request names `mode` itself (not through `.common`).
    func hasPending(named mode: RunLoopMode) -> Bool {
        if !mayHavePending { return false }
        return lock.withLock { () in
            for k in 0..<queued where names(Int(ring[k]), mode) { return true }
            return false
        }
    }

    /// Whether a request for `ms` is queued (due or not).
    func hasPending(for ms: ModeState) -> Bool {
        if !mayHavePending { return false }
        return lock.withLock { () in
            for k in 0..<queued where matches(Int(ring[k]), ms) { return true }
            return false
        }
    }

    /// The earliest due time of a queued delayed request for `ms`.
    func nextDue(for ms: ModeState) -> UInt64 {
        if !mayHavePending { return .max }
        return lock.withLock { () in
            var next = UInt64.max
            for k in 0..<queued {
                let i = Int(ring[k])
                if matches(i, ms) && due[i] < next { next = due[i] }
            }
            return next
        }
    }

    /// Moves the due requests for `ms` out of the ring, in FIFO order; they
    /// are no longer pending. Slots of requests run since the last take go
    /// back on the free list on the way.
    /// The clock (the loop's manual clock, or the monotonic one) is read
    /// only if a delayed request is queued.
    func take(for ms: ModeState, clock: ManualClock?, into out: UnsafeMutablePointer<Int32>, nextDue: inout UInt64) -> Int {
        lock.withLock { () in
            reclaimRanSlots()
            let now = delayed == 0 ? 0 : clock?.now.nanoseconds ?? MonotonicClock.nanoseconds
            var taken = 0
            var kept = 0
            for k in 0..<queued {
                let slot = ring[k]
                let i = Int(slot)
                if matches(i, ms) {
                    if due[i] <= now {
                        if due[i] != 0 { delayed -= 1 }
                        setState(slot, Self.running)
                        out[taken] = slot
                        taken += 1
                        continue
                    }
                    if due[i] < nextDue { nextDue = due[i] }
                }
                ring[kept] = slot
                kept += 1
            }
            queued = kept
            if taken > 0 { pendingCount.wrappingSubtract(taken, ordering: .releasing) }
            return taken
        }
    }

    /// With the lock held: the slots of requests that ran are free again.
    @inline(__always) private func reclaimRanSlots() {
        let tail = ranTail.load(ordering: .acquiring)
        while ranHead != tail {
            release(ranRing[ranHeadIndex])
            ranHeadIndex = ranHeadIndex + 1 == capacity ? 0 : ranHeadIndex + 1
            ranHead &+= 1
        }
    }

    /// Owner thread, for a request that ran: its slot goes back (see `ranRing`).
    @inline(__always) private func handBack(_ slot: Int32) {
        ranRing[ranTailIndex] = slot
        ranTailIndex = ranTailIndex + 1 == capacity ? 0 : ranTailIndex + 1
        ranTail.store(ranTail.load(ordering: .relaxed) &+ 1, ordering: .releasing)
    }

    /// Runs a taken request, then frees its slot (or hands it to its
    /// waiter), without the lock: a taken slot is the owner's alone until
    /// it is handed back (`ranRing`) or its waiter is told it is done.
    func run(_ slot: Int32) {
        let i = Int(slot)
        // Emptied before the slot is handed on (a post may then reuse it);
        // the queue's reference (to the work item, or to the block's context
        // and the modes array) is released at the end of this function,
        // outside any lock.
        let item = workItems[i]
        var closure: Emptied?
        if let item {
            workItems[i] = nil
            item._withUnsafeGuaranteedRef { __BOARDLOOP_IS_CALLING_OUT_TO_A_PERFORM_REQUEST__($0) }
        } else {
            closure = empty(slot, pending: false)
            if let block = closure?.block { __BOARDLOOP_IS_CALLING_OUT_TO_A_PERFORM_REQUEST__(block) }
        }
        if waited[i] {
            // The waiter frees the slot under the lock once it has seen `done`.
            setState(slot, Self.done)
            Futex.wakeAll(states + i)
        } else {
            handBack(slot)
        }
        item?.release()
        _ = closure
    }

    func cancel(_ token: PerformToken) -> Bool {
        let (ok, emptied) = lock.withLock { () -> (Bool, Emptied?) in
            let i = Int(token.slot)
            guard token.slot >= 0, i < capacity, generation(token.slot) == token.generation,
                  state(token.slot) == Self.posted
            else { return (false, nil) }
            removeFromRing(token.slot)
            let e = empty(token.slot)
            finish(token.slot, tellingWaiter: Self.cancelled)
            return (true, e)
        }
        _ = emptied
        return ok
    }

    /// Blocks until the request ran; false (and cancelled) if `deadline`
    /// passed before it started.
    func waitUntilDone(_ token: PerformToken, deadline: UInt64?) -> WaitResult {
        let p = states + Int(token.slot)
        while true {
            let word = Futex.load(p)
            switch word & 7 {
            case Self.done:
                lock.withLock { () in release(token.slot) }
                return .done
            case Self.cancelled:
                lock.withLock { () in release(token.slot) }
                return .timedOut
            case Self.refused:
                lock.withLock { () in release(token.slot) }
                return .loopEnded
            case Self.posted:
                if let deadline {
                    let now = MonotonicClock.nanoseconds
                    if now >= deadline {
                        // The waiter withdraws its own request: nobody to tell.
                        let withdrawn = lock.withLock { () -> Emptied? in
                            guard state(token.slot) == Self.posted else { return nil }
                            removeFromRing(token.slot)
                            let e = empty(token.slot)
                            release(token.slot)
                            return e
                        }
                        if withdrawn != nil { return .timedOut }
                        continue
                    }
                    Futex.wait(p, whileEqualTo: word, timeoutNanoseconds: Int64(deadline - now))
                } else {
                    Futex.wait(p, whileEqualTo: word)
                }
            default:
                // Running: it will finish; wait without a deadline.
                Futex.wait(p, whileEqualTo: word)
            }
        }
    }

    /// What a finished request leaves: released by the caller after the
    /// lock, since releasing a block's context may run deinits.
    private struct Emptied {
        let item: PerformWorkItem?
        let block: Block?
        let modes: [RunLoopMode]?
    }

    /// Takes the request's work item, or its block and modes, out of its
    /// slot (with the lock held, or by the owner for a taken request); with
    /// `pending`, it was still counted as pending and no longer is.
    @inline(__always) private func empty(_ slot: Int32, pending: Bool = true) -> Emptied {
        let i = Int(slot)
        let e: Emptied
        if let item = workItems[i] {
            workItems[i] = nil
            e = Emptied(item: item.takeRetainedValue(), block: nil, modes: nil)
        } else {
            e = Emptied(item: nil, block: (blocks + i).move(), modes: (modes + i).move())
        }
        if pending { pendingCount.wrappingSubtract(1, ordering: .releasing) }
        return e
    }

    /// With the lock held, for an emptied slot: a waiter in
    /// `performAndWait` is told `state` and woken (it frees the slot);
    /// otherwise the slot is free again.
    @inline(__always) private func finish(_ slot: Int32, tellingWaiter state: UInt32) {
        if waited[Int(slot)] {
            setState(slot, state)
            Futex.wakeAll(states + Int(slot))
        } else {
            release(slot)
        }
    }

    private func release(_ slot: Int32) {
        setState(slot, Self.free)
        waited[Int(slot)] = false
        freeList[freeCount] = slot
        freeCount += 1
    }

    private func removeFromRing(_ slot: Int32) {
        var kept = 0
        for k in 0..<queued {
            let s = ring[k]
            if s == slot {
                if due[Int(s)] != 0 { delayed -= 1 }
                continue
            }
            ring[kept] = s
            kept += 1
        }
        queued = kept
    }
}
