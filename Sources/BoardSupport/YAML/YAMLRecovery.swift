/// Finding, from indentation alone, the block of text a YAML syntax error
/// sits in, so that the block can be blanked out and the rest of the
/// document read: one syntax error then hides only the entry it is in.
///
/// A block is an entry under a top-level key (`lines.button`: from its
/// first line to the line before the next entry at the same indentation or
/// the next top-level key), an item of a top-level list (`reactions[2]`),
/// or, for an error on a top-level key's own line, the whole section.
public struct YAMLSkippedBlock: Sendable, Equatable {
    /// Where the block is in the document: `lines.button`, `reactions[2]`,
    /// `board`; empty for text outside every top-level key.
    public var path: String
    /// The top-level key the block is under (empty when none).
    public var section: String
    /// The entry's key under the section; nil for a list item or a whole
    /// section.
    public var key: String?
    /// 1-based lines blanked out.
    public var lines: ClosedRange<Int>

    public init(path: String, section: String, key: String?, lines: ClosedRange<Int>) {
        self.path = path
        self.section = section
        self.key = key
        self.lines = lines
    }

    /// True when the whole section was blanked (its key's own line was).
    public var isWholeSection: Bool { !section.isEmpty && path == section }
}

enum YAMLRecovery {
    /// The text's lines as Unicode scalars, split at `\n` only (a `\r`
    /// before it stays on the line and counts as trailing space).
    static func lines(_ text: String) -> [[Unicode.Scalar]] {
        var out: [[Unicode.Scalar]] = [[]]
        for c in text.unicodeScalars {
            if c == "\n" { out.append([]) } else { out[out.count - 1].append(c) }
        }
        return out
    }

    static func isSpace(_ c: Unicode.Scalar) -> Bool { c == " " || c == "\t" || c == "\r" }

    /// Columns of leading spaces and tabs.
    static func indent(_ line: [Unicode.Scalar]) -> Int { line.prefix { $0 == " " || $0 == "\t" }.count }

    /// Blank or a comment: says nothing about structure.
    static func isFiller(_ line: [Unicode.Scalar]) -> Bool {
        guard let first = line.first(where: { !isSpace($0) }) else { return true }
        return first == "#"
    }

    /// The 1-based column of the first tab in the line's indentation.
    static func tabInIndentation(_ line: [Unicode.Scalar]) -> Int? {
        for (i, c) in line.enumerated() {
            if c == "\t" { return i + 1 }
            if c != " " { return nil }
        }
        return nil
    }

    /// A mapping key at the start of the line (after its indentation): the
    /// text before the first `:` followed by a space or the end, unquoted.
    static func key(_ line: [Unicode.Scalar]) -> String? {
        let body = Array(line.drop { $0 == " " || $0 == "\t" })
        var i = 0
        while i < body.count {
            if body[i] == ":" && (i + 1 == body.count || isSpace(body[i + 1])) { break }
            i += 1
        }
        guard i < body.count, i > 0 else { return nil }
        var name = String(String.UnicodeScalarView(body[0..<i]))
        while name.last == " " || name.last == "\t" { name.removeLast() }
        if name.count >= 2, let f = name.first, f == "\"" || f == "'", name.last == f {
            name = String(name.dropFirst().dropLast())
        }
        return name.isEmpty ? nil : name
    }

    static func isListItem(_ line: [Unicode.Scalar]) -> Bool {
        let body = line.drop { $0 == " " || $0 == "\t" }
        guard body.first == "-" else { return false }
        return body.count == 1 || isSpace(body[body.startIndex + 1])
    }

    /// The block around line `at` (1-based) of `lines`, or nil when there
    /// is nothing to blank there.
    static func block(around at: Int, in lines: [[Unicode.Scalar]]) -> YAMLSkippedBlock? {
        guard !lines.isEmpty else { return nil }
        // Past the end or on filler: the nearest line with content above.
        var at = min(max(at, 1), lines.count)
        while at > 1 && isFiller(lines[at - 1]) { at -= 1 }
        if isFiller(lines[at - 1]) { return nil }

        // The top-level key at or above: the last line with content at
        // indentation 0 that is not a list item continuing a section.
        var start = at
        while start >= 1 {
            let l = lines[start - 1]
            if !isFiller(l) && indent(l) == 0 && !isListItem(l) { break }
            start -= 1
        }
        guard start >= 1 else {
            // Text above the first top-level key: that line alone.
            return YAMLSkippedBlock(path: "", section: "", key: nil, lines: at...at)
        }
        // The section runs to the line before the next top-level key.
        var end = start
        var i = start + 1
        while i <= lines.count {
            let l = lines[i - 1]
            if !isFiller(l) && indent(l) == 0 && !isListItem(l) { break }
            end = i
            i += 1
        }
        let section = key(lines[start - 1]) ?? ""
        if at == start || section.isEmpty {
            return YAMLSkippedBlock(path: section, section: section, key: nil, lines: start...max(start, end))
        }
        // Entries: the lines at the indentation of the section's first line
        // with content.
        guard let first = (start + 1...end).first(where: { !isFiller(lines[$0 - 1]) }) else { return nil }
        let entryIndent = indent(lines[first - 1])
        let listed = isListItem(lines[first - 1])
        func startsEntry(_ n: Int) -> Bool {
            let l = lines[n - 1]
            return !isFiller(l) && indent(l) == entryIndent && (!listed || isListItem(l))
        }
        var entryStart = first
        var index = 0
        var n = first + 1
        while n <= at {
            if startsEntry(n) {
                entryStart = n
                index += 1
            }
            n += 1
        }
        var entryEnd = entryStart
        n = entryStart + 1
        while n <= end && !startsEntry(n) {
            entryEnd = n
            n += 1
        }
        // Trailing filler stays (it may hold the next entry's comment).
        while entryEnd > entryStart && isFiller(lines[entryEnd - 1]) { entryEnd -= 1 }
        if listed {
            return YAMLSkippedBlock(
                path: "\(section)[\(index)]", section: section, key: nil, lines: entryStart...entryEnd)
        }
        guard let name = key(lines[entryStart - 1]) else {
            return YAMLSkippedBlock(path: section, section: section, key: nil, lines: start...max(start, end))
        }
        return YAMLSkippedBlock(
            path: "\(section).\(name)", section: section, key: name, lines: entryStart...entryEnd)
    }

    /// `text` with the lines of `block` emptied (line breaks kept, so every
    /// other line and column stays where it was).
    static func blank(_ text: String, _ block: YAMLSkippedBlock) -> String {
        var out = String.UnicodeScalarView()
        var line = 1
        for c in text.unicodeScalars {
            if c == "\n" {
                out.append(c)
                line += 1
            } else if !block.lines.contains(line) {
                out.append(c)
            }
        }
        return String(out)
    }
}
