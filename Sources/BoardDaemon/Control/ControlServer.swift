import BoardControl
import Boardloop
import BoardSupport
import CDaemon
import Glibc
import Logging

/// boardd's control socket (docs/control.md): a Unix stream socket on the
/// main loop, in every mode, that takes one JSON request per line and
/// answers each with one JSON line. Everything is bounded: the request
/// line (`Options.maxLine`), what waits to be written to a client
/// (`Options.maxOutput`: a client that stops reading is dropped), the time
/// a client may go without a complete request (`Options.idleTimeout`),
/// the clients at once (`max_clients`) and the presses in flight
/// (`maxScheduled`; pulses are the command service's, `RemoteCommands`). Reads and writes never block: a
/// slow client holds up nothing. Main loop only.
public final class ControlServer {
    public struct Options: Sendable {
        /// `boardd --socket PATH` (nil: the config's `control: { path }`, else the default).
        public var path: String?
        /// The socket file's name in the default directories (`--demo`:
        /// `boardd-demo.sock`, so the demo never takes a daemon's socket).
        public var defaultName = "boardd.sock"
        public var idleTimeout: Duration = .seconds(60)
        /// How long a client may stay connected without sending a byte (at
        /// most `idleTimeout`): connections that only hold a slot go sooner.
        public var firstRequestTimeout: Duration = .seconds(10)
        /// The longest request line, in bytes (without its newline).
        public var maxLine = 64 * 1024
        /// The most bytes of replies that may wait for a client to read them.
        public var maxOutput = 1 << 20
        /// Where sysfs is mounted: gpio-sim lines are driven through it (a test gives a directory of its own).
        public var sysfs = "/sys"

        public init(path: String? = nil) { self.path = path }
    }

    /// What the server has done since it started.
    public struct Counters: Sendable, Equatable {
        public var accepted: UInt64 = 0
        /// Clients told "busy" (max_clients reached) and closed.
        public var busy: UInt64 = 0
        /// Clients closed at the idle timeout.
        public var idle: UInt64 = 0
        /// Clients dropped because their replies piled up unread.
        public var slow: UInt64 = 0
        /// Clients that hung up (with or without a request in progress).
        public var hungUp: UInt64 = 0
        public var requests: UInt64 = 0
        /// Error replies, by code.
        public var errors: [String: UInt64] = [:]
    }

    public let path: String
    public internal(set) var counters = Counters()
    unowned let daemon: Daemon
    let options: Options
    let config: ControlConfig
    let listenFD: Int32
    var listener: PortSource?
    var clients: [Client] = []
    var idleTimer: RunLoopTimer?
    /// Input drives and a trace's end to do later, soonest first (`driveTimer`).
    var scheduled: [Scheduled] = []
    var driveTimer: RunLoopTimer?
    var nextScheduleOrder: UInt64 = 0
    /// Floods in progress, one per line at most (ControlDrive.swift).
    var floods: [FloodRun] = []
    let startedAt: MonotonicInstant
    /// The socket file made (device, inode): the stop removes only it.
    var file: (dev: UInt64, ino: UInt64)?
    var stopped = false
    /// The `events` command's state (ControlEvents.swift).
    let events = Events()
    /// The trace that runs, if one does (ControlTrace.swift), and the last
    /// trace's number.
    var trace: TraceRun?
    var traceSerial: UInt64 = 0
    /// The recording that runs, if one does (ControlRecord.swift).
    var recording: RecordRun?
    var loop: BoardRunLoop { daemon.loop }
    var logger: Logger { daemon.logger }

    final class Client {
        let fd: Int32
        var source: PortSource?
        var input: [UInt8] = []
        /// Discarding the rest of a line that was too long.
        var discarding = false
        var output: [UInt8] = []
        /// When the client is closed unless a complete request comes first.
        var idleAt: UInt64
        let pid: Int32, uid: UInt32, gid: UInt32
        var closed = false
        /// Whether it has sent anything (before: the first-request timeout).
        var heardFrom = false
        /// Following the events (`events` with follow), and closed once its replies are written.
        var follow: Follow?
        var closeWhenFlushed = false
        /// A finished trace still to be sent, a chunk whenever the output drains.
        var traceDump: TraceDump?
        /// A request whose reply comes later (`reload`) is in progress: the
        /// client's socket is not read meanwhile, and what was read after
        /// that request waits in `stash` (replies stay in order).
        var awaiting = false
        var stash: [UInt8] = []

