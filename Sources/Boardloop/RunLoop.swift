import CLinux
import Glibc
import Synchronization

/// A run loop with Core Foundation's semantics (modes, version-0 custom
/// sources, version-1 port sources, timers, observers, perform requests),
/// built on epoll, eventfd and timerfd.
///
/// A loop belongs to one thread, its owner: only the owner adds and removes
/// items and runs the loop; `add`, `remove` and `run` from another thread
/// throw `RunLoopError.notOwner` (unlike CF, which takes the loop's lock for
/// them: here the run path takes no lock at all, which is what keeps a pass
/// cheap and allocation-free; use `perform` to add from another thread).
/// Safe from any thread: `wakeUp()`, `stop()`, `perform(...)`, `cancel(_:)`,
/// `CustomSource.signal()`, and the changes CF allows from any thread —
/// `invalidate()` of any item, a timer's `fireDate`, a port's `interest` —
/// which the owner applies at the start of its next pass (an invalidated
/// item's handler is not started again once `invalidate()` returned).
///
/// When the owner thread exits, its loop ends: every item still scheduled is
/// invalidated (and released), queued perform requests are dropped, waiters
/// in `performAndWait` get `.loopEnded`, and new requests are refused with it.
///
/// Everything the loop needs while running is reserved when it is made, from
/// its `Capacities`; exceeding a capacity is a typed error at add/post time.
/// While it runs, the loop makes no heap allocations.
public final class RunLoop: @unchecked Sendable {
    public let capacities: Capacities
    /// The kernel thread id of the owning thread.
    public let ownerThread: Int32
    let manualClock: ManualClock?

    /// Set when the owner thread has exited (see `end()`).
    let endedFlag = Atomic<Bool>(false)
    /// Items other threads changed, for the owner to apply (guarded by
    /// `itemBindingLock`; a FIFO ring, one entry per item at most).
    let remoteQueue: UnsafeMutablePointer<(any LoopItem)?>
    let remoteCapacity: Int
    @exclusivity(unchecked) var remoteHead = 0
    @exclusivity(unchecked) var remoteCount = 0
    let remotePending = Atomic<Bool>(false)

    /// The epoll sets, the wake-up eventfd and the timerfd.
    let poller: Poller
    // The engine's mutable state (here and in ModeState, the items and the
    // perform queue) is `@exclusivity(unchecked)`: it is touched on the
    // owner thread (or under a lock) by engine code that never holds an
    // access across a callout, and the runtime's dynamic exclusivity checks
    // were 40% of the instructions of a pass (callgrind, BENCHMARKS.md).
    /// How many times the timerfd was re-armed (for tests and profiling).
    public var timerArmCount: UInt64 { poller.armCount }
    /// How many times the loop called `epoll_wait` (for tests and profiling:
    /// ports found ready by one wait are handled without another).
    public var waitCount: UInt64 { poller.waitCount }
    /// True while a wake-up would be redundant: one is already written, or
    /// the loop is not between the start of a pass and its sleep.
    let wakePending = Atomic<Bool>(true)
    let stopRequested = Atomic<Bool>(false)
    /// The ready list: the ports the last `epoll_wait` returned, sorted by
    /// order (stable: epoll's order among equals), dispatched one per pass
    /// before the loop waits again. Entries `readyNext..<readyCount` are
    /// left; they belong to the mode with bit `readyModeBit`.
    let readyList: UnsafeMutablePointer<ReadyPort>
    @exclusivity(unchecked) var readyCount = 0
    @exclusivity(unchecked) var readyNext = 0
    @exclusivity(unchecked) var readyModeBit: UInt64 = 0

    // Items.
    @exclusivity(unchecked) var customs: SlotTable<CustomSource>
    @exclusivity(unchecked) var ports: SlotTable<PortSource>
    @exclusivity(unchecked) var timers: SlotTable<RunLoopTimer>
    @exclusivity(unchecked) var observers: SlotTable<RunLoopObserver>
    let timerKeys: UnsafeMutablePointer<TimerKey>
    let modeStates: [ModeState]
    @exclusivity(unchecked) var usedModes = 0
    @exclusivity(unchecked) var nextSeq: UInt64 = 1
    @exclusivity(unchecked) var scratch: ScratchStack

