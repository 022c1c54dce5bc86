import CLinux
import Glibc

/// A port-based input source (CF's version-1 source): a file descriptor the
/// kernel signals — a GPIO line request, a signalfd, a message port's
/// eventfd, a socket, a pipe. Its fd sits in the epoll set of each mode it is
/// in, level-triggered: while its mode is not running the kernel keeps the
/// readiness, so nothing is dropped.
///
/// One ready port source is handled per pass (the guide's step 5 → step 9).
/// The ports one `epoll_wait` finds ready form the loop's ready list: they
/// are handled one per pass, lowest order first, before the loop waits
/// again (due timers still fire first), so a busy loop makes one system call
/// per batch rather than per event. A port that becomes ready meanwhile is
/// handled after that batch. The handler is called on the loop's thread with
/// what the kernel reported; it should consume the readiness (read the fd),
/// or the source is handled again on a later pass. As with any epoll loop,
/// make the fd non-blocking: if another handler of the same batch drained
/// it, the read finds nothing.
///
/// The fd is the caller's: invalidating the source does not close it. The
/// loop watches its own duplicate of it (close-on-exec), made when the source
/// is added and closed when it leaves the loop, so a registration always
/// belongs to the source that made it: if the caller closes `fd` and the
/// number is reused by a new file, removing or invalidating this source can
/// never touch the new file's source. Invalidate before closing: a file the
/// loop still watches stays open through its duplicate.
///
/// Hangup and error: a dispatch that reports `.hangup` or `.error` (a pipe
/// whose writer closed, a socket reset, a GPIO chip that vanished) is the
/// last one unless the handler calls `rearm()`: after the handler returns,
/// the loop invalidates the source, as sd-event disables a failing source,
/// so an fd that stays in that state cannot make the loop spin. Read what is
/// left in that last dispatch (a hung-up pipe may still hold data).
///
/// A reused fd number: the source remembers which file `fd` referred to
/// when it was made (fstat's device and inode); adding it to a loop when
/// the number refers to another file throws `.fdReused`.
///
/// An fd closed while the source is scheduled: the loop's duplicate keeps
/// the file open, so epoll reports it ready for ever while the handler's
/// reads fail with EBADF. The loop ends such a source (`endedByClosedFD`)
/// instead of dispatching it for ever, and without depending on errno:
/// - a handler that calls `reportClosedFD()` on its EBADF ends it at once
///   (that dispatch is its last);
/// - a handler that returns with errno still EBADF ends it before the loop
///   waits again;
/// - otherwise (the handler made another failing call after the EBADF, or
///   ignores it), the loop finds it out itself: every
///   `closedFDCheckInterval` dispatches of a source it checks that `fd` is
///   still open and still the file the source was made for, so a closed
///   fd — or one closed and its number reused by another file, whose data
///   the stale handler would read — is dispatched at most that many times.
///   A source whose fd is open and its own is never ended by the check,
///   however often it is dispatched.
public final class PortSource: @unchecked Sendable {
    /// What the loop watches the fd for.
    public struct Interest: OptionSet, Sendable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        public static let readable = Interest(rawValue: 1)
        public static let writable = Interest(rawValue: 2)

