import Foundation
import Testing

@testable import BoardDaemon

/// The figures docs/daemon.md and docs/config.md state about the daemon's
/// fixed sizes and periods are the code's: each phrase is made from the
/// constant it states, so changing one without the other fails here.
@Suite struct DocFiguresTests {
    static func page(_ name: String) throws -> String {
        try String(contentsOfFile: Fixtures.packageRoot + "/docs/" + name, encoding: .utf8)
    }

    /// The page's text with line breaks and indentation as single spaces
    /// (a phrase may wrap).
    static func flat(_ name: String) throws -> String {
        try page(name).split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }

    static func kib(_ bytes: Int) -> String { "\(bytes / 1024) KiB" }

    @Test func daemonMdStatesTheCodesFigures() throws {
        let text = try Self.flat("daemon.md")
        let writer = LogWriter.shared
        let phrases = [
            "at most \(InputLine.lowPriorityBatch) events per dispatch",
            "at most \(Self.kib(CommandRunner.readBudget)) is read from a stream per pass",
            "(\(CommandRunner.maxLineBytes) bytes a line, \(CommandRunner.maxLines) lines a stream a run;",
            "up to \(Self.kib(CommandRunner.drainBudget)) a stream, is read first",
            "a fixed-size ring (\(TraceLog.ringCapacity) records",
            "its trace ring of \(TraceLog.ringCapacity) records",
            "the programs of the last \(TraceLog.generationsKept) generations",
            "(at most \(writer.queueCapacity) lines; never waiting on stderr)",
            "A busy writer drains every \(LogWriter.busyPollMilliseconds) ms",
            "it looks again every \(LogWriter.napMilliseconds) ms by itself) for \(LogWriter.napAfterTraces / 1_000_000_000) s after",
            "at most \(LogWriter.RateLimit().burst) lines per \(LogWriter.RateLimit().interval.components.seconds) s",
        ]
        for p in phrases { #expect(text.contains(p), "docs/daemon.md lacks: \(p)") }
    }

    @Test func configMdStatesTheCodesFigures() throws {
        let text = try Self.flat("config.md")
        let phrases = [
            "handles at most \(InputLine.lowPriorityBatch) events per dispatch",
            "at most \(Self.kib(CommandRunner.readBudget)) a stream per pass, and logs the first \(CommandRunner.maxLines) lines of each (cut at \(CommandRunner.maxLineBytes) bytes)",
            "more than \(ConfigParser.maxModes) modes on a loop, or more than \(ConfigParser.maxLinesPerRequest) lines of one chip on one loop",
            "A run loop has at most \(ConfigParser.maxModes) modes (the default included)",
            "| `every` | duration, at least `\(ConfigParser.minimumTaskPeriod.components.attoseconds / 1_000_000_000_000)us` |",
        ]
        for p in phrases { #expect(text.contains(p), "docs/config.md lacks: \(p)") }
    }

    /// The check can fail: a figure the page does not state is not found.
    @Test func aWrongFigureIsNotFound() throws {
        let text = try Self.flat("daemon.md")
        #expect(text.contains("a fixed-size ring (\(TraceLog.ringCapacity) records"))
        #expect(!text.contains("a fixed-size ring (\(TraceLog.ringCapacity + 1) records"))
    }
}