        init(fd: Int32, idleAt: UInt64) {
            self.fd = fd
            self.idleAt = idleAt
            var p: pid_t = 0, u: uid_t = 0, g: gid_t = 0
            if bd_peer_credentials(fd, &p, &u, &g) == 0 {
                (pid, uid, gid) = (p, u, g)
            } else {
                (pid, uid, gid) = (-1, UInt32.max, UInt32.max)
            }
        }

        var peer: String { "uid \(uid) gid \(gid) pid \(pid)" }
    }

    struct Scheduled {
        var at: UInt64
        var order: UInt64
        var action: ScheduledAction
    }

    enum ScheduledAction {
        /// An input (a mock pin, a gpio-sim line) to a physical level.
        case level(line: String, high: Bool)
        /// The time of the trace `serial` is up.
        case endTrace(serial: UInt64)
    }

    public enum StartError: Error, CustomStringConvertible {
        case live(path: String, pid: Int32, uid: UInt32 = getuid())
        /// The socket file belongs to another user (not root, not this
        /// one): a squatter's, or another person's boardd.
        case foreign(path: String, uid: UInt32)
        case notSocket(String)
        case system(path: String, what: String, errno: Int32)

        public var description: String {
            switch self {
            case let .live(path, pid, uid) where uid == getuid():
                "the control socket \(path) is in use: another boardd (pid \(pid)) answers on it; stop it, or give this one another path (--socket PATH or control: { path: ... })"
            case let .live(path, pid, uid):
                "the control socket \(path) is in use: a process of another user (pid \(pid), \(ControlClient.userName(uid))) answers on it; boardd will not share it: give this one another path (--socket PATH or control: { path: ... })"
            case let .foreign(path, uid):
                "the control socket path \(path) is a socket of another user (\(ControlClient.userName(uid))); boardd will not use or replace it: give this one another path (--socket PATH or control: { path: ... }), or set XDG_RUNTIME_DIR"
            case let .notSocket(path): "the control socket path \(path) exists and is not a socket; remove it or choose another path"
            case let .system(path, what, e): "the control socket \(path): \(what): \(String(cString: strerror(e)))"
            }
        }
    }

    // MARK: Start and stop

    static func start(_ daemon: Daemon, _ options: Options) throws -> ControlServer {
        let c = daemon.config.control
        let path = resolvePath(flag: options.path, config: c.path, name: options.defaultName)
        let fd = try listen(path, mode: c.mode, group: c.group)
        let s = ControlServer(daemon: daemon, options: options, config: c, path: path, fd: fd)
        do { try s.schedule() } catch {
            s.stop()
            throw error
        }
        daemon.logger.info("control socket: \(path) (mode \(String(c.mode, radix: 8)), at most \(c.maxClients) clients)")
        return s
    }

    private init(daemon: Daemon, options: Options, config: ControlConfig, path: String, fd: Int32) {
        self.daemon = daemon
        self.options = options
        self.config = config
        self.path = path
        listenFD = fd
        startedAt = daemon.loop.now
        var st = stat()
        if lstat(path, &st) == 0 { file = (UInt64(st.st_dev), UInt64(st.st_ino)) }
    }

    private func schedule() throws {
        let l = PortSource(fd: listenFD, interest: .readable) { [unowned self] _, _ in self.acceptClients() }
        try loop.add(l, mode: .common)
        listener = l
        let idle = RunLoopTimer.rearmable { [unowned self] _ in self.idleTick() }
        try loop.add(idle, mode: .common)
        idleTimer = idle
        let drive = RunLoopTimer.rearmable { [unowned self] _ in self.driveTick() }
        try loop.add(drive, mode: .common)
        driveTimer = drive
        startEvents()
    }

    /// Closes every client and the listening socket and removes the socket file.
    func stop() {
        guard !stopped else { return }
        stopped = true
        stopEvents()
        for c in clients { close(c, counted: false) }
        clients = []
        listener?.invalidate()
        idleTimer?.invalidate()
        driveTimer?.invalidate()
        scheduled = []
        floods = []
        Glibc.close(listenFD)
        // Only our own socket file: one that replaced it is left alone.
        var st = stat()
        if let file, lstat(path, &st) == 0, UInt64(st.st_dev) == file.dev, UInt64(st.st_ino) == file.ino { unlink(path) }
    }

