import BoardControl
import BoardSupport
import Glibc

/// The `mqtt:` block: boardd as a client of an MQTT broker (docs/mqtt.md).
public struct MQTTConfig: Sendable, Equatable {
    /// The broker's host name or address.
    public var broker: String
    public var port: Int
    /// The MQTT client id; also the device's id in topics and Home
    /// Assistant (default: the machine's host name).
    public var clientID: String
    public var username: String?
    /// The password, read from its file or `secrets.yaml` when the config
    /// is loaded (never written in the config itself; never printed).
    public var password: Secret?
    public var tls: TLS?
    public var keepalive: Duration = .seconds(60)
    /// Every topic starts with it (default `boardd/<client id>`).
    public var topicPrefix: String
    public var qos = QoS()
    /// The lines whose states and events are published (default: every line).
    public var published: [LineID]
    /// What may be commanded over MQTT: nothing unless listed.
    public var writableOutputs: [LineID] = []
    public var writableSequences: [SequenceID] = []
    public var writableModes: [ModeID] = []
    /// Where each permission was given, in the order of
    /// the three lists above: `--check` says so when they come from more
    /// than one file (packages merged). Not part of the config's equality.
    public var commandOrigins = Provenance()
    /// How often the stats summary is published (nil: never).
    public var statsInterval: Duration? = .seconds(60)
    /// Events kept while the broker is out of reach, the most recent first
    /// to stay; older ones are counted as dropped.
    public var queue = 256
    /// Home Assistant discovery (nil: off).
    public var discovery: Discovery?
    /// Reconnection's back-off: from `min`, doubled each failure up to `max`, with jitter.
    public var reconnectMin: Duration = .seconds(1)
    public var reconnectMax: Duration = .seconds(60)

    public struct TLS: Sendable, Equatable {
        /// The CA certificates the broker's certificate is checked against
        /// (nil: the system's, `/etc/ssl/certs`).
        public var caFile: String?
        public var certFile: String?
        public var keyFile: String?
        /// Whether the broker's certificate and host name are checked.
        public var verify = true
    }

    public struct QoS: Sendable, Equatable {
        public var states = 1
        public var events = 0
        public var commands = 1
    }

    public struct Discovery: Sendable, Equatable {
        public var prefix = "homeassistant"
    }

    /// A value read from a file, kept out of every message.
    public struct Secret: Sendable, Equatable, CustomStringConvertible {
        public let value: String
        public var description: String { "(secret)" }
    }

    /// The settings a connection is made with: when they change at a
    /// reload, the client connects again.
    var connection: [String] {
        [
            broker, "\(port)", clientID, username ?? "", password?.value ?? "", tls?.caFile ?? "", tls?.certFile ?? "",
            tls?.keyFile ?? "", "\(tls?.verify ?? true)", "\(tls != nil)", "\(keepalive)", topicPrefix,
        ]
    }
}

extension ConfigParser {
    static let mqttKeys = [
        "broker", "port", "client_id", "username", "password", "password_file", "tls", "keepalive", "topic_prefix", "qos", "publish",
        "commands", "stats_interval", "queue", "discovery", "reconnect",
    ]
    static let mqttTLSKeys = ["ca_file", "cert_file", "key_file", "verify"]
    static let mqttQoSKeys = ["states", "events", "commands"]
    static let mqttCommandKeys = ["outputs", "sequences", "modes"]
    static let mqttDiscoveryKeys = ["enabled", "prefix"]
    static let mqttReconnectKeys = ["min", "max"]
    /// Events a queue may keep at most.
    static let maxMQTTQueue = 100_000

