import Synchronization

/// Suggestions for a misspelt name: the known names nearest to it.
///
/// Names reach it from the wire (a control request, an MQTT topic), so
/// the work is bounded whatever they are: a name longer than `longest`
/// characters gets no suggestion (none a config declares is that long); a
/// candidate whose length differs from the name's by more than the edits
/// allowed is not compared (the prefix rule still applies); the distance
/// is computed only in a band of `maxEdits` either side of the diagonal,
/// on three short rows on the stack (no heap allocation per comparison),
/// and given up as soon as a whole row is over the bound; and one call
/// compares at most `budget` cells in all.
public enum DidYouMean {
    /// The longest name (in Unicode scalars) a suggestion is made for.
    public static let longest = 64
    /// The most edits a suggestion may be away.
    public static let maxEdits = 3
    /// The most distance cells one call of `nearest` computes.
    public static let budget = 100_000

    /// Distance table cells computed since the process started: the work
    /// suggestions cost, which tests bound.
    public static var cellsComputed: Int { cells.load(ordering: .relaxed) }
    private static let cells = Atomic<Int>(0)

    /// Edit distance between two names, case-insensitive: insertions,
    /// deletions, substitutions and swaps of neighbours (`titel` → `title`
    /// is one edit). Names longer than `longest` scalars are not compared:
    /// their distance is `Int.max`.
    public static func distance(_ a: String, _ b: String) -> Int {
        withFolded(a) { x in
            withFolded(b) { y in
                guard let x, let y else { return Int.max }
                var work = 0
                let d = bounded(x, y, limit: longest, work: &work)
                cells.add(work, ordering: .relaxed)
                return d
            }
        }
    }

    /// The candidates close enough to `name` to be what was meant, nearest
    /// first (at most `limit`). Close enough: within a third of the name's
    /// length in edits (at least 1, at most 3), or one is a prefix of the other.
    public static func nearest(_ name: String, in candidates: [String], limit: Int = 3) -> [String] {
        withFolded(name) { x in
            guard let x else { return [] }
            let allowed = min(maxEdits, max(1, name.count / 3))
            let lower = name.lowercased()
            let prefixes = lower.count >= 3
            var work = 0
            var scored: [(Int, String)] = []
            for c in candidates {
                var d = allowed + 1
                if work < budget {
                    d = withFolded(c) { y in y.map { bounded(x, $0, limit: allowed, work: &work) } ?? allowed + 1 }
                }
                let prefix = prefixes && d > allowed && isPrefix(lower, c)
                if d <= allowed || prefix { scored.append((min(d, allowed), c)) }
            }
            cells.add(work, ordering: .relaxed)
            var seen = Set<String>()
            return scored.sorted { ($0.0, $0.1) < ($1.0, $1.1) }.map(\.1).filter { seen.insert($0).inserted }.prefix(limit)
                .map { $0 }
        }
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

    // MARK: The distance

    /// Whether one of `lower` (lowercased, at most `longest` scalars) and
    /// `candidate` is a prefix of the other, case-insensitive. A long
    /// candidate is lowercased only as far as `lower` reaches.
    static func isPrefix(_ lower: String, _ candidate: String) -> Bool {
        let lc = String(candidate.prefix(lower.count + 1)).lowercased()
        return lc.hasPrefix(lower) || lower.hasPrefix(lc)
    }

    /// `s`'s scalars, each lowercased, in a buffer on the stack; nil when
    /// `s` has more than `longest` of them.
    static func withFolded<R>(_ s: String, _ body: (UnsafeBufferPointer<Unicode.Scalar>?) -> R) -> R {
        withUnsafeTemporaryAllocation(of: Unicode.Scalar.self, capacity: longest) { buf in
            var n = 0
            for u in s.unicodeScalars {
                guard n < longest else { return body(nil) }
                buf[n] = folded(u)
                n += 1
            }
            return body(UnsafeBufferPointer(rebasing: buf[..<n]))
        }
    }

    /// A scalar's lowercase form when that is one scalar (as it is for
    /// every letter a name is likely to have), else the scalar itself.
    static func folded(_ u: Unicode.Scalar) -> Unicode.Scalar {
        if u.isASCII { return (0x41...0x5A).contains(u.value) ? Unicode.Scalar(UInt8(u.value + 0x20)) : u }
        let l = u.properties.lowercaseMapping.unicodeScalars
        return l.count == 1 ? l.first! : u
    }

    /// The restricted Damerau-Levenshtein distance of `x` and `y` (at most
    /// `longest` scalars each) when it is at most `limit`, else `limit + 1`.
    /// Only the cells within `limit` of the diagonal are computed, one row
    /// at a time on three rows (this one and the two before, for swaps);
    /// `work` counts them.
    static func bounded(
        _ x: UnsafeBufferPointer<Unicode.Scalar>, _ y: UnsafeBufferPointer<Unicode.Scalar>, limit k: Int, work: inout Int
    ) -> Int {
        let n = x.count
        let m = y.count
        let over = k + 1
        guard abs(n - m) <= k else { return over }
        guard n > 0, m > 0 else { return max(n, m) }
        return withUnsafeTemporaryAllocation(of: Int16.self, capacity: 3 * (m + 1)) { rows in
            let capped = Int16(over)
            var before = 0  // row i - 2
            var last = m + 1  // row i - 1
            var this = 2 * (m + 1)  // row i
            for j in 0...m { rows[last + j] = j <= k ? Int16(j) : capped }
            for i in 1...n {
                let lo = max(1, i - k)
                let hi = min(m, i + k)
                rows[this + lo - 1] = lo == 1 && i <= k ? Int16(i) : capped
                if hi < m { rows[this + hi + 1] = capped }
                var least = rows[this + lo - 1]
                for j in lo...hi {
                    let same = x[i - 1] == y[j - 1]
                    var v = min(rows[last + j] + 1, rows[this + j - 1] + 1, rows[last + j - 1] + (same ? 0 : 1))
                    if i > 1 && j > 1 && x[i - 1] == y[j - 2] && x[i - 2] == y[j - 1] { v = min(v, rows[before + j - 2] + 1) }
                    v = min(v, capped)
                    rows[this + j] = v
                    least = min(least, v)
                }
                work += hi - lo + 1
                // Every later row is at least this row's least.
                if least > capped - 1 { return over }
                (before, last, this) = (last, this, before)
            }
            return Int(rows[last + m])
        }
    }
}
