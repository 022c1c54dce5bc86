/// `boardctl stats`: the `stats` reply as tables a person reads, or as the
/// Prometheus text exposition format (node_exporter's textfile collector
/// reads it; docs/control.md lists every metric).
public enum Stats {
    static func ns(_ v: JSON?) -> String { v?.int.map { DurationText.rounded(nanoseconds: $0) } ?? "-" }

    public static func human(_ r: JSON) -> String {
        let loops = r["loops"]?.array ?? []
        var sections: [String] = []
        let info = r["boardd"]
        sections.append(
            "boardd \(info?["version"]?.cell ?? "?"), board \(info?["board"]?.cell ?? "?"), config \(info?["config"]?.cell ?? "?")")
        sections.append(
            Render.table(
                ["LOOP", "MODE"],
                loops.map { l in [l["name"]?.cell ?? "?", (l["mode"]?.cell ?? "?") + (l["answered"]?.bool == false ? " (did not answer)" : "")] }))
        var tasks: [[String]] = [], reactions: [[String]] = [], lines: [[String]] = []
        for l in loops {
            let loop = l["name"]?.cell ?? "?"
            for t in l["tasks"]?.array ?? [] {
                tasks.append([
                    t["name"]?.cell ?? "?", loop, t["runs"]?.cell ?? "-", t["skipped_periods"]?.cell ?? "-", ns(t["lateness_p50_ns"]),
                    ns(t["lateness_p99_ns"]), ns(t["lateness_max_ns"]),
                ])
            }
            for x in l["reactions"]?.array ?? [] {
                let fired = (x["fires"]?.int ?? 0) > 0
                reactions.append([
                    x["name"]?.cell ?? "?", loop, x["fires"]?.cell ?? "-", x["skipped"]?.cell ?? "-",
                    fired ? ns(x["trigger_to_done_p50_ns"]) : "-", fired ? ns(x["trigger_to_done_p99_ns"]) : "-",
                    fired ? ns(x["trigger_to_done_max_ns"]) : "-",
                ])
            }
            for x in l["lines"]?.array ?? [] {
                lines.append([
                    x["name"]?.cell ?? "?", loop, x["events"]?.cell ?? "-", x["held"]?.cell ?? "-", x["lost"]?.cell ?? "-",
                    x["rate_limited"]?.cell ?? "-",
                ])
            }
        }
        sections.append(
            tasks.isEmpty ? "no tasks" : Render.table(["TASK", "LOOP", "RUNS", "SKIPPED", "LATE P50", "LATE P99", "LATE MAX"], tasks))
        sections.append(
            reactions.isEmpty
                ? "no reactions" : Render.table(["REACTION", "LOOP", "FIRES", "SKIPPED", "DONE P50", "DONE P99", "DONE MAX"], reactions))
        sections.append(lines.isEmpty ? "no input lines" : Render.table(["LINE", "LOOP", "EVENTS", "HELD", "LOST", "RATE-LIMITED"], lines))
        let commands = r["commands"]
        let each = commands?["each"]?.array ?? []
        if each.isEmpty {
            sections.append("no commands")
        } else {
            sections.append(
                Render.table(
                    ["COMMAND", "STARTED", "REFUSED"], each.map { [$0["name"]?.cell ?? "?", $0["started"]?.cell ?? "-", $0["refused"]?.cell ?? "-"] })
                    + "\n(\(commands?["running"]?.cell ?? "0") running now)")
        }
        if let c = r["control"] {
            var text =
                "control socket: \(c["requests"]?.cell ?? "0") requests, \(c["accepted"]?.cell ?? "0") connections (\(c["clients"]?.cell ?? "0") open), "
                + "\(c["busy"]?.cell ?? "0") busy, \(c["idle"]?.cell ?? "0") idle, \(c["slow"]?.cell ?? "0") slow"
            let errors = c["errors"]?.members ?? []
            if !errors.isEmpty { text += "; errors: " + errors.map { "\($0.0) \($0.1.cell)" }.joined(separator: ", ") }
            sections.append(text)
        }
        return sections.joined(separator: "\n\n")
    }

    // MARK: Prometheus

