import Glibc
import Synchronization

/// `boardctl events`: the events boardd kept, or (follow) a stream of them
/// as they happen, one line each, until Ctrl-C. The protocol's `events`
/// (docs/control.md).
public enum EventStream {
    public static func request(line: String?, follow: Bool) -> Request {
        Request("events", [("follow", .bool(follow))] + (line.map { [("line", JSON.string($0))] } ?? []))
    }

    /// Set by SIGINT: the stream ends cleanly (the read is interrupted).
    static let interrupted = Atomic<Bool>(false)

    /// SIGINT ends a follow cleanly: the handler only sets a flag, and is
    /// installed without SA_RESTART so the blocked read returns.
    public static func catchInterrupt() {
        var sa = sigaction()
        sa.__sigaction_handler.sa_handler = { _ in EventStream.interrupted.store(true, ordering: .relaxed) }
        sigemptyset(&sa.sa_mask)
        sa.sa_flags = 0
        sigaction(SIGINT, &sa, nil)
        // A mask inherited from the parent would hold the signal back.
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
    }

    /// One event as a person reads it:
    /// `12:03:04.123456 main  button  press -> flip (reaction, 85us)`.
    public static func human(_ e: JSON) -> String {
        let ns = e["t_ns"]?.int ?? 0
        var secs = time_t(ns / 1_000_000_000)
        var tm = tm()
        localtime_r(&secs, &tm)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let micros = String(ns % 1_000_000_000 / 1000)
        let time = "\(two(tm.tm_hour)):\(two(tm.tm_min)):\(two(tm.tm_sec)).\(String(repeating: "0", count: 6 - micros.count))\(micros)"
        let loop = e["loop"]?.string ?? "?"
        let kind = e["kind"]?.string ?? "?"
        var text = e["text"]?.string ?? ""
        let line = e["line"]?.string
        if let line, text.hasPrefix(line + ": ") {
            text.removeFirst(line.count + 2)
        } else if let line, text.hasPrefix(line + " ") {
            text.removeFirst(line.count + 1)
        }
        var note = kind
        if kind == "reaction", let took = e["took_ns"]?.int { note += ", \(DurationText.rounded(nanoseconds: took))" }
        return "\(time) \(loop)  \(line ?? "-")  \(text) (\(note))"
    }

    /// Runs `boardctl events`: each event to `out` (a line with its
    /// newline, written as it comes), a problem to `err`; returns the exit
    /// status (0 at the end of the kept events, at Ctrl-C, or after a cancel).
    public static func run(
        socket path: String, line: String?, follow: Bool, json: Bool, timeoutSeconds: Int = ControlClient.defaultTimeoutSeconds,
        out: (String) -> Void, err: (String) -> Void
    ) -> Int32 {
        let fd: Int32
        do { fd = try ControlClient.connect(path) } catch {
            err(error.stderrText)
            return error.exitStatus
        }
        defer { close(fd) }
        if !follow {
            var tv = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
            _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        }
        let e = ControlClient.sendAll(fd, Array(request(line: line, follow: follow).line(id: 1).utf8)) { interrupted.load(ordering: .relaxed) }
        if e != 0 {
            if interrupted.load(ordering: .relaxed) { return 0 }
            err("boardctl: \(ControlError.connection(path: path, problem: "sending the request failed: \(ControlClient.describe(e))").message)\n")
            return 6
        }
        func show(_ event: JSON) { out((json ? event.serialized : human(event)) + "\n") }
        var reader = LineReader(fd: fd, limit: 16 << 20)
        var answered = false
        while true {
            let got = reader.next { interrupted.load(ordering: .relaxed) }
            guard case let .success(bytes) = got else {
                switch got {
                case .failure(.interrupted): return 0
                case .failure(.timedOut):
                    err("boardctl: \(ControlError.connection(path: path, problem: "no reply within \(timeoutSeconds)s").message)\n")
                case let .failure(.failed(e)):
                    err("boardctl: \(ControlError.connection(path: path, problem: "reading failed: \(ControlClient.describe(e))").message)\n")
                case .failure(.tooLong): err("boardctl: a line from boardd is longer than 16 MiB\n")
                default:  // closed
                    if answered && follow {
                        err("boardctl: boardd closed the stream\n")
                    } else {
                        err("boardctl: \(ControlError.connection(path: path, problem: "the daemon closed the connection without a reply").message)\n")
                    }
                }
                return 6
            }
            let text = String(decoding: bytes, as: UTF8.self)
            if !answered {
                answered = true
                let result: JSON
                do { result = try ControlClient.result(of: text, path: path) } catch {
                    err(error.stderrText)
                    return error.exitStatus
                }
                guard follow else {
                    for e in result["events"]?.array ?? [] { show(e) }
                    return 0
                }
                continue
            }
            guard let reply = JSON.parse(text) else { continue }
            if let e = reply["event"] {
                show(e)
            } else if reply["cancelled"]?.bool == true {
                return 0
            } else if reply["ok"]?.bool == false {
                let message = reply["error"]?["message"]?.string ?? "the stream ended"
                err("boardctl: \(message)\n")
                return 1
            }
        }
    }
}