    // Rate-limit holds.
    let heldPorts: UnsafeMutablePointer<Int32>
    @exclusivity(unchecked) var heldPortCount = 0
    @exclusivity(unchecked) var nextPortRelease: UInt64 = .max
    @exclusivity(unchecked) var nextCustomRelease: UInt64 = .max

    // Running state.
    @exclusivity(unchecked) var runningMode: ModeState?
    /// How many run calls are active (nested runs count each).
    @exclusivity(unchecked) public internal(set) var runDepth = 0
    /// Callouts made so far (timers fired, sources handled, performs run):
    /// lets `advanceManualClock` tell when a step has nothing left to do.
    @exclusivity(unchecked) var workCount: UInt64 = 0

    let performs: PerformQueue

    // MARK: Creation

    /// Makes a loop owned by the calling thread. It is not the thread's
    /// `current` loop (see `makeCurrent`); use it from this thread only.
    /// Like every loop of a thread other than the main thread, it ends when
    /// its thread exits (see `end()`).
    public convenience init(capacities: Capacities = Capacities(), clock: RunLoopClock = .monotonic) throws(RunLoopError) {
        try self.init(capacities: capacities, clock: clock, owner: OSThread.currentID)
        ThreadLoops.register(self)
    }

    init(capacities c: Capacities, clock: RunLoopClock, owner: Int32) throws(RunLoopError) {
        func check(_ value: Int, _ name: String, max: Int) throws(RunLoopError) {
            guard value >= 1 && value <= max else {
                throw .invalidArgument("RunLoop.Capacities.\(name) is \(value); it must be between 1 and \(max)")
            }
        }
        let m = Capacities.maxima
        try check(c.sources, "sources", max: m.sources)
        try check(c.timers, "timers", max: m.timers)
        try check(c.observers, "observers", max: m.observers)
        try check(c.modes, "modes", max: m.modes)
        try check(c.pendingPerforms, "pendingPerforms", max: m.pendingPerforms)
        try check(c.eventsPerWait, "eventsPerWait", max: m.eventsPerWait)
        try check(c.nestingDepth, "nestingDepth", max: m.nestingDepth)
        guard c.reservedBytes <= m.bytes else {
            throw .invalidArgument(
                "RunLoop.Capacities reserve about \(c.reservedBytes >> 20) MiB; a loop may reserve at most \(m.bytes >> 20) MiB (lower sources, timers, pendingPerforms or nestingDepth)")
        }

        do { poller = try Poller(modes: c.modes, eventsPerWait: c.eventsPerWait) } catch { throw .system(error) }
        remoteCapacity = c.sources * 2 + c.timers + c.observers
        remoteQueue = .allocate(capacity: remoteCapacity)
        remoteQueue.initialize(repeating: nil, count: remoteCapacity)
        capacities = c
        ownerThread = owner
        if case .manual(let m) = clock { manualClock = m } else { manualClock = nil }
        readyList = .allocate(capacity: c.eventsPerWait)
        customs = SlotTable(capacity: c.sources)
        ports = SlotTable(capacity: c.sources)
        timers = SlotTable(capacity: c.timers)
        observers = SlotTable(capacity: c.observers)
        timerKeys = .allocate(capacity: c.timers)
        timerKeys.initialize(repeating: TimerKey(fire: 0, order: 0, seq: 0), count: c.timers)
        var states: [ModeState] = []
        states.reserveCapacity(c.modes)
        for i in 0..<c.modes {
            states.append(ModeState(index: i, sources: c.sources, observers: c.observers, timers: c.timers))
        }
        modeStates = states
        scratch = ScratchStack(capacity: (c.sources + c.observers + c.timers + c.pendingPerforms) * c.nestingDepth)
        heldPorts = .allocate(capacity: c.sources)
        performs = PerformQueue(capacity: c.pendingPerforms)
        // The default mode always exists and starts in the common set (as in CF).
        let def = try modeState(creating: .default)
        def.isCommon = true
        manualClock?.attach(self)
    }

