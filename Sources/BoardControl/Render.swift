/// `status` and `lines` as text a person reads over ssh: a few "key: value"
/// lines, then aligned tables with upper-case headers.
public enum Render {
    /// Columns left-aligned, two spaces apart, no trailing spaces.
    public static func table(_ header: [String], _ rows: [[String]]) -> String {
        let all = [header] + rows
        let widths = header.indices.map { c in all.map { c < $0.count ? $0[c].count : 0 }.max() ?? 0 }
        return all.map { row in
            var line = ""
            for (c, cell) in row.enumerated() {
                if c > 0 { line += "  " }
                line += c == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[c] - cell.count)
            }
            while line.hasSuffix(" ") { line.removeLast() }
            return line
        }.joined(separator: "\n")
    }

    /// A list of CPUs as a range list: [0,1,2,3,6] -> "0-3,6".
    public static func cpus(_ list: [Int]) -> String {
        var parts: [String] = []
        var i = 0
        let l = list.sorted()
        while i < l.count {
            var j = i
            while j + 1 < l.count, l[j + 1] == l[j] + 1 { j += 1 }
            parts.append(i == j ? "\(l[i])" : "\(l[i])-\(l[j])")
            i = j + 1
        }
        return parts.isEmpty ? "any" : parts.joined(separator: ",")
    }

    static func keyed(_ pairs: [(String, String)]) -> String {
        let w = (pairs.map { $0.0.count }.max() ?? 0) + 1
        return pairs.map { k, v in (k + ":").padding(w) + "  " + v }.joined(separator: "\n")
    }

    public static func status(_ r: JSON) -> String {
        var pairs: [(String, String)] = []
        let board = r["board"]
        var how: [String] = []
        if let f = board?["found"]?.string { how.append("found: \(f)") }
        if let b = board?["backend"]?.string { how.append(b) }
        pairs.append(("board", (board?["name"]?.cell ?? "?") + (how.isEmpty ? "" : " (\(how.joined(separator: ", ")))")))
        let config = r["config"]
        let file = config?["file"]?.cell ?? "-"
        let generation = config?["generation"].map { " (generation \($0.cell))" } ?? ""
        pairs.append(("config", file + generation))
        var process = "pid \(r["pid"]?.cell ?? "?")"
        if let up = r["uptime_s"]?.double { process += ", up \(DurationText.uptime(seconds: Int(up)))" }
        if let c = r["children"]?.int { process += ", \(c) child process\(c == 1 ? "" : "es")" }
        pairs.append(("boardd", process))
        if let reloads = r["reloads"] {
            var text = "\(reloads["applied"]?.cell ?? "0") applied, \(reloads["refused"]?.cell ?? "0") refused"
            if let last = reloads["last_error"], !last.isNull { text += " (last error: \(last.cell))" }
            pairs.append(("reloads", text))
        }
        if let m = r["mqtt"], !m.isNull {
            var text = "\(m["state"]?.cell ?? "?") \(m["broker"]?.cell ?? "?") as \(m["client_id"]?.cell ?? "?")"
            text += ", \(m["connections"]?.cell ?? "0") connection(s), \(m["losses"]?.cell ?? "0") lost"
            if let q = m["queued"]?.int, q > 0 { text += ", \(q) events queued" }
            if let d = m["dropped"]?.int, d > 0 { text += ", \(d) dropped" }
            if let e = m["last_error"], !e.isNull { text += " (last error: \(e.cell))" }
            pairs.append(("mqtt", text))
        }
        var out = keyed(pairs)

        let loops = r["loops"]?.array ?? []
        if !loops.isEmpty {
            let rows = loops.map { l -> [String] in
                var sched = l["thread"]?["policy"]?.string ?? "-"
                if let p = l["thread"]?["priority_now"]?.int, p > 0 { sched += " \(p)" }
                var slowest = "-"
                if let s = l["slowest_handler"], let what = s["what"]?.string, let ns = s["took_ns"]?.int {
                    slowest = "\(what) \(DurationText.rounded(nanoseconds: ns))"
                }
                return [
                    l["name"]?.cell ?? "?", l["mode"]?.cell ?? "?", l["thread_tid"]?.cell ?? "-",
                    l["thread"]?["cpu_now"]?.cell ?? "-", l["cpus"]?.array.map { cpus($0.compactMap(\.int)) } ?? "any", sched,
                    l["waits"]?.cell ?? "-", l["handled"]?.cell ?? "-", l["answered"]?.bool == false ? "(did not answer)" : slowest,
                ]
            }
            out += "\n\n" + table(["LOOP", "MODE", "TID", "CPU", "CPUS", "SCHED", "WAITS", "HANDLED", "SLOWEST HANDLER"], rows)
        }
        let sequences = r["sequences_running"]?.array ?? []
        out += "\n\n"
        if sequences.isEmpty {
            out += "no sequence running"
        } else {
            out += table(
                ["SEQUENCE", "RUNS", "QUEUED"], sequences.map { [$0["name"]?.cell ?? "?", $0["runs"]?.cell ?? "-", $0["queued"]?.cell ?? "-"] })
        }
        // Lines with events held back or lost, one row each.
        let held = r["lines_held"]?.members ?? [], lost = r["lost"]?.members ?? []
        let names = Set(held.map(\.0) + lost.map(\.0)).sorted()
        if !names.isEmpty {
            let rows = names.map { n in [n, r["lines_held"]?[n]?.cell ?? "0", r["lost"]?[n]?.cell ?? "0"] }
            out += "\n\n" + table(["LINE", "HELD", "LOST"], rows)
        }
        return out
    }

    public static func lines(_ r: JSON) -> String {
        let lines = r["lines"]?.array ?? []
        if lines.isEmpty { return "no lines" }
        let rows = lines.map { l -> [String] in
            [
                l["name"]?.cell ?? "?", l["pin"]?.cell ?? "-", l["chip"]?.cell ?? "-", l["offset"]?.cell ?? "-",
                l["direction"]?.cell ?? "-", l["value"]?.bool.map { $0 ? "on" : "off" } ?? (l["value"]?.cell ?? "-"),
                l["priority"]?.cell ?? "-", lastEdge(l["last_edge"]), l["events"]?.cell ?? "-", l["held"]?.cell ?? "-",
                l["lost"]?.cell ?? "-", l["rate_limited"]?.cell ?? "-",
            ]
        }
        return table(
            ["LINE", "PIN", "CHIP", "OFFSET", "DIRECTION", "VALUE", "PRIORITY", "LAST EDGE", "EVENTS", "HELD", "LOST", "RATE-LIMITED"], rows)
    }

    /// "rising 3.2s ago", or "-".
    static func lastEdge(_ e: JSON?) -> String {
        guard let e, let edge = e["edge"]?.string, let ago = e["ago_ns"]?.int else { return "-" }
        return "\(edge) \(DurationText.rounded(nanoseconds: ago)) ago"
    }
}

extension String {
    fileprivate func padding(_ width: Int) -> String { count >= width ? self : self + String(repeating: " ", count: width - count) }
}
