/// Suggestions for a misspelt name: the known names nearest to it.
public enum DidYouMean {
    /// Edit distance between two names, case-insensitive: insertions,
    /// deletions, substitutions and swaps of neighbours (`titel` → `title`
    /// is one edit).
    public static func distance(_ a: String, _ b: String) -> Int {
        let x = Array(a.lowercased().unicodeScalars)
        let y = Array(b.lowercased().unicodeScalars)
        if x.isEmpty { return y.count }
        if y.isEmpty { return x.count }
        var d = [[Int]](repeating: [Int](repeating: 0, count: y.count + 1), count: x.count + 1)
        for i in 0...x.count { d[i][0] = i }
        for j in 0...y.count { d[0][j] = j }
        for i in 1...x.count {
            for j in 1...y.count {
                let cost = x[i - 1] == y[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1 && j > 1 && x[i - 1] == y[j - 2] && x[i - 2] == y[j - 1] {
                    d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
                }
            }
        }
        return d[x.count][y.count]
    }

    /// The candidates close enough to `name` to be what was meant, nearest
    /// first (at most `limit`). Close enough: within a third of the name's
    /// length in edits (at least 1, at most 3), or one is a prefix of the other.
    public static func nearest(_ name: String, in candidates: [String], limit: Int = 3) -> [String] {
        let allowed = min(3, max(1, name.count / 3))
        let lower = name.lowercased()
        var scored: [(Int, String)] = []
        for c in candidates {
            let d = distance(name, c)
            let lc = c.lowercased()
            let prefix = lower.count >= 3 && (lc.hasPrefix(lower) || lower.hasPrefix(lc))
            if d <= allowed || prefix { scored.append((prefix ? min(d, allowed) : d, c)) }
        }
        var seen = Set<String>()
        return scored.sorted { ($0.0, $0.1) < ($1.0, $1.1) }.map(\.1).filter { seen.insert($0).inserted }.prefix(limit)
            .map { $0 }
    }

    /// `; did you mean 'x'?` / `; did you mean 'x' or 'y'?`, or "".
    public static func hint(_ name: String, in candidates: [String]) -> String {
        let near = nearest(name, in: candidates)
        guard !near.isEmpty else { return "" }
        return "; did you mean " + orList(near.map { "'\($0)'" }) + "?"
    }

    /// `a`, `a or b`, `a, b or c`.
    public static func orList(_ items: [String]) -> String {
        switch items.count {
        case 0: return ""
        case 1: return items[0]
        default: return items.dropLast().joined(separator: ", ") + " or " + items[items.count - 1]
        }
    }
}