    func parseMQTT(_ e: YAMLReader.Entry) -> MQTTConfig? {
        guard
            let entries = r.mapping(
                e.value, e.path, allowed: Self.mqttKeys, what: "a mapping of broker, port, client_id, username, password_file, tls, …")
        else { return nil }
        let before = log.errorCount
        func entry(_ k: String) -> YAMLReader.Entry? { entries.first { $0.key == k } }
        guard let b = entry("broker") else {
            r.error(e.value, e.path, "broker: missing (the broker's host name or address, such as 192.168.1.10 or mqtt.local)")
            return nil
        }
        var broker = ""
        if let s = r.string(b.value, b.path, what: "a host name or address") {
            if s.isEmpty || s.contains(where: { $0.isWhitespace || $0 == "/" }) {
                r.error(b.value, b.path, "expected a host name or address (such as 192.168.1.10 or mqtt.local; no URL, the port goes in port:), found \(Echo(s))")
            } else {
                broker = s
            }
        }
        let hostname = Self.hostName()
        var clientID = hostname
        if let c = entry("client_id"), let s = r.string(c.value, c.path, what: "a client id") {
            if s.isEmpty || s.utf8.count > 64 || s.contains(where: { "/+#".contains($0) || $0.isWhitespace }) {
                r.error(c.value, c.path, "a client id has 1 to 64 characters and no spaces, '/', '+' or '#'; found \(Echo(s))")
            } else {
                clientID = s
            }
        }
        let tls = entry("tls").flatMap(parseMQTTTLS)
        var port = tls != nil ? 8883 : 1883
        if let p = entry("port"), let n = r.int(p.value, p.path, in: 1...65535, what: "a TCP port") { port = n }
        var prefix = "boardd/\(clientID)"
        if let p = entry("topic_prefix"), let s = r.string(p.value, p.path, what: "a topic prefix") {
            if s.isEmpty || s.hasPrefix("/") || s.hasSuffix("/") || s.contains(where: { "+#".contains($0) }) || s.contains("//") {
                r.error(p.value, p.path, "a topic prefix is one or more levels without '+', '#' or empty levels (such as boardd/greenhouse-1); found \(Echo(s))")
            } else {
                prefix = s
            }
        }
        var c = MQTTConfig(broker: broker, port: port, clientID: clientID, topicPrefix: prefix, published: lines.indices.map(LineID.init))
        c.tls = tls
        if let u = entry("username"), let s = r.string(u.value, u.path, what: "a user name") { c.username = s }
        let pw = entry("password"), pf = entry("password_file")
        if let pw, pf != nil {
            r.error(pw.value, pw.path, "give password or password_file, not both")
        } else if let pw {
            if !isSecret(pw.value) {
                r.error(
                    pw.value, pw.path,
                    "a password is not written in the config: put it in secrets.yaml beside the config and write password: !secret NAME, or give password_file (a file only boardd's user may read)")
            } else if let s = secret(pw.value, pw.path) {
                c.password = .init(value: s)
            }
        } else if let pf, let path = r.string(pf.value, pf.path, what: "a file's path") {
            c.password = readPasswordFile(path, pf)
        }
        if c.password != nil && c.username == nil, let at = pw ?? pf {
            r.error(at.value, at.path, "a password needs a username (MQTT sends no password without one)")
        }
        if let k = entry("keepalive"), let d = r.duration(k.value, k.path, suggest: "s") {
            if d < .seconds(5) || d > .seconds(65535) {
                r.error(k.value, k.path, "keepalive must be from 5s to 65535s (whole seconds)")
            } else {
                c.keepalive = d
            }
        }
        if let q = entry("qos") {
            for qe in r.mapping(q.value, q.path, allowed: Self.mqttQoSKeys, what: "a mapping of states, events, commands") ?? [] {
                guard let n = r.int(qe.value, qe.path, in: 0...2, what: "a QoS level (0, 1 or 2)") else { continue }
                switch qe.key {
                case "states": c.qos.states = n
                case "events": c.qos.events = n
                default: c.qos.commands = n
                }
            }
        }
        if let p = entry("publish") {
            var ids: [LineID] = []
            for (name, node, path) in r.names(p.value, p.path, what: "a list of line names") ?? [] {
                if let id = lineRef(node, path, named: name) { ids.append(id) }
            }
            c.published = ids
        }
        if let w = entry("commands") {
            func origin(_ node: Node) -> Provenance.Place {
                let at = r.position(node)
                return Provenance.Place(file: r.log.place(at).file, line: at.line, column: at.column)
            }
            var origins: (outputs: [Provenance.Place], sequences: [Provenance.Place], modes: [Provenance.Place]) = ([], [], [])
            defer { c.commandOrigins.places = origins.outputs + origins.sequences + origins.modes }
            for we in r.mapping(w.value, w.path, allowed: Self.mqttCommandKeys, what: "a mapping of outputs, sequences, modes") ?? [] {
                let names = r.names(we.value, we.path) ?? []
                switch we.key {
                case "outputs":
                    for (name, node, path) in names {
                        guard let id = lineRef(node, path, named: name) else { continue }
                        if lines[id.index].isOutput {
                            c.writableOutputs.append(id)
                            origins.outputs.append(origin(node))
                        } else {
                            r.error(node, path, "line '\(name)' is an input; only outputs can be commanded")
                        }
                    }
                case "sequences":
                    for (name, node, path) in names {
                        if let i = sequenceIndex[name] {
                            c.writableSequences.append(SequenceID(i))
                            origins.sequences.append(origin(node))
                        } else {
                            r.error(node, path, "no sequence named '\(name)'\(DidYouMean.hint(name, in: declaredSequences))")
                        }
                    }
                default:
                    for (name, node, path) in names {
                        if let m = modes.firstIndex(where: { $0.name == name }) {
                            c.writableModes.append(ModeID(m))
                            origins.modes.append(origin(node))
                        } else {
                            r.error(node, path, "no mode named '\(name)'\(DidYouMean.hint(name, in: modes.map(\.name)))")
                        }
                    }
                }
            }
        }
        if let s = entry("stats_interval") {
            if case let .scalar(sc) = s.value, sc.string == "off" || sc.string == "false" {
                c.statsInterval = nil
            } else if let d = r.duration(s.value, s.path, suggest: "s") {
                if d < .seconds(1) { r.error(s.value, s.path, "stats_interval is at least 1s (or off)") } else { c.statsInterval = d }
            }
        }
        if let q = entry("queue"), let n = r.int(q.value, q.path, in: 0...Self.maxMQTTQueue, what: "a number of events") { c.queue = n }
        if let d = entry("discovery") {
            var on = false
            var disc = MQTTConfig.Discovery()
            for de in r.mapping(d.value, d.path, allowed: Self.mqttDiscoveryKeys, what: "a mapping of enabled, prefix") ?? [] {
                switch de.key {
                case "enabled": on = r.bool(de.value, de.path) ?? false
                default:
                    guard let s = r.string(de.value, de.path, what: "a topic prefix") else { continue }
                    if s.isEmpty || s.contains(where: { "+#".contains($0) }) || s.hasSuffix("/") {
                        r.error(de.value, de.path, "a discovery prefix is a topic without '+', '#' or a trailing '/'; found \(Echo(s))")
                    } else {
                        disc.prefix = s
                    }
                }
            }
            if on { c.discovery = disc }
        }
        if let rc = entry("reconnect") {
            for re in r.mapping(rc.value, rc.path, allowed: Self.mqttReconnectKeys, what: "a mapping of min, max") ?? [] {
                guard let d = r.duration(re.value, re.path, suggest: "s") else { continue }
                guard d >= .milliseconds(100), d <= .seconds(3600) else {
                    r.error(re.value, re.path, "must be from 100ms to 1h")
                    continue
                }
                if re.key == "min" { c.reconnectMin = d } else { c.reconnectMax = d }
            }
            if c.reconnectMin > c.reconnectMax {
                r.error(rc.value, rc.path, "min (\(DurationText.format(c.reconnectMin))) is more than max (\(DurationText.format(c.reconnectMax)))")
            }
        }
        return log.errorCount == before ? c : nil
    }

