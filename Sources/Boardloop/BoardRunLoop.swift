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
public final class BoardRunLoop: @unchecked Sendable {
    public let capacities: Capacities
    /// The kernel thread id of the owning thread.
    public let ownerThread: Int32
    /// The manual clock the loop runs on, if any (where there is none, the
    /// package's daemon reads CLOCK_MONOTONIC itself, without a call).
    package let manualClock: ManualClock?

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
    package var timerArmCount: UInt64 { poller.armCount }
    /// How many times the loop called `epoll_wait` (for tests and profiling:
    /// ports found ready by one wait are handled without another).
    public var waitCount: UInt64 { poller.waitCount }
    /// True while a wake-up would be redundant: one is already written, or
    /// the loop is not between the start of a pass and its sleep.
    let wakePending = Atomic<Bool>(true)
    /// Perform requests the owner thread posted during a run, which wrote no
    /// wake-up: a pass in which this moved does not sleep (a count, not a
    /// flag, so a nested run cannot clear what its outer pass must see).
    /// Owner thread only.
    @exclusivity(unchecked) var ownerPosts: UInt64 = 0
    /// How many times a wake-up was written to the eventfd (for tests).
    let wakeUpWrites = Atomic<UInt64>(0)
    package var wakeUpWriteCount: UInt64 { wakeUpWrites.load(ordering: .relaxed) }
    let stopRequested = Atomic<Bool>(false)
    /// The ready list: the ports the last `epoll_wait` returned, sorted by
    /// order (stable: epoll's order among equals), dispatched one per pass
    /// before the loop waits again. Entries `readyNext..<readyCount` are
    /// left; they belong to the mode with bit `readyModeBit`.
    let readyList: UnsafeMutablePointer<ReadyPort>
    /// Each port slot's source order, kept beside the table so that sorting
    /// the ready list reads no source object (and takes no reference).
    let portOrders: UnsafeMutablePointer<Int>
    @exclusivity(unchecked) var readyCount = 0
    @exclusivity(unchecked) var readyNext = 0
    @exclusivity(unchecked) var readyModeBit: UInt64 = 0

