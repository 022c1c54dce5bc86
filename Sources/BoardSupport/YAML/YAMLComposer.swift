import Clibyaml

/// What stops a document from composing: libyaml's reader, scanner or
/// parser error with its words and marks, or the composer's own (an
/// undefined alias, a second document).
public enum YAMLError: Error, Sendable {
    /// The text cannot be read (`offset`: in characters from the start).
    case reader(problem: String, offset: Int?)
    case scanner(context: Context?, problem: String, Mark)
    case parser(context: Context?, problem: String, Mark)
    case composer(context: Context?, problem: String, Mark)
    /// libyaml could not allocate.
    case memory

    /// What libyaml was reading when it met the problem, and where that began.
    public struct Context: Sendable {
        public let text: String
        public let mark: Mark
    }
}

/// Composes one YAML document into a `Node` tree from libyaml's events, and
/// finds on the way what the config language refuses in a document that
/// parses: tags it does not define, lists and mappings nested deeper than
/// `YAMLReader.maximumDepth`, keys given twice in one mapping, and aliases
/// that expand the document past `YAMLReader.maximumAliasNodes` nodes.
///
/// Iterative (an explicit stack of open collections); a collection past the
/// depth limit is reported and its contents skipped, never composed, and
/// reading stops at `maximumNesting`.
struct YAMLComposer {
    let scalarTags: [String]
    /// Stamped into every mark (the file the text came from).
    let source: Int
    /// What is wrong with a document that parses, in document order; the
    /// document is refused when any is found.
    private(set) var problems: [(Position, String)] = []

    private var anchors: [String: (node: Node, size: Int)] = [:]
    private var aliasNodes = 0
    private var deepReported = false
    /// Something was not composed (too deep, or everything after an alias
    /// overflow): an alias to an anchor in it is not an error of its own.
    private var skippedSomething = false
    private var duplicatesReported = 0
    private var duplicatesUnlisted = 0
    private var firstUnlisted = Position.none

    init(scalarTags: [String], source: Int) {
        self.scalarTags = scalarTags
        self.source = source
    }

    /// One open list or mapping.
    private struct Frame {
        let isMapping: Bool
        let tag: Tag
        let style: Node.CollectionStyle
        let mark: Mark
        let anchor: String?
        var items: [Node] = []
        var pairs: [(Node, Node)] = []
        var key: Node?
        /// Each scalar key's first position, for keys given twice.
        var keys: [String: Position] = [:]
        var size = 1
    }

    private var stack: [Frame] = []
    private var root: Node?
    /// Open collections being skipped (their events read, nothing composed).
    private var skipDepth = 0

