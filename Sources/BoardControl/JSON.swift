/// A JSON value as the control protocol carries it: objects keep their keys'
/// order (requests go out in a fixed order, `--json` prints a reply's fields
/// as the daemon sent them), numbers keep their text.
public enum JSON: Equatable, Sendable {
    case null
    case bool(Bool)
    case number(String)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    public static func int(_ n: Int) -> JSON { .number(String(n)) }

    public static func == (a: JSON, b: JSON) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case let (.bool(x), .bool(y)): return x == y
        case let (.number(x), .number(y)): return x == y
        case let (.string(x), .string(y)): return x == y
        case let (.array(x), .array(y)): return x == y
        case let (.object(x), .object(y)): return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    /// The member named `key` of an object (nil for anything else).
    public subscript(key: String) -> JSON? {
        if case let .object(members) = self { return members.first { $0.0 == key }?.1 }
        return nil
    }

    public var string: String? { if case let .string(s) = self { return s } else { return nil } }
    public var bool: Bool? { if case let .bool(b) = self { return b } else { return nil } }
    public var int: Int? { if case let .number(n) = self { return Int(n) ?? Double(n).flatMap { Int(exactly: $0) } } else { return nil } }
    public var double: Double? { if case let .number(n) = self { return Double(n) } else { return nil } }
    public var array: [JSON]? { if case let .array(a) = self { return a } else { return nil } }
    public var members: [(String, JSON)]? { if case let .object(m) = self { return m } else { return nil } }
    public var isNull: Bool { if case .null = self { return true } else { return false } }

    /// The value as a person reads it in a table cell: strings bare, null "-".
    public var text: String {
        switch self {
        case .null: return "-"
        case let .bool(b): return b ? "true" : "false"
        case let .number(n): return n
        case let .string(s): return s
        default: return serialized
        }
    }

    /// Compact JSON on one line (no spaces, no newline).
    public var serialized: String {
        var out = ""
        write(to: &out)
        return out
    }

