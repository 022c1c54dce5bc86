import Yams

/// Reads a composed YAML document node by node, reporting what is wrong
/// with a position and key path instead of stopping at the first problem.
///
/// Every accessor returns nil after reporting when the node is not what was
/// asked for, so a caller carries on with the rest of the document.
public struct YAMLReader {
    public let log: DiagnosticLog

    public init(log: DiagnosticLog) { self.log = log }

    /// Composes `text` into a node tree. A syntax error is reported with the
    /// parser's own line and column and yields nil.
    public func compose(_ text: String) -> Node? {
        do {
            return try Yams.compose(yaml: text, .basic)
        } catch let error as YamlError {
            switch error {
            case let .scanner(context, problem, mark, _), let .parser(context, problem, mark, _),
                let .composer(context, problem, mark, _):
                var message = "YAML syntax: \(problem)"
                if let context { message += " (\(context.text) at \(context.mark.line):\(context.mark.column))" }
                log.error(Position(line: mark.line, column: mark.column), "", message)
            case let .reader(problem, offset, _, _):
                log.error(.none, "", "cannot read the text: \(problem)" + (offset.map { " at byte \($0)" } ?? ""))
            case let .duplicatedKeysInMapping(duplicates, context):
                let names = duplicates.map { "'\($0)'" }.joined(separator: ", ")
                log.error(
                    Position(line: context.mark.line, column: context.mark.column), "",
                    "key \(names) is given more than once in this mapping (here first)")
            default:
                log.error(.none, "", "YAML: \(error)")
            }
            return nil
        } catch {
            log.error(.none, "", "YAML: \(error)")
            return nil
        }
    }

    // MARK: Positions and paths

    public static func position(_ node: Node) -> Position {
        guard let m = node.mark else { return .none }
        return Position(line: m.line, column: m.column)
    }

    public static func key(_ path: String, _ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }
    public static func index(_ path: String, _ i: Int) -> String { "\(path)[\(i)]" }

    /// How a node is described in "expected X, found Y".
    public static func kind(_ node: Node) -> String {
        switch node {
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        case .alias: return "an alias"
        case let .scalar(s):
            if s.style == .plain {
                if s.string.isEmpty || s.string == "~" || s.string == "null" { return "nothing (null)" }
                if Int(s.string) != nil { return "the number \(s.string)" }
                if Double(s.string) != nil { return "the number \(s.string)" }
            }
            return "'\(s.string)'"
        }
    }

    public func error(_ node: Node, _ path: String, _ message: String) {
        log.error(Self.position(node), path, message)
    }

    public func warning(_ node: Node, _ path: String, _ message: String) {
        log.warning(Self.position(node), path, message)
    }

    // MARK: Mappings

    /// One key/value pair of a mapping, with the key's node for positions.
    public struct Entry {
        public let key: String
        public let keyNode: Node
        public let value: Node
        public let path: String
    }

    /// The entries of a mapping, or nil (reported) when the node is not a
    /// mapping. Unknown keys are reported with the nearest known ones.
    public func mapping(_ node: Node, _ path: String, allowed: [String]? = nil, what: String? = nil) -> [Entry]? {
        guard case let .mapping(m) = node else {
            error(node, path, "expected \(what ?? "a mapping"), found \(Self.kind(node))")
            return nil
        }
        var entries: [Entry] = []
        for (k, v) in m {
            guard case let .scalar(ks) = k else {
                error(k, path, "keys must be plain names, found \(Self.kind(k))")
                continue
            }
            let entryPath = Self.key(path, ks.string)
            if let allowed, !allowed.contains(ks.string) {
                error(
                    k, entryPath,
                    "unknown key '\(ks.string)'"
                        + (DidYouMean.hint(ks.string, in: allowed).isEmpty
                            ? " (known keys: \(allowed.joined(separator: ", ")))"
                            : DidYouMean.hint(ks.string, in: allowed)))
                continue
            }
            entries.append(Entry(key: ks.string, keyNode: k, value: v, path: entryPath))
        }
        return entries
    }

