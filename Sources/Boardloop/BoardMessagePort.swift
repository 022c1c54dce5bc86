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
    /// A received message, valid only while the handler runs: `payload`
    /// points into the port's receive area, and `reply` and `load` use the
    /// port without keeping it alive (as CF, which takes a request's reply
    /// as its callback's return value). Copy what must outlive the handler;
    /// `replyPort` is an ordinary strong reference and may be kept.
    public struct Message {
        public let id: Int32
        public let payload: UnsafeRawBufferPointer
        /// The port the sender asked replies to go to, if any.
        public let replyPort: BoardMessagePort?
        // unowned(unsafe): a strong reference would be a retain and a release
        // of the port per message (atomic; on the runtime's slow path, some
        // 60 instructions each, for a port with a side table: a registered
        // one, which the registry refers to weakly). The loop keeps the port
        // alive while its handler runs (see `source`).
        unowned(unsafe) let port: BoardMessagePort
        let replyToken: UInt64

        /// Whether the sender waits in `sendRequest` for `reply`.
        public var expectsReply: Bool { replyToken != 0 }

        /// Reads the payload as a value of `T` (unaligned load). A payload
        /// shorter than `T` — whatever a sender sent — throws
        /// `.payloadTooShort` and reads nothing. (Inlinable: specialized for
        /// `T` where it is called, it is a length check and a load; generic,
        /// it went through `T`'s metadata, some 40 instructions a message.)
        @inlinable
        public func load<T: BitwiseCopyable>(as type: T.Type) throws(BoardMessagePortError) -> T {
            guard payload.count >= MemoryLayout<T>.size else { throw tooShort(needed: MemoryLayout<T>.size) }
            return payload.loadUnaligned(as: T.self)
        }

        /// The error for a payload shorter than `needed` (out of line: it
        /// copies the port's label).
        @usableFromInline @inline(never)
        func tooShort(needed: Int) -> BoardMessagePortError {
            .payloadTooShort(port: port.label, size: payload.count, needed: needed)
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
    private let monitor = FutexMonitor()
    private let eventFD: EventFD
    /// A queued message but for its payload, which is in the payload slot of
    /// the same index. The reply port is held by hand (one retain, taken by
    /// the sender, handed on to the message or released when the message is
    /// dropped): most messages have none, and an Optional reference would
    /// cost a call into the runtime per message even when nil. A plain value,
    /// so headers move in bulk.
    private struct Header {
        var replyPort: Unmanaged<BoardMessagePort>?
        var token: UInt64
        var length: Int
        var id: Int32
    }
    // The ring of queued messages (guarded by monitor). A slot's header is
    // meaningful only while the slot holds a message: sending writes it,
    // receiving moves it out with its reply port's retain.
    private let storage: UnsafeMutableRawPointer
    private let headers: UnsafeMutablePointer<Header>
    @exclusivity(unchecked) private var head = 0
    @exclusivity(unchecked) private var count = 0
    @exclusivity(unchecked) private var signalled = false
    /// Threads sleeping in `waitForRoom`: senders waiting for a slot,
    /// requesters waiting for their reply or a reply slot.
    @exclusivity(unchecked) private var waitingThreads = 0
    @exclusivity(unchecked) private var valid = true
    // Pending requests' reply slots (guarded by monitor).
    private let replyBuffers: UnsafeMutableRawPointer
    private let replyLengths: UnsafeMutablePointer<Int>
    private let replyIds: UnsafeMutablePointer<Int32>
    private let replyGenerations: UnsafeMutablePointer<UInt32>
    private let replyStates: UnsafeMutablePointer<UInt8>  // 0 free, 1 waiting, 2 replied
    @exclusivity(unchecked) private var freeReplies = 0
    // The receive area (owner thread only): the messages one lock
    // acquisition took out of the ring, handed to the handler from here
    // without the lock. Entries takenNext..<takenEnd are still to deliver
    // (their reply ports retained); the payload of entry j is in slot j of takenPayloads.
    private let takenCapacity: Int
    private let taken: UnsafeMutablePointer<Header>
    private let takenPayloads: UnsafeMutableRawPointer
    @exclusivity(unchecked) private var takenNext = 0
    @exclusivity(unchecked) private var takenEnd = 0
    /// Set with `valid` by `close()`: the receiver reads it before each
    /// message of a batch it took, so an invalidation — by a handler of the
    /// same batch or from another thread — drops the rest, as it drops those
    /// still in the ring.
    private let closed = Atomic<Bool>(false)
    private let receivedCount = Atomic<UInt64>(0)
    /// Names the port is registered under (guarded by monitor).
    @exclusivity(unchecked) private var registeredNames: [String] = []

    /// The most slots a port may have, the largest slot, and the most memory
    /// its rings may take (payload ring and reply ring together).
    public static let maxima = (slots: 1 << 16, slotSize: 1 << 20, bytes: 64 << 20)

    /// The receive area's payload bytes: a batch takes at most this much (but
    /// always at least one message). 64 KiB holds a whole ring of small slots,
    /// so one lock acquisition takes everything queued, and keeps a port of
    /// large slots from doubling its memory.
    private static let receiveAreaBytes = 64 << 10
    /// Slots up to this size are copied out of the ring in whole runs (one
    /// copy per contiguous run of slots instead of one per message).
    private static let wholeSlotCopyLimit = 128

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
        // Zeroed: small slots are copied out whole, bytes past a short
        // payload included.
        storage.initializeMemory(as: UInt8.self, repeating: 0, count: max(slots * slotSize, 1))
        headers = .allocate(capacity: slots)
        replyBuffers = .allocate(byteCount: max(slots * slotSize, 1), alignment: 16)
        replyLengths = .allocate(capacity: slots)
        replyIds = .allocate(capacity: slots)
        replyGenerations = .allocate(capacity: slots)
        replyGenerations.initialize(repeating: 0, count: slots)
        replyStates = .allocate(capacity: slots)
        replyStates.initialize(repeating: 0, count: slots)
        freeReplies = slots
        takenCapacity = min(slots, max(1, Self.receiveAreaBytes / max(slotSize, 1)))
        taken = .allocate(capacity: takenCapacity)
        takenPayloads = .allocate(byteCount: max(takenCapacity * slotSize, 1), alignment: 16)
        // Unretained, and borrowed per dispatch: the handler is called only
        // by a dispatch of the source on its loop, and the loop keeps the
        // port alive while the source is scheduled (`lifetimeOwner` below)
        // and, if the source leaves the loop during a dispatch, until that
        // dispatch ends (PortSource.keptOwner). (`unowned`, and even
        // `unowned(unsafe)`, would take and drop a strong reference per
        // dispatch.)
        let me = Unmanaged.passUnretained(self)
        source = PortSource(fd: eventFD.fd, interest: .readable, order: order) { _, _ in me._withUnsafeGuaranteedRef { $0.receive() } }
        // While the source is scheduled, the loop keeps the port alive; when
        // the source is invalidated (its loop ended, say), the port follows.
        source.lifetimeOwner = self
        // unowned, not weak (see `PortSource.lifetimeOwner`): the loop calls
        // this only while the source is on it, and so while it keeps the
        // port alive.
        source.invalidationHandler = { [unowned self] in _ = self.close() }
    }

    deinit {
        // The source may outlive the port (whoever kept `source`): it must
        // not join a loop without it (it refers to the port unowned).
        source.invalidate()
        for name in registeredNames { BoardMessagePortRegistry.remove(name, self) }
        dropQueued()
        Self.releaseReplyPorts(taken + takenNext, takenEnd - takenNext)
        eventFD.close()
        storage.deallocate()
        headers.deallocate()
        replyBuffers.deallocate()
        replyLengths.deallocate()
        replyIds.deallocate()
        replyGenerations.deallocate()
        replyStates.deallocate()
        taken.deallocate()
        takenPayloads.deallocate()
    }

    /// Schedules the port's source on `loop` (the loop's thread only); that
    /// loop becomes the port's owner.
    public func schedule(on loop: BoardRunLoop, mode: RunLoopMode = .default) throws(BoardMessagePortError) {
        do { try loop.add(source, mode: mode) } catch { throw .runLoop(error) }
    }

    public var isValid: Bool { monitor.withLock { valid } }

    /// Messages handled so far.
    public var messagesReceived: UInt64 { receivedCount.load(ordering: .relaxed) }

    /// How many threads wait in a send or a request on this port (for tests).
    var waitingThreadCount: Int { monitor.withLock { waitingThreads } }

    // MARK: Sending

    /// Sends a message if a slot is free (`.full` at once when every slot
    /// is taken). Safe from any thread.
    public func send(
        id: Int32, payload: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0),
        replyPort: BoardMessagePort? = nil
    ) throws(BoardMessagePortError) {
        // (An overload rather than a default timeout of zero: a default
        // argument is evaluated by every caller, and `Duration.zero` is a
        // call into the standard library.)
        try enqueue(id: id, payload: payload, replyPort: replyPort, token: 0, deadline: 0, timeout: nil)
    }

    /// Sends a message. Waits up to `timeout` for a free slot when all are
    /// taken (zero: does not wait). Safe from any thread.
    public func send(
        id: Int32, payload: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0),
        replyPort: BoardMessagePort? = nil, timeout: Duration
    ) throws(BoardMessagePortError) {
        try enqueue(id: id, payload: payload, replyPort: replyPort, token: 0, deadline: deadline(after: timeout), timeout: timeout)
    }

    /// Sends the bytes of `value` as the payload if a slot is free.
    /// (Inlinable: specialized for `T` where it is called, the copy of the
    /// value and its closure cost nothing; unspecialized, they cost more
    /// than sending does.)
    @inlinable
    public func send<T: BitwiseCopyable>(id: Int32, value: T, replyPort: BoardMessagePort? = nil) throws(BoardMessagePortError) {
        var v = value
        try withUnsafeBytes(of: &v) { (p) throws(BoardMessagePortError) in
            try send(id: id, payload: p, replyPort: replyPort)
        }
    }

    /// Sends the bytes of `value` as the payload, waiting up to `timeout`
    /// for a free slot.
    @inlinable
    public func send<T: BitwiseCopyable>(id: Int32, value: T, replyPort: BoardMessagePort? = nil, timeout: Duration) throws(BoardMessagePortError) {
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

    @inline(__always)
    private func deadline(after timeout: Duration) -> UInt64 {
        // No timeout is the common case: skip Duration's 128-bit arithmetic
        // (and the call).
        timeout.isPositive ? Self.deadline(afterPositive: timeout) : 0
    }

    @inline(never)
    private static func deadline(afterPositive timeout: Duration) -> UInt64 {
        let ns = timeout.nanosecondsClamped
        return ns > 0 ? MonotonicClock.nanoseconds &+ UInt64(ns) : 0
    }

    /// With the monitor held: waits until something changes or the deadline
    /// (0: no waiting) passes. False when the time is up.
    private func waitForRoom(_ deadline: UInt64) -> Bool {
        if deadline == 0 || MonotonicClock.nanoseconds >= deadline { return false }
        waitingThreads += 1
        monitor.wait(until: deadline)
        waitingThreads -= 1
        return true
    }

    /// With the monitor held: wakes the threads waiting in `waitForRoom`,
    /// if any (a futex wake is a system call even when nobody sleeps).
    @inline(__always)
    private func wakeWaitingThreads() {
        if waitingThreads > 0 { monitor.broadcast() }
    }

    /// With the monitor held: waits for a free slot until the deadline; when
    /// it throws, it has released the monitor. (Out of line, and throwing
    /// straight through its caller: a send that finds room carries neither
    /// the waiting nor a place for an error of its own.)
    @inline(never)
    private func waitForSlot(deadline: UInt64, timeout: Duration?) throws(BoardMessagePortError) {
        while true {
            if !valid {
                monitor.unlock()
                throw .invalidated(port: label)
            }
            if count < slotCount { return }
            if !waitForRoom(deadline) {
                monitor.unlock()
                throw .full(port: label, slots: slotCount, waited: timeout ?? .zero)
            }
        }
    }

    private func releaseReply(_ slot: Int) {
        replyStates[slot] = 0
        replyGenerations[slot] &+= 1
        freeReplies += 1
        wakeWaitingThreads()
    }

    private func enqueue(id: Int32, payload: UnsafeRawBufferPointer, replyPort: BoardMessagePort?, token: UInt64, deadline: UInt64, timeout: Duration?) throws(BoardMessagePortError) {
        let length = payload.count
        guard length <= slotSize else { throw tooLarge(length) }
        // The lock by hand rather than withLock's closure: only the rare
        // wait can throw, so the common path carries no unwinding.
        monitor.lock()
        if _slowPath(!valid || count == slotCount) { try waitForSlot(deadline: deadline, timeout: timeout) }
        // (Wrapping arithmetic: indices and counts are below slotCount.)
        var i = head &+ count
        if i >= slotCount { i &-= slotCount }
        if length > 0 { bl_copy_bytes(storage + i &* slotSize, payload.baseAddress!, length) }
        headers[i] = Header(replyPort: replyPort == nil ? nil : Self.retained(replyPort), token: token, length: length, id: id)
        count &+= 1
        let wakeReceiver = !signalled
        signalled = true
        monitor.unlock()
        // After the unlock: the write wakes the receiver, which takes the
        // lock next — with the write inside, it would find it held by a
        // sender still in the system call, and sleep on it. A write that
        // comes late (the receiver took the message meanwhile) only makes
        // a dispatch that finds nothing; the port (and so its fd) lives as
        // long as this call.
        if wakeReceiver { eventFD.signal() }
    }

    /// The error for a payload larger than a slot (out of line: building it
    /// copies the label).
    @inline(never)
    private func tooLarge(_ size: Int) -> BoardMessagePortError {
        .payloadTooLarge(port: label, size: size, slotSize: slotSize)
    }

    // MARK: Receiving (owner loop thread)

    private func receive() {
        eventFD.drain()
        // A dispatch nested in a handler (one that ran the loop again) would
        // first deliver the rest of the batch its caller took, keeping order
        // and emptying the receive area before it is filled again. (The
        // eventfd stays drained while a batch is handled — `signalled` is
        // set, so senders do not write it — but for a sender's write that
        // comes late, after its unlock.)
        deliverTaken()
        // At most one ring's worth per dispatch, so a flooded port cannot
        // keep its loop from other sources; the rest stay signalled. Each
        // batch is one lock acquisition for everything queued (up to the
        // receive area's size), and what arrived while a batch was handled is
        // taken by the next, as long as the budget lasts.
        var budget = slotCount
        while budget > 0 {
            let n = take(min(budget, takenCapacity))
            if n == 0 { return }
            budget -= n
            deliverTaken()
        }
        // Budget used up with messages left: keep the port ready.
        let left = monitor.withLock { () -> Bool in
            if count == 0 { signalled = false }
            return count > 0
        }
        if left { eventFD.signal() }
    }

    /// Moves up to `limit` queued messages into the (empty) receive area
    /// under one acquisition of the lock, freeing their slots for senders at
    /// once; returns how many (0: none queued, or the port is invalid — the
    /// port is then no longer signalled).
    private func take(_ limit: Int) -> Int {
        let n = monitor.withLock { () -> Int in
            guard valid, count > 0 else {
                signalled = false
                return 0
            }
            let n = min(count, limit)
            // At most two runs: from head to the ring's end, then from its start.
            let first = min(n, slotCount - head)
            moveOut(from: head, to: 0, first)
            if first < n { moveOut(from: 0, to: first, n - first) }
            head += n
            if head >= slotCount { head -= slotCount }
            count -= n
            wakeWaitingThreads()
            return n
        }
        takenNext = 0
        takenEnd = n
        return n
    }

    /// With the monitor held: moves `k` messages from ring slot `i` on to
    /// receive-area entry `j` on.
    @inline(__always)
    private func moveOut(from i: Int, to j: Int, _ k: Int) {
        // One message (a ping-pong's every batch) is copied in line: the
        // bulk copies are calls into the C library.
        if k == 1 {
            let h = headers[i]
            taken[j] = h
            if h.length > 0 { bl_copy_bytes(takenPayloads + j * slotSize, storage + i * slotSize, h.length) }
            return
        }
        (taken + j).moveInitialize(from: headers + i, count: k)
        if slotSize <= Self.wholeSlotCopyLimit {
            (takenPayloads + j * slotSize).copyMemory(from: storage + i * slotSize, byteCount: k * slotSize)
        } else {
            for m in 0..<k {
                let length = taken[j + m].length
                if length > 0 { (takenPayloads + (j + m) * slotSize).copyMemory(from: storage + (i + m) * slotSize, byteCount: length) }
            }
        }
    }

    /// Hands the receive area's messages to the handler, in order, without
    /// the lock; drops them once the port is invalidated.
    private func deliverTaken() {
        // Read once per batch: the slot size sits near the object's reference
        // count, which senders on other threads change on every send they
        // make through a stored reference; a read per message would pull
        // that line back to this CPU each time.
        let slotSize = slotSize
        while takenNext < takenEnd {
            let j = takenNext
            takenNext = j + 1
            let h = taken[j]
            if closed.load(ordering: .acquiring) {
                Self.releaseReplyPorts(taken + j, takenEnd - j)
                takenNext = takenEnd
                return
            }
            // Only this thread writes the count: no read-modify-write needed.
            receivedCount.store(receivedCount.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
            let payload = UnsafeRawBufferPointer(start: takenPayloads + j &* slotSize, count: h.length)
            if let r = h.replyPort {
                // The sender's retain moves on into the message, whose end releases it.
                handler(Message(id: h.id, payload: payload, replyPort: r.takeRetainedValue(), port: self, replyToken: h.token))
            } else {
                handler(Message(id: h.id, payload: payload, replyPort: nil, port: self, replyToken: h.token))
            }
        }
    }

    /// With the monitor held (or from deinit): drops the queued messages.
    private func dropQueued() {
        let first = min(count, slotCount - head)
        Self.releaseReplyPorts(headers + head, first)
        Self.releaseReplyPorts(headers, count - first)
        count = 0
    }

    /// A reply port's retain for a header. Out of line: inlined, the
    /// optimizer retains the Optional whether or not it is nil (a call into
    /// the runtime per message even without a reply port).
    @inline(never)
    private static func retained(_ port: BoardMessagePort?) -> Unmanaged<BoardMessagePort>? {
        port.map { .passRetained($0) }
    }

    /// Releases the reply ports of `n` dropped messages' headers.
    private static func releaseReplyPorts(_ h: UnsafeMutablePointer<Header>, _ n: Int) {
        for k in 0..<n { h[k].replyPort?.release() }
    }

    fileprivate func deliverReply(token: UInt64, id: Int32, payload: UnsafeRawBufferPointer) throws(BoardMessagePortError) {
        guard token != 0 else { throw .noReplyExpected(port: label) }
        guard payload.count <= slotSize else { throw tooLarge(payload.count) }
        let slot = Int(token & 0xFFFF_FFFF) - 1
        let generation = UInt32(token >> 32)
        try monitor.withLock { () throws(BoardMessagePortError) in
            guard replyStates[slot] == 1, replyGenerations[slot] == generation else { throw .replyAbandoned(port: label) }
            if payload.count > 0 { (replyBuffers + slot * slotSize).copyMemory(from: payload.baseAddress!, byteCount: payload.count) }
            replyLengths[slot] = payload.count
            replyIds[slot] = id
            replyStates[slot] = 2
            wakeWaitingThreads()
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
            closed.store(true, ordering: .releasing)
            dropQueued()
            wakeWaitingThreads()
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