    /// The document in `text`, nil for an empty stream; throws what stops
    /// libyaml. `problems` holds what else is wrong.
    mutating func compose(_ text: String) throws -> Node? {
        var text = text
        if text.utf8.isEmpty { return nil }
        return try text.withUTF8 { bytes in
            var parser = yaml_parser_t()
            guard yaml_parser_initialize(&parser) == 1 else { throw YAMLError.memory }
            defer { yaml_parser_delete(&parser) }
            yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING)
            yaml_parser_set_input_string(&parser, bytes.baseAddress, bytes.count)
            return try run(&parser, bytes)
        }
    }

    private mutating func run(_ parser: inout yaml_parser_t, _ bytes: UnsafeBufferPointer<UInt8>) throws -> Node? {
        var event = yaml_event_t()
        try Self.next(&parser, &event, bytes)  // the stream's start
        yaml_event_delete(&event)
        try Self.next(&parser, &event, bytes)
        let empty = event.type == YAML_STREAM_END_EVENT
        yaml_event_delete(&event)  // the document's start
        if empty { return nil }
        while root == nil {
            try Self.next(&parser, &event, bytes)
            defer { yaml_event_delete(&event) }
            try take(&event)
        }
        try Self.next(&parser, &event, bytes)  // the document's end
        yaml_event_delete(&event)
        try Self.next(&parser, &event, bytes)
        defer { yaml_event_delete(&event) }
        if event.type != YAML_STREAM_END_EVENT {
            throw YAMLError.composer(
                context: .init(text: "expected a single document in the stream", mark: Mark(line: 1, column: 1)),
                problem: "but found another document", mark(event.start_mark))
        }
        if duplicatesUnlisted > 0 {
            problems.append(
                (firstUnlisted,
                 "\(duplicatesUnlisted) more keys are given more than once in their mappings (the first \(YAMLReader.maximumDuplicateGroups) are listed)"))
        }
        return root
    }

    private static func next(_ parser: inout yaml_parser_t, _ event: inout yaml_event_t, _ bytes: UnsafeBufferPointer<UInt8>) throws {
        guard yaml_parser_parse(&parser, &event) == 1 else { throw error(parser, bytes) }
    }

    private func mark(_ m: yaml_mark_t) -> Mark {
        Mark(line: Int(m.line) + 1, column: Int(m.column) + 1, source: source)
    }

    private static func text(_ p: UnsafeMutablePointer<yaml_char_t>?) -> String? {
        p.map { String(cString: $0) }
    }

    /// One event of the document's node.
    private mutating func take(_ event: inout yaml_event_t) throws {
        let at = mark(event.start_mark)
        if skipDepth > 0 {
            switch event.type {
            case YAML_SEQUENCE_START_EVENT, YAML_MAPPING_START_EVENT:
                try checkNesting(at)
                skipDepth += 1
            case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                skipDepth -= 1
                // The skipped collection stands as an empty scalar: the
                // document is refused anyway.
                if skipDepth == 0 { add(.scalar(.init("", .implicit, .plain, at)), size: 1, at: at, anchor: nil) }
            default: break
            }
            return
        }
        switch event.type {
        case YAML_SCALAR_EVENT:
            let s = event.data.scalar
            let value = String(decoding: UnsafeBufferPointer(start: s.value, count: s.length), as: UTF8.self)
            let tag = s.quoted_implicit == 1 ? Tag.str : Self.text(s.tag).map(Tag.init) ?? .implicit
            let node = Node.scalar(.init(value, tag, Node.Scalar.Style(rawValue: UInt8(s.style.rawValue)) ?? .any, at))
            checkTag(tag, node: node, at)
            add(node, size: 1, at: at, anchor: Self.text(s.anchor))
        case YAML_ALIAS_EVENT:
            let name = Self.text(event.data.alias.anchor) ?? ""
            guard let anchored = anchors[name] else {
                if skippedSomething {
                    add(.scalar(.init("", .implicit, .plain, at)), size: 1, at: at, anchor: nil)
                    return
                }
                throw YAMLError.composer(context: nil, problem: "found undefined alias", at)
            }
            aliasNodes = Self.sum(aliasNodes, anchored.size)
            if aliasNodes > YAMLReader.maximumAliasNodes {
                problems.append(
                    (Position(line: at.line, column: at.column),
                     "alias *\(name) makes the document larger than \(YAMLReader.maximumAliasNodes) nodes from aliases (it repeats \(anchored.size) nodes); a config never needs that many — write the values out or use fewer aliases"
                    ))
                // Nothing more is composed; the rest is still read, so that
                // a syntax error in it is what is reported.
                skippedSomething = true
                skipDepth = stack.count
                stack.removeAll()
                if skipDepth == 0 { root = .scalar(.init("", .implicit, .plain, at)) }
                return
            }
            add(anchored.node, size: anchored.size, at: at, anchor: nil)
        case YAML_SEQUENCE_START_EVENT, YAML_MAPPING_START_EVENT:
            try checkNesting(at)
            let isMapping = event.type == YAML_MAPPING_START_EVENT
            let (implicit, tagText, anchor, style) =
                isMapping
                ? (event.data.mapping_start.implicit, event.data.mapping_start.tag, event.data.mapping_start.anchor,
                   event.data.mapping_start.style.rawValue)
                : (event.data.sequence_start.implicit, event.data.sequence_start.tag, event.data.sequence_start.anchor,
                   event.data.sequence_start.style.rawValue)
            let tag = implicit != 0 ? Tag.implicit : Self.text(tagText).map(Tag.init) ?? .implicit
            checkTag(tag, collection: isMapping, at)
            if stack.count >= YAMLReader.maximumDepth {
                if !deepReported {
                    deepReported = true
                    problems.append(
                        (Position(line: at.line, column: at.column),
                         "lists and mappings are nested more than \(YAMLReader.maximumDepth) deep here; a config needs only a few levels"))
                }
                skippedSomething = true
                skipDepth = 1
                return
            }
            stack.append(
                Frame(
                    isMapping: isMapping, tag: tag, style: Node.CollectionStyle(rawValue: UInt8(style)) ?? .any, mark: at,
                    anchor: Self.text(anchor)))
        case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
            guard let f = stack.popLast() else { return }
            let node: Node =
                f.isMapping ? .mapping(.init(f.pairs, f.tag, f.style, f.mark)) : .sequence(.init(f.items, f.tag, f.style, f.mark))
            add(node, size: f.size, at: f.mark, anchor: f.anchor)
        default:
            break
        }
    }

    /// How deep libyaml is let nest before the composer stops reading:
    /// Debian's libyaml has no limit of its own, and its scanner's work per
    /// token grows with the flow depth, so a file nested a million deep
    /// would take hours. 1000 is the limit libyaml releases that have one
    /// set, and its words are theirs (`YAMLReader.report` says them as a
    /// person reads them).
    static let maximumNesting = 1000

    private func checkNesting(_ at: Mark) throws {
        if stack.count + skipDepth >= Self.maximumNesting {
            throw YAMLError.parser(context: nil, problem: "Maximum nesting level reached, set with yaml_set_max_nest_level()", at)
        }
    }

    /// A node composed: anchored, then added to the open collection (or
    /// made the root).
    private mutating func add(_ node: Node, size: Int, at: Mark, anchor: String?) {
        if let anchor { anchors[anchor] = (node, size) }
        guard !stack.isEmpty else {
            root = node
            return
        }
        let top = stack.count - 1
        stack[top].size = Self.sum(stack[top].size, size)
        guard stack[top].isMapping else {
            stack[top].items.append(node)
            return
        }
        guard let key = stack[top].key else {
            if case let .scalar(s) = node {
                let here = Position(line: at.line, column: at.column)
                if let first = stack[top].keys[s.string] {
                    duplicate(s.string, here, first)
                } else {
                    stack[top].keys[s.string] = here
                }
            }
            stack[top].key = node
            return
        }
        stack[top].pairs.append((key, node))
        stack[top].key = nil
    }

    private mutating func duplicate(_ name: String, _ here: Position, _ first: Position) {
        guard duplicatesReported < YAMLReader.maximumDuplicateGroups else {
            if duplicatesUnlisted == 0 { firstUnlisted = here }
            duplicatesUnlisted += 1
            return
        }
        duplicatesReported += 1
        problems.append((here, "key '\(name)' is given more than once in this mapping (first at \(first))"))
    }

    private static func sum(_ a: Int, _ b: Int) -> Int { a > Int.max / 2 || b > Int.max / 2 ? Int.max / 2 : a + b }

    // MARK: Tags

    /// Tags: a config's language has `scalarTags` (`!include FILE`,
    /// `!secret NAME`), each on a scalar; a board file's has none. The
    /// standard tags that only say what the node is anyway (`!!str` on a
    /// scalar, what quotes say; `!!map` on a mapping, `!!seq` on a list)
    /// are accepted; any other tag is an error, with the nearest defined
    /// one.
    private mutating func checkTag(_ tag: Tag, node: Node, _ at: Mark) {
        if tag == .str || scalarTags.contains(tag.description) { return }
        refuse(tag, kind: YAMLReader.kind(node), at)
    }

    private mutating func checkTag(_ tag: Tag, collection isMapping: Bool, _ at: Mark) {
        if tag == (isMapping ? .map : .seq) { return }
        refuse(tag, kind: isMapping ? "a mapping" : "a list", at)
    }

    private mutating func refuse(_ tag: Tag, kind: String, _ mark: Mark) {
        let raw = tag.description
        if raw.isEmpty { return }
        let at = Position(line: mark.line, column: mark.column)
        let shown = raw.hasPrefix("tag:yaml.org,2002:") ? "!!" + raw.dropFirst(18) : raw
        if scalarTags.contains(raw) {
            problems.append((at, "\(shown) takes a single value (\(shown) NAME), found \(kind)"))
        } else if scalarTags.isEmpty {
            problems.append(
                (at, "unknown tag '\(shown)': the config language has no tags (write the value itself; quotes make a string)"))
        } else {
            let defined = scalarTags.joined(separator: " and ")
            let hint = DidYouMean.hint(shown, in: scalarTags)
            problems.append(
                (at,
                 hint.isEmpty
                    ? "unknown tag '\(shown)': the config language has only the tags \(defined) (write the value itself; quotes make a string)"
                    : "unknown tag '\(shown)'\(hint) (the config language has only the tags \(defined))"))
        }
    }

    // MARK: libyaml's errors

    /// The error libyaml stopped at, with its words and 1-based marks.
    private static func error(_ parser: yaml_parser_t, _ bytes: UnsafeBufferPointer<UInt8>) -> YAMLError {
        let problem = parser.problem.map { String(cString: $0) } ?? "unknown problem"
        let at = Mark(line: Int(parser.problem_mark.line) + 1, column: Int(parser.problem_mark.column) + 1)
        let context = parser.context.map {
            YAMLError.Context(
                text: String(cString: $0), mark: Mark(line: Int(parser.context_mark.line) + 1, column: Int(parser.context_mark.column) + 1))
        }
        switch parser.error {
        case YAML_MEMORY_ERROR: return .memory
        case YAML_READER_ERROR:
            // The offset in bytes, as a count of characters.
            let offset = parser.problem_offset
            let characters = offset <= bytes.count ? String(decoding: UnsafeBufferPointer(rebasing: bytes[..<offset]), as: UTF8.self).count : nil
            return .reader(problem: problem, offset: characters)
        case YAML_SCANNER_ERROR: return .scanner(context: context, problem: problem, at)
        case YAML_PARSER_ERROR: return .parser(context: context, problem: problem, at)
        default: return .composer(context: context, problem: problem, at)
        }
    }
}