    /// A label value as the exposition format escapes it (backslash, quote, newline).
    public static func escape(_ s: String) -> String {
        var out = ""
        for c in s.unicodeScalars {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }

    struct Family {
        var name: String, type: String, help: String
        var samples: [(suffix: String, labels: [(String, String)], value: String)] = []

        mutating func add(_ labels: [(String, String)], _ value: String, suffix: String = "") {
            samples.append((suffix, labels, value))
        }

        var text: String {
            var out = "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
            for s in samples {
                out += name + s.suffix
                if !s.labels.isEmpty { out += "{" + s.labels.map { "\($0.0)=\"\(Stats.escape($0.1))\"" }.joined(separator: ",") + "}" }
                out += " \(s.value)\n"
            }
            return out
        }
    }

    static func count(_ v: JSON?) -> String { v?.int.map(String.init) ?? "0" }
    static func seconds(_ v: JSON?) -> String {
        guard let n = v?.int else { return "0" }
        if n % 1_000_000_000 == 0 { return String(n / 1_000_000_000) }
        return String(Double(n) / 1e9)
    }

    /// The reply in the text exposition format (ends with a newline).
    public static func prometheus(_ r: JSON) -> String {
        func counter(_ name: String, _ help: String) -> Family { Family(name: name, type: "counter", help: help) }
        func gauge(_ name: String, _ help: String) -> Family { Family(name: name, type: "gauge", help: help) }
        var info = gauge("boardd_info", "The running boardd: its version, board and config file (always 1).")
        let b = r["boardd"]
        info.add([("board", b?["board"]?.cell ?? ""), ("config", b?["config"]?.cell ?? ""), ("version", b?["version"]?.cell ?? "")], "1")
        var generation = gauge("boardd_config_generation", "The config's generation (1 at start, one more per applied reload).")
        generation.add([], count(b?["generation"]))
        var mode = gauge("boardd_loop_mode", "1 for each loop's effective mode.")
        var answered = gauge("boardd_loop_answered", "1 when the loop answered for its figures within a second, else 0.")
        var runs = counter("boardd_task_runs_total", "Times a task ran.")
        var skipped = counter("boardd_task_skipped_periods_total", "Periods a task skipped because it ran late.")
        var late = gauge("boardd_task_lateness_seconds", "A task's lateness (how long after its due time it ran), at quantile 0.5 and 0.99.")
        var lateMax = gauge("boardd_task_lateness_max_seconds", "A task's largest lateness.")
        var fires = counter("boardd_reaction_fires_total", "Times a reaction fired.")
        var rskipped = counter("boardd_reaction_skipped_total", "Times a reaction's trigger came but it did not fire (its mode, a condition, its rate).")
        var done = gauge("boardd_reaction_trigger_to_done_seconds", "From a reaction's trigger time (an edge's kernel timestamp, a software debounce included) to its actions done, at quantile 0.5 and 0.99.")
        var doneMax = gauge("boardd_reaction_trigger_to_done_max_seconds", "The longest from a reaction's trigger to its actions done.")
        var events = counter("boardd_line_events_total", "Edge events an input line delivered.")
        var held = counter("boardd_line_held_events_total", "Events held in a line's ring because its loop was busy.")
        var lost = counter("boardd_line_lost_events_total", "Events a line lost (the kernel's or boardd's buffer overflowed).")
        var limited = counter("boardd_line_rate_limited_events_total", "Events held back by a line's rate limit.")
        for l in r["loops"]?.array ?? [] {
            let loop = l["name"]?.cell ?? ""
            if let m = l["mode"]?.string { mode.add([("loop", loop), ("mode", m)], "1") }
            answered.add([("loop", loop)], l["answered"]?.bool == false ? "0" : "1")
            for t in l["tasks"]?.array ?? [] {
                let k = [("task", t["name"]?.cell ?? ""), ("loop", loop)]
                runs.add(k, count(t["runs"]))
                skipped.add(k, count(t["skipped_periods"]))
                guard (t["runs"]?.int ?? 0) > 0 else { continue }  // no lateness yet
                late.add(k + [("quantile", "0.5")], seconds(t["lateness_p50_ns"]))
                late.add(k + [("quantile", "0.99")], seconds(t["lateness_p99_ns"]))
                lateMax.add(k, seconds(t["lateness_max_ns"]))
            }
            for x in l["reactions"]?.array ?? [] {
                let k = [("reaction", x["name"]?.cell ?? ""), ("loop", loop)]
                fires.add(k, count(x["fires"]))
                rskipped.add(k, count(x["skipped"]))
                guard (x["fires"]?.int ?? 0) > 0 else { continue }  // no time yet
                done.add(k + [("quantile", "0.5")], seconds(x["trigger_to_done_p50_ns"]))
                done.add(k + [("quantile", "0.99")], seconds(x["trigger_to_done_p99_ns"]))
                doneMax.add(k, seconds(x["trigger_to_done_max_ns"]))
            }
            for x in l["lines"]?.array ?? [] {
                let k = [("line", x["name"]?.cell ?? ""), ("loop", loop)]
                events.add(k, count(x["events"]))
                held.add(k, count(x["held"]))
                lost.add(k, count(x["lost"]))
                limited.add(k, count(x["rate_limited"]))
            }
        }
        var started = counter("boardd_command_started_total", "Times a command was started.")
        var refused = counter("boardd_command_refused_total", "Times a command was refused (max_running, or it could not start).")
        var running = gauge("boardd_commands_running", "Child processes running now.")
        let c = r["commands"]
        for x in c?["each"]?.array ?? [] {
            let k = [("command", x["name"]?.cell ?? "")]
            started.add(k, count(x["started"]))
            refused.add(k, count(x["refused"]))
        }
        running.add([], count(c?["running"]))
        var requests = counter("boardd_control_requests_total", "Requests the control socket answered.")
        var accepted = counter("boardd_control_connections_total", "Connections the control socket accepted.")
        var errors = counter("boardd_control_errors_total", "Error replies of the control socket, by code.")
        let s = r["control"]
        requests.add([], count(s?["requests"]))
        accepted.add([], count(s?["accepted"]))
        for (code, n) in s?["errors"]?.members ?? [] { errors.add([("code", code)], count(n)) }
        let families = [
            info, generation, mode, answered, runs, skipped, late, lateMax, fires, rskipped, done, doneMax, events, held, lost, limited,
            started, refused, running, requests, accepted, errors,
        ]
        return families.map(\.text).joined()
    }
}