    private func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case let .bool(b): out += b ? "true" : "false"
        case let .number(n): out += n
        case let .string(s): JSON.quote(s, into: &out)
        case let .array(items):
            out += "["
            for (i, v) in items.enumerated() {
                if i > 0 { out += "," }
                v.write(to: &out)
            }
            out += "]"
        case let .object(members):
            out += "{"
            for (i, (k, v)) in members.enumerated() {
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

    /// Parses one JSON text (surrounding whitespace allowed); nil when it is not JSON.
    public static func parse(_ text: String) -> JSON? {
        var p = Parser(bytes: Array(text.utf8))
        guard let v = p.value(depth: 0) else { return nil }
        p.skipSpace()
        return p.at == p.bytes.count ? v : nil
    }

    private struct Parser {
        let bytes: [UInt8]
        var at = 0

        mutating func skipSpace() {
            while at < bytes.count, bytes[at] == 0x20 || bytes[at] == 0x0A || bytes[at] == 0x0D || bytes[at] == 0x09 { at += 1 }
        }

        mutating func literal(_ word: String, _ v: JSON) -> JSON? {
            let w = Array(word.utf8)
            guard at + w.count <= bytes.count, Array(bytes[at..<at + w.count]) == w else { return nil }
            at += w.count
            return v
        }

        mutating func value(depth: Int) -> JSON? {
            guard depth < 64 else { return nil }
            skipSpace()
            guard at < bytes.count else { return nil }
            switch bytes[at] {
            case UInt8(ascii: "n"): return literal("null", .null)
            case UInt8(ascii: "t"): return literal("true", .bool(true))
            case UInt8(ascii: "f"): return literal("false", .bool(false))
            case UInt8(ascii: "\""): return string().map(JSON.string)
            case UInt8(ascii: "["):
                at += 1
                var items: [JSON] = []
                skipSpace()
                if at < bytes.count, bytes[at] == UInt8(ascii: "]") {
                    at += 1
                    return .array(items)
                }
                while true {
                    guard let v = value(depth: depth + 1) else { return nil }
                    items.append(v)
                    skipSpace()
                    guard at < bytes.count else { return nil }
                    if bytes[at] == UInt8(ascii: ",") { at += 1; continue }
                    if bytes[at] == UInt8(ascii: "]") { at += 1; return .array(items) }
                    return nil
                }
            case UInt8(ascii: "{"):
                at += 1
                var members: [(String, JSON)] = []
                skipSpace()
                if at < bytes.count, bytes[at] == UInt8(ascii: "}") {
                    at += 1
                    return .object(members)
                }
                while true {
                    skipSpace()
                    guard at < bytes.count, bytes[at] == UInt8(ascii: "\""), let k = string() else { return nil }
                    skipSpace()
                    guard at < bytes.count, bytes[at] == UInt8(ascii: ":") else { return nil }
                    at += 1
                    guard let v = value(depth: depth + 1) else { return nil }
                    members.append((k, v))
                    skipSpace()
                    guard at < bytes.count else { return nil }
                    if bytes[at] == UInt8(ascii: ",") { at += 1; continue }
                    if bytes[at] == UInt8(ascii: "}") { at += 1; return .object(members) }
                    return nil
                }
            default: return number()
            }
        }

        mutating func number() -> JSON? {
            let start = at
            if at < bytes.count, bytes[at] == UInt8(ascii: "-") { at += 1 }
            func digits(_ p: inout Parser) -> Int {
                let s = p.at
                while p.at < p.bytes.count, p.bytes[p.at] >= 0x30, p.bytes[p.at] <= 0x39 { p.at += 1 }
                return p.at - s
            }
            guard digits(&self) > 0 else { return nil }
            if at < bytes.count, bytes[at] == UInt8(ascii: ".") {
                at += 1
                guard digits(&self) > 0 else { return nil }
            }
            if at < bytes.count, bytes[at] == UInt8(ascii: "e") || bytes[at] == UInt8(ascii: "E") {
                at += 1
                if at < bytes.count, bytes[at] == UInt8(ascii: "+") || bytes[at] == UInt8(ascii: "-") { at += 1 }
                guard digits(&self) > 0 else { return nil }
            }
            return .number(String(decoding: bytes[start..<at], as: UTF8.self))
        }

        mutating func hex4() -> UInt32? {
            guard at + 4 <= bytes.count else { return nil }
            var v: UInt32 = 0
            for b in bytes[at..<at + 4] {
                guard let d = Character(Unicode.Scalar(b)).hexDigitValue else { return nil }
                v = v * 16 + UInt32(d)
            }
            at += 4
            return v
        }

        mutating func string() -> String? {
            at += 1  // the opening quote
            var out: [UInt8] = []
            while at < bytes.count {
                let b = bytes[at]
                at += 1
                switch b {
                case UInt8(ascii: "\""): return String(decoding: out, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard at < bytes.count else { return nil }
                    let e = bytes[at]
                    at += 1
                    var scalar: Unicode.Scalar?
                    switch e {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): scalar = Unicode.Scalar(e)
                    case UInt8(ascii: "n"): scalar = "\n"
                    case UInt8(ascii: "r"): scalar = "\r"
                    case UInt8(ascii: "t"): scalar = "\t"
                    case UInt8(ascii: "b"): scalar = "\u{8}"
                    case UInt8(ascii: "f"): scalar = "\u{c}"
                    case UInt8(ascii: "u"):
                        guard var v = hex4() else { return nil }
                        if v >= 0xD800, v < 0xDC00, at + 1 < bytes.count, bytes[at] == UInt8(ascii: "\\"), bytes[at + 1] == UInt8(ascii: "u") {
                            at += 2
                            guard let low = hex4(), low >= 0xDC00, low < 0xE000 else { return nil }
                            v = 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00)
                        }
                        scalar = Unicode.Scalar(v) ?? "\u{FFFD}"
                    default: return nil
                    }
                    out.append(contentsOf: Array(String(scalar!).utf8))
                case 0..<0x20: return nil
                default: out.append(b)
                }
            }
            return nil
        }
    }
}
