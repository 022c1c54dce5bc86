/// Durations as text, for every part of boardd and boardctl: the one
/// grammar the config, the command line and both remote front ends read
/// (`500us`, `20ms`, `1.5s`, `2min`, `1h`), and the one formatter that
/// writes them back, exactly (`format`, text the grammar reads again) or
/// rounded for a person (`rounded`, `850ns`, `12.3us`, `1.2ms`), as a time
/// since a start (`offset`, `42.458997 ms`) or as an uptime (`uptime`,
/// `3d 4h`).
///
/// Whole numbers throughout: a decimal is split at its point and scaled,
/// so `0.1s` is 100,000,000 ns exactly and nothing is rounded twice.
public enum DurationText {
    /// What is wrong with a duration's text. The words are BoardSupport's
    /// (`message(_:suggest:)`), where names are echoed and near misses
    /// suggested.
    public enum Problem: Error, Equatable, Sendable {
        case noUnit, unknownUnit(String), negative, notANumber, tooPrecise, tooLarge
    }

    /// Units and their length in nanoseconds.
    public static let units: [(String, Int64)] = [
        ("us", 1_000), ("µs", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000),
        ("min", 60_000_000_000), ("h", 3_600_000_000_000),
    ]

    // MARK: The grammar

    /// A decimal number and a unit, spaces around either allowed: zero or
    /// more, finer than a nanosecond refused, about 292 years at most.
    public static func parse(_ text: String) -> Result<Duration, Problem> {
        var chars = Substring(text)
        while chars.first?.isWhitespace == true { chars = chars.dropFirst() }
        while chars.last?.isWhitespace == true { chars = chars.dropLast() }
        if chars.hasPrefix("-") { return .failure(.negative) }
        if chars.hasPrefix("+") { chars = chars.dropFirst() }
        let numberEnd = chars.firstIndex { !($0.isASCII && ($0.isNumber || $0 == ".")) } ?? chars.endIndex
        let number = chars[chars.startIndex..<numberEnd]
        var unitText = chars[numberEnd...]
        while unitText.first?.isWhitespace == true { unitText = unitText.dropFirst() }
        let unit = String(unitText)
        let parts = number.split(separator: ".", omittingEmptySubsequences: false)
        guard !number.isEmpty, parts.count <= 2, parts.allSatisfy({ $0.allSatisfy(\.isNumber) }),
            !(parts[0].isEmpty && (parts.count == 1 || parts[1].isEmpty))
        else { return .failure(.notANumber) }
        if unit.isEmpty { return .failure(.noUnit) }
        guard let scale = units.first(where: { $0.0 == unit })?.1 else {
            return unit.allSatisfy({ $0.isLetter }) ? .failure(.unknownUnit(unit)) : .failure(.notANumber)
        }
        guard let whole = parts[0].isEmpty ? 0 : Int64(parts[0]) else { return .failure(.tooLarge) }
        var (ns, overflow) = whole.multipliedReportingOverflow(by: scale)
        if overflow { return .failure(.tooLarge) }
        if parts.count == 2 && !parts[1].isEmpty {
            var fraction: Int64 = 0
            var denominator: Int64 = 1
            for d in parts[1] {
                guard denominator < 1_000_000_000_000_000 else { return .failure(.tooPrecise) }
                fraction = fraction * 10 + Int64(d.wholeNumberValue!)
                denominator *= 10
            }
            let (scaled, o) = fraction.multipliedReportingOverflow(by: scale)
            guard !o else { return .failure(.tooPrecise) }
            guard scaled % denominator == 0 else { return .failure(.tooPrecise) }
            (ns, overflow) = ns.addingReportingOverflow(scaled / denominator)
            if overflow { return .failure(.tooLarge) }
        }
        return .success(.nanoseconds(ns))
    }

    // MARK: The formatter

