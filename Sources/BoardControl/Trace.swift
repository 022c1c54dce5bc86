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
                ("file", .string(file)), ("events", .int(Int64(events))), ("loops", .array(loops.map(JSON.string))),
                ("overwritten", .int(Int64(overwritten))), ("loops_missing", .array(missing.map(JSON.string))),
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
        let e = ControlClient.sendAll(fd, Array(request(for: duration).line(id: 1).utf8))
        if e != 0 { throw .connection(path: path, problem: "sending the request failed: \(ControlClient.describe(e))") }
        var reader = LineReader(fd: fd, limit: 64 << 20)
        let first = try next(&reader, path: path)
        let result = try ControlClient.result(of: first, path: path)
        let loops = (result["loops"]?.array ?? []).compactMap(\.string)
        started(loops)
        var out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":["
        var count = 0
        while true {
            let line = try next(&reader, path: path)
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

    /// The next line of the trace's stream, or what ended it.
    static func next(_ reader: inout LineReader, path: String) throws(ControlError) -> String {
        try reader.streamLine(path: path, closed: "the daemon closed the connection before the trace was sent")
    }

    /// Writes the file through a temporary one and a rename: a reader never
    /// sees half a trace.
    static func write(_ text: String, to file: String, path: String) throws(ControlError) {
        let out = try PartFile(file)
        do {
            try out.write(text)
            try out.finish()
        } catch {
            out.abandon()
            throw error
        }
    }
}
