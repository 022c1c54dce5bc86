import BoardControl
import Boardloop

/// Reads a composed YAML document node by node, reporting what is wrong
/// with a position and key path instead of stopping at the first problem.
///
/// Every accessor returns nil after reporting when the node is not what was
/// asked for, so a caller carries on with the rest of the document.
public struct YAMLReader {
    public let log: DiagnosticLog
    /// Tags the language defines, each taking a scalar (`!include`,
    /// `!secret` in a config); any other tag is an error. Empty: no tags.
    public var scalarTags: [String] = []

    public init(log: DiagnosticLog) {
        self.log = log
    }

    /// Nodes that aliases may add to a document, in all: a config never
    /// needs many, and a few nested aliases ("billion laughs") can
    /// otherwise make a small file expand to billions of nodes.
    public static let maximumAliasNodes = 100_000
    /// How deep lists and mappings may be nested: the language needs a
    /// handful, and the readers recurse.
    public static let maximumDepth = 100
    /// Keys given twice that one document lists at most (the rest are
    /// counted).
    static let maximumDuplicateGroups = 64

    /// Composes `text` into a node tree. A syntax error is reported with the
    /// parser's own line and column and yields nil. Characters YAML does not
    /// allow, every duplicated key, tags and oversized alias expansion are
    /// reported with their positions and yield nil as well. `source` is
    /// stamped into every node's mark: the file the text came from, when it
    /// is not the log's own (an included file).
    public func compose(_ text: String, source: Int = 0) -> Node? {
        var skipped: [YAMLSkippedBlock] = []
        return compose(text, recover: false, skipped: &skipped, source: source)
    }

    /// Syntax errors one document may recover from: each costs a compose of
    /// the text.
    public static let maximumSyntaxRecoveries = 20

    /// Composes `text` as `compose` does, but a syntax error does not stop
    /// it: the error is reported with the key path of the block it sits in
    /// (an entry under a top-level key, an item of a top-level list, or a
    /// whole section when the key's own line is broken), the block is
    /// blanked out (its lines emptied, so every other position stays) and
    /// the text composed again, up to `maximumSyntaxRecoveries` times.
    /// `skipped` gets the blocks blanked out: the caller reads the rest
    /// knowing they were there.
    public func compose(recovering text: String, skipped: inout [YAMLSkippedBlock]) -> Node? {
        compose(text, recover: true, skipped: &skipped, source: 0)
    }

    func compose(_ text: String, recover: Bool, skipped: inout [YAMLSkippedBlock], source: Int) -> Node? {
        guard checkCharacters(text) else { return nil }
        var text = text
        // A byte order mark is accepted (editors on Windows write one) and
        // dropped, so that it does not count as a column of line 1.
        if text.unicodeScalars.first == "\u{FEFF}" { text = String(text.unicodeScalars.dropFirst()) }
        while true {
            var composer = YAMLComposer(scalarTags: scalarTags, source: source)
            do {
                let root = try composer.compose(text)
                for (at, message) in composer.problems { log.error(at, "", message) }
                return composer.problems.isEmpty ? root : nil
            } catch let error as YAMLError {
                if recover, skipped.count < Self.maximumSyntaxRecoveries, let (block, blanked) = recoverable(error, in: text) {
                    report(error, lines: YAMLRecovery.lines(text), path: block.path)
                    skipped.append(block)
                    text = blanked
                    continue
                }
                report(error, lines: YAMLRecovery.lines(text))
                return nil
            } catch {
                log.error(.none, "", "YAML: \(error)")
                return nil
            }
        }
    }

    /// The block a syntax error sits in and the text with it blanked out;
    /// nil when the error is not one to read past (nesting too deep, not a
    /// syntax error) or blanking would not change the text.
    func recoverable(_ error: YAMLError, in text: String) -> (YAMLSkippedBlock, String)? {
        let context: YAMLError.Context?
        let mark: Mark
        switch error {
        case let .scanner(c, problem, m), let .parser(c, problem, m), let .composer(c, problem, m):
            if problem.hasPrefix("Maximum nesting level") { return nil }
            context = c
            mark = m
        default: return nil
        }
        let lines = YAMLRecovery.lines(text)
        // Where the broken construct begins: a flow collection (`{`, `[`)
        // left open is found only where something else starts, so its
        // block is the one it began in; so is an error found on a
        // top-level key's line or past the end.
        var at = mark.line
        if let context, context.mark.line >= 1, context.mark.line < mark.line {
            let problemLine = mark.line <= lines.count ? lines[mark.line - 1] : []
            let atTopLevel =
                YAMLRecovery.isFiller(problemLine) || (YAMLRecovery.indent(problemLine) == 0 && !YAMLRecovery.isListItem(problemLine))
            if context.text.contains("flow") || atTopLevel { at = context.mark.line }
        }
        guard let block = YAMLRecovery.block(around: at, in: lines) else { return nil }
        let blanked = YAMLRecovery.blank(text, block)
        return blanked == text ? nil : (block, blanked)
    }

