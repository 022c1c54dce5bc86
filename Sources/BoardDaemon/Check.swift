import BoardControl
import BoardSupport

/// What `boardd --check` and `boardd --board-detect` print and return,
/// kept out of the executable so tests can call it too: the same value as
/// a boardctl run's outcome.
public typealias CommandOutput = Outcome

public enum Check {
    /// Checks a config: the summary on stdout and status 0, or every error
    /// (and warning) on stderr and status 1. With `json`, stdout carries the
    /// summary or the diagnostics as JSON either way.
    public static func run(configPath: String, options: LoadOptions, json: Bool) -> CommandOutput {
        let result = ConfigLoader.load(path: configPath, options: options)
        let messages = result.diagnostics.map(\.description)
        let counts = countText(errors: result.errors.count, warnings: result.warnings.count)
        if let config = result.config {
            let summary = ConfigSummary(config)
            return CommandOutput(
                stdout: (json ? summary.json : summary.text) + "\n",
                stderr: messages.isEmpty ? "" : (messages + ["\(configPath): \(counts)"]).joined(separator: "\n") + "\n",
                status: 0)
        }
        var stdout = ""
        if json {
            struct Failure: Encodable {
                var config: String
                var ok: Bool
                var diagnostics: [Entry]
            }
            struct Entry: Encodable {
                var file: String
                var line: Int
                var column: Int
                var severity: String
                var path: String
                var message: String
            }
            let f = Failure(
                config: configPath, ok: false,
                diagnostics: result.diagnostics.map {
                    Entry(file: $0.file, line: $0.line, column: $0.column, severity: $0.severity.rawValue, path: $0.path, message: $0.message)
                })
            stdout = JSONValueEncoder.pretty(f) + "\n"
        }
        return CommandOutput(
            stdout: stdout, stderr: (messages + ["\(configPath): \(counts)"]).joined(separator: "\n") + "\n", status: 1)
    }

    static func countText(errors: Int, warnings: Int) -> String {
        var parts: [String] = []
        if errors > 0 { parts.append("\(errors) error\(errors == 1 ? "" : "s")") }
        if warnings > 0 { parts.append("\(warnings) warning\(warnings == 1 ? "" : "s")") }
        return parts.isEmpty ? "OK" : parts.joined(separator: ", ")
    }

    /// Reads the machine facts under `root`, prints them and the verdict:
    /// status 0 when one board matches, 1 otherwise.
    public static func detect(root: String, catalog: BoardCatalog) -> CommandOutput {
        let facts = MachineFacts.read(root: root)
        let (boards, problems) = catalog.loadAll()
        var out = ["read from \(root):"] + facts.report.map { "  " + $0 }
        let verdict = BoardDetection.detect(facts, boards: boards)
        var status: Int32 = 0
        switch verdict {
        case let .found(b, because):
            out.append("verdict: \(b.name) (\(because)) — \(b.title) [\(b.file)]")
            out += BoardDetection.naming(b, facts).map { "naming: " + $0 }
        case let .ambiguous(names, because):
            status = 1
            out.append("verdict: ambiguous: \(names.joined(separator: " and ")) \(because); name the board (board: NAME or --board NAME)")
        case let .computeModule(because):
            status = 1
            out.append(
                "verdict: a compute module (\(because)): name the carrier's board file (board: NAME or --board NAME); its GPIOs reach the carrier, not a 40-pin header")
        case .noMatch:
            status = 1
            out.append(
                "verdict: no board matches (known boards: \(boards.map(\.name).joined(separator: ", "))); name one (board: NAME or --board NAME)")
        }
        let err = problems.map(\.description)
        return CommandOutput(
            stdout: out.joined(separator: "\n") + "\n", stderr: err.isEmpty ? "" : err.joined(separator: "\n") + "\n",
            status: status)
    }
}
