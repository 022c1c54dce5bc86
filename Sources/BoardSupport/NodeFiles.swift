import Yams

/// Which file each node of a document came from, when the document is read
/// from several files (a config and the files it includes).
///
/// Yams marks carry a line and a column only, and a `Mark` cannot be made
/// outside Yams, so a node cannot carry its file in its mark. But every
/// node the parser makes has a `Tag` object of its own, which the node (and
/// every copy of it, and every node rebuilt from it with the same tag)
/// keeps: the tag's identity names the node's origin. Nodes of the
/// document's own file are not recorded (source 0), so a document read
/// from one file costs nothing here. The tags recorded are retained, so an
/// identifier is never reused while this table lives.
public final class NodeFiles {
    private var sources: [ObjectIdentifier: Int] = [:]
    private var retained: [Tag] = []

    public init() {}

    /// Records every node of the tree under `root` as read from `source`
    /// (a `DiagnosticLog` source number).
    public func assign(_ root: Node, source: Int) {
        var stack = [root]
        var seen = Set<ObjectIdentifier>()
        while let node = stack.popLast() {
            guard let tag = Self.ownTag(node), seen.insert(ObjectIdentifier(tag)).inserted else { continue }
            sources[ObjectIdentifier(tag)] = source
            retained.append(tag)
            switch node {
            case let .mapping(m):
                for (k, v) in m {
                    stack.append(k)
                    stack.append(v)
                }
            case let .sequence(q): stack.append(contentsOf: q)
            case .scalar, .alias: break
            }
        }
    }

    /// The source a node was read from: 0 for the document's own file.
    public func source(of node: Node) -> Int {
        guard !sources.isEmpty, let tag = Self.ownTag(node) else { return 0 }
        return sources[ObjectIdentifier(tag)] ?? 0
    }

    /// The node's tag object as the parser made it (`Node.tag` would
    /// resolve it).
    static func ownTag(_ node: Node) -> Tag? {
        switch node {
        case let .scalar(s): return s.tag
        case let .mapping(m): return m.tag
        case let .sequence(q): return q.tag
        case let .alias(a): return a.tag
        }
    }
}
