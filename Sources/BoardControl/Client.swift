import Glibc

/// One request as it goes on the wire: `{"v":1,"id":N,"cmd":"NAME", ...args}`.
public struct Request: Equatable, Sendable {
    public var cmd: String
    public var args: [(String, JSON)]

    public init(_ cmd: String, _ args: [(String, JSON)] = []) {
        self.cmd = cmd
        self.args = args
    }

    public static func == (a: Request, b: Request) -> Bool { a.json(id: 1) == b.json(id: 1) }

    public func json(id: Int) -> JSON {
        .object([("v", .int(Int64(ControlError.protocolVersion))), ("id", .int(Int64(id))), ("cmd", .string(cmd))] + args)
    }

    /// The request line, newline included.
    public func line(id: Int) -> String { json(id: id).serialized + "\n" }
}

/// The client side of the control socket: connect, send one request line,
/// read the reply line.
public enum ControlClient {
    /// How long boardctl waits for a reply (a press with a long hold is
    /// answered when the hold begins, so this is a generous bound).
    public static let defaultTimeoutSeconds = 30

    /// Sends `request` to the socket at `path` and returns the reply's
    /// result: the reply object without "v", "id" and "ok". Throws
    /// `ControlError` for every failure, an error reply included.
    public static func send(_ request: Request, to path: String, timeoutSeconds: Int = defaultTimeoutSeconds) throws(ControlError) -> JSON {
        let fd = try connect(path)
        defer { close(fd) }
        var tv = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let id = 1
        let writeError = sendAll(fd, Array(request.line(id: id).utf8))
        // A daemon that refuses the connection (busy) writes one error line
        // and closes: read it even when the write failed.
        let line: [UInt8]
        switch readLine(fd, timeoutSeconds: timeoutSeconds) {
        case let .success(l): line = l
        case let .failure(e):
            if writeError != 0 { throw .connection(path: path, problem: "sending the request failed: \(describe(writeError))") }
            throw .connection(path: path, problem: e.description)
        }
        return try result(of: String(decoding: line, as: UTF8.self), path: path)
    }

    /// The result of one reply line, or the error it carries.
    public static func result(of line: String, path: String) throws(ControlError) -> JSON {
        guard let reply = JSON.parse(line), let members = reply.members else {
            throw .connection(path: path, problem: "the reply is not a JSON object: \(line.prefix(200))")
        }
        let v = reply["v"]
        if v?.int != ControlError.protocolVersion || reply["error"]?["code"]?.string == "version" {
            throw .versionMismatch(daemon: v?.cell ?? "?", detail: reply["error"]?["message"]?.string)
        }
        guard let ok = reply["ok"]?.bool else { throw .connection(path: path, problem: "the reply has no \"ok\": \(line.prefix(200))") }
        if !ok {
            let code = reply["error"]?["code"]?.string ?? "internal"
            let message = reply["error"]?["message"]?.string ?? "boardd answered an error without a message (\(code))"
            throw .daemon(code: code, message: message)
        }
        return .object(members.filter { !["v", "id", "ok"].contains($0.0) })
    }

    static func describe(_ e: Int32) -> String { String(cString: strerror(e)) }

    static func connect(_ path: String) throws(ControlError) -> Int32 {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: addr.sun_path)
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count < capacity else {
            throw .connection(path: path, problem: "a socket path must be 1 to \(capacity - 1) bytes long")
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .connection(path: path, problem: "socket(): \(describe(errno))") }
        var r: Int32
        repeat {
            r = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
        } while r < 0 && errno == EINTR
        if r == 0 {
            if let peer = peer(fd), !trusts(uid: peer.uid, path: path) {
                close(fd)
                throw .untrustedPeer(path: path, uid: peer.uid, pid: peer.pid)
            }
            return fd
        }
        let e = errno
        close(fd)
        throw classify(connectErrno: e, path: path)
    }

    /// The process at the other end of a connected Unix socket (SO_PEERCRED).
    static func peer(_ fd: Int32) -> (pid: Int32, uid: UInt32)? {
        // struct ucred: pid, uid, gid.
        var cred: (Int32, UInt32, UInt32) = (0, 0, 0)
        var len = socklen_t(MemoryLayout.size(ofValue: cred))
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 else { return nil }
        return (cred.0, cred.1)
    }

    /// Whether a socket's listener may be believed to be boardd: it runs as
    /// root, as this user, or as the owner of the socket's directory
    /// (`/run/boardd` belongs to the service's user). A socket another user
    /// made in `/tmp` (owned by root, writable by all) is not trusted.
    public static func trusts(uid: UInt32, path: String, me: UInt32 = getuid()) -> Bool {
        if uid == 0 || uid == me || uid == geteuid() { return true }
        let dir = path.lastIndex(of: "/").map { path[..<$0].isEmpty ? "/" : String(path[..<$0]) } ?? "."
        var st = stat()
        return stat(dir, &st) == 0 && st.st_uid == uid
    }

    /// `uid 1001 (alice)`.
    public static func userName(_ uid: UInt32) -> String {
        guard let pw = getpwuid(uid), let name = pw.pointee.pw_name else { return "uid \(uid)" }
        return "uid \(uid) (\(String(cString: name)))"
    }

    /// What a failed connect() means to a person.
    public static func classify(connectErrno e: Int32, path: String) -> ControlError {
        switch e {
        case ENOENT, ECONNREFUSED, ENOTDIR: return .noDaemon(path: path)
        case EACCES, EPERM: return .permissionDenied(path: path)
        default: return .connection(path: path, problem: "connect: \(describe(e))")
        }
    }

    /// One line (without its newline); at most 16 MiB.
    static func readLine(_ fd: Int32, timeoutSeconds: Int) -> Result<[UInt8], ReadProblem> {
        var reader = LineReader(fd: fd, limit: 16 << 20)
        return reader.next().mapError { e in
            switch e {
            case .timedOut: ReadProblem("no reply within \(timeoutSeconds)s")
            case let .failed(errno): ReadProblem("reading the reply failed: \(describe(errno))")
            case .closed(partial: false), .interrupted: ReadProblem("the daemon closed the connection without a reply")
            case .closed(partial: true): ReadProblem("the reply ended without a newline")
            case .tooLong: ReadProblem("the reply is longer than 16 MiB")
            }
        }
    }

    /// Writes all of `bytes` to the socket `fd`: 0, or the errno of the
    /// write that failed. An interrupted write is tried again unless
    /// `stop()` says to give up (then EINTR).
    static func sendAll(_ fd: Int32, _ bytes: [UInt8], stop: () -> Bool = { false }) -> Int32 {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBufferPointer { Glibc.send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR && !stop() { continue }
                return errno
            }
            sent += n
        }
        return 0
    }

    struct ReadProblem: Error, CustomStringConvertible {
        let description: String
        init(_ d: String) { description = d }
    }
}