    /// The items of a list, or nil (reported).
    public func list(_ node: Node, _ path: String, what: String? = nil) -> [Node]? {
        guard case let .sequence(s) = node else {
            error(node, path, "expected \(what ?? "a list"), found \(Self.kind(node))")
            return nil
        }
        return Array(s)
    }

    // MARK: Scalars

    /// A plain string (names, messages). Numbers and booleans written
    /// without quotes are accepted as their text.
    public func string(_ node: Node, _ path: String, what: String = "a string") -> String? {
        guard case let .scalar(s) = node else {
            error(node, path, "expected \(what), found \(Self.kind(node))")
            return nil
        }
        if s.style == .plain && (s.string.isEmpty || s.string == "~" || s.string == "null") {
            error(node, path, "expected \(what), found nothing (null)")
            return nil
        }
        return s.string
    }

    /// A name: a string of letters, digits, `_` and `-`.
    public func name(_ node: Node, _ path: String, what: String = "a name") -> String? {
        guard let s = string(node, path, what: what) else { return nil }
        return s
    }

    /// `true`/`false` (also `yes`/`no`, `on`/`off`).
    public func bool(_ node: Node, _ path: String) -> Bool? {
        guard case let .scalar(s) = node, let b = Self.boolValue(s.string) else {
            error(node, path, "expected true or false, found \(Self.kind(node))")
            return nil
        }
        return b
    }

    static func boolValue(_ s: String) -> Bool? {
        switch s.lowercased() {
        case "true", "yes", "on": return true
        case "false", "no", "off": return false
        default: return nil
        }
    }

    /// A whole number in `range`.
    public func int(_ node: Node, _ path: String, in range: ClosedRange<Int>, what: String = "a whole number") -> Int? {
        guard case let .scalar(s) = node, s.style == .plain, let v = Int(s.string) else {
            error(node, path, "expected \(what), found \(Self.kind(node))")
            return nil
        }
        guard range.contains(v) else {
            let bounds =
                range.upperBound == Int.max ? "at least \(range.lowerBound)" : "between \(range.lowerBound) and \(range.upperBound)"
            error(node, path, "\(v) is out of range; it must be \(bounds)")
            return nil
        }
        return v
    }

    /// One of a fixed set of words.
    public func choice(_ node: Node, _ path: String, _ choices: [String]) -> String? {
        guard case let .scalar(s) = node else {
            error(node, path, "expected one of \(choices.joined(separator: ", ")), found \(Self.kind(node))")
            return nil
        }
        guard choices.contains(s.string) else {
            error(
                node, path,
                "'\(s.string)' is not one of \(choices.joined(separator: ", "))" + DidYouMean.hint(s.string, in: choices))
            return nil
        }
        return s.string
    }

    /// A list of names; a single name stands for a list of one.
    public func names(_ node: Node, _ path: String, what: String = "a list of names") -> [(String, Node, String)]? {
        if case .scalar = node, let s = string(node, path, what: what) { return [(s, node, path)] }
        guard let items = list(node, path, what: what) else { return nil }
        var out: [(String, Node, String)] = []
        for (i, item) in items.enumerated() {
            let p = Self.index(path, i)
            if let s = string(item, p, what: "a name") { out.append((s, item, p)) }
        }
        return out
    }

    // MARK: Durations

    /// A duration with a unit: `500us`, `20ms`, `1.5s`, `2min`, `1h`.
    /// A bare number is an error that says which unit to add
    /// (`suggest`, e.g. "ms").
    public func duration(_ node: Node, _ path: String, suggest: String = "ms") -> Duration? {
        guard case let .scalar(s) = node else {
            error(node, path, "expected a duration such as 20ms, found \(Self.kind(node))")
            return nil
        }
        switch DurationText.parse(s.string) {
        case let .success(d): return d
        case let .failure(problem):
            error(node, path, problem.message(s.string, suggest: suggest))
            return nil
        }
    }
}

