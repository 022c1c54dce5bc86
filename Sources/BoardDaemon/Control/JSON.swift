import BoardControl
/// A JSON value as the control protocol reads and writes it: objects keep
/// their keys' order (replies list fields as the protocol does), numbers
/// keep whether they were written as whole numbers. Parsed and printed on
/// the main loop only.
enum JSON: Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    static func == (a: JSON, b: JSON) -> Bool {
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

    subscript(key: String) -> JSON? {
        guard case let .object(fields) = self else { return nil }
        return fields.last { $0.0 == key }?.1
    }

    /// The kind, for messages ("a string", "a number").
    var kind: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .int, .double: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    // MARK: Printing

    /// One line of JSON (no newline).
    var text: String {
        var out = ""
        write(to: &out)
        return out
    }

    func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case let .bool(b): out += b ? "true" : "false"
        case let .int(i): out += String(i)
        case let .double(d): out += d.isFinite ? (d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(d)) : "null"
        case let .string(s): BoardControl.JSON.quote(s, into: &out)
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
                BoardControl.JSON.quote(k, into: &out)
                out += ":"
                v.write(to: &out)
            }
            out += "}"
        }
    }

    // MARK: Parsing

    struct ParseError: Error {
        var message: String
    }

    /// Parses one JSON text (a request line without its newline).
    static func parse(_ bytes: ArraySlice<UInt8>) throws(ParseError) -> JSON {
        var p = Parser(bytes: bytes)
        p.skipSpace()
        let v = try p.value(depth: 0)
        p.skipSpace()
        guard p.i == p.bytes.endIndex else { throw p.fail("unexpected text after the JSON value") }
        return v
    }

    private struct Parser {
        let bytes: ArraySlice<UInt8>
        var i: Int
        static let maxDepth = 32

        init(bytes: ArraySlice<UInt8>) {
            self.bytes = bytes
            i = bytes.startIndex
        }

        func fail(_ m: String) -> ParseError { ParseError(message: "\(m) at byte \(i - bytes.startIndex + 1)") }

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
                skipSpace()
                if peek == UInt8(ascii: "}") {
                    i += 1
                    return .object(fields)
                }
                while true {
                    skipSpace()
                    guard peek == UInt8(ascii: "\"") else { throw fail("expected a key in quotes") }
                    let k = try string()
                    skipSpace()
                    guard peek == UInt8(ascii: ":") else { throw fail("expected ':'") }
                    i += 1
                    skipSpace()
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
