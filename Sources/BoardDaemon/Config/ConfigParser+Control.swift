import BoardSupport

/// The `control:` block: boardd's control socket (docs/control.md).
public struct ControlConfig: Sendable, Equatable {
    /// Whether boardd listens on a control socket.
    public var enabled = true
    /// The socket's path (nil: the default path, `ControlServer.resolvePath`).
    public var path: String?
    /// The socket file's permission bits.
    public var mode: UInt32 = 0o660
    /// The group the socket file is given (nil: boardd's own).
    public var group: String?
    /// Clients connected at once; the next is told "busy" and closed.
    public var maxClients = 16
    /// Slots beyond `maxClients` kept for root and boardd's own user.
    public static let keptClients = 2

    public init() {}
}

extension ConfigParser {
    static let controlKeys = ["enabled", "path", "mode", "group", "max_clients"]
    /// The most clients `max_clients` may allow (each is a source on the main loop).
    static let maxControlClients = 256

    func parseControl(_ e: YAMLReader.Entry) -> ControlConfig {
        var c = ControlConfig()
        for ce in r.mapping(e.value, e.path, allowed: Self.controlKeys, what: "a mapping of enabled, path, mode, group, max_clients") ?? [] {
            switch ce.key {
            case "enabled": if let b = r.bool(ce.value, ce.path) { c.enabled = b }
            case "path":
                guard let p = r.string(ce.value, ce.path, what: "a socket path") else { continue }
                if !p.hasPrefix("/") {
                    r.error(ce.value, ce.path, "the socket path must be absolute (start with /)")
                } else if p.utf8.count > ControlConfig.maxPathBytes {
                    r.error(ce.value, ce.path, "a Unix socket path has at most \(ControlConfig.maxPathBytes) bytes; this one has \(p.utf8.count)")
                } else {
                    c.path = p
                }
            case "mode":
                guard let s = r.string(ce.value, ce.path, what: "permission bits in octal (0660)") else { continue }
                if let m = UInt32(s, radix: 8), m <= 0o777 { c.mode = m } else {
                    r.error(ce.value, ce.path, "expected permission bits in octal such as 0660 or 0600, found \(Echo(s))")
                }
            case "group": if let g = r.string(ce.value, ce.path, what: "a group name") { c.group = g }
            case "max_clients":
                if let n = r.int(ce.value, ce.path, in: 1...Self.maxControlClients) { c.maxClients = n }
            default: break
            }
        }
        return c
    }
}

extension ControlConfig {
    /// `sun_path` holds 108 bytes with its terminating zero.
    public static let maxPathBytes = 107
}
