import Boardloop
import Glibc
import Logging

/// swift-log handler of boardd: one line per message on stderr. Under
/// systemd (`JOURNAL_STREAM` set) each line starts with its syslog
/// priority (`<3>` error … `<7>` debug), which journald reads, so
/// `journalctl -p warning` works; on a terminal it carries the time since
/// start and the level.
public struct BoarddLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public let label: String
    public let journal: Bool
    let start: UInt64

    public init(label: String, level: Logger.Level, journal: Bool = getenv("JOURNAL_STREAM") != nil) {
        self.label = label
        logLevel = level
        self.journal = journal
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
        let level = event.level, message = event.message
        var text: String
        if journal {
            text = "<\(Self.priority(level))>\(message)\n"
        } else {
            let ms = (MonotonicInstant.now.nanoseconds &- start) / 1_000_000
            let secs = String(ms / 1000)
            let frac = String(ms % 1000)
            let stamp = String(repeating: " ", count: max(0, 4 - secs.count)) + secs + "."
                + String(repeating: "0", count: 3 - frac.count) + frac
            let lv = level.rawValue
            text = "\(stamp) \(lv)\(String(repeating: " ", count: max(1, 7 - lv.count)))\(message)\n"
        }
        text.withUTF8 { p in
            var off = 0
            while off < p.count {
                let n = write(2, p.baseAddress! + off, p.count - off)
                if n <= 0 {
                    if n < 0 && errno == EINTR { continue }
                    return
                }
                off += n
            }
        }
    }
}
