/// A JSON value as the control protocol carries it, on both ends (boardd
/// and boardctl), and as boardd's MQTT payloads, recordings and traces are
/// written:
///
/// - Objects keep their keys' order (replies list fields as the protocol
///   does; `--json` prints them as the daemon sent them). A key given twice
///   in one object is a parse error: which of the two was meant cannot be
///   known, so neither is taken.
/// - Numbers: a number written without a fraction or an exponent that fits
///   in 64 bits is a whole number (`int`); every other number is a double
///   (`double`, IEEE 754 binary64). `1.0` and `1e3` are doubles; a field
///   that needs a whole number takes an `int`, and `int` on a double that
///   is whole and in range gives it too.
/// - Strings are valid UTF-8; escapes as RFC 8259, a lone surrogate is an
///   error. Nesting at most `maxDepth` deep.
public enum JSON: Equatable, Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    public static func == (a: JSON, b: JSON) -> Bool {
        switch (a, b) {
        case (.null, .null): true
        case let (.bool(x), .bool(y)): x == y
        case let (.int(x), .int(y)): x == y
        case let (.double(x), .double(y)): x == y
        case let (.string(x), .string(y)): x == y
        case let (.array(x), .array(y)): x == y
        case let (.object(x), .object(y)): x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: false
        }
    }

    /// The most deeply values nest.
    public static let maxDepth = 32

    /// The member named `key` of an object (nil for anything else).
    public subscript(key: String) -> JSON? {
        guard case let .object(members) = self else { return nil }
        return members.first { $0.0 == key }?.1
    }

    public var string: String? { if case let .string(s) = self { s } else { nil } }
    public var bool: Bool? { if case let .bool(b) = self { b } else { nil } }
    /// A whole number: an `int`, or a `double` that is whole and fits.
    public var int: Int? {
        switch self {
        case let .int(i): Int(exactly: i)
        case let .double(d): Int(exactly: d)
        default: nil
        }
    }
    public var double: Double? {
        switch self {
        case let .int(i): Double(i)
        case let .double(d): d
        default: nil
        }
    }
    public var array: [JSON]? { if case let .array(a) = self { a } else { nil } }
    public var members: [(String, JSON)]? { if case let .object(m) = self { m } else { nil } }
    public var isNull: Bool { if case .null = self { true } else { false } }

    /// The kind, for messages ("a string", "a number").
    public var kind: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .int, .double: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    /// The value as a person reads it in a table cell: strings bare, null "-".
    public var cell: String {
        switch self {
        case .null: "-"
        case let .string(s): s
        default: serialized
        }
    }

    // MARK: Printing

    /// Compact JSON on one line (no spaces, no newline).
    public var serialized: String {
        var out = ""
        write(to: &out)
        return out
    }

    public func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case let .bool(b): out += b ? "true" : "false"
        case let .int(i): out += String(i)
        case let .double(d): out += d.isFinite ? (d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(d)) : "null"
        case let .string(s): JSON.quote(s, into: &out)
        case let .array(xs):
            out += "["
            for (i, x) in xs.enumerated() {
                if i > 0 { out += "," }
                x.write(to: &out)
            }
            out += "]"
        case let .object(fields):
            out += "{"
            for (i, (k, v)) in fields.enumerated() {
                if i > 0 { out += "," }
                JSON.quote(k, into: &out)
                out += ":"
                v.write(to: &out)
            }
            out += "}"
        }
    }

    /// `s` as a JSON string, appended to `out`: control characters escaped,
    /// and U+2028/U+2029 too (valid JSON, but line ends to JavaScript). The
    /// daemon's control server writes its strings with it as well.
    public static func quote(_ s: String, into out: inout String) {
        out += "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where u.value < 0x20 || u.value == 0x2028 || u.value == 0x2029:
                let hex = String(u.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(u)
            }
        }
        out += "\""
    }

    // MARK: Parsing

    public struct ParseError: Error, Sendable {
        /// What is wrong and at which byte (from 1).
        public var message: String
    }

    /// Parses one JSON text (a request line without its newline; blanks
    /// around it allowed).
    public static func parse(_ bytes: ArraySlice<UInt8>) throws(ParseError) -> JSON {
        var p = Parser(bytes: bytes)
        p.skipSpace()
        let v = try p.value(depth: 0)
        p.skipSpace()
        guard p.i == p.bytes.endIndex else { throw p.fail("unexpected text after the JSON value") }
        return v
    }

    /// Parses one JSON text; nil when it is not JSON.
    public static func parse(_ text: String) -> JSON? { try? parse(ArraySlice(text.utf8)) }

    private struct Parser {
        let bytes: ArraySlice<UInt8>
        var i: Int
        static let maxDepth = JSON.maxDepth

        init(bytes: ArraySlice<UInt8>) {
            self.bytes = bytes
            i = bytes.startIndex
        }

        func fail(_ m: String, at: Int? = nil) -> ParseError { ParseError(message: "\(m) at byte \((at ?? i) - bytes.startIndex + 1)") }

        var peek: UInt8? { i < bytes.endIndex ? bytes[i] : nil }

        mutating func skipSpace() {
            while let c = peek, c == 0x20 || c == 0x09 || c == 0x0a || c == 0x0d { i += 1 }
        }

        mutating func literal(_ s: String, _ v: JSON) throws(ParseError) -> JSON {
            for b in s.utf8 {
                guard peek == b else { throw fail("invalid literal") }
                i += 1
            }
            return v
        }

        mutating func value(depth: Int) throws(ParseError) -> JSON {
            guard depth < Self.maxDepth else { throw fail("nested more than \(Self.maxDepth) deep") }
            guard let c = peek else { throw fail("unexpected end of the line") }
            switch c {
            case UInt8(ascii: "{"):
                i += 1
                var fields: [(String, JSON)] = []
                var seen: Set<String> = []
                skipSpace()
                if peek == UInt8(ascii: "}") {
                    i += 1
                    return .object(fields)
                }
                while true {
                    skipSpace()
                    guard peek == UInt8(ascii: "\"") else { throw fail("expected a key in quotes") }
                    let keyAt = i
                    let k = try string()
                    skipSpace()
                    guard peek == UInt8(ascii: ":") else { throw fail("expected ':'") }
                    i += 1
                    skipSpace()
                    // A scan while the object is small, as on the wire; past
                    // that a set of its keys, built once.
                    if fields.count < 16 {
                        if fields.contains(where: { $0.0 == k }) { throw fail("the key \(Self.shown(k)) is given twice", at: keyAt) }
                    } else {
                        if seen.isEmpty { seen = Set(fields.map(\.0)) }
                        guard seen.insert(k).inserted else { throw fail("the key \(Self.shown(k)) is given twice", at: keyAt) }
                    }
                    fields.append((k, try value(depth: depth + 1)))
                    skipSpace()
                    if peek == UInt8(ascii: ",") {
                        i += 1
                        continue
                    }
                    guard peek == UInt8(ascii: "}") else { throw fail("expected ',' or '}'") }
                    i += 1
                    return .object(fields)
                }
            case UInt8(ascii: "["):
                i += 1
                var xs: [JSON] = []
                skipSpace()
                if peek == UInt8(ascii: "]") {
                    i += 1
                    return .array(xs)
                }
                while true {
                    skipSpace()
                    xs.append(try value(depth: depth + 1))
                    skipSpace()
                    if peek == UInt8(ascii: ",") {
                        i += 1
                        continue
                    }
                    guard peek == UInt8(ascii: "]") else { throw fail("expected ',' or ']'") }
                    i += 1
                    return .array(xs)
                }
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): return try literal("true", .bool(true))
            case UInt8(ascii: "f"): return try literal("false", .bool(false))
            case UInt8(ascii: "n"): return try literal("null", .null)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
            default: throw fail("unexpected character")
            }
        }

        /// A key for a message: quoted if short and printable, else not shown.
        static func shown(_ k: String) -> String {
            k.utf8.count <= 64 && k.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value < 0x7f }) ? "\"\(k)\"" : "(\(k.utf8.count) bytes)"
        }

        mutating func number() throws(ParseError) -> JSON {
            let start = i
            var integral = true
            if peek == UInt8(ascii: "-") { i += 1 }
            guard let d = peek, d >= 0x30, d <= 0x39 else { throw fail("invalid number") }
            if d == 0x30 {
                i += 1
            } else {
                while let c = peek, c >= 0x30, c <= 0x39 { i += 1 }
            }
            if peek == UInt8(ascii: ".") {
                integral = false
                i += 1
                guard let c = peek, c >= 0x30, c <= 0x39 else { throw fail("invalid number") }
                while let c = peek, c >= 0x30, c <= 0x39 { i += 1 }
            }
            if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
                integral = false
                i += 1
                if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { i += 1 }
                guard let c = peek, c >= 0x30, c <= 0x39 else { throw fail("invalid number") }
                while let c = peek, c >= 0x30, c <= 0x39 { i += 1 }
            }
            let text = String(decoding: bytes[start..<i], as: UTF8.self)
            if integral, let v = Int64(text) { return .int(v) }
            guard let v = Double(text) else { throw fail("invalid number") }
            return .double(v)
        }

        mutating func hex4() throws(ParseError) -> UInt32 {
            var v: UInt32 = 0
            for _ in 0..<4 {
                guard let c = peek else { throw fail("short \\u escape") }
                let d: UInt32
                switch c {
                case 0x30...0x39: d = UInt32(c - 0x30)
                case 0x41...0x46: d = UInt32(c - 0x41 + 10)
                case 0x61...0x66: d = UInt32(c - 0x61 + 10)
                default: throw fail("bad \\u escape")
                }
                v = v << 4 | d
                i += 1
            }
            return v
        }

        mutating func string() throws(ParseError) -> String {
            i += 1  // the opening quote
            var out: [UInt8] = []
            while true {
                guard let c = peek else { throw fail("unterminated string") }
                i += 1
                switch c {
                case UInt8(ascii: "\""):
                    guard let s = String(validating: out, as: UTF8.self) else { throw fail("a string is not valid UTF-8") }
                    return s
                case UInt8(ascii: "\\"):
                    guard let e = peek else { throw fail("unterminated string") }
                    i += 1
                    switch e {
                    case UInt8(ascii: "\""): out.append(0x22)
                    case UInt8(ascii: "\\"): out.append(0x5c)
                    case UInt8(ascii: "/"): out.append(0x2f)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0c)
                    case UInt8(ascii: "n"): out.append(0x0a)
                    case UInt8(ascii: "r"): out.append(0x0d)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "u"):
                        var u = try hex4()
                        if (0xd800..<0xdc00).contains(u) {
                            guard peek == UInt8(ascii: "\\") else { throw fail("lone surrogate") }
                            i += 1
                            guard peek == UInt8(ascii: "u") else { throw fail("lone surrogate") }
                            i += 1
                            let lo = try hex4()
                            guard (0xdc00..<0xe000).contains(lo) else { throw fail("lone surrogate") }
                            u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00)
                        }
                        guard let scalar = Unicode.Scalar(u) else { throw fail("bad \\u escape") }
                        out.append(contentsOf: Array(String(Character(scalar)).utf8))
                    default: throw fail("bad escape")
                    }
                default:
                    guard c >= 0x20 else { throw fail("a control character in a string") }
                    out.append(c)
                }
            }
        }
    }
}
