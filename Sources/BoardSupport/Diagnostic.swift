/// One problem found in a config or board file, with where it is.
///
/// Printed as `FILE:LINE:COLUMN: error: PATH: MESSAGE`, the format editors
/// and CI annotate (`config.yaml:12:7: error: reactions[2].do[0].set.valve:
/// line 'valve' is an input; set needs an output`).
public struct Diagnostic: Sendable, Equatable, Hashable, CustomStringConvertible {
    public enum Severity: String, Sendable, Equatable, Hashable {
        case error, warning
    }

    public var severity: Severity
    /// The file as the user named it.
    public var file: String
    /// 1-based line and column; 0 when the problem has no position (a file
    /// that cannot be read).
    public var line: Int
    public var column: Int
    /// The key path in the document (`lines.button.input.debounce`), empty
    /// for the document as a whole.
    public var path: String
    public var message: String

    public init(_ severity: Severity, file: String, line: Int, column: Int, path: String, message: String) {
        self.severity = severity
        self.file = file
        self.line = line
        self.column = column
        self.path = path
        self.message = message
    }

    /// One line, always: what a config's text brought into the path or the
    /// message (a newline or an ESC inside a key, a bidi override) is
    /// written as `\u{…}` (`Echo`), so a diagnostic can neither be split
    /// into a forged second one nor move a terminal's cursor.
    public var description: String {
        let place = line > 0 ? "\(file):\(line):\(column)" : file
        let what = path.isEmpty ? message : "\(path): \(message)"
        return Echo.escaped("\(place): \(severity.rawValue): \(what)")
    }
}

/// Collects diagnostics for one document while it is read: its own file
/// and, for a config, the files it includes (`!include`) and its secrets
/// file.
///
/// Each file besides the log's own is a *source*, numbered from 1 in the
/// order it was read; a `Position` carries the number of its source (0 is
/// the log's own file). A diagnostic at a position in a source names that
/// source's file and ends with how it was reached ("(included from
/// board.yaml:3:10)"), so an error in a shared file says which config led
/// to it.
public final class DiagnosticLog {
    public let file: String
    public private(set) var items: [Diagnostic] = []
    /// The errors so far, kept as they come: readers compare it before and
    /// after a part, and counting through `items` each time would make a
    /// config with many warnings quadratic to check.
    public private(set) var errorCount = 0

    /// A file read into the document besides the log's own.
    public struct Source: Sendable, Equatable {
        /// The file as messages name it.
        public let file: String
        /// How the file was reached, said after each of its messages
        /// (" (included from board.yaml:3:10)"); empty for none.
        public let via: String
    }

    /// The sources, source n at index n - 1.
    public private(set) var sources: [Source] = []

    public init(file: String) { self.file = file }

    public var errors: [Diagnostic] { items.filter { $0.severity == .error } }
    public var warnings: [Diagnostic] { items.filter { $0.severity == .warning } }
    public var hasErrors: Bool { errorCount > 0 }

    /// Registers a file read into the document; `via` is said after each of
    /// its messages. Returns the source's number, for `Position.source`.
    public func addSource(file: String, via: String = "") -> Int {
        sources.append(Source(file: file, via: via))
        return sources.count
    }

    /// The file a position is in, and what its messages end with.
    public func place(_ at: Position) -> (file: String, via: String) {
        guard at.source > 0, at.source <= sources.count else { return (file, "") }
        let s = sources[at.source - 1]
        return (s.file, s.via)
    }

    public func error(_ at: Position, _ path: String, _ message: String) {
        errorCount += 1
        let (file, via) = place(at)
        items.append(Diagnostic(.error, file: file, line: at.line, column: at.column, path: path, message: message + via))
    }

    public func warning(_ at: Position, _ path: String, _ message: String) {
        let (file, via) = place(at)
        items.append(Diagnostic(.warning, file: file, line: at.line, column: at.column, path: path, message: message + via))
    }

    public func append(_ d: Diagnostic) {
        if d.severity == .error { errorCount += 1 }
        items.append(d)
    }

    /// Takes the diagnostics of `other` (a log a file of this document was
    /// read into on its own, such as an included file composed by itself),
    /// each ending with `via`.
    public func append(_ other: DiagnosticLog, via: String) {
        for var d in other.items {
            d.message += via
            append(d)
        }
    }

    /// In file order: the log's own file first, then the sources in the
    /// order they were read; within a file by line, then column, stable for
    /// equal positions.
    public var sorted: [Diagnostic] {
        var rank: [String: Int] = [file: 0]
        for (i, s) in sources.enumerated() where rank[s.file] == nil { rank[s.file] = i + 1 }
        return items.enumerated().sorted { a, b in
            let ra = rank[a.element.file] ?? Int.max
            let rb = rank[b.element.file] ?? Int.max
            return (ra, a.element.line, a.element.column, a.offset) < (rb, b.element.line, b.element.column, b.offset)
        }.map(\.element)
    }
}

/// A 1-based line and column in a file: the log's own (`source` 0) or one
/// of its sources (see `DiagnosticLog`).
public struct Position: Sendable, Equatable, Hashable, CustomStringConvertible {
    public var line: Int
    public var column: Int
    /// The file: 0 for the log's own, else the number `addSource` gave.
    public var source: Int
    public init(line: Int, column: Int, source: Int = 0) {
        self.line = line
        self.column = column
        self.source = source
    }
    public static let none = Position(line: 0, column: 0)
    public var description: String { "\(line):\(column)" }
}
