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

    /// `logger`'s handler when it is this type writing through `writer`: a
    /// caller may then ask the writer's rate limit (`LogWriter.admits`)
    /// before it formats a line, and hand the line over admitted.
    static func direct(_ logger: Logger, writer: LogWriter = .shared) -> BoarddLogHandler? {
        guard let h = logger.handler as? BoarddLogHandler, h.writer === writer else { return nil }
        return h
    }

    /// `message` as this handler writes it (`format(level:message:journal:start:)`).
    func format(_ level: Logger.Level, _ message: String) -> String {
        Self.format(level: level, message: message, journal: journal, start: start)
    }

    /// A line as boardd writes it: `<N>message` under journald, else the
    /// seconds since `start` (ms), the level and the message. The message is
    /// one line whatever it holds: control characters (a newline in a
    /// config string, a command's ESC, CR or BEL) are written escaped, so
    /// nothing logged can start a journal entry of its own or move a
    /// terminal's cursor.
    static func format(level: Logger.Level, message raw: String, journal: Bool, start: UInt64) -> String {
        let message = escapingControls(raw)
        if journal { return "<\(priority(level))>\(message)\n" }
        let ms = (MonotonicInstant.now.nanoseconds &- start) / 1_000_000
        let secs = String(ms / 1000)
        let frac = String(ms % 1000)
        let stamp = String(repeating: " ", count: max(0, 4 - secs.count)) + secs + "."
            + String(repeating: "0", count: 3 - frac.count) + frac
        let lv = level.rawValue
        return "\(stamp) \(lv)\(String(repeating: " ", count: max(1, 7 - lv.count)))\(message)\n"
    }

    /// `text` with every C0 control character and DEL written as an escape
    /// (`\n`, `\r`, `\t`, `\x1b`); unchanged (not copied) when it has none.
    public static func escapingControls(_ text: String) -> String {
        var needs = false
        for b in text.utf8 where b < 0x20 || b == 0x7f {
            needs = true
            break
        }
        guard needs else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x0a: out += "\\n"
            case 0x0d: out += "\\r"
            case 0x09: out += "\\t"
            case 0..<0x20, 0x7f:
                let hex = String(scalar.value, radix: 16)
                out += "\\x" + (hex.count < 2 ? "0" + hex : hex)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