    deinit {
        // Items outlive their loop: detach them so they do not point at it.
        // The objects ports belong to are released after the lock: their
        // deinit may invalidate other items, which takes it.
        var owners: [AnyObject] = []
        defer { owners.removeAll() }
        itemBindingLock.withLock {
            customs.forEach { $0.item = ItemState(); $0.item.invalidated = true }
            ports.forEach { p in
                if let owner = p.closeRegisteredFD() { owners.append(owner) }
                p.item = ItemState()
                p.item.invalidated = true
            }
            timers.forEach { $0.item = ItemState(); $0.item.invalidated = true }
            observers.forEach { $0.item = ItemState(); $0.item.invalidated = true }
            remoteQueue.deinitialize(count: remoteCapacity)
        }
        remoteQueue.deallocate()
        timerKeys.deallocate()
        heldPorts.deallocate()
        readyList.deallocate()
    }

    // MARK: Basic properties

    /// Whether the calling thread owns this loop.
    @inline(__always) public var isOwnedByCurrentThread: Bool { OSThread.currentID == ownerThread }

    @inline(__always)
    func checkOwner(_ operation: @autoclosure () -> String) throws(RunLoopError) {
        let tid = OSThread.currentID
        if tid != ownerThread { throw .notOwner(operation: operation(), ownerThread: ownerThread, callingThread: tid) }
    }

    /// Whether the owner thread has exited and the loop ended (see `end()`).
    public var hasEnded: Bool { endedFlag.load(ordering: .acquiring) }

    /// The loop's current time: CLOCK_MONOTONIC, or its manual clock.
    public var now: MonotonicInstant { MonotonicInstant(nanoseconds: nowNanoseconds) }

    @inline(__always) var nowNanoseconds: UInt64 {
        if let manualClock { return manualClock.now.nanoseconds }
        return MonotonicClock.nanoseconds
    }

    /// The mode the innermost active run call is running, if any.
    public var currentMode: RunLoopMode? { runningMode?.mode }

    /// Every mode the loop knows (the default mode and any mode an item or
    /// `addCommonMode` named).
    public var allModes: [RunLoopMode] { modeStates.prefix(usedModes).compactMap(\.mode) }

    /// The modes in the common set; items added to `.common` are in each.
    public var commonModes: [RunLoopMode] { modeStates.prefix(usedModes).filter(\.isCommon).compactMap(\.mode) }

    // MARK: Wake-up and stop (any thread)

    /// Wakes the loop if it is sleeping or about to sleep, so it runs another
    /// pass (and sees signalled sources, stop requests and performs). As in
    /// CF, a wake-up while the loop is awake past its sleep, or not running,
    /// is dropped: the loop checks everything before it next sleeps anyway.
    /// Safe from any thread; several wake-ups cost one system call.
    @inline(__always)
    public func wakeUp() {
        if !wakePending.exchange(true, ordering: .acquiringAndReleasing) {
            poller.wake.signal()
        }
    }

    /// Makes the innermost active run call return `.stopped`. As in CF, a stop
    /// made while no run call is active has no effect. Safe from any thread.
    public func stop() {
        stopRequested.store(true, ordering: .releasing)
        wakeUp()
    }

    /// Whether the loop is blocked in the kernel waiting for an event.
    public var isWaiting: Bool { isWaitingFlag.load(ordering: .acquiring) }
    let isWaitingFlag = Atomic<Bool>(false)

    // MARK: Binding items

    private func bind<T: LoopItem>(_ x: T, kind: String, insert: () -> (slot: Int32, generation: UInt32)?, capacity: RunLoopCapacity, limit: Int) throws(RunLoopError) -> Bool {
        if hasEnded { throw .loopEnded(thread: ownerThread) }
        return try itemBindingLock.withLock { () throws(RunLoopError) -> Bool in
            if x.item.invalidated || x.remote.invalidationRequested { throw .invalidated(item: kind) }
            if let loop = x.item.loop {
                if loop !== self { throw .belongsToAnotherLoop(item: kind) }
                return false
            }
            guard let (slot, generation) = insert() else { throw .capacityExceeded(capacity, limit: limit) }
            x.item.loop = self
            x.item.slot = slot
            x.item.generation = generation
            x.item.seq = nextSeq
            nextSeq += 1
            x.item.modeMask = 0
            x.item.inCommonModes = false
            return true
        }
    }

