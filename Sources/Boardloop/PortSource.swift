import CLinux

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
/// it, the read finds nothing. The fd is the caller's: invalidating the
/// source does not close it.
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

        @inline(__always)
        init(epoll e: UInt32) {
            var r: UInt32 = 0
            if e & (BL_EPOLLIN | BL_EPOLLPRI) != 0 { r |= 1 }
            if e & BL_EPOLLOUT != 0 { r |= 2 }
            if e & BL_EPOLLERR != 0 { r |= 4 }
            if e & (BL_EPOLLHUP | BL_EPOLLRDHUP) != 0 { r |= 8 }
            rawValue = r
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
    /// How many times the handler was called.
    @exclusivity(unchecked) public internal(set) var dispatchCount: UInt64 = 0

    public init(fd: Int32, interest: Interest = .readable, order: Int = 0, handler: @escaping (PortSource, Events) -> Void) {
        self.fd = fd
        self.order = order
        self.handler = handler
        interestBits = interest.epollEvents
    }

    /// What the loop watches the fd for. Setting it updates every mode's epoll
    /// set. Owner thread only.
    public var interest: Interest {
        get {
            var r: Interest = []
            if interestBits & BL_EPOLLIN != 0 { r.insert(.readable) }
            if interestBits & BL_EPOLLOUT != 0 { r.insert(.writable) }
            return r
        }
        set {
            interestBits = newValue.epollEvents
            item.loop?.portInterestChanged(self)
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

    public var isValid: Bool { !item.invalidated }
    public var runLoop: RunLoop? { item.loop }

    /// Removes the source from every mode's epoll set and makes it unusable.
    /// Does not close the fd. Owner thread only.
    public func invalidate() {
        if let loop = item.loop {
            loop.invalidatePort(self)
        } else {
            item.invalidated = true
        }
    }
}