    /// `20ms`, `1.5s`, `500us`: the shortest exact text for a duration,
    /// which `parse` reads back to the same nanosecond.
    public static func format(_ d: Duration) -> String {
        let ns = nanoseconds(d)
        if ns == 0 { return "0s" }
        if ns < 0 { return "-" + format(.nanoseconds(ns == .min ? .max : -ns)) }
        for (unit, scale) in [("h", Int64(3_600_000_000_000)), ("min", 60_000_000_000), ("s", 1_000_000_000)] {
            if ns % scale == 0 { return "\(ns / scale)\(unit)" }
        }
        if ns < 1_000_000_000 && ns % 1_000_000 == 0 { return "\(ns / 1_000_000)ms" }
        if ns < 1_000_000 && ns % 1_000 == 0 { return "\(ns / 1_000)us" }
        // A decimal of the largest unit it reaches, when that is exact
        // within three decimals (1.5s, 1.25ms); else the smaller unit.
        for (unit, scale) in [("s", Int64(1_000_000_000)), ("ms", 1_000_000), ("us", 1_000)] where ns >= scale {
            if ns % (scale / 1000) == 0 { return decimal(UInt64(ns), UInt64(scale), unit) }
        }
        // Under a microsecond: a fraction of one (`0.25us`), as the grammar
        // has no nanosecond unit.
        return decimal(UInt64(ns), 1_000, "us")
    }

    /// Nanoseconds as a person reads them, in the largest unit they reach
    /// (ns, us, ms, s) rounded to at most `decimals` places, trailing zeros
    /// dropped: `850ns`, `85us`, `12.3us`, `1.2ms`, `499.5ms`, `3s`, `0s`.
    public static func rounded(nanoseconds ns: Int, decimals: Int = 1) -> String {
        if ns == 0 { return "0s" }
        let a = UInt64(ns.magnitude)
        let sign = ns < 0 ? "-" : ""
        if a < 1000 { return "\(sign)\(a)ns" }
        let (scale, unit): (UInt64, String) =
            a < 1_000_000 ? (1_000, "us") : a < 1_000_000_000 ? (1_000_000, "ms") : (1_000_000_000, "s")
        // Round half up at `decimals` places of the unit, in integers.
        var step: UInt64 = scale
        for _ in 0..<max(0, min(decimals, 9)) where step % 10 == 0 { step /= 10 }
        let (sum, o) = a.addingReportingOverflow(step / 2)
        let kept = o ? a : sum / step * step
        return sign + decimal(kept, scale, unit)
    }

    /// A time from a start, exact to the nanosecond, with a space before
    /// its unit: `150 ms`, `42.458997 ms`, `-2 ms`; seconds from 10 s on
    /// (`12 s`, `12.00025 s`).
    public static func offset(_ d: Duration) -> String {
        let ns = nanoseconds(d)
        let sign = ns < 0 ? "-" : ""
        let a = ns.magnitude
        return a >= 10_000_000_000 ? sign + decimal(a, 1_000_000_000, " s") : sign + decimal(a, 1_000_000, " ms")
    }

    /// Whole seconds as an uptime: `3d 4h`, `2h 05m`, `5m 03s`, `42s`.
    public static func uptime(seconds s: Int) -> String {
        let s = max(0, s)
        let d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60, sec = s % 60
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        if d > 0 { return "\(d)d \(h)h" }
        if h > 0 { return "\(h)h \(two(m))m" }
        if m > 0 { return "\(m)m \(two(sec))s" }
        return "\(sec)s"
    }

    /// `v` in units of `scale` as a decimal without trailing zeros:
    /// (1_500_000, 1_000_000, "ms") is `1.5ms`.
    static func decimal(_ v: UInt64, _ scale: UInt64, _ unit: String) -> String {
        var width = 0
        var s = scale
        while s > 1 { s /= 10; width += 1 }
        var fraction = String(v % scale)
        fraction = String(repeating: "0", count: max(0, width - fraction.count)) + fraction
        while fraction.hasSuffix("0") { fraction.removeLast() }
        return "\(v / scale)" + (fraction.isEmpty ? "" : "." + fraction) + unit
    }

    /// A duration's nanoseconds, clamped to Int64.
    static func nanoseconds(_ d: Duration) -> Int64 {
        let (s, atto) = d.components
        let (whole, o1) = s.multipliedReportingOverflow(by: 1_000_000_000)
        let (ns, o2) = whole.addingReportingOverflow(atto / 1_000_000_000)
        if o1 || o2 { return s < 0 ? .min : .max }
        return ns
    }
}