    // MARK: Clients

    private func acceptClients() {
        // A bounded number per dispatch (the source is level-triggered: the rest wait for the next pass).
        for _ in 0..<8 {
            let fd = bd_unix_accept(listenFD)
            guard fd >= 0 else { return }
            counters.accepted += 1
            let c = Client(fd: fd, idleAt: deadline(first: true))
            guard clients.count < config.maxClients || (Self.keepsSlot(for: c.uid) && clients.count < config.maxClients + ControlConfig.keptClients) else {
                counters.busy += 1
                counters.errors["busy", default: 0] += 1  // an error reply, counted by its code as the others are
                var out: [UInt8] = []
                append(
                    error(id: .null, "busy", "boardd serves at most \(config.maxClients) control clients at once (control: { max_clients }); try again later"),
                    to: &out)
                _ = out.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                c.closed = true
                Glibc.close(fd)
                continue
            }
            let s = PortSource(fd: fd, interest: .readable) { [unowned self, unowned c] src, events in self.dispatch(c, src, events) }
            do { try loop.add(s, mode: .common) } catch {
                logger.error("control: cannot watch a new client: \(error)")
                Glibc.close(fd)
                continue
            }
            c.source = s
            clients.append(c)
            armIdle()
        }
    }

    /// When a client is closed unless a complete request comes: the idle
    /// timeout, or before its first request the shorter first-request one.
    func deadline(first: Bool = false) -> UInt64 {
        let limit = first ? min(options.idleTimeout, options.firstRequestTimeout) : options.idleTimeout
        return loop.now.nanoseconds &+ UInt64(max(limit.nanosecondsClamped, 0))
    }

    /// Root and boardd's own user keep `ControlConfig.keptClients` slots
    /// beyond `max_clients`: connections of others that fill it cannot lock
    /// the operator out.
    static func keepsSlot(for uid: UInt32) -> Bool { uid == 0 || uid == getuid() || uid == geteuid() }

    private func dispatch(_ c: Client, _ src: PortSource, _ events: PortSource.Events) {
        guard !c.closed else { return }
        let tr = daemon.main.tracer
        let t0 = tr == nil ? 0 : loop.now.nanoseconds
        defer { if let tr { tr.slice(.control, Int(c.fd), from: t0, to: loop.now.nanoseconds) } }
        if events.contains(.writable) { flush(c) }
        guard !c.closed else { return }
        if events.contains(.readable) || events.contains(.hangup) {
            var buf = [UInt8](repeating: 0, count: 16 * 1024)
            let n = buf.withUnsafeMutableBytes { read(c.fd, $0.baseAddress, $0.count) }
            if n > 0 {
                take(buf[0..<n], from: c)
            } else if n == 0 || (errno != EAGAIN && errno != EINTR) {
                // Hung up (a request in progress is dropped unanswered).
                counters.hungUp += 1
                close(c)
                return
            }
        }
        if events.contains(.error) && !events.contains(.readable) {
            counters.hungUp += 1
            close(c)
        } else if events.contains(.hangup) || events.contains(.error) {
            // Level-triggered: what is left is read in the next dispatches;
            // the read that returns 0 closes the client.
            if !c.closed { src.rearm() }
        }
    }

    /// Bytes read from a client: each complete line is a request.
    func take(_ bytes: ArraySlice<UInt8>, from c: Client) {
        if !c.heardFrom && !bytes.isEmpty {
            // Sending: no longer a connection that only holds a slot.
            c.heardFrom = true
            c.idleAt = deadline()
            armIdle()
        }
        var rest = bytes
        while !rest.isEmpty, !c.closed {
            if c.awaiting {
                // Read only at a hangup while a reply is due (the socket's
                // interest has no readable): at most a request line waits.
                c.stash += rest
                if c.stash.count > options.maxLine {
                    counters.hungUp += 1
                    close(c)
                }
                return
            }
            if let nl = Self.newline(in: rest) {
                let piece = rest[rest.startIndex..<nl]
                rest = rest[(nl + 1)...]
                if c.discarding {
                    c.discarding = false
                    continue
                }
                if c.input.count + piece.count > options.maxLine {
                    c.input = []
                    tooLong(c)
                    continue
                }
                c.input += piece
                let line = c.input
                c.input = []
                // (A client waiting for its trace has no idle timeout.)
                c.idleAt = trace?.client === c || recording?.client === c ? .max : deadline()
                armIdle()
                handleLine(line[...], from: c)
            } else {
                if !c.discarding {
                    if c.input.count + rest.count > options.maxLine {
                        c.input = []
                        c.discarding = true
                        tooLong(c)
                    } else {
                        c.input += rest
                    }
                }
                rest = []
            }
        }
    }

