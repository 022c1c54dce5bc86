/// What can go wrong talking to boardd, each with the one line a person
/// reads on stderr and boardctl's exit status (docs/boardctl.md lists them).
public enum ControlError: Error, Equatable, Sendable {
    /// The socket is missing, or nothing listens on it (ECONNREFUSED).
    case noDaemon(path: String)
    /// EACCES on the socket (or a directory on its way).
    case permissionDenied(path: String)
    /// The directory boardd's socket is in exists but this user may not
    /// enter it: not a member of its group.
    case directoryDenied(path: String, group: String)
    /// The daemon answered in another protocol version (`daemon`: the
    /// version its reply carries), or refused this one (`detail`: its message).
    case versionMismatch(daemon: String, detail: String? = nil)
    /// An error reply: the daemon's code and message.
    case daemon(code: String, message: String)
    /// `reload` answered applied: false; the errors exactly as the daemon sent them.
    case reloadRefused(errors: [String])
    /// Anything else on the connection: connect or write failed, no reply,
    /// no reply in time, a reply that is not the protocol's JSON.
    case connection(path: String, problem: String)
    /// A file boardctl writes (a trace) cannot be written.
    case file(path: String, problem: String)
    /// The process answering on the socket runs as a user boardctl does
    /// not trust to be boardd (not root, not this user, not the owner of
    /// the socket's directory): nothing was sent to it.
    case untrustedPeer(path: String, uid: UInt32, pid: Int32)

    /// The protocol version this boardctl speaks.
    public static let protocolVersion = 1

    public var exitStatus: Int32 {
        switch self {
        case .daemon, .reloadRefused: return 1
        case .noDaemon: return 3
        case .permissionDenied, .directoryDenied: return 4
        case .versionMismatch: return 5
        case .connection: return 6
        case .file: return 1
        case .untrustedPeer: return 7
        }
    }

    /// What boardctl writes to stderr: the message, prefixed with
    /// "boardctl: " (the reload errors go out exactly as the daemon sent them).
    public var stderrText: String {
        if case .reloadRefused = self { return message + "\n" }
        return "boardctl: \(message)\n"
    }

    /// The text for stderr (one line, or the reload errors one per line).
    public var message: String {
        switch self {
        case let .noDaemon(path):
            return "no boardd is running at \(path) (start it: systemctl start boardd, or boardd --config FILE --mock; or give --socket)"
        case let .permissionDenied(path):
            return "permission denied on \(path): add yourself to the group that owns it (ls -l \(path) shows it) and log in again"
        case let .directoryDenied(path, group):
            return
                "permission denied on \(path), the directory of boardd's socket: add yourself to group \(group) (sudo usermod -aG \(group) $USER) and log in again"
        case let .versionMismatch(daemon, detail):
            if daemon == String(Self.protocolVersion) || daemon == "?" {
                // A reply in this version that refuses it: the message says which versions the daemon speaks.
                return "boardd does not speak protocol v\(Self.protocolVersion) (\(detail ?? "its reply has no protocol version")): upgrade boardctl"
            }
            return "boardd speaks protocol v\(daemon), this boardctl v\(Self.protocolVersion): upgrade boardctl"
        case let .daemon(_, message):
            return message
        case let .reloadRefused(errors):
            let n = errors.count
            return (errors + ["boardctl: boardd refused the reload (\(n) error\(n == 1 ? "" : "s")) and keeps running the config it had"])
                .joined(separator: "\n")
        case let .connection(path, problem):
            return "boardd at \(path): \(problem)"
        case let .file(path, problem):
            return "cannot write \(path): \(problem)"
        case let .untrustedPeer(path, uid, pid):
            return
                "the process answering on \(path) (pid \(pid)) runs as \(ControlClient.userName(uid)), which is neither root, you nor the owner of the socket's directory: it is not trusted to be boardd, and nothing was sent (give --socket with the path your boardd listens on)"
        }
    }
}
