/// Finds the alias tokens (`*name`) of a YAML text with their positions, in
/// document order. Yams resolves aliases while composing and keeps no
/// position for them; this light scanner gives the place to point at when
/// an alias is refused. It knows quotes, comments, flow collections and
/// block scalars, enough for configs; it runs only on that error path.
enum YAMLAliasScanner {
    struct Alias: Equatable {
        var name: String
        var at: Position
    }

    static func aliases(in text: String) -> [Alias] {
        let s = Array(text.unicodeScalars)
        var out: [Alias] = []
        var i = 0
        var line = 1
        var column = 1
        var tokenStart = true
        var flow = 0
        var lineIndent = 0
        var atLineStart = true
        /// Set after a block scalar indicator: lines indented more than this
        /// are the scalar's text.
        var blockParent: Int?

        func isSpace(_ c: Unicode.Scalar) -> Bool { c == " " || c == "\t" }
        func isBreak(_ c: Unicode.Scalar) -> Bool { c == "\n" || c == "\r" }
        func endsName(_ c: Unicode.Scalar) -> Bool {
            isSpace(c) || isBreak(c) || c == "," || c == "[" || c == "]" || c == "{" || c == "}"
        }
        func advance() {
            if s[i] == "\n" {
                line += 1
                column = 1
                atLineStart = true
                lineIndent = 0
                tokenStart = true
            } else if s[i] == "\r" {
                if i + 1 < s.count && s[i + 1] == "\n" {
                    // counted at the "\n"
                } else {
                    line += 1
                    column = 1
                    atLineStart = true
                    lineIndent = 0
                    tokenStart = true
                }
            } else {
                column += 1
            }
            i += 1
        }
        func skipToLineEnd() { while i < s.count && !isBreak(s[i]) { advance() } }

        while i < s.count {
            let c = s[i]
            if atLineStart {
                // Indentation, then a block scalar's lines are skipped whole.
                var j = i
                while j < s.count && s[j] == " " { j += 1 }
                let indent = j - i
                let blank = j >= s.count || isBreak(s[j]) || s[j] == "#"
                if let parent = blockParent {
                    if blank || indent > parent {
                        skipToLineEnd()
                        if i < s.count { advance() }
                        continue
                    }
                    blockParent = nil
                }
                while i < j { advance() }
                lineIndent = indent
                atLineStart = false
                continue
            }
            if isBreak(c) {
                advance()
                continue
            }
            if isSpace(c) {
                advance()
                continue
            }
            if c == "#" && (i == 0 || isSpace(s[i - 1]) || isBreak(s[i - 1])) {
                skipToLineEnd()
                continue
            }
            let next: Unicode.Scalar? = i + 1 < s.count ? s[i + 1] : nil
            let nextIsGap = next.map { isSpace($0) || isBreak($0) } ?? true
            if tokenStart {
                switch c {
                case "\"":
                    advance()
                    while i < s.count && s[i] != "\"" {
                        if s[i] == "\\" && i + 1 < s.count { advance() }
                        advance()
                    }
                    if i < s.count { advance() }
                    tokenStart = false
                case "'":
                    advance()
                    while i < s.count {
                        if s[i] == "'" {
                            if i + 1 < s.count && s[i + 1] == "'" {
                                advance()
                                advance()
                                continue
                            }
                            break
                        }
                        advance()
                    }
                    if i < s.count { advance() }
                    tokenStart = false
                case "*", "&", "!":
                    let at = Position(line: line, column: column)
                    advance()
                    var name = String.UnicodeScalarView()
                    while i < s.count && !endsName(s[i]) {
                        name.append(s[i])
                        advance()
                    }
                    if c == "*" {
                        out.append(Alias(name: String(name), at: at))
                        tokenStart = false
                    }  // a property: the node follows
                case "-", "?", ":":
                    advance()
                    if !nextIsGap && flow == 0 { tokenStart = false }
                case "[", "{":
                    flow += 1
                    advance()
                case "]", "}":
                    flow = max(0, flow - 1)
                    advance()
                    tokenStart = false
                case ",":
                    advance()
                case "|" where flow == 0, ">" where flow == 0:
                    blockParent = lineIndent
                    skipToLineEnd()
                default:
                    advance()
                    tokenStart = false
                }
                continue
            }
            // Inside a plain scalar (or after a closed one).
            if c == ":" && (nextIsGap || (flow > 0 && next.map { ",[]{}".unicodeScalars.contains($0) } == true)) {
                advance()
                tokenStart = true
            } else if flow > 0 && (c == "," || c == "[" || c == "{") {
                if c != "," { flow += 1 }
                advance()
                tokenStart = true
            } else if flow > 0 && (c == "]" || c == "}") {
                flow = max(0, flow - 1)
                advance()
            } else {
                advance()
            }
        }
        return out
    }
}