    private func parseMQTTTLS(_ e: YAMLReader.Entry) -> MQTTConfig.TLS? {
        // `tls: true`: the system's CA certificates, verification on.
        if case .scalar = e.value, let b = r.bool(e.value, e.path) { return b ? MQTTConfig.TLS() : nil }
        var t = MQTTConfig.TLS()
        for te in r.mapping(e.value, e.path, allowed: Self.mqttTLSKeys, what: "true, or a mapping of ca_file, cert_file, key_file, verify") ?? [] {
            if te.key == "verify" {
                if let b = r.bool(te.value, te.path) { t.verify = b }
                continue
            }
            guard let path = r.string(te.value, te.path, what: "a file's path") else { continue }
            guard access(path, R_OK) == 0 else {
                r.error(te.value, te.path, "cannot read '\(path)': \(String(cString: strerror(errno)))")
                continue
            }
            switch te.key {
            case "ca_file": t.caFile = path
            case "cert_file": t.certFile = path
            default: t.keyFile = path
            }
        }
        if (t.certFile == nil) != (t.keyFile == nil) {
            r.error(e.value, e.path, "cert_file and key_file go together (a client certificate and its key)")
        }
        return t
    }

    /// The first line of the file at `path`, without its line end.
    private func readPasswordFile(_ path: String, _ e: YAMLReader.Entry) -> MQTTConfig.Secret? {
        switch FileSystem.readConfigText(path) {
        case let .success(text):
            let first = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
            let value = first.hasSuffix("\r") ? String(first.dropLast()) : first
            guard !value.isEmpty else {
                r.error(e.value, e.path, "'\(path)' is empty; its first line is the password")
                return nil
            }
            var st = stat()
            if stat(path, &st) == 0, st.st_mode & S_IROTH != 0 {
                r.warning(e.value, e.path, "'\(path)' is readable by every user (mode 0\(String(st.st_mode & 0o777, radix: 8))); chmod 600 it")
            }
            return .init(value: value)
        case let .failure(why):
            r.error(e.value, e.path, "cannot read the password file: \(why)")
            return nil
        }
    }

    /// This machine's host name, the default client id.
    static func hostName() -> String {
        var buf = [CChar](repeating: 0, count: 256)
        guard gethostname(&buf, buf.count - 1) == 0 else { return "boardd" }
        let s = String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let cleaned = String(s.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" ? $0 : "-" })
        return cleaned.isEmpty ? "boardd" : cleaned
    }
}

/// Where settings of a config came from, carried beside them for the
/// summary; two configs that differ only in where they were written are
/// the same config (a reload of a file with a line added above is no change).
public struct Provenance: Sendable, Equatable {
    /// Where one setting was written.
    public struct Place: Sendable, Equatable, CustomStringConvertible {
        public var file: String
        public var line: Int, column: Int
        /// `FILE:LINE:COL`.
        public var description: String { "\(file):\(line):\(column)" }
    }
    /// One per setting, in the order its owner documents.
    public var places: [Place] = []
    public init() {}
    public static func == (_: Provenance, _: Provenance) -> Bool { true }
}