/// Duration text: a decimal number and a unit, without floating point.
public enum DurationText {
    public enum Problem: Error, Equatable {
        case noUnit, unknownUnit(String), negative, notANumber, tooPrecise, tooLarge

        /// What is wrong with `text`, in words (the config's and the command
        /// line's messages are the same); `suggest` is the unit a bare
        /// number is told to take.
        public func message(_ text: String, suggest: String = "ms") -> String {
            switch self {
            case .noUnit: "'\(text)' has no unit; write \(text)\(suggest) (units: us, ms, s, min, h)"
            case let .unknownUnit(u):
                "unknown unit '\(u)' in '\(text)'; units are us, ms, s, min, h" + DidYouMean.hint(u, in: DurationText.units.map(\.0))
            case .negative: "'\(text)' is negative; a duration is zero or more"
            case .notANumber: "expected a duration such as 20ms, found '\(text)'"
            case .tooPrecise: "'\(text)' is finer than a nanosecond"
            case .tooLarge: "'\(text)' is too long (the limit is about 292 years)"
            }
        }
    }

    /// Units and their length in nanoseconds.
    public static let units: [(String, Int64)] = [
        ("us", 1_000), ("µs", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000),
        ("min", 60_000_000_000), ("h", 3_600_000_000_000),
    ]

    public static func parse(_ text: String) -> Result<Duration, Problem> {
        let t = text.trimmingSpaces
        var chars = Substring(t)
        if chars.hasPrefix("-") { return .failure(.negative) }
        if chars.hasPrefix("+") { chars = chars.dropFirst() }
        let numberEnd = chars.firstIndex { !($0.isASCII && ($0.isNumber || $0 == ".")) } ?? chars.endIndex
        let number = chars[chars.startIndex..<numberEnd]
        let unit = String(chars[numberEnd...]).trimmingSpaces
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
            let digits = parts[1].drop { _ in false }
            var fraction: Int64 = 0
            var denominator: Int64 = 1
            for d in digits {
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

    /// `20ms`, `1.5s`, `500us`: the shortest exact text for a duration.
    public static func format(_ d: Duration) -> String {
        let ns = d.totalNanoseconds
        if ns == 0 { return "0s" }
        for (unit, scale) in [("h", Int64(3_600_000_000_000)), ("min", 60_000_000_000), ("s", 1_000_000_000)] {
            if ns % scale == 0 { return "\(ns / scale)\(unit)" }
        }
        if ns < 1_000_000_000 && ns % 1_000_000 == 0 { return "\(ns / 1_000_000)ms" }
        if ns < 1_000_000 && ns % 1_000 == 0 { return "\(ns / 1_000)us" }
        // A decimal of the largest unit it reaches, when that is exact
        // within three decimals (1.5s, 1.25ms); else the smaller unit.
        for (unit, scale) in [("s", Int64(1_000_000_000)), ("ms", 1_000_000), ("us", 1_000)] where ns >= scale {
            if ns % (scale / 1000) == 0 { return decimal(ns, scale, unit) }
        }
        return "\(ns)ns"
    }

    static func decimal(_ ns: Int64, _ scale: Int64, _ unit: String) -> String {
        var frac = String(ns % scale)
        let width = String(scale).count - 1
        frac = String(repeating: "0", count: width - frac.count) + frac
        while frac.hasSuffix("0") { frac.removeLast() }
        return "\(ns / scale).\(frac)\(unit)"
    }
}

extension Duration {
    /// The whole nanoseconds of a duration (the configs never need finer).
    public var totalNanoseconds: Int64 {
        let (s, a) = components
        return s * 1_000_000_000 + a / 1_000_000_000
    }
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while s.first?.isWhitespace == true { s = s.dropFirst() }
        while s.last?.isWhitespace == true { s = s.dropLast() }
        return String(s)
    }
}
