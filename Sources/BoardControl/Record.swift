import Glibc

/// `boardctl record`: asks boardd to record what it sees and does for a
/// while (the protocol's `record`, docs/control.md) and writes the records
/// it streams into a recording file (JSON lines, docs/testing-configs.md) as they
/// come: the header, the records, the footer. The file is written through
/// a temporary one and a rename: it exists only once the recording is
/// complete.
public enum Recording {
    /// What a finished recording holds.
    public struct Summary: Equatable, Sendable {
        public var file: String
        public var records: Int
        public var lines: [String]
        /// Records the loops' rings had no room for.
        public var dropped: Int
        /// Loops that did not answer (left out).
        public var missing: [String]

        public var json: JSON {
            .object([
                ("file", .string(file)), ("records", .int(Int64(records))), ("lines", .array(lines.map(JSON.string))), ("dropped", .int(Int64(dropped))),
                ("loops_missing", .array(missing.map(JSON.string))),
            ])
        }

        public var text: String {
            var t = "wrote \(file): \(records) records of line(s) \(lines.joined(separator: ", ")), \(dropped) dropped"
            if !missing.isEmpty { t += "; loop(s) \(missing.joined(separator: ", ")) did not answer and are left out" }
            return t
        }
    }

    public static func request(for duration: String, lines: [String]) -> Request {
        var args: [(String, JSON)] = [("for", .string(duration))]
        if !lines.isEmpty { args.append(("lines", .array(lines.map(JSON.string)))) }
        return Request("record", args)
    }

    /// Records for `duration` (e.g. "5s") into `file`; `started` is told
    /// the lines once boardd has begun. Throws `ControlError` for what the
    /// daemon or the socket says, or when the file cannot be written (no
    /// file is left then).
    public static func record(
        socket path: String, duration: String, seconds: Int, lines: [String], file: String, started: ([String]) -> Void
    ) throws(ControlError) -> Summary {
        let fd = try ControlClient.connect(path)
        defer { close(fd) }
        // A record comes at least every few seconds while the recording
        // runs only if something happens: wait as long as it lasts.
        var tv = timeval(tv_sec: seconds + ControlClient.defaultTimeoutSeconds, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let e = ControlClient.sendAll(fd, Array(request(for: duration, lines: lines).line(id: 1).utf8))
        if e != 0 { throw .connection(path: path, problem: "sending the request failed: \(ControlClient.describe(e))") }
        var reader = LineReader(fd: fd, limit: 64 << 20)
        let first = try next(&reader, path: path)
        let result = try ControlClient.result(of: first, path: path)
        guard let header = result["header"], header["boardd_recording"] != nil else {
            throw .connection(path: path, problem: "the reply to record has no recording header: \(first.prefix(200))")
        }
        let recorded = (header["lines"]?.array ?? []).compactMap(\.string)
        started(recorded)
        let out = try PartFile(file)
        do {
            try out.write(header.serialized + "\n")
            let prefix = #"{"v":\#(ControlError.protocolVersion),"id":1,"record":"#
            var count = 0
            while true {
                let line = try next(&reader, path: path)
                if line.hasPrefix(prefix), line.hasSuffix("}") {
                    // The record as boardd wrote it, unwrapped.
                    try out.write(String(line.dropFirst(prefix.count).dropLast()) + "\n")
                    count += 1
                    continue
                }
                let done = try ControlClient.result(of: line, path: path)
                guard done["done"]?.bool == true, let end = done["end"] else { continue }
                try out.write(end.serialized + "\n")
                try out.finish()
                return Summary(
                    file: file, records: end["records"]?.int ?? count, lines: recorded, dropped: end["dropped"]?.int ?? 0,
                    missing: (end["loops_missing"]?.array ?? []).compactMap(\.string))
            }
        } catch {
            out.abandon()
            throw error
        }
    }

    /// The next line of the recording's stream, or what ended it.
    static func next(_ reader: inout LineReader, path: String) throws(ControlError) -> String {
        try reader.streamLine(path: path, closed: "the daemon closed the connection before the recording ended; no file is written")
    }
}