    func report(_ error: YAMLError, lines: [[Unicode.Scalar]] = [], path: String = "") {
        switch error {
        case let .scanner(context, problem, mark), let .parser(context, problem, mark),
            let .composer(context, problem, mark):
            if problem.hasPrefix("Maximum nesting level") {
                log.error(
                    Position(line: mark.line, column: mark.column), "",
                    "YAML: lists and mappings are nested more than 1000 deep here; a config needs only a few levels")
                return
            }
            // A tab in a line's indentation: libyaml's words for it vary
            // with what it was scanning; say what to do.
            if mark.line >= 1, mark.line <= lines.count, let column = YAMLRecovery.tabInIndentation(lines[mark.line - 1]),
                !YAMLRecovery.isFiller(lines[mark.line - 1]) || problem.contains("tab")
            {
                log.error(
                    Position(line: mark.line, column: column), path,
                    "YAML syntax: a tab character indents this line; YAML indents with spaces")
                return
            }
            var message = "YAML syntax: \(problem)"
            if let context { message += " (\(context.text) at \(context.mark.line):\(context.mark.column))" }
            log.error(Position(line: mark.line, column: mark.column), path, message)
        case let .reader(problem, offset):
            log.error(.none, "", "cannot read the text: \(problem)" + (offset.map { " at character \($0)" } ?? ""))
        case .memory:
            log.error(.none, "", "YAML: out of memory")
        }
    }

    /// Characters YAML does not allow in a document (C0 controls other than
    /// tab and line breaks, DEL, C1 controls other than NEL, surrogates,
    /// U+FFFE and U+FFFF): the first is reported with its line and column.
    /// A byte order mark at the start is allowed (and ignored).
    func checkCharacters(_ text: String) -> Bool {
        var line = 1
        var column = 1
        var first = true
        for c in text.unicodeScalars {
            defer { first = false }
            let v = c.value
            if v == 0x0A {
                line += 1
                column = 1
                continue
            }
            let allowed =
                v == 0x09 || v == 0x0D || (0x20...0x7E).contains(v) || v == 0x85 || (0xA0...0xD7FF).contains(v)
                || (0xE000...0xFFFD).contains(v) || v >= 0x10000
            if !allowed {
                let hex = String(v, radix: 16, uppercase: true)
                let what = v == 0 ? "a NUL byte" : "the control character U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
                log.error(Position(line: line, column: column), "", "\(what) is not allowed in YAML text")
                return false
            }
            if !(first && v == 0xFEFF) { column += 1 }
        }
        return true
    }

    // MARK: Secrets

    /// The tag of a value read from the secrets file.
    public static let secretTag = "!secret"

    /// Whether a node is written `!secret NAME`. Such a node keeps the
    /// secret's name, never its value (see ConfigParser.secret).
    public static func isSecret(_ node: Node) -> Bool {
        if case let .scalar(s) = node { return s.tag.description == secretTag }
        return false
    }

    /// Reports a secret where a plain value is read: only the keys that
    /// take a password or token read secrets, so that a secret's value is
    /// never shown (a log message, a summary, an error quoting a value).
    public func refuseSecret(_ node: Node, _ path: String) -> Bool {
        guard Self.isSecret(node) else { return false }
        error(
            node, path,
            "\(Self.kind(node)) is not taken here: only a password or token may come from the secrets file; write the value itself")
        return true
    }

    // MARK: Positions and paths

    /// Where a node is in the file it was read from (the log's own: a
    /// reader of one file).
    public static func position(_ node: Node) -> Position {
        var at = node.mark
        at.source = 0
        return at
    }

    /// Where a node is, with the file it came from (its mark's source).
    public func position(_ node: Node) -> Position { node.mark }

    public static func key(_ path: String, _ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }
    public static func index(_ path: String, _ i: Int) -> String { "\(path)[\(i)]" }

    /// How a node is described in "expected X, found Y".
    public static func kind(_ node: Node) -> String {
        switch node {
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        case let .scalar(s):
            // A value is quoted as `Echo` shows it (at most 64 characters,
            // escaped): an error never carries a whole line of a file, which
            // may be an included file's, to the log or a control reply.
            if s.tag.description == secretTag { return "a secret (!secret \(Echo(s.string).bare))" }
            if s.style == .plain {
                if s.string.isEmpty || s.string == "~" || s.string == "null" { return "nothing (null)" }
                if Int(s.string) != nil || Double(s.string) != nil { return "the number \(Echo(s.string).bare)" }
            }
            return Echo(s.string).description
        }
    }

    public func error(_ node: Node, _ path: String, _ message: String) {
        log.error(position(node), path, message)
    }

    public func warning(_ node: Node, _ path: String, _ message: String) {
        log.warning(position(node), path, message)
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
        if refuseSecret(node, path) { return nil }
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
        if refuseSecret(node, path) { return nil }
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
        if refuseSecret(node, path) { return nil }
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
        if refuseSecret(node, path) { return nil }
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
        if refuseSecret(node, path) { return nil }
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

extension DurationText.Problem {
    /// What is wrong with `text`, in words (the config's, the command
    /// line's and the remote front ends' messages are the same);
    /// `suggest` is the unit a bare number is told to take.
    public func message(_ text: String, suggest: String = "ms") -> String {
        let text = Echo(text).bare
        return switch self {
        case .noUnit: "'\(text)' has no unit; write \(text)\(suggest) (units: us, ms, s, min, h)"
        case let .unknownUnit(u):
            "unknown unit '\(Echo(u).bare)' in '\(text)'; units are us, ms, s, min, h" + DidYouMean.hint(u, in: DurationText.units.map(\.0))
        case .negative: "'\(text)' is negative; a duration is zero or more"
        case .notANumber: "expected a duration such as 20ms, found \(Echo(text))"
        case .tooPrecise: "'\(text)' is finer than a nanosecond"
        case .tooLarge: "'\(text)' is too long (the limit is about 292 years)"
        }
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
