import CLinux
import Glibc
import Synchronization

/// Why a message port call failed. Each case names the port.
public enum BoardMessagePortError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Every slot stayed full for the whole timeout; nothing was sent.
    case full(port: String, slots: Int, waited: Duration)
    /// The port was invalidated; nothing was sent.
    case invalidated(port: String)
    /// The payload does not fit a slot; nothing was sent.
    case payloadTooLarge(port: String, size: Int, slotSize: Int)
    /// No reply came within the timeout; the pending request was withdrawn.
    case replyTimedOut(port: String, waited: Duration)
    /// A reply to a request whose sender stopped waiting (it timed out).
    case replyAbandoned(port: String)
    /// `reply` on a message that was not sent with `sendRequest`.
    case noReplyExpected(port: String)
    /// `sendRequest` on the port's own loop thread would wait for itself.
    case requestFromOwnerThread(port: String)
    /// A port is already registered under that name.
    case nameInUse(String)
    /// The message's payload is shorter than the value read from it.
    case payloadTooShort(port: String, size: Int, needed: Int)
    case runLoop(RunLoopError)
    case system(SystemError)

    public var description: String {
        switch self {
        case let .full(port, slots, waited):
            "message port '\(port)' is full: all \(slots) slots stayed taken for \(waited); the message was not sent"
        case let .invalidated(port): "message port '\(port)' was invalidated; the message was not sent"
        case let .payloadTooLarge(port, size, slotSize):
            "message of \(size) bytes does not fit message port '\(port)' (slot size \(slotSize) bytes); nothing was sent"
        case let .replyTimedOut(port, waited): "no reply from message port '\(port)' within \(waited); the request was withdrawn"
        case let .replyAbandoned(port): "the sender of the request to '\(port)' stopped waiting (timed out); the reply was dropped"
        case let .noReplyExpected(port): "a message to '\(port)' sent without sendRequest cannot be replied to; use its replyPort"
        case let .requestFromOwnerThread(port):
            "sendRequest to '\(port)' from the port's own loop thread would wait for itself; send from another thread"
        case let .nameInUse(name): "a message port is already registered as '\(name)'"
        case let .payloadTooShort(port, size, needed):
            "a message to '\(port)' carries \(size) bytes, fewer than the \(needed) needed to read the value; nothing was read"
        case let .runLoop(e): e.description
        case let .system(e): e.description
        }
    }
}

/// A local message port (CF's `CFMessagePort`, local flavour): owned by one
/// loop, with a fixed number of fixed-size slots chosen at creation. Sending
/// copies id, payload and an optional reply port into a slot and signals an
/// eventfd; on the owner's loop the port is a port source whose handler gets
/// each message in order without any heap allocation.
///
/// `send` and `sendRequest` are safe from any thread. When every slot is
/// taken, a sender waits up to its timeout, then gets `.full`; an accepted
/// message is never lost or reordered.
///
/// Lifetime: as CF's run loop retains its sources, a scheduled port stays
/// alive while it is scheduled, even with no other reference to it (a worker
/// can make a port in its setup, register its name and let it go). It is
/// freed once invalidated, or when its loop ends (the loop's thread exited).
public final class BoardMessagePort: @unchecked Sendable {
    /// A received message. `payload` points into the port's receive buffer and
    /// is valid only while the handler runs.
    public struct Message {
        public let id: Int32
        public let payload: UnsafeRawBufferPointer
        /// The port the sender asked replies to go to, if any.
        public let replyPort: BoardMessagePort?
        let port: BoardMessagePort
        let replyToken: UInt64

        /// Whether the sender waits in `sendRequest` for `reply`.
        public var expectsReply: Bool { replyToken != 0 }

        /// Reads the payload as a value of `T` (unaligned load). A payload
        /// shorter than `T` — whatever a sender sent — throws
        /// `.payloadTooShort` and reads nothing.
        public func load<T: BitwiseCopyable>(as type: T.Type) throws(BoardMessagePortError) -> T {
            guard payload.count >= MemoryLayout<T>.size else {
                throw .payloadTooShort(port: port.label, size: payload.count, needed: MemoryLayout<T>.size)
            }
            return payload.loadUnaligned(as: T.self)
        }