    /// The first newline's index in `bytes`, by memchr: a client's 16 KiB
    /// read of a long line is scanned in about a microsecond, not byte by byte.
    static func newline(in bytes: ArraySlice<UInt8>) -> Int? {
        bytes.withUnsafeBytes { b -> Int? in
            guard let base = b.baseAddress, let hit = memchr(base, 0x0a, b.count) else { return nil }
            return bytes.startIndex + (UnsafeRawPointer(hit) - base)
        }
    }

    private func tooLong(_ c: Client) {
        reply(
            error(id: .null, "too-long", "a request line has at most \(options.maxLine) bytes; the rest of this line is discarded"), to: c)
    }

    private func handleLine(_ line: ArraySlice<UInt8>, from c: Client) {
        var trimmed = line
        if trimmed.last == 0x0d { trimmed = trimmed.dropLast() }
        if trimmed.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { return }  // an empty line asks nothing
        counters.requests += 1
        if followerRequest(trimmed, from: c) { return }
        if let r = handle(trimmed, from: c) { reply(r, to: c) }
    }

    /// A reply that came later was queued for `c`: what the client sent
    /// meanwhile is taken now, and its socket read again.
    func resume(_ c: Client) {
        guard !c.closed else { return }
        c.idleAt = deadline()
        armIdle()
        let waiting = c.stash
        c.stash = []
        if !waiting.isEmpty { take(waiting[...], from: c) }
        flush(c)
    }

    /// Queues `reply` for `c` and writes what the socket takes now.
    func reply(_ reply: JSON, to c: Client) {
        guard !c.closed else { return }
        if case .object = reply, reply["ok"] == .bool(false), case let .string(code)? = reply["error"]?["code"] {
            counters.errors[code, default: 0] += 1
        }
        append(reply, to: &c.output)
        guard c.output.count <= options.maxOutput else {
            counters.slow += 1
            logger.warning("control: dropped a client (\(c.peer)) that does not read its replies (\(c.output.count) bytes waiting)")
            close(c)
            return
        }
        flush(c)
    }

    func append(_ j: JSON, to out: inout [UInt8]) {
        out += Array(j.serialized.utf8)
        out.append(0x0a)
    }

    func flush(_ c: Client) {
        // One chunk of a trace per call: the rest when the socket is
        // writable again, a pass later (the loop's other work goes on).
        var chunked = false
        while !c.output.isEmpty || (c.traceDump != nil && !chunked) {
            if c.output.isEmpty {
                chunked = true
                if !sendTraceChunk(c) { break }
            }
            let n = c.output.withUnsafeBytes { send(c.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                c.output.removeFirst(n)
            } else if n < 0 && errno == EINTR {
                continue
            } else if n < 0 && errno == EAGAIN {
                break
            } else {
                counters.hungUp += 1
                close(c)
                return
            }
        }
        if c.output.isEmpty && c.closeWhenFlushed {
            close(c)
            return
        }
        let reading: PortSource.Interest = c.awaiting ? [] : .readable
        let want: PortSource.Interest = c.output.isEmpty && c.traceDump == nil ? reading : reading.union(.writable)
        if let s = c.source, s.interest != want { s.interest = want }
    }

    func close(_ c: Client, counted: Bool = true) {
        guard !c.closed else { return }
        c.closed = true
        if c.follow != nil { unfollow(c) }
        if trace?.client === c { endTrace(send: false) }
        if recording?.client === c { endRecording(send: false) }
        c.traceDump = nil
        c.source?.invalidate()
        c.source = nil
        Glibc.close(c.fd)
        if counted { clients.removeAll { $0 === c } }
    }
}