        var epollEvents: UInt32 {
            (contains(.readable) ? BL_EPOLLIN | BL_EPOLLPRI : 0) | (contains(.writable) ? BL_EPOLLOUT : 0)
        }
    }

    /// What the kernel reported for the fd in this dispatch.
    public struct Events: OptionSet, Sendable, CustomStringConvertible {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        public static let readable = Events(rawValue: 1)
        public static let writable = Events(rawValue: 2)
        /// EPOLLERR: an error condition on the fd (e.g. a GPIO chip that vanished).
        public static let error = Events(rawValue: 4)
        /// EPOLLHUP/EPOLLRDHUP: the other end hung up.
        public static let hangup = Events(rawValue: 8)

        /// From epoll's bits (IN 0x1, PRI 0x2, OUT 0x4, ERR 0x8, HUP 0x10,
        /// RDHUP 0x2000): readable is IN or PRI, writable OUT, error ERR,
        /// hangup HUP or RDHUP (by a table, without a branch per bit).
        @inline(__always)
        init(epoll e: UInt32) {
            rawValue = bl_port_events(e)
        }

        public var description: String {
            var parts: [String] = []
            if contains(.readable) { parts.append("readable") }
            if contains(.writable) { parts.append("writable") }
            if contains(.error) { parts.append("error") }
            if contains(.hangup) { parts.append("hangup") }
            return "[" + parts.joined(separator: ", ") + "]"
        }
    }

    public let fd: Int32
    /// Lower orders are handled first when several ports are ready at once.
    public let order: Int
    let handler: (PortSource, Events) -> Void
    @exclusivity(unchecked) var item = ItemState()
    @exclusivity(unchecked) var limiter = RateLimiter()
    @exclusivity(unchecked) var interestBits: UInt32
    /// Whether the fd's epoll interest is switched off while rate-limit held.
    @exclusivity(unchecked) var heldInKernel = false
    /// The loop's duplicate of `fd` (what its epoll sets watch), or -1.
    @exclusivity(unchecked) var registeredFD: Int32 = -1
    /// Set by `rearm()` during a dispatch that reported hangup or error.
    @exclusivity(unchecked) var rearmed = false
    /// Whether the loop ended the source after a hangup or error.
    @exclusivity(unchecked) public internal(set) var endedByHangup = false
    /// Whether the loop ended the source because its `fd` was closed while
    /// the source was scheduled (its handler reported it, left EBADF in
    /// errno, or the loop's own check found it; see the type's notes).
    @exclusivity(unchecked) public internal(set) var endedByClosedFD = false
    /// The file `fd` referred to when the source was made (or, if it was
    /// not open then, when it first joined a loop): joining a loop checks
    /// the fd still refers to it.
    @exclusivity(unchecked) var fileIdentity: Kernel.FileIdentity?
    let remote = RemoteRequests()
    /// The object this source belongs to (a message port, a signal source),
    /// which the loop keeps alive while the source is scheduled, as CF's run
    /// loop retains its sources. Unowned, not weak: a weak reference gives
    /// its object a side table, and every retain and release of the object
    /// then takes the runtime's slow path — for a message port, each time a
    /// sender's code holds the port to send (some 130 instructions a
    /// message). An owner therefore invalidates its source when it goes
    /// (its deinit), so a source whose owner is gone can no longer join a
    /// loop, and this reference is never read after its owner's end.
    unowned(safe) var lifetimeOwner: AnyObject? {
        didSet { hasLifetimeOwner = true }
    }
    @exclusivity(unchecked) var hasLifetimeOwner = false
    /// `lifetimeOwner`, held strongly while the source is on a loop.
    @exclusivity(unchecked) var retainedOwner: AnyObject?
    /// Called once, on the loop's thread, when the source is invalidated
    /// while on a loop — by `invalidate()` from any thread, after a hangup,
    /// or because its loop ended — so what the source belongs to can follow
    /// (a message port stops accepting messages; a GPIO request lets go of
    /// its lines). CF's version-1 sources have the same in their cancel
    /// callback. Set it before adding the source.
    @exclusivity(unchecked) public var invalidationHandler: (() -> Void)?
    /// How many times the handler was called.
    @exclusivity(unchecked) public internal(set) var dispatchCount: UInt64 = 0
    /// How often the loop checks, by itself, that a port's `fd` is still
    /// open and still the file the source was made for: every this many
    /// dispatches of the source. A source whose fd the program closed ends
    /// at that check at the latest (`endedByClosedFD`), even when its
    /// handler never reports it (`reportClosedFD()`) and errno no longer
    /// says EBADF when it returns. A power of two.
    public static var closedFDCheckInterval: Int { 256 }
    /// `closedFDCheckInterval - 1`, for the dispatch's mask test.
    @inline(__always) static var closedFDCheckMask: UInt64 { 255 }
    /// How many dispatches of this source are running (more than one only
    /// when a handler runs the loop again). The loop dispatches a source
    /// without retaining it: its port table holds it. While this is not
    /// zero, leaving the loop moves the table's reference to `keptAlive`
    /// instead of releasing it, and the dispatch releases it when it ends.
    @exclusivity(unchecked) var dispatchDepth: UInt32 = 0
    @exclusivity(unchecked) var keptAlive: PortSource?
    /// Likewise the object the source belongs to (`retainedOwner`), which
    /// the loop would otherwise release when the source leaves it: a
    /// message port's handler runs on its port without retaining it.
    @exclusivity(unchecked) var keptOwner: AnyObject?

    public init(fd: Int32, interest: Interest = .readable, order: Int = 0, handler: @escaping (PortSource, Events) -> Void) {
        self.fd = fd
        self.order = order
        self.handler = handler
        interestBits = interest.epollEvents
        fileIdentity = Kernel.identity(of: fd)
    }

    /// What the loop watches the fd for. Setting it updates every mode's epoll
    /// set; from a thread other than the loop's, the owner applies it at the
    /// start of its next pass.
    public var interest: Interest {
        get {
            var r: Interest = []
            if interestBits & BL_EPOLLIN != 0 { r.insert(.readable) }
            if interestBits & BL_EPOLLOUT != 0 { r.insert(.writable) }
            return r
        }
        set {
            let bits = newValue.epollEvents
            remote.interest.store(bits, ordering: .releasing)
            let owner = routeChange(RemoteRequests.changeInterest) { interestBits = bits }
            if let owner {
                interestBits = bits
                owner.portInterestChanged(self)
            }
        }
    }

    /// At most `count` dispatches per interval; over the limit the fd's
    /// readiness is left with the kernel and the source is held until the next
    /// interval. Owner thread only.
    public var rateLimit: RateLimit? {
        get { limiter.limit }
        set {
            limiter = RateLimiter(limit: newValue, holds: limiter.holds)
            if heldInKernel { item.loop?.releaseHeldPort(self) }
        }
    }

    /// How many times the source hit its rate limit and was held.
    public var rateLimitHolds: UInt64 { limiter.holds }

    public var isValid: Bool { !item.invalidated && !remote.invalidationRequested }
    public var runLoop: BoardRunLoop? { item.loop }

    /// Removes the source from every mode's epoll set and makes it unusable.
    /// Does not close the fd. Safe from any thread: from another thread, the
    /// loop removes the fd at the start of its next pass, and the handler is
    /// not started once the loop has checked for the invalidation — a loop
    /// already past that check may start it once more (use
    /// `invalidateAndWait()` to rule that out).
    public func invalidate() { invalidateFromAnyThread { $0.invalidateItem(self) } }

    /// `invalidate()`, and from a thread other than the loop's, waits until
    /// the loop has applied it: when this returns, the handler is not
    /// running and will never start again, and the loop no longer watches
    /// the fd (closing it is safe). On the loop's own thread, and for a
    /// source on no loop, it is `invalidate()`. The owner applies it at the
    /// start of its next pass, or when it next runs, or when it ends: do not
    /// wait for a loop whose thread is waiting for you. Returns false if
    /// `timeout` passed first (the invalidation stays requested).
    @discardableResult
    public func invalidateAndWait(timeout: Duration? = nil) -> Bool {
        invalidateAndWaitFromAnyThread(timeout: timeout) { $0.invalidateItem(self) }
    }

    /// Keeps the source after a dispatch that reported `.hangup` or `.error`
    /// (call it from that handler; anywhere else it has no effect). Use it
    /// when the fd recovers by itself or the handler has dealt with the
    /// condition; otherwise the loop invalidates the source after the handler.
    public func rearm() { rearmed = true }

    /// Tells the loop that `fd` is closed: a read or write of it failed with
    /// EBADF because the program closed it while the source was scheduled.
    /// The loop ends the source at once, as when it finds the fd closed
    /// itself (`endedByClosedFD`; invalidated, so the handler is not called
    /// again and the loop does not wait on the loop's duplicate, which
    /// keeps the file open and ready). Call it from the handler that got
    /// the EBADF, anywhere in it: unlike the errno the failed call left,
    /// which the handler's next failing call replaces, nothing undoes it.
    /// From another thread it is applied at the start of the loop's next
    /// pass, as `invalidate()` is; on a source on no loop it is
    /// `invalidate()`.
    public func reportClosedFD() {
        let owner = routeChange(RemoteRequests.invalidate | RemoteRequests.closedFD) { item.invalidated = true }
        if let owner { owner.endSourceWithClosedFD(self) }
    }

    /// Whether `fd` no longer refers to the file the loop watches: the
    /// program closed it, or closed it and the number now refers to another
    /// file. (Anonymous-inode files of one kind look alike; see
    /// `openRegisteredFD`.)
    var fdIsNoLongerItsFile: Bool {
        guard let made = fileIdentity else { return Kernel.isClosed(fd) }
        return Kernel.identity(of: fd) != made
    }

    /// Makes the loop's duplicate of `fd` (when the source joins a loop).
    func openRegisteredFD() throws(RunLoopError) {
        // The source of a message port or signal source that is gone has
        // nothing left to call (its owner invalidated it in its deinit, so
        // binding it failed before this; an owner cleared by hand is nil).
        if hasLifetimeOwner && lifetimeOwner == nil { throw .invalidated(item: "PortSource") }
        do { registeredFD = try Kernel.duplicate(fd) } catch {
            if error.code == .badFileDescriptor { throw .invalidArgument("fd \(fd) is not an open file descriptor; a port source needs an open fd") }
            throw .system(error)
        }
        // The number may have been closed and reused since the source was
        // made: watching it would hand the handler another file's data.
        // (Anonymous-inode files — eventfd, timerfd, signalfd, epoll — all
        // share one inode, so a reuse by another of the same kind passes.)
        let now = Kernel.identity(of: registeredFD)
        if let made = fileIdentity, let now, made != now {
            Kernel.close(registeredFD)
            registeredFD = -1
            throw .fdReused(fd: fd)
        }
        if fileIdentity == nil { fileIdentity = now }
        retainedOwner = lifetimeOwner
    }

    /// Closes the loop's duplicate (when the source leaves its loop) and
    /// returns the owner the loop kept alive, for the caller to release once
    /// it is done with the source (releasing it may free the owner).
    func closeRegisteredFD() -> AnyObject? {
        Kernel.close(registeredFD)
        registeredFD = -1
        defer { retainedOwner = nil }
        return retainedOwner
    }
}