    /// Frees the item's slot and detaches it from the loop.
    private func unbind<T: LoopItem>(_ x: T, from table: inout SlotTable<T>) {
        itemBindingLock.withLock {
            table.remove(x.item.slot)
            x.item.detach()
        }
    }

    private var sourceCount: Int { customs.count + ports.count }

    // MARK: Custom sources

    /// Adds a custom source to `mode` (or to every common mode for `.common`);
    /// its `schedule` callback runs for each mode it joins. Owner thread only.
    public func add(_ source: CustomSource, mode: RunLoopMode) throws(RunLoopError) {
        try checkOwner("RunLoop.add(CustomSource)")
        let ms = try targets(mode, creating: true)
        let full = sourceCount >= capacities.sources
        _ = try bind(source, kind: "CustomSource", insert: { full ? nil : customs.insert(source) }, capacity: .sources, limit: capacities.sources)
        if mode == .common { source.item.inCommonModes = true }
        for m in ms { enter(source, m) }
    }

    func enter(_ source: CustomSource, _ ms: ModeState) {
        guard source.item.modeMask & ms.bit == 0 else { return }
        source.item.modeMask |= ms.bit
        let order = source.order
        ms.customs.insert(source.item.slot) { other in customs[other]!.order > order }
        source.scheduleCallback?(self, ms.mode!)
    }

    /// Removes a custom source from `mode` (its `cancel` callback runs). Owner thread only.
    public func remove(_ source: CustomSource, mode: RunLoopMode) throws(RunLoopError) {
        try removeItem(source, mode: mode, operation: "RunLoop.remove(CustomSource)", leave: leave, unbind: unbind)
    }

    private func leave(_ source: CustomSource, _ ms: ModeState) {
        guard source.item.modeMask & ms.bit != 0 else { return }
        source.item.modeMask &= ~ms.bit
        ms.customs.remove(source.item.slot)
        source.cancelCallback?(self, ms.mode!)
    }

    private func unbind(_ source: CustomSource) { unbind(source, from: &customs) }

    func invalidateSource(_ source: CustomSource) {
        invalidateItem(source, operation: "CustomSource.invalidate", leave: leave, unbind: unbind)
    }

    public func contains(_ source: CustomSource, mode: RunLoopMode) -> Bool { containsItem(source, mode: mode) }

    // MARK: Port sources

    /// Adds a port source to `mode` (or every common mode): its fd joins the
    /// mode's epoll set. A bad fd, or one epoll cannot watch (a regular file),
    /// is a `.system` error naming epoll_ctl; nothing is changed then. Owner
    /// thread only.
    public func add(_ source: PortSource, mode: RunLoopMode) throws(RunLoopError) {
        try checkOwner("RunLoop.add(PortSource)")
        let ms = try targets(mode, creating: true)
        let full = sourceCount >= capacities.sources
        let fresh = try bind(source, kind: "PortSource", insert: { full ? nil : ports.insert(source) }, capacity: .sources, limit: capacities.sources)
        if fresh {
            do throws(RunLoopError) { try source.openRegisteredFD() } catch {
                unbind(source, from: &ports)
                throw error
            }
        }
        var entered: [ModeState] = []
        do throws(RunLoopError) {
            for m in ms where source.item.modeMask & m.bit == 0 {
                try enter(source, m)
                entered.append(m)
            }
        } catch {
            for m in entered { leave(source, m) }
            if fresh { unbind(source) }
            throw error
        }
        if mode == .common { source.item.inCommonModes = true }
    }

    func enter(_ source: PortSource, _ ms: ModeState) throws(RunLoopError) {
        guard source.item.modeMask & ms.bit == 0 else { return }
        let token = Poller.portToken(slot: source.item.slot, generation: source.item.generation)
        do {
            try poller.register(source.registeredFD, in: ms.epfd, events: source.heldInKernel ? 0 : source.interestBits, token: token, userFD: source.fd)
        } catch {
            if error.code == .operationNotPermitted {
                throw .invalidArgument(
                    "fd \(source.fd) is a regular file or directory: such files are always ready, so epoll cannot watch them and they cannot be port sources (read them directly, or watch a pipe, socket or device instead)")
            }
            throw .system(error)
        }
        source.item.modeMask |= ms.bit
        ms.portCount += 1
    }