/// Reads a socket a line at a time (the lines of one reply, or of a stream
/// of them), with a bound on a line's length.
struct LineReader {
    enum Failure: Error {
        /// The socket's receive timeout passed (EAGAIN).
        case timedOut
        /// `interrupted()` said to stop (Ctrl-C during a follow).
        case interrupted
        /// The other end closed; `partial`: in the middle of a line.
        case closed(partial: Bool)
        case failed(Int32)
        case tooLong
    }

    let fd: Int32
    let limit: Int
    private var pending: [UInt8] = []
    private var buffer = [UInt8](repeating: 0, count: 16 * 1024)

    init(fd: Int32, limit: Int) {
        self.fd = fd
        self.limit = limit
    }

    /// The next line, without its newline. Lines already read are handed
    /// out before `interrupted()` is asked, which it is before each read.
    mutating func next(interrupted: () -> Bool = { false }) -> Result<[UInt8], Failure> {
        while true {
            if let nl = pending.firstIndex(of: 0x0A) {
                let line = Array(pending[..<nl])
                pending.removeFirst(nl + 1)
                return .success(line)
            }
            if interrupted() { return .failure(.interrupted) }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { return .failure(.timedOut) }
                return .failure(.failed(errno))
            }
            if n == 0 { return .failure(.closed(partial: !pending.isEmpty)) }
            pending += buffer[0..<n]
            if pending.count > limit { return .failure(.tooLong) }
        }
    }

    /// The next line of a stream boardd sends (a trace, a recording) as
    /// text, or what ended it; `closed` says what a connection closed
    /// before the stream's end means.
    mutating func streamLine(path: String, closed: String) throws(ControlError) -> String {
        switch next() {
        case let .success(bytes): return String(decoding: bytes, as: UTF8.self)
        case .failure(.timedOut): throw .connection(path: path, problem: "boardd stopped answering")
        case let .failure(.failed(e)): throw .connection(path: path, problem: "reading failed: \(ControlClient.describe(e))")
        case .failure(.tooLong): throw .connection(path: path, problem: "a line from boardd is longer than \(limit >> 20) MiB")
        case .failure(.closed), .failure(.interrupted): throw .connection(path: path, problem: closed)
        }
    }
}

/// A file written through `FILE.part` and renamed when complete (a trace,
/// a recording): a reader never sees half of one.
final class PartFile {
    let file: String
    let tmp: String
    var fd: Int32

    init(_ file: String) throws(ControlError) {
        self.file = file
        tmp = file + ".part"
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .file(path: file, problem: ControlClient.describe(errno)) }
    }

    func write(_ text: String) throws(ControlError) {
        let bytes = Array(text.utf8)
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBufferPointer { Glibc.write(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 {
                if errno == EINTR { continue }
                throw .file(path: file, problem: ControlClient.describe(errno))
            }
            done += n
        }
    }

    func finish() throws(ControlError) {
        let failed = close(fd) != 0
        fd = -1
        if failed { throw .file(path: file, problem: ControlClient.describe(errno)) }
        guard rename(tmp, file) == 0 else { throw .file(path: file, problem: ControlClient.describe(errno)) }
    }

    /// Removes the temporary file (what it was for did not complete).
    func abandon() {
        if fd >= 0 { close(fd) }
        fd = -1
        unlink(tmp)
    }
}
