import Glibc

/// `boardctl trace`: asks boardd to record every loop's activity for a
/// while (the protocol's `trace`, docs/control.md), gathers the Chrome trace
/// events it sends, and writes them as one trace-event JSON file that
/// ui.perfetto.dev and chrome://tracing open (one track per loop thread).
public enum TraceRecorder {
    /// What a finished trace holds.
    public struct Summary: Equatable, Sendable {
        public var file: String
        public var events: Int
        public var loops: [String]
        /// Spans the loops' rings overwrote (the oldest; a shorter trace keeps them all).
        public var overwritten: Int
        /// Loops that did not answer (left out).
        public var missing: [String]

        public var json: JSON {
            .object([
                ("file", .string(file)), ("events", .int(events)), ("loops", .array(loops.map(JSON.string))),
                ("overwritten", .int(overwritten)), ("loops_missing", .array(missing.map(JSON.string))),
            ])
        }

        public var text: String {
            var t = "wrote \(file): \(events) trace events from loop(s) \(loops.joined(separator: ", "))"
            if overwritten > 0 { t += "; the oldest \(overwritten) spans were overwritten (a shorter trace keeps them all)" }
            if !missing.isEmpty { t += "; loop(s) \(missing.joined(separator: ", ")) did not answer and are left out" }
            return t + "\nopen it in https://ui.perfetto.dev (Open trace file) or chrome://tracing"
        }
    }

    public static func request(for duration: String) -> Request { Request("trace", [("for", .string(duration))]) }

    /// Records a trace of `duration` (e.g. "5s") into `file`; `started` is
    /// told the loops once boardd has begun. Throws `ControlError` for
    /// what the daemon or the socket says, `TraceRecorder.Failure` when the
    /// file cannot be written.
    public static func record(
        socket path: String, duration: String, seconds: Int, file: String, started: ([String]) -> Void
    ) throws(ControlError) -> Summary {
        let fd = try ControlClient.connect(path)
        defer { close(fd) }
        // Long enough for the trace and its sending.
        var tv = timeval(tv_sec: seconds + ControlClient.defaultTimeoutSeconds, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let bytes = Array(request(for: duration).line(id: 1).utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBufferPointer { Glibc.send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw .connection(path: path, problem: "sending the request failed: \(ControlClient.describe(errno))")
            }
            sent += n
        }
        var reader = LineReader(fd: fd)
        let first = try reader.next(path: path)
        let result = try ControlClient.result(of: first, path: path)
        let loops = (result["loops"]?.array ?? []).compactMap(\.string)
        started(loops)
        var out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":["
        var count = 0
        while true {
            let line = try reader.next(path: path)
            guard let reply = JSON.parse(line) else { throw .connection(path: path, problem: "a trace line is not JSON: \(line.prefix(200))") }
            if let events = reply["trace_events"]?.array {
                for e in events {
                    if count > 0 { out += "," }
                    out += "\n" + e.serialized
                    count += 1
                }
                continue
            }
            let done = try ControlClient.result(of: line, path: path)
            guard done["done"]?.bool == true else { continue }
            out += "\n],\"otherData\":{\"tool\":\"boardctl trace\",\"for\":"
            JSON.quote(duration, into: &out)
            out += "}}\n"
            try write(out, to: file, path: path)
            return Summary(
                file: file, events: count, loops: loops, overwritten: done["overwritten"]?.int ?? 0,
                missing: (done["loops_missing"]?.array ?? []).compactMap(\.string))
        }
    }

    /// Writes the file through a temporary one and a rename: a reader never
    /// sees half a trace.
    static func write(_ text: String, to file: String, path: String) throws(ControlError) {
        let tmp = file + ".part"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .file(path: file, problem: ControlClient.describe(errno)) }
        let bytes = Array(text.utf8)
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBufferPointer { Glibc.write(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 {
                if errno == EINTR { continue }
                let e = errno
                close(fd)
                unlink(tmp)
                throw .file(path: file, problem: ControlClient.describe(e))
            }
            done += n
        }
        close(fd)
        guard rename(tmp, file) == 0 else {
            let e = errno
            unlink(tmp)
            throw .file(path: file, problem: ControlClient.describe(e))
        }
    }
}

/// Reads a socket a line at a time.
struct LineReader {
    let fd: Int32
    private var pending: [UInt8] = []
    private var buffer = [UInt8](repeating: 0, count: 64 * 1024)

    init(fd: Int32) { self.fd = fd }

    mutating func next(path: String) throws(ControlError) -> String {
        while true {
            if let nl = pending.firstIndex(of: 0x0A) {
                let text = String(decoding: pending[..<nl], as: UTF8.self)
                pending.removeFirst(nl + 1)
                return text
            }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { throw .connection(path: path, problem: "boardd stopped answering") }
                throw .connection(path: path, problem: "reading failed: \(ControlClient.describe(errno))")
            }
            if n == 0 { throw .connection(path: path, problem: "the daemon closed the connection before the trace was sent") }
            pending += buffer[0..<n]
            if pending.count > 64 << 20 { throw .connection(path: path, problem: "a line from boardd is longer than 64 MiB") }
        }
    }
}
