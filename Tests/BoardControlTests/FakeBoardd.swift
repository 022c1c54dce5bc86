import BoardControl
import Foundation
import Glibc

/// A fake boardd: a Unix socket in a temporary directory, served by a
/// thread that reads one request line per connection, records it, and
/// answers what `reply` makes of it (nil: close without answering).
final class FakeBoardd: @unchecked Sendable {
    let directory: String
    let path: String
    private let listener: Int32
    private let lock = NSLock()
    private var received: [String] = []
    private var thread: Thread?
    private let done = DispatchSemaphore(value: 0)

    /// `reply` gets the request line (no newline) and returns the reply line
    /// (no newline). `greeting`: written at once on accept, before reading
    /// anything, and the connection closed (what a busy daemon does).
    init(greeting: String? = nil, reply: @escaping @Sendable (String) -> String? = { _ in nil }) throws {
        directory = try TempDir.make()
        path = directory + "/boardd.sock"
        listener = try FakeBoardd.listen(at: path)
        let fd = listener
        let t = Thread { [self] in
            while true {
                let c = accept(fd, nil, nil)
                if c < 0 {
                    if errno == EINTR { continue }
                    break  // the listener was shut down
                }
                if let greeting {
                    let bytes = Array((greeting + "\n").utf8)
                    _ = bytes.withUnsafeBytes { Glibc.send(c, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    close(c)
                    continue
                }
                var line: [UInt8] = []
                var byte: UInt8 = 0
                while read(c, &byte, 1) == 1, byte != 0x0A { line.append(byte) }
                let request = String(decoding: line, as: UTF8.self)
                lock.withLock { received.append(request) }
                if let answer = reply(request) {
                    let bytes = Array((answer + "\n").utf8)
                    _ = bytes.withUnsafeBytes { Glibc.send(c, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                }
                close(c)
            }
            done.signal()
        }
        t.start()
        thread = t
    }

    /// Answers every request with `{"v":1,"id":ID,"ok":true,` + `result` fields.
    convenience init(result: String) throws {
        try self.init { request in
            let id = JSON.parse(request)?["id"]?.serialized ?? "null"
            return "{\"v\":1,\"id\":\(id),\"ok\":true\(result.isEmpty ? "" : ",")\(result)}"
        }
    }

    var requests: [String] { lock.withLock { received } }

    /// The first request as parsed JSON.
    var request: JSON? { requests.first.flatMap(JSON.parse) }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        _ = done.wait(timeout: .now() + 10)
        close(listener)
        TempDir.remove(directory)
    }

    static func listen(at path: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno)!) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            let b = Array(path.utf8)
            raw.copyBytes(from: b)
            raw[b.count] = 0
        }
        let r = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard r == 0, Glibc.listen(fd, 8) == 0 else {
            let e = errno
            close(fd)
            throw POSIXError(.init(rawValue: e)!)
        }
        return fd
    }

    /// A socket file nobody listens on (a daemon that died without removing it).
    static func staleSocket() throws -> (directory: String, path: String) {
        let dir = try TempDir.make()
        let path = dir + "/boardd.sock"
        close(try listen(at: path))
        return (dir, path)
    }
}

enum TempDir {
    static func make() throws -> String {
        var template = Array("/tmp/boardctl-test-XXXXXX".utf8CString)
        guard let p = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw POSIXError(.init(rawValue: errno)!)
        }
        return String(cString: p)
    }

    static func remove(_ dir: String) { try? FileManager.default.removeItem(atPath: dir) }
}

/// The built `boardctl`, next to the test bundle.
enum BoardctlBinary {
    static var path: String {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
        return URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent("boardctl").path
    }

    /// Runs it (or `program`, another of the package's binaries); `prefix`
    /// runs it under another program (setpriv).
    static func run(_ arguments: [String], prefix: [String] = [], environment: [String: String]? = nil, program: String? = nil) throws
        -> Outcome
    {
        let path = program ?? path
        let p = Process()
        p.executableURL = URL(fileURLWithPath: prefix.first ?? path)
        p.arguments = prefix.isEmpty ? arguments : Array(prefix.dropFirst()) + [path] + arguments
        if let environment { p.environment = environment }
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        try p.run()
        // Read before waiting, so a full pipe cannot stall the child.
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return Outcome(stdout: String(decoding: o, as: UTF8.self), stderr: String(decoding: e, as: UTF8.self), status: p.terminationStatus)
    }
}