    /// Removes a port source from `mode`. Owner thread only.
    public func remove(_ source: PortSource, mode: RunLoopMode) throws(RunLoopError) {
        try removeItem(source, mode: mode, operation: "RunLoop.remove(PortSource)", leave: leave, unbind: unbind)
    }

    private func leave(_ source: PortSource, _ ms: ModeState) {
        guard source.item.modeMask & ms.bit != 0 else { return }
        source.item.modeMask &= ~ms.bit
        ms.portCount -= 1
        // The loop's own duplicate of the fd: removing it can never touch a
        // registration of another source, even if the user closed `fd` and
        // the number was reused.
        poller.unregister(source.registeredFD, from: ms.epfd)
    }

    private func unbind(_ source: PortSource) {
        if source.heldInKernel { dropHeld(source.item.slot) }
        source.heldInKernel = false
        let owner = source.closeRegisteredFD()
        unbind(source, from: &ports)
        _ = owner  // released here, after the source left the loop
    }

    func invalidatePort(_ source: PortSource) {
        let wasHere = source.item.loop === self
        // The owner the loop kept alive must outlive the hook that tells it.
        let owner = source.retainedOwner
        invalidateItem(source, operation: "PortSource.invalidate", leave: leave, unbind: unbind)
        if wasHere, let hook = source.invalidationHandler {
            source.invalidationHandler = nil
            hook()
        }
        withExtendedLifetime(owner) {}
    }

    func portInterestChanged(_ source: PortSource) {
        guard !source.heldInKernel else { return }
        applyPortEvents(source, source.interestBits)
    }

    func applyPortEvents(_ source: PortSource, _ bits: UInt32) {
        let token = Poller.portToken(slot: source.item.slot, generation: source.item.generation)
        for ms in modeStates.prefix(usedModes) where source.item.modeMask & ms.bit != 0 {
            poller.modify(source.registeredFD, in: ms.epfd, events: bits, token: token)
        }
    }

    public func contains(_ source: PortSource, mode: RunLoopMode) -> Bool { containsItem(source, mode: mode) }

    // MARK: Timers

    /// Adds a timer to `mode` (or every common mode). Owner thread only.
    public func add(_ timer: RunLoopTimer, mode: RunLoopMode) throws(RunLoopError) {
        try checkOwner("RunLoop.add(RunLoopTimer)")
        let ms = try targets(mode, creating: true)
        let fresh = try bind(timer, kind: "RunLoopTimer", insert: { timers.insert(timer) }, capacity: .timers, limit: capacities.timers)
        if fresh {
            timerKeys[Int(timer.item.slot)] = TimerKey(fire: timer.fireNanoseconds, order: timer.order, seq: timer.item.seq)
        }
        if mode == .common { timer.item.inCommonModes = true }
        for m in ms { enter(timer, m) }
    }

    func enter(_ timer: RunLoopTimer, _ ms: ModeState) {
        guard timer.item.modeMask & ms.bit == 0 else { return }
        timer.item.modeMask |= ms.bit
        ms.timers.insert(timer.item.slot, keys: timerKeys)
    }

    /// Removes a timer from `mode`. Owner thread only.
    public func remove(_ timer: RunLoopTimer, mode: RunLoopMode) throws(RunLoopError) {
        try removeItem(timer, mode: mode, operation: "RunLoop.remove(RunLoopTimer)", leave: leave, unbind: unbind)
    }

    private func leave(_ timer: RunLoopTimer, _ ms: ModeState) {
        guard timer.item.modeMask & ms.bit != 0 else { return }
        timer.item.modeMask &= ~ms.bit
        ms.timers.remove(timer.item.slot, keys: timerKeys)
    }

    private func unbind(_ timer: RunLoopTimer) { unbind(timer, from: &timers) }

    func invalidateTimer(_ timer: RunLoopTimer) {
        invalidateItem(timer, operation: "RunLoopTimer.invalidate", leave: leave, unbind: unbind)
    }

