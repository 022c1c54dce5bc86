/// `flood`: many edges on an input at a fixed rate (docs/control.md). The
/// limits and the rate's grammar, shared by boardd (which enforces them)
/// and boardctl (which checks its arguments before it sends them), and the
/// line boardctl prints for a reply.
public enum Flood {
    /// What is wrong with a rate, for people.
    public struct RateError: Error, Equatable {
        public let message: String
        init(_ message: String) { self.message = message }
    }

    /// The most edges one flood drives.
    public static let maxEdges = 1_000_000
    /// The highest rate, in edges per second.
    public static let maxRate = 100_000

    /// A rate as `2kHz`, `500Hz`, `2.5kHz` or `100/s` (edges per second), to
    /// whole edges per second from 1 to `maxRate`; or what is wrong with it.
    public static func parseRate(_ text: String) -> Result<Int, RateError> {
        let units: [(String, Int)] = [("khz", 1000), ("hz", 1), ("/s", 1)]
        guard text.utf8.count <= 32 else { return .failure(RateError("a rate is a number and a unit (2kHz, 500Hz or 100/s), not \(text.utf8.count) bytes")) }
        let lower = text.lowercased()
        guard let (unit, scale) = units.first(where: { lower.hasSuffix($0.0) }) else {
            return .failure(RateError("'\(text)': a rate is a number and a unit: 2kHz, 500Hz or 100/s"))
        }
        let number = lower.dropLast(unit.count)
        let parts = number.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = parts.first, !whole.isEmpty, whole.count <= 9, whole.allSatisfy({ $0.isASCII && $0.isNumber }),
            parts.count == 1 || (parts[1].count >= 1 && parts[1].count <= 3 && parts[1].allSatisfy({ $0.isASCII && $0.isNumber }))
        else {
            return .failure(RateError("'\(text)': a rate is a number and a unit: 2kHz, 500Hz or 100/s"))
        }
        // Thousandths of the unit, so 2.5kHz is exact.
        let fraction = parts.count == 2 ? String(parts[1]) + String(repeating: "0", count: 3 - parts[1].count) : "000"
        let milli = Int(whole)! * 1000 + Int(fraction)!
        let total = milli * scale
        guard total % 1000 == 0 else { return .failure(RateError("'\(text)': a rate is a whole number of edges per second")) }
        let hz = total / 1000
        guard hz >= 1, hz <= maxRate else { return .failure(RateError("'\(text)': the rate is at least 1/s and at most 100kHz")) }
        return .success(hz)
    }

    /// `2000` as `2kHz`, `2500` as `2.5kHz`, `500` as `500Hz`.
    public static func rateText(_ hz: Int) -> String {
        guard hz >= 1000 else { return "\(hz)Hz" }
        let k = hz / 1000, rest = hz % 1000
        guard rest != 0 else { return "\(k)kHz" }
        var frac = String(rest)
        frac = String(repeating: "0", count: 3 - frac.count) + frac
        while frac.hasSuffix("0") { frac.removeLast() }
        return "\(k).\(frac)kHz"
    }

    /// What boardctl prints for a reply: `button: flooding 1000 edges at 2kHz for 499.5ms`,
    /// or for a stop `button: flood stopped after 120 of 1000 edges`.
    public static func human(_ r: JSON, line: String) -> String {
        let name = r["line"]?.string ?? line
        let edges = r["edges"]?.int ?? 0
        if r["stopped"]?.bool == true {
            return "\(name): flood stopped after \(r["driven"]?.int ?? 0) of \(edges) edges"
        }
        let rate = r["rate_hz"]?.int.map(rateText) ?? "?"
        let d = r["duration_ns"]?.int.map { DurationText.rounded(nanoseconds: $0, decimals: 2) } ?? "?"
        return "\(name): flooding \(edges) edge\(edges == 1 ? "" : "s") at \(rate), done in \(d)"
    }
}
