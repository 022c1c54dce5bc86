import BoardDaemon
import BoardloopTestSupport
import Foundation
import Glibc
import XCTest

/// boardd's log never holds a loop: lines go through the log writer's
/// thread, and repeated messages are rate-limited per source.
final class LogWriterTests: XCTestCase {
    /// A task on the main loop logs long lines every millisecond from five
    /// `log:` actions (five sources, so the rate limit leaves ~400 KB to
    /// write), and boardd's stderr is a pipe nobody reads: it fills within
    /// the first second. boardd still stops at the end of `--for 2s` and
    /// exits 0 within a bound (a loop that wrote its log itself would block
    /// in `write` and never stop).
    func testAStderrNobodyReadsDoesNotHoldTheLoopsOrTheExit() throws {
        let long = String(repeating: "x", count: 400)
        let file = try ConfigFile(
            """
            board: demo
            lines:
              led: { pin: LED, output: {} }
            tasks:
              spam:
                every: 1ms
                do: [ toggle: led, log: "a \(long)", log: "b \(long)", log: "c \(long)", log: "d \(long)", log: "e \(long)" ]

            """)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Boardd.path)
        p.arguments = ["--config", file.path, "--for", "2s"]
        var env = Boardd.environment()
        env.removeValue(forKey: "NOTIFY_SOCKET")
        env.removeValue(forKey: "JOURNAL_STREAM")
        if TestBuild.addressSanitized {
            // The writer is left blocked on purpose and what it still holds
            // goes with the process; LeakSanitizer would write its report of
            // that into the very pipe nobody reads, and block there.
            env["LSAN_OPTIONS"] = "detect_leaks=0"
        }
        p.environment = env
        defer { Boardd.removeRuntimeDirectory(env) }
        let unread = Pipe()  // never read
        p.standardError = unread
        p.standardOutput = FileHandle.nullDevice
        let start = Date()
        try p.run()
        let end = start.addingTimeInterval(15)
        while p.isRunning && Date() < end { usleep(20_000) }
        let running = p.isRunning
        if running {
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
        }
        XCTAssertFalse(running, "boardd did not exit within 15 s of a 2 s run with its stderr unread")
        if !running {
            XCTAssertEqual(p.terminationStatus, 0)
            XCTAssertEqual(p.terminationReason, .exit)
        }
        _ = unread  // kept open (unread) until here
    }

    /// A task logs every millisecond for 2 s (2,000 messages from one
    /// source): at most `burst` of them are written, then one line says how
    /// many were suppressed (at the stop, the window being 5 s).
    func testRepeatedMessagesAreRateLimitedPerSourceWithASummary() throws {
        let file = try ConfigFile(
            """
            board: demo
            lines:
              led: { pin: LED, output: {} }
            tasks:
              chatty: { every: 1ms, do: [ log: "tick" ] }

            """)
        let p = try Spawned(["--config", file.path, "--for", "2s"])
        XCTAssertEqual(p.exitStatus(seconds: 30), 0, p.log)
        let lines = p.log.split(separator: "\n")
        let ticks = lines.filter { $0.hasSuffix(" tick") }.count
        let burst = LogWriter.RateLimit().burst
        XCTAssertGreaterThan(ticks, 0, p.log)
        XCTAssertLessThanOrEqual(ticks, burst, "at most \(burst) lines of one source in its window")
        let summary = lines.first { $0.contains("log \"tick\": suppressed ") && $0.contains(" messages") }
        XCTAssertNotNil(summary, "a summary of the suppressed lines:\n\(lines.suffix(20).joined(separator: "\n"))")
        if let summary, let n = Int(summary.split(separator: "suppressed ")[1].split(separator: " ")[0]) {
            XCTAssertGreaterThan(n, 1000, "2,000 ticks less at most \(burst) written: \(summary)")
            XCTAssertLessThanOrEqual(n + ticks, 2_100, summary.description)
        }
        XCTAssertTrue(p.log.contains("stopped: 1 outputs at their safe values") || p.log.contains("stopped: 0 outputs"), p.log)
    }

    /// `log: { rate_limit: … }` raises the limit, and `rate_limit: off`
    /// lifts it: a task logging every millisecond for 2 s gets more than
    /// the default's 200 lines written, and nothing is reported suppressed.
    func testTheRateLimitIsTheConfigs() throws {
        for block in ["log: { rate_limit: { lines: 100000, per: 1h } }", "log: { rate_limit: off }"] {
            let file = try ConfigFile(
                """
                board: demo
                \(block)
                lines:
                  led: { pin: LED, output: {} }
                tasks:
                  chatty: { every: 1ms, do: [ log: "tick" ] }

                """)
            let p = try Spawned(["--config", file.path, "--for", "2s"])
            XCTAssertEqual(p.exitStatus(seconds: 30), 0, p.log)
            let lines = p.log.split(separator: "\n")
            let ticks = lines.filter { $0.hasSuffix(" tick") }.count
            // The stop's summary says how often the task ran: each run's line
            // is in the log.
            let summary = lines.first { $0.contains("task chatty: ") && $0.contains(" runs (") }.map(String.init) ?? ""
            let runs = Int(summary.components(separatedBy: "task chatty: ").last?.split(separator: " ").first ?? "")
            XCTAssertEqual(ticks, runs, "\(block): \(ticks) ticks written; \(summary)")
            XCTAssertGreaterThan(ticks, 5 * LogWriter.RateLimit().burst, "\(block): \(ticks) ticks written; \(summary)")
            XCTAssertFalse(p.log.contains("suppressed"), "\(block): nothing suppressed:\n\(lines.suffix(10).joined(separator: "\n"))")
        }
    }

    /// A reload that changes `log:` changes the writer's limit; the stop
    /// gives the writer its own back.
    func testAReloadChangesTheRateLimit() throws {
        let file = try ConfigFile("board: demo\nlines:\n  led: { pin: LED, output: {} }\n")
        let h = try Harness(path: file.path)
        XCTAssertEqual(LogWriter.shared.rateLimit, LogWriter.RateLimit())
        try file.write("board: demo\nlog: { rate_limit: { lines: 20, per: 2s } }\nlines:\n  led: { pin: LED, output: {} }\n")
        XCTAssertTrue(h.daemon.reload().applied)
        XCTAssertEqual(LogWriter.shared.rateLimit, LogWriter.RateLimit(burst: 20, interval: .seconds(2)))
        try file.write("board: demo\nlog: { rate_limit: off }\nlines:\n  led: { pin: LED, output: {} }\n")
        XCTAssertTrue(h.daemon.reload().applied)
        XCTAssertNil(LogWriter.shared.rateLimit)
        h.daemon.shutdown()
        XCTAssertEqual(LogWriter.shared.rateLimit, LogWriter.RateLimit())
    }
}
