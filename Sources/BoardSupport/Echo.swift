/// A name or text from the wire, as a refusal echoes it back: at most
/// `longest` Unicode scalars of it (then `…` and its length), with control
/// characters (C0, DEL, C1) and the bidirectional controls (U+200E,
/// U+200F, U+202A–U+202E, U+2066–U+2069) written as `\u{…}`. So a reply
/// or a log line that names what it refused neither carries a 60 KB name
/// nor lets one move a terminal's cursor or reorder the text around it.
///
/// `"no line named \(Echo(name))"` quotes it: `no line named 'ledd'`,
/// `no line named 'AAAA…' (65000 characters)`; `bare` leaves out the quotes.
public struct Echo: CustomStringConvertible, Sendable {
    /// The most scalars shown.
    public static let longest = 64

    /// What is shown of the text, escaped (without `…`).
    public let shown: String
    /// The text's length in scalars when it is longer than what is shown.
    public let cut: Int?

    public init(_ text: String) {
        var out = ""
        var n = 0
        for u in text.unicodeScalars {
            if n == Self.longest { break }
            if Self.isEscaped(u) {
                out += "\\u{" + String(u.value, radix: 16, uppercase: true) + "}"
            } else {
                out.unicodeScalars.append(u)
            }
            n += 1
        }
        shown = out
        cut = n == Self.longest && text.unicodeScalars.count > n ? text.unicodeScalars.count : nil
    }

    /// `'text'`, or `'first scalars…' (N characters)`.
    public var description: String {
        guard let cut else { return "'\(shown)'" }
        return "'\(shown)…' (\(cut) characters)"
    }

    /// `text`, or `first scalars… (N characters)`.
    public var bare: String {
        guard let cut else { return shown }
        return "\(shown)… (\(cut) characters)"
    }

    /// `text` whole, with every scalar `isEscaped` names written as `\u{…}`.
    public static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isEscaped) else { return text }
        var out = String.UnicodeScalarView()
        for u in text.unicodeScalars {
            if isEscaped(u) {
                out.append(contentsOf: "\\u{\(String(u.value, radix: 16, uppercase: true))}".unicodeScalars)
            } else {
                out.append(u)
            }
        }
        return String(out)
    }

    /// The scalars written as escapes.
    public static func isEscaped(_ u: Unicode.Scalar) -> Bool {
        switch u.value {
        case 0x00...0x1F, 0x7F...0x9F: true
        case 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }
}
