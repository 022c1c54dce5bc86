/// Where a node begins: a diagnostic's `Position` (line and column from 1,
/// columns counted in Unicode scalars, as libyaml counts them, and the file
/// it was read from: 0 for the document's own, else the number a
/// `DiagnosticLog` gave an included file).
public typealias Mark = Position

/// A node's tag as written, with libyaml's tag handles expanded: empty for
/// a plain value without one, `tag:yaml.org,2002:str` for a quoted value
/// without one (what quotes say), `!secret` for `!secret NAME`.
public struct Tag: Sendable, Hashable, CustomStringConvertible {
    public let description: String

    public init(_ text: String) { description = text }

    public static let implicit = Tag("")
    public static let str = Tag("tag:yaml.org,2002:str")
    public static let map = Tag("tag:yaml.org,2002:map")
    public static let seq = Tag("tag:yaml.org,2002:seq")
}

/// A composed YAML document: scalars, lists and mappings, each with its
/// tag, its style and where it begins. An alias is composed as the node its
/// anchor names (a copy of the same value), so readers never meet one.
///
/// The config reader interprets every scalar itself (`YAMLReader`), so a
/// scalar is its text, never a resolved type.
public enum Node: Sendable, Equatable {
    case scalar(Scalar)
    case mapping(Mapping)
    case sequence(Sequence)

    public struct Scalar: Sendable, Equatable {
        /// libyaml's scalar styles, in its order.
        public enum Style: UInt8, Sendable {
            case any, plain, singleQuoted, doubleQuoted, literal, folded
        }

        public var string: String
        public var tag: Tag
        public var style: Style
        public var mark: Mark

        public init(_ string: String, _ tag: Tag = .implicit, _ style: Style = .plain, _ mark: Mark = Mark(line: 0, column: 0)) {
            self.string = string
            self.tag = tag
            self.style = style
            self.mark = mark
        }
    }

    /// libyaml's collection styles, in its order.
    public enum CollectionStyle: UInt8, Sendable {
        case any, block, flow
    }

    /// A mapping's pairs in the order written.
    public struct Mapping: Sendable, Equatable, RandomAccessCollection {
        public typealias Element = (key: Node, value: Node)
        public typealias Style = CollectionStyle

        public var pairs: [Element]
        public var tag: Tag
        public var style: Style
        public var mark: Mark

        public init(_ pairs: [(Node, Node)], _ tag: Tag = .implicit, _ style: Style = .any, _ mark: Mark = Mark(line: 0, column: 0)) {
            self.pairs = pairs.map { (key: $0.0, value: $0.1) }
            self.tag = tag
            self.style = style
            self.mark = mark
        }

        public var startIndex: Int { pairs.startIndex }
        public var endIndex: Int { pairs.endIndex }
        public subscript(i: Int) -> Element { pairs[i] }

        /// The keys, in the order written.
        public var keys: [Node] { pairs.map(\.key) }

        public static func == (a: Mapping, b: Mapping) -> Bool {
            a.tag == b.tag && a.style == b.style && a.mark == b.mark && a.pairs.count == b.pairs.count
                && zip(a.pairs, b.pairs).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        }
    }

    /// A list's items in the order written.
    public struct Sequence: Sendable, Equatable, RandomAccessCollection {
        public typealias Style = CollectionStyle

        public var items: [Node]
        public var tag: Tag
        public var style: Style
        public var mark: Mark

        public init(_ items: [Node], _ tag: Tag = .implicit, _ style: Style = .any, _ mark: Mark = Mark(line: 0, column: 0)) {
            self.items = items
            self.tag = tag
            self.style = style
            self.mark = mark
        }

        public var startIndex: Int { items.startIndex }
        public var endIndex: Int { items.endIndex }
        public subscript(i: Int) -> Node { items[i] }
    }

    /// Where the node begins.
    public var mark: Mark {
        switch self {
        case let .scalar(s): s.mark
        case let .mapping(m): m.mark
        case let .sequence(q): q.mark
        }
    }

    /// The node's tag as written.
    public var tag: Tag {
        switch self {
        case let .scalar(s): s.tag
        case let .mapping(m): m.tag
        case let .sequence(q): q.tag
        }
    }

    /// A scalar's text; nil for a list or a mapping.
    public var string: String? {
        if case let .scalar(s) = self { return s.string }
        return nil
    }
}