        /// Answers a `sendRequest` with the bytes of `value`.
        public func reply<T: BitwiseCopyable>(id: Int32, value: T) throws(BoardMessagePortError) {
            var failure: BoardMessagePortError?
            withUnsafeBytes(of: value) { p in
                do throws(BoardMessagePortError) { try reply(id: id, payload: p) } catch { failure = error }
            }
            if let failure { throw failure }
        }

        /// Answers a `sendRequest`: the bytes are copied to the waiting sender.
        public func reply(id: Int32, payload: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0)) throws(BoardMessagePortError) {
            try port.deliverReply(token: replyToken, id: id, payload: payload)
        }
    }

    /// The name used in errors and, once registered, for lookups.
    public let label: String
    public let slotCount: Int
    public let slotSize: Int
    /// The port source on the owner loop (its order, rate limit, dispatch count).
    public private(set) var source: PortSource!

    private let handler: (Message) -> Void
    private let monitor = Monitor()
    private let eventFD: EventFD
    // The ring of queued messages (guarded by monitor).
    private let storage: UnsafeMutableRawPointer
    private let ids: UnsafeMutablePointer<Int32>
    private let lengths: UnsafeMutablePointer<Int>
    private let replyPorts: UnsafeMutablePointer<BoardMessagePort?>
    private let replyTokens: UnsafeMutablePointer<UInt64>
    @exclusivity(unchecked) private var head = 0
    @exclusivity(unchecked) private var count = 0
    @exclusivity(unchecked) private var signalled = false
    @exclusivity(unchecked) private var waitingSenders = 0
    @exclusivity(unchecked) private var valid = true
    // Pending requests' reply slots (guarded by monitor).
    private let replyBuffers: UnsafeMutableRawPointer
    private let replyLengths: UnsafeMutablePointer<Int>
    private let replyIds: UnsafeMutablePointer<Int32>
    private let replyGenerations: UnsafeMutablePointer<UInt32>
    private let replyStates: UnsafeMutablePointer<UInt8>  // 0 free, 1 waiting, 2 replied
    @exclusivity(unchecked) private var freeReplies = 0
    // The receiver's copy of the message being handled (owner thread only).
    private let receiveBuffer: UnsafeMutableRawPointer
    private let receivedCount = Atomic<UInt64>(0)
    /// Names the port is registered under (guarded by monitor).
    @exclusivity(unchecked) private var registeredNames: [String] = []

    /// The most slots a port may have, the largest slot, and the most memory
    /// its rings may take (payload ring and reply ring together).
    public static let maxima = (slots: 1 << 16, slotSize: 1 << 20, bytes: 64 << 20)

    /// - Parameters:
    ///   - slots: messages that can be queued at once.
    ///   - slotSize: the largest payload in bytes.
    ///   - order: the port source's order on its loop.
    ///   - handler: called on the owner loop's thread for each message, in order.
    public init(label: String = "message port", slots: Int, slotSize: Int, order: Int = 0, handler: @escaping (Message) -> Void) throws(BoardMessagePortError) {
        guard slots > 0, slotSize >= 0 else {
            throw .runLoop(.invalidArgument("BoardMessagePort needs at least one slot and a slot size of 0 or more (got \(slots) slots of \(slotSize) bytes)"))
        }
        let m = Self.maxima
        guard slots <= m.slots else {
            throw .runLoop(.invalidArgument("BoardMessagePort '\(label)': \(slots) slots; the limit is \(m.slots)"))
        }
        guard slotSize <= m.slotSize else {
            throw .runLoop(.invalidArgument("BoardMessagePort '\(label)': slot size \(slotSize) bytes; the limit is \(m.slotSize) bytes"))
        }
        guard 2 * slots * slotSize <= m.bytes else {
            throw .runLoop(.invalidArgument(
                "BoardMessagePort '\(label)': \(slots) slots of \(slotSize) bytes need \(2 * slots * slotSize >> 20) MiB (message and reply rings); the limit is \(m.bytes >> 20) MiB"))
        }
        do { eventFD = try EventFD() } catch { throw .system(error) }
        self.label = label
        slotCount = slots
        self.slotSize = slotSize
        self.handler = handler
        storage = .allocate(byteCount: max(slots * slotSize, 1), alignment: 16)
        ids = .allocate(capacity: slots)
        lengths = .allocate(capacity: slots)
        replyPorts = .allocate(capacity: slots)
        replyPorts.initialize(repeating: nil, count: slots)
        replyTokens = .allocate(capacity: slots)
        replyBuffers = .allocate(byteCount: max(slots * slotSize, 1), alignment: 16)
        replyLengths = .allocate(capacity: slots)
        replyIds = .allocate(capacity: slots)
        replyGenerations = .allocate(capacity: slots)
        replyGenerations.initialize(repeating: 0, count: slots)
        replyStates = .allocate(capacity: slots)
        replyStates.initialize(repeating: 0, count: slots)
        freeReplies = slots
        receiveBuffer = .allocate(byteCount: max(slotSize, 1), alignment: 16)
        // unowned(unsafe): the handler is called only by a dispatch of the
        // source on its loop, and the loop keeps the port alive while the
        // source is scheduled (`lifetimeOwner` below) and, if the source
        // leaves the loop during a dispatch, until that dispatch ends
        // (PortSource.keptOwner). (`unowned` would take a reference per
        // dispatch, through the port's side table.)
        source = PortSource(fd: eventFD.fd, interest: .readable, order: order) { [unowned(unsafe) self] _, _ in self.receive() }
        // While the source is scheduled, the loop keeps the port alive; when
        // the source is invalidated (its loop ended, say), the port follows.
        source.lifetimeOwner = self
        source.invalidationHandler = { [weak self] in _ = self?.close() }
    }

    deinit {
        for name in registeredNames { BoardMessagePortRegistry.remove(name, self) }
        replyPorts.deinitialize(count: slotCount)
        eventFD.close()
        storage.deallocate()
        ids.deallocate()
        lengths.deallocate()
        replyPorts.deallocate()
        replyTokens.deallocate()
        replyBuffers.deallocate()
        replyLengths.deallocate()
        replyIds.deallocate()
        replyGenerations.deallocate()
        replyStates.deallocate()
        receiveBuffer.deallocate()
    }

    /// Schedules the port's source on `loop` (the loop's thread only); that
    /// loop becomes the port's owner.
    public func schedule(on loop: BoardRunLoop, mode: RunLoopMode = .default) throws(BoardMessagePortError) {
        do { try loop.add(source, mode: mode) } catch { throw .runLoop(error) }
    }

    public var isValid: Bool { monitor.withLock { valid } }

    /// Messages handled so far.
    public var messagesReceived: UInt64 { receivedCount.load(ordering: .relaxed) }

    // MARK: Sending

    /// Sends a message. Waits up to `timeout` for a free slot when all are
    /// taken (zero: does not wait). Safe from any thread.
    public func send(
        id: Int32, payload: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0),
        replyPort: BoardMessagePort? = nil, timeout: Duration = .zero
    ) throws(BoardMessagePortError) {
        try enqueue(id: id, payload: payload, replyPort: replyPort, token: 0, deadline: deadline(after: timeout), timeout: timeout)
    }

    /// Sends the bytes of `value` as the payload.
    public func send<T: BitwiseCopyable>(id: Int32, value: T, replyPort: BoardMessagePort? = nil, timeout: Duration = .zero) throws(BoardMessagePortError) {
        var v = value
        try withUnsafeBytes(of: &v) { (p) throws(BoardMessagePortError) in
            try send(id: id, payload: p, replyPort: replyPort, timeout: timeout)
        }
    }

    /// Sends a request and waits for its reply (CF's `CFMessagePortSendRequest`),
    /// both within `timeout`. The reply's bytes are copied into `replyBuffer`
    /// (at most its size); returns the reply's id and length. From any thread
    /// but the port's owner. A request that times out is withdrawn: its reply
    /// slot is freed, and a late reply is dropped (`.replyAbandoned` for the replier).
    public func sendRequest(
        id: Int32, payload: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0),
        timeout: Duration, replyInto replyBuffer: UnsafeMutableRawBufferPointer
    ) throws(BoardMessagePortError) -> (id: Int32, length: Int) {
        if let loop = source.runLoop, loop.isOwnedByCurrentThread { throw .requestFromOwnerThread(port: label) }
        let deadline = deadline(after: timeout)
        // Reserve a reply slot.
        let (slot, generation) = try monitor.withLock { () throws(BoardMessagePortError) -> (Int, UInt32) in
            while true {
                guard valid else { throw .invalidated(port: label) }
                if freeReplies > 0 {
                    var r = 0
                    while replyStates[r] != 0 { r += 1 }
                    replyStates[r] = 1
                    replyGenerations[r] &+= 1
                    freeReplies -= 1
                    return (r, replyGenerations[r])
                }
                if !waitForRoom(deadline) { throw .full(port: label, slots: slotCount, waited: timeout) }
            }
        }
        let token = UInt64(generation) << 32 | UInt64(slot + 1)
        do {
            try enqueue(id: id, payload: payload, replyPort: nil, token: token, deadline: deadline, timeout: timeout)
        } catch {
            monitor.withLock { releaseReply(slot) }
            throw error
        }
        return try monitor.withLock { () throws(BoardMessagePortError) -> (Int32, Int) in
            while replyStates[slot] != 2 {
                guard valid else {
                    releaseReply(slot)
                    throw .invalidated(port: label)
                }
                if !waitForRoom(deadline) && replyStates[slot] != 2 {
                    releaseReply(slot)
                    throw .replyTimedOut(port: label, waited: timeout)
                }
            }
            let n = min(replyLengths[slot], replyBuffer.count)
            if n > 0 { replyBuffer.baseAddress!.copyMemory(from: replyBuffers + slot * slotSize, byteCount: n) }
            let rid = replyIds[slot]
            releaseReply(slot)
            return (rid, n)
        }
    }

    private func deadline(after timeout: Duration) -> UInt64 {
        // No timeout is the common case: skip Duration's 128-bit arithmetic.
        if !timeout.isPositive { return 0 }
        let ns = timeout.nanosecondsClamped
        return ns > 0 ? MonotonicClock.nanoseconds &+ UInt64(ns) : 0
    }

    /// With the monitor held: waits until something changes or the deadline
    /// (0: no waiting) passes. False when the time is up.
    private func waitForRoom(_ deadline: UInt64) -> Bool {
        if deadline == 0 || MonotonicClock.nanoseconds >= deadline { return false }
        waitingSenders += 1
        _ = monitor.wait(until: deadline)
        waitingSenders -= 1
        return true
    }

    private func releaseReply(_ slot: Int) {
        replyStates[slot] = 0
        replyGenerations[slot] &+= 1
        freeReplies += 1
        if waitingSenders > 0 { monitor.broadcast() }
    }

    private func enqueue(id: Int32, payload: UnsafeRawBufferPointer, replyPort: BoardMessagePort?, token: UInt64, deadline: UInt64, timeout: Duration) throws(BoardMessagePortError) {
        guard payload.count <= slotSize else { throw .payloadTooLarge(port: label, size: payload.count, slotSize: slotSize) }
        try monitor.withLock { () throws(BoardMessagePortError) in
            while true {
                guard valid else { throw .invalidated(port: label) }
                if count < slotCount { break }
                if !waitForRoom(deadline) { throw .full(port: label, slots: slotCount, waited: timeout) }
            }
            let i = (head + count) % slotCount
            if payload.count > 0 { (storage + i * slotSize).copyMemory(from: payload.baseAddress!, byteCount: payload.count) }
            ids[i] = id
            lengths[i] = payload.count
            replyPorts[i] = replyPort
            replyTokens[i] = token
            count += 1
            if !signalled {
                signalled = true
                eventFD.signal()
            }
        }
    }

    // MARK: Receiving (owner loop thread)

    private func receive() {
        eventFD.drain()
        // At most one ring's worth per dispatch, so a flooded port cannot
        // keep its loop from other sources; the rest stay signalled.
        var budget = slotCount
        while budget > 0 {
            budget -= 1
            var id: Int32 = 0
            var length = 0
            var replyPort: BoardMessagePort?
            var token: UInt64 = 0
            let got = monitor.withLock { () -> Bool in
                guard valid, count > 0 else {
                    signalled = false
                    return false
                }
                let i = head
                length = lengths[i]
                if length > 0 { receiveBuffer.copyMemory(from: storage + i * slotSize, byteCount: length) }
                id = ids[i]
                replyPort = replyPorts[i]
                replyPorts[i] = nil
                token = replyTokens[i]
                head = (head + 1) % slotCount
                count -= 1
                if waitingSenders > 0 { monitor.broadcast() }
                return true
            }
            if !got { return }
            receivedCount.add(1, ordering: .relaxed)
            handler(Message(id: id, payload: UnsafeRawBufferPointer(start: receiveBuffer, count: length), replyPort: replyPort, port: self, replyToken: token))
        }
        // Budget used up with messages left: keep the port ready.
        monitor.withLock {
            if count > 0 { eventFD.signal() } else { signalled = false }
        }
    }

    fileprivate func deliverReply(token: UInt64, id: Int32, payload: UnsafeRawBufferPointer) throws(BoardMessagePortError) {
        guard token != 0 else { throw .noReplyExpected(port: label) }
        guard payload.count <= slotSize else { throw .payloadTooLarge(port: label, size: payload.count, slotSize: slotSize) }
        let slot = Int(token & 0xFFFF_FFFF) - 1
        let generation = UInt32(token >> 32)
        try monitor.withLock { () throws(BoardMessagePortError) in
            guard replyStates[slot] == 1, replyGenerations[slot] == generation else { throw .replyAbandoned(port: label) }
            if payload.count > 0 { (replyBuffers + slot * slotSize).copyMemory(from: payload.baseAddress!, byteCount: payload.count) }
            replyLengths[slot] = payload.count
            replyIds[slot] = id
            replyStates[slot] = 2
            monitor.broadcast()
        }
    }

    // MARK: Names and invalidation

    /// Registers the port under a process-wide unique name (a port may have
    /// several; all are released by `invalidate()`). An invalidated port
    /// cannot be registered.
    public func register(name: String) throws(BoardMessagePortError) {
        try monitor.withLock { () throws(BoardMessagePortError) in
            guard valid else { throw .invalidated(port: label) }
            try BoardMessagePortRegistry.add(name, self)
            registeredNames.append(name)
        }
    }

    /// Makes the port unusable: waiting and later senders get `.invalidated`,
    /// queued messages are dropped, its names are unregistered and its source
    /// leaves the loop. Safe from any thread.
    public func invalidate() {
        close()
        source.invalidate()
    }

    /// Marks the port invalid: senders and waiters get `.invalidated`,
    /// queued messages are dropped, names released. Returns whether it was valid.
    @discardableResult
    private func close() -> Bool {
        let (wasValid, names) = monitor.withLock { () -> (Bool, [String]) in
            guard valid else { return (false, []) }
            valid = false
            for k in 0..<count { replyPorts[(head + k) % slotCount] = nil }
            count = 0
            monitor.broadcast()
            let n = registeredNames
            registeredNames = []
            return (true, n)
        }
        for name in names { BoardMessagePortRegistry.remove(name, self) }
        return wasValid
    }
}

/// The process-wide registry of named message ports (CF's named local ports),
/// used for check-in handshakes between threads.
public enum BoardMessagePortRegistry {
    private struct Entry { weak var port: BoardMessagePort? }
    private static let lock = Lock()
    nonisolated(unsafe) private static var entries: [String: Entry] = [:]

    static func add(_ name: String, _ port: BoardMessagePort) throws(BoardMessagePortError) {
        let ok = lock.withLock { () -> Bool in
            if entries[name]?.port != nil { return false }
            entries[name] = Entry(port: port)
            return true
        }
        if !ok { throw .nameInUse(name) }
    }

    static func remove(_ name: String, _ port: BoardMessagePort) {
        lock.withLock {
            if let e = entries[name], e.port == nil || e.port === port { entries[name] = nil }
        }
    }

    /// The port registered under `name`, if it is still valid.
    public static func lookup(_ name: String) -> BoardMessagePort? {
        lock.withLock { entries[name]?.port }
    }
}