    func timerMoved(_ timer: RunLoopTimer) {
        let slot = Int(timer.item.slot)
        timerKeys[slot].fire = timer.fireNanoseconds
        var i = 0
        while i < usedModes {
            let ms = modeStates[i]
            if timer.item.modeMask & ms.bit != 0 { ms.timers.update(timer.item.slot, keys: timerKeys) }
            i += 1
        }
    }

    public func contains(_ timer: RunLoopTimer, mode: RunLoopMode) -> Bool { containsItem(timer, mode: mode) }

    // MARK: Observers

    /// Adds an observer to `mode` (or every common mode). Owner thread only.
    public func add(_ observer: RunLoopObserver, mode: RunLoopMode) throws(RunLoopError) {
        try checkOwner("RunLoop.add(RunLoopObserver)")
        let ms = try targets(mode, creating: true)
        _ = try bind(observer, kind: "RunLoopObserver", insert: { observers.insert(observer) }, capacity: .observers, limit: capacities.observers)
        if mode == .common { observer.item.inCommonModes = true }
        for m in ms { enter(observer, m) }
    }

    func enter(_ observer: RunLoopObserver, _ ms: ModeState) {
        guard observer.item.modeMask & ms.bit == 0 else { return }
        observer.item.modeMask |= ms.bit
        let order = observer.order
        ms.observers.insert(observer.item.slot) { other in observers[other]!.order > order }
        recomputeObserverMask(ms)
    }

    /// Removes an observer from `mode`. Owner thread only.
    public func remove(_ observer: RunLoopObserver, mode: RunLoopMode) throws(RunLoopError) {
        try removeItem(observer, mode: mode, operation: "RunLoop.remove(RunLoopObserver)", leave: leave, unbind: unbind)
    }

    private func leave(_ observer: RunLoopObserver, _ ms: ModeState) {
        guard observer.item.modeMask & ms.bit != 0 else { return }
        observer.item.modeMask &= ~ms.bit
        ms.observers.remove(observer.item.slot)
        recomputeObserverMask(ms)
    }

    private func unbind(_ observer: RunLoopObserver) { unbind(observer, from: &observers) }

    private func recomputeObserverMask(_ ms: ModeState) {
        var mask: UInt32 = 0
        for i in 0..<ms.observers.count { mask |= observers[ms.observers[i]]!.activities.rawValue }
        ms.observerMask = mask
    }

    func invalidateObserver(_ observer: RunLoopObserver) {
        invalidateItem(observer, operation: "RunLoopObserver.invalidate", leave: leave, unbind: unbind)
    }

    public func contains(_ observer: RunLoopObserver, mode: RunLoopMode) -> Bool { containsItem(observer, mode: mode) }

    // MARK: What every item kind shares

    private func removeItem<T: LoopItem>(
        _ x: T, mode: RunLoopMode, operation: @autoclosure () -> String, leave: (T, ModeState) -> Void, unbind: (T) -> Void
    ) throws(RunLoopError) {
        try checkOwner(operation())
        guard x.item.loop === self else { return }
        if mode == .common { x.item.inCommonModes = false }
        for m in try targets(mode, creating: false) { leave(x, m) }
        if x.item.modeMask == 0 && !x.item.inCommonModes { unbind(x) }
    }

    /// Owner thread only (public `invalidate()`s route here through `routeChange`).
    private func invalidateItem<T: LoopItem>(_ x: T, operation: @autoclosure () -> String, leave: (T, ModeState) -> Void, unbind: (T) -> Void) {
        guard x.item.loop === self else { return }
        itemBindingLock.withLock { x.item.invalidated = true }
        x.item.inCommonModes = false
        for m in modeStates.prefix(usedModes) { leave(x, m) }
        unbind(x)
    }

    private func containsItem<T: LoopItem>(_ x: T, mode: RunLoopMode) -> Bool {
        guard x.item.loop === self else { return false }
        if mode == .common { return x.item.inCommonModes }
        guard let ms = modeState(named: mode) else { return false }
        return x.item.modeMask & ms.bit != 0
    }
}
