import Glibc
/// One boardctl command: the request it sends and how its reply reads.
public enum Command: Equatable, Sendable {
    case status
    case lines
    case get(line: String)
    case set(line: String, value: Bool)
    case toggle(line: String)
    case pulse(line: String, duration: String)
    case sequence(start: Bool, name: String)
    case mode(loop: String, mode: String?)
    case reload
    case press(line: String, hold: String?)
    case release(line: String)
    case click(line: String, count: Int?, hold: String?)
    case input(line: String, value: Bool)
    case ping
    /// Every loop's counters; `prometheus`: printed in the text exposition format.
    case stats(prometheus: Bool)
    /// `edges` edges on an input at `rate` (`2kHz`); `stop`: ends the line's flood.
    case flood(line: String, edges: Int, rate: String)
    case floodStop(line: String)

    public var request: Request {
        switch self {
        case .status: return Request("status")
        case .lines: return Request("lines")
        case let .get(line): return Request("get", [("line", .string(line))])
        case let .set(line, value): return Request("set", [("line", .string(line)), ("value", .bool(value))])
        case let .toggle(line): return Request("toggle", [("line", .string(line))])
        case let .pulse(line, duration): return Request("pulse", [("line", .string(line)), ("duration", .string(duration))])
        case let .sequence(start, name): return Request("sequence", [("action", .string(start ? "start" : "stop")), ("name", .string(name))])
        case let .mode(loop, mode): return Request("mode", [("loop", .string(loop))] + (mode.map { [("mode", JSON.string($0))] } ?? []))
        case .reload: return Request("reload")
        case let .press(line, hold): return Request("press", [("line", .string(line))] + (hold.map { [("hold", JSON.string($0))] } ?? []))
        case let .release(line): return Request("release", [("line", .string(line))])
        case let .click(line, count, hold):
            return Request(
                "click",
                [("line", .string(line))] + (count.map { [("count", JSON.int(Int64($0)))] } ?? []) + (hold.map { [("hold", JSON.string($0))] } ?? []))
        case let .input(line, value): return Request("input", [("line", .string(line)), ("value", .bool(value))])
        case .ping: return Request("ping")
        case .stats: return Request("stats")
        case let .flood(line, edges, rate): return Request("flood", [("line", .string(line)), ("edges", .int(Int64(edges))), ("rate", .string(rate))])
        case let .floodStop(line): return Request("flood", [("line", .string(line)), ("stop", .bool(true))])
        }
    }

    /// What a person reads for a successful reply (no trailing newline).
    public func human(_ r: JSON) -> String {
        func onOff(_ v: JSON?) -> String { v?.bool.map { $0 ? "on" : "off" } ?? (v?.cell ?? "?") }
        func name(_ key: String, _ fallback: String) -> String { r[key]?.string ?? fallback }
        switch self {
        case .status: return Render.status(r)
        case .lines: return Render.lines(r)
        case let .get(line), let .set(line, _), let .toggle(line):
            return "\(name("line", line)): \(onOff(r["value"]))"
        case let .pulse(line, duration): return "\(name("line", line)): pulse \(duration) started"
        case let .sequence(start, seq): return "\(name("name", seq)): \(start ? "started" : "stopped")"
        case let .mode(loop, _): return "\(name("loop", loop)): \(r["mode"]?.cell ?? "?")"
        case .reload: return "reloaded: the new config is running"
        case let .press(line, hold): return "\(name("line", line)): pressed" + (hold.map { " for \($0)" } ?? "")
        case let .release(line): return "\(name("line", line)): released"
        case let .click(line, count, hold):
            let n = count ?? 1
            return "\(name("line", line)): clicked" + (n == 1 ? "" : " \(n) times") + (hold.map { " (held \($0) each)" } ?? "")
        case let .input(line, value): return "\(name("line", line)): input \(value ? "on" : "off")"
        case .ping: return r["pong"]?.bool == true ? "pong" : "pong? \(r.serialized)"
        case let .stats(prometheus): return prometheus ? String(Stats.prometheus(r).dropLast()) : Stats.human(r)
        case let .flood(line, _, _), let .floodStop(line): return Flood.human(r, line: line)
        }
    }
}

/// The outcome of one boardctl run: what goes to stdout and stderr, and the
/// exit status.
public struct Outcome: Equatable, Sendable {
    public var stdout: String
    public var stderr: String
    public var status: Int32

    public init(stdout: String, stderr: String, status: Int32) {
        self.stdout = stdout
        self.stderr = stderr
        self.status = status
    }
}

public enum Boardctl {
    /// Sends `command` to the socket at `socket`, and says what boardctl
    /// prints and how it exits. `json`: the reply's result as one JSON line.
    /// `alternative`: a socket to name when none answers at `socket` (the
    /// system socket, when boardctl chose `socket` by itself).
    /// A press with `--hold` or a click returns when boardd has made its
    /// last change (the reply says how long that is): a script's next step
    /// then sees the line released.
    static func waitForTheDrive(_ result: JSON) {
        guard let ns = result["ends_in_ns"]?.int, ns > 0 else { return }
        var t = timespec(tv_sec: Int(ns / 1_000_000_000), tv_nsec: Int(ns % 1_000_000_000))
        var rest = timespec()
        while nanosleep(&t, &rest) != 0 && errno == EINTR { t = rest }
    }

    public static func execute(
        _ command: Command, socket: String, json: Bool, timeoutSeconds: Int = ControlClient.defaultTimeoutSeconds, alternative: String? = nil
    ) -> Outcome {
        do {
            let result = try ControlClient.send(command.request, to: socket, timeoutSeconds: timeoutSeconds)
            if case .reload = command, result["applied"]?.bool == false {
                let errors = result["errors"]?.array?.map { $0.string ?? $0.serialized } ?? []
                let refused = ControlError.reloadRefused(errors: errors)
                return Outcome(stdout: json ? result.serialized + "\n" : "", stderr: refused.message + "\n", status: refused.exitStatus)
            }
            waitForTheDrive(result)
            return Outcome(stdout: (json ? result.serialized : command.human(result)) + "\n", stderr: "", status: 0)
        } catch {
            if case .noDaemon = error, let alternative {
                return Outcome(
                    stdout: "", stderr: "boardctl: \(error.message); \(alternative) exists: try --socket \(alternative)\n", status: error.exitStatus)
            }
            return Outcome(stdout: "", stderr: error.stderrText, status: error.exitStatus)
        }
    }
}
