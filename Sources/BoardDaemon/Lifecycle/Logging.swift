import Boardloop
import Glibc
import Logging

/// swift-log handler of boardd: one line per message on stderr. Under
/// systemd (`JOURNAL_STREAM` set) each line starts with its syslog
/// priority (`<3>` error … `<7>` debug), which journald reads, so
/// `journalctl -p warning` works; on a terminal it carries the time since
/// start and the level. The line is formatted by the caller and handed to
/// the log writer (`LogWriter`): while a daemon runs, a thread of its own
/// writes it, so a log call never blocks on stderr.
public struct BoarddLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public let label: String
    public let journal: Bool
    public let writer: LogWriter
    let start: UInt64

    public init(
        label: String, level: Logger.Level, journal: Bool = getenv("JOURNAL_STREAM") != nil, writer: LogWriter = .shared
    ) {
        self.label = label
        logLevel = level
        self.journal = journal
        self.writer = writer
        start = MonotonicInstant.now.nanoseconds
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public static func priority(_ l: Logger.Level) -> Int {
        switch l {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    public func log(event: LogEvent) {
        writer.submit(Self.format(level: event.level, message: "\(event.message)", journal: journal, start: start), source: event.source, level: event.level)
    }

    /// A line as boardd writes it: `<N>message` under journald, else the
    /// seconds since `start` (ms), the level and the message.
    static func format(level: Logger.Level, message: String, journal: Bool, start: UInt64) -> String {
        if journal { return "<\(priority(level))>\(message)\n" }
        let ms = (MonotonicInstant.now.nanoseconds &- start) / 1_000_000
        let secs = String(ms / 1000)
        let frac = String(ms % 1000)
        let stamp = String(repeating: " ", count: max(0, 4 - secs.count)) + secs + "."
            + String(repeating: "0", count: 3 - frac.count) + frac
        let lv = level.rawValue
        return "\(stamp) \(lv)\(String(repeating: " ", count: max(1, 7 - lv.count)))\(message)\n"
    }
}
