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

    public var description: String {
        let place = line > 0 ? "\(file):\(line):\(column)" : file
        let what = path.isEmpty ? message : "\(path): \(message)"
        return "\(place): \(severity.rawValue): \(what)"
    }
}

/// Collects diagnostics for one file while it is read.
public final class DiagnosticLog {
    public let file: String
    public private(set) var items: [Diagnostic] = []
    /// The errors so far, kept as they come: readers compare it before and
    /// after a part, and counting through `items` each time would make a
    /// config with many warnings quadratic to check.
    public private(set) var errorCount = 0

    public init(file: String) { self.file = file }

    public var errors: [Diagnostic] { items.filter { $0.severity == .error } }
    public var warnings: [Diagnostic] { items.filter { $0.severity == .warning } }
    public var hasErrors: Bool { errorCount > 0 }

    public func error(_ at: Position, _ path: String, _ message: String) {
        errorCount += 1
        items.append(Diagnostic(.error, file: file, line: at.line, column: at.column, path: path, message: message))
    }

    public func warning(_ at: Position, _ path: String, _ message: String) {
        items.append(Diagnostic(.warning, file: file, line: at.line, column: at.column, path: path, message: message))
    }

    public func append(_ d: Diagnostic) {
        if d.severity == .error { errorCount += 1 }
        items.append(d)
    }

    /// In file order (line, then column), stable for equal positions.
    public var sorted: [Diagnostic] {
        items.enumerated().sorted { a, b in
            (a.element.line, a.element.column, a.offset) < (b.element.line, b.element.column, b.offset)
        }.map(\.element)
    }
}

/// A 1-based line and column in a file.
public struct Position: Sendable, Equatable, Hashable, CustomStringConvertible {
    public var line: Int
    public var column: Int
    public init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }
    public static let none = Position(line: 0, column: 0)
    public var description: String { "\(line):\(column)" }
}