extension PortSource: RegisteredItem {
    static var kindName: String { "PortSource" }
    static var capacity: RunLoopCapacity { .sources }

    func takeSlot(in loop: BoardRunLoop) -> (slot: Int32, generation: UInt32)? {
        guard loop.sourceCount < loop.capacities.sources, let taken = loop.ports.insert(self) else { return nil }
        loop.portOrders[Int(taken.slot)] = order
        return taken
    }

    func freeSlot(in loop: BoardRunLoop) {
        // A source leaving its loop during its own dispatch (its handler
        // invalidated it, say) stays alive until that dispatch ends: the
        // dispatch holds no reference of its own (see `dispatchDepth`).
        if dispatchDepth > 0 {
            keptAlive = loop.ports.take(item.slot)
        } else {
            loop.ports.remove(item.slot)
        }
    }

    /// The loop watches its own duplicate of `fd` (see `openRegisteredFD`).
    func joined(_ loop: BoardRunLoop) throws(RunLoopError) { try openRegisteredFD() }

    func enter(_ ms: ModeState, of loop: BoardRunLoop) throws(RunLoopError) {
        let token = Poller.portToken(slot: item.slot, generation: item.generation)
        do {
            try loop.poller.register(registeredFD, in: ms.epfd, events: heldInKernel ? 0 : interestBits, token: token, userFD: fd)
        } catch {
            if error.code == .operationNotPermitted {
                throw .invalidArgument(
                    "fd \(fd) is a regular file or directory: such files are always ready, so epoll cannot watch them and they cannot be port sources (read them directly, or watch a pipe, socket or device instead)")
            }
            throw .system(error)
        }
        item.modeMask |= ms.bit
        ms.portCount += 1
        ms.portOrderLow = min(ms.portOrderLow, order)
        ms.portOrderHigh = max(ms.portOrderHigh, order)
    }

    func leave(_ ms: ModeState, of loop: BoardRunLoop) {
        ms.portCount -= 1
        if ms.portCount == 0 {
            ms.portOrderLow = .max
            ms.portOrderHigh = .min
        }
        // The loop's own duplicate of the fd: removing it can never touch a
        // registration of another source, even if the user closed `fd` and
        // the number was reused.
        loop.poller.unregister(registeredFD, from: ms.epfd)
    }

    func leaving(_ loop: BoardRunLoop) -> AnyObject? {
        if heldInKernel { loop.dropHeld(item.slot) }
        heldInKernel = false
        let owner = closeRegisteredFD()
        // Leaving during one of its dispatches: the owner stays alive until
        // that dispatch ends (see `keptOwner`).
        if dispatchDepth > 0 && owner != nil {
            keptOwner = owner
            return nil
        }
        return owner
    }

    /// Tells what the source belongs to (a message port, say) that it is gone.
    func invalidated(on loop: BoardRunLoop) {
        if let hook = invalidationHandler {
            invalidationHandler = nil
            hook()
        }
    }
}