    // Items.
    @exclusivity(unchecked) var customs: SlotTable<CustomSource>
    @exclusivity(unchecked) var ports: SlotTable<PortSource>
    @exclusivity(unchecked) var timers: SlotTable<RunLoopTimer>
    @exclusivity(unchecked) var observers: SlotTable<RunLoopObserver>
    let timerKeys: UnsafeMutablePointer<TimerKey>
    /// Moves on whenever a timer key or a mode's timer heap changes.
    @exclusivity(unchecked) var timerEpoch: UInt64 = 0
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
    /// The mode of the innermost active run. Unowned: the loop's mode
    /// table (`modeStates`) keeps every mode state for the loop's life, and
    /// a run call would otherwise retain and release it twice.
    @exclusivity(unchecked) unowned(unsafe) var runningMode: ModeState?
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
                throw .invalidArgument("BoardRunLoop.Capacities.\(name) is \(value); it must be between 1 and \(max)")
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
                "BoardRunLoop.Capacities reserve about \(c.reservedBytes >> 20) MiB; a loop may reserve at most \(m.bytes >> 20) MiB (lower sources, timers, pendingPerforms or nestingDepth)")
        }

        do { poller = try Poller(modes: c.modes, eventsPerWait: c.eventsPerWait) } catch { throw .system(error) }
        remoteCapacity = c.sources * 2 + c.timers + c.observers
        remoteQueue = .allocate(capacity: remoteCapacity)
        remoteQueue.initialize(repeating: nil, count: remoteCapacity)
        capacities = c
        ownerThread = owner
        if case .manual(let m) = clock { manualClock = m } else { manualClock = nil }
        readyList = .allocate(capacity: c.eventsPerWait)
        portOrders = .allocate(capacity: c.sources)
        portOrders.initialize(repeating: 0, count: c.sources)
        customs = SlotTable(capacity: c.sources)
        ports = SlotTable(capacity: c.sources)
        timers = SlotTable(capacity: c.timers)
        observers = SlotTable(capacity: c.observers)
        timerKeys = .allocate(capacity: c.timers)
        timerKeys.initialize(repeating: TimerKey(fire: 0, tolerance: 0, order: 0, seq: 0), count: c.timers)
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
        _ = Self.runPathMetadata
    }

    /// The types the run path borrows items through. Unoptimised (debug)
    /// builds make a generic type's metadata at its first use, and making it
    /// allocates: made here, when the first loop is, a loop that runs for the
    /// first time allocates nothing. (Optimised builds need none of them.)
    private static let runPathMetadata: [Any.Type] = [
        Unmanaged<PortSource>.self, Unmanaged<PortSource>?.self,
        Unmanaged<RunLoopTimer>.self, Unmanaged<RunLoopTimer>?.self,
        Unmanaged<CustomSource>.self, Unmanaged<CustomSource>?.self,
        Unmanaged<BoardRunLoop>.self, Unmanaged<BoardRunLoop>?.self,
        (Bool?, PortSource?, AnyObject?).self, RunLoopTimer?.self, AnyObject?.self,
        UnsafeMutablePointer<PerformQueue.Block>.self, PerformQueue.Block?.self,
    ]

    deinit {
        manualClock?.detach(self)
        // Items outlive their loop: detach them so they do not point at it.
        // The objects ports belong to are released after the lock: their
        // deinit may invalidate other items, which takes it.
        var owners: [AnyObject] = []
        defer { owners.removeAll() }
        itemBindingLock.withLock {
            // (No callout runs: a loop is not freed while it runs. Threads
            // waiting in `invalidateAndWait()` are released.)
            customs.forEach { $0.item = ItemState(); $0.item.invalidated = true; $0.remote.settle() }
            ports.forEach { p in
                if let owner = p.closeRegisteredFD() { owners.append(owner) }
                p.item = ItemState()
                p.item.invalidated = true
                p.remote.settle()
            }
            timers.forEach { $0.item = ItemState(); $0.item.invalidated = true; $0.remote.settle() }
            observers.forEach { $0.item = ItemState(); $0.item.invalidated = true; $0.remote.settle() }
            remoteQueue.deinitialize(count: remoteCapacity)
        }
        remoteQueue.deallocate()
        timerKeys.deallocate()
        heldPorts.deallocate()
        readyList.deallocate()
        portOrders.deallocate()
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
            wakeUpWrites.add(1, ordering: .relaxed)
        }
    }

    /// Makes the innermost active run call return `.stopped`. As in CF, a stop
    /// made while no run call is active has no effect. Safe from any thread.
    public func stop() {
        stopRequested.store(true, ordering: .releasing)
        // A loop that is awake drops this wake-up; its pass checks the flag
        // before it sleeps (see `runPasses`).
        wakeUp()
    }

    /// Whether the loop is blocked in the kernel waiting for an event.
    public var isWaiting: Bool { isWaitingFlag.load(ordering: .acquiring) }
    let isWaitingFlag = Atomic<Bool>(false)

    // MARK: Adding and removing items (owner thread only)

    /// Adds a custom source to `mode` (or to every common mode for `.common`);
    /// its `schedule` callback runs for each mode it joins. Owner thread only.
    public func add(_ source: CustomSource, mode: RunLoopMode) throws(RunLoopError) {
        try addItem(source, mode: mode, operation: "BoardRunLoop.add(CustomSource)")
    }

    /// Adds a port source to `mode` (or every common mode): its fd joins the
    /// mode's epoll set. A bad fd, or one epoll cannot watch (a regular file),
    /// is a `.system` error naming epoll_ctl; nothing is changed then. Owner
    /// thread only.
    public func add(_ source: PortSource, mode: RunLoopMode) throws(RunLoopError) {
        try addItem(source, mode: mode, operation: "BoardRunLoop.add(PortSource)")
    }

    /// Adds a timer to `mode` (or every common mode). Owner thread only.
    public func add(_ timer: RunLoopTimer, mode: RunLoopMode) throws(RunLoopError) {
        try addItem(timer, mode: mode, operation: "BoardRunLoop.add(RunLoopTimer)")
    }

    /// Adds an observer to `mode` (or every common mode). Owner thread only.
    public func add(_ observer: RunLoopObserver, mode: RunLoopMode) throws(RunLoopError) {
        try addItem(observer, mode: mode, operation: "BoardRunLoop.add(RunLoopObserver)")
    }

    /// Removes a custom source from `mode` (its `cancel` callback runs). Owner thread only.
    public func remove(_ source: CustomSource, mode: RunLoopMode) throws(RunLoopError) {
        try removeItem(source, mode: mode, operation: "BoardRunLoop.remove(CustomSource)")
    }

    /// Removes a port source from `mode`. Owner thread only.
    public func remove(_ source: PortSource, mode: RunLoopMode) throws(RunLoopError) {
        try removeItem(source, mode: mode, operation: "BoardRunLoop.remove(PortSource)")
    }

    /// Removes a timer from `mode`. Owner thread only.
    public func remove(_ timer: RunLoopTimer, mode: RunLoopMode) throws(RunLoopError) {
        try removeItem(timer, mode: mode, operation: "BoardRunLoop.remove(RunLoopTimer)")
    }

    /// Removes an observer from `mode`. Owner thread only.
    public func remove(_ observer: RunLoopObserver, mode: RunLoopMode) throws(RunLoopError) {
        try removeItem(observer, mode: mode, operation: "BoardRunLoop.remove(RunLoopObserver)")
    }

    public func contains(_ source: CustomSource, mode: RunLoopMode) -> Bool { containsItem(source, mode: mode) }
    public func contains(_ source: PortSource, mode: RunLoopMode) -> Bool { containsItem(source, mode: mode) }
    public func contains(_ timer: RunLoopTimer, mode: RunLoopMode) -> Bool { containsItem(timer, mode: mode) }
    public func contains(_ observer: RunLoopObserver, mode: RunLoopMode) -> Bool { containsItem(observer, mode: mode) }
}
