import BoardloopTestSupport
import Glibc
import Logging
import XCTest

@testable import BoardDaemon

/// The log's level and rate limit decide before a trace record is
/// described: a record whose line is not written costs the log writer a
/// counter, no formatting and no allocation.
final class LogAdmissionTests: XCTestCase {
    private var pipeFDs: [Int32] = []

    static let yaml = """
        board: demo
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true } }
          led: { pin: LED, output: {} }
        reactions:
          - { name: toggle, on: { line: button, edge: both }, do: [ toggle: led ] }
        """

    /// A trace log whose lines go through `writer` (boardd's own handler at
    /// `level`), and the pipe the writer writes to.
    private func traceLog(level: Logger.Level, limit: LogWriter.RateLimit?) throws -> (TraceLog, LogWriter, read: Int32, TraceRecord) {
        defer { addTeardownBlock { [pipeFDs] in for f in pipeFDs { close(f) } } }
        let loaded = ConfigLoader.load(text: Self.yaml, file: "admission.yaml")
        let config = try XCTUnwrap(loaded.config, "\(loaded.errors)")
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(pipe(&fds), 0)
        pipeFDs = fds
        _ = fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK)
        let writer = LogWriter(fd: fds[1], rateLimit: limit)
        var logger = Logger(label: "test") { l in BoarddLogHandler(label: l, level: level, journal: true, writer: writer) }
        logger.logLevel = level
        let program = Program(config: config, generation: 1)
        let log = TraceLog(loops: 1, program: program, logger: logger, writer: writer)
        let button = Int32(try XCTUnwrap(config.line(named: "button")).index)
        return (log, writer, fds[0], TraceRecord(kind: .reaction, line: button, index: 0, repeatCount: 0, generation: 1))
    }

    private func lines(_ fd: Int32) -> [String] {
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(fd, &buf, buf.count)
            if n <= 0 { break }
            out += buf[0..<n]
        }
        return String(decoding: out, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    func testSuppressedReactionRecordsAreCountedNotFormatted() throws {
        try XCTSkipUnless(AllocationCounter.isActive, "malloc interposer not linked (ThreadSanitizer build)")
        let (log, writer, fd, record) = try traceLog(level: .info, limit: .init(burst: 3, interval: .seconds(3600)))
        // The window's three lines, formatted and written.
        for _ in 0..<3 { log.rings[0].push(record) }
        log.drain()
        for _ in 0..<1000 { log.rings[0].push(record) }
        let m = AllocationCounter.measure { log.drain() }
        XCTAssertEqual(m.allocations, 0, "1,000 suppressed records: \(m.allocations) allocations (\(m.bytes) bytes)")
        XCTAssertEqual(writer.suppressed("reaction toggle"), 1000, "each suppressed record counted")
        let written = lines(fd)
        XCTAssertEqual(written, Array(repeating: "<6>button: both edge -> toggle", count: 3))
    }

    /// Below the log level: not written, not counted as suppressed (the
    /// level is not the rate limit), not formatted.
    func testRecordsBelowTheLevelAreNotFormatted() throws {
        try XCTSkipUnless(AllocationCounter.isActive, "malloc interposer not linked (ThreadSanitizer build)")
        let (log, writer, fd, record) = try traceLog(level: .notice, limit: .init())
        log.rings[0].push(record)
        log.drain()
        for _ in 0..<1000 { log.rings[0].push(record) }
        let e = AllocationCounter.measure { log.drain() }
        XCTAssertEqual(e.allocations, 0, "an empty drain")
        for _ in 0..<1000 { log.rings[0].push(record) }
        let m = AllocationCounter.measure { log.drain() }
        XCTAssertEqual(m.allocations, 0, "1,000 records below the level: \(m.allocations) allocations")
        XCTAssertEqual(writer.suppressed("reaction toggle"), 0)
        XCTAssertEqual(lines(fd), [])
    }

    /// With the rate limit off every line is written.
    func testNoRateLimitWritesEveryLine() throws {
        let (log, writer, fd, record) = try traceLog(level: .info, limit: nil)
        for _ in 0..<500 { log.rings[0].push(record) }
        log.drain()
        XCTAssertEqual(lines(fd).count, 500)
        XCTAssertEqual(writer.suppressed("reaction toggle"), 0)
    }

    /// Another handler (the tests' capturing one) gets every record at its
    /// level, as before: the rate limit is boardd's writer's.
    func testAnotherHandlerGetsEveryRecord() throws {
        let loaded = ConfigLoader.load(text: Self.yaml, file: "admission.yaml")
        let config = try XCTUnwrap(loaded.config)
        let text = Locked("")
        var logger = Logger(label: "test") { _ in CapturingLogHandler(text: text, level: .info) }
        logger.logLevel = .info
        let writer = LogWriter(fd: -1, rateLimit: .init(burst: 1, interval: .seconds(3600)))
        let log = TraceLog(loops: 1, program: Program(config: config, generation: 1), logger: logger, writer: writer)
        for _ in 0..<10 { log.rings[0].push(TraceRecord(kind: .reaction, line: 0, index: 0, repeatCount: 0, generation: 1)) }
        log.drain()
        let got = text.withLock { $0 }
        XCTAssertEqual(got.split(separator: "\n").filter { $0.hasSuffix("both edge -> toggle") }.count, 10, got)
    }

    /// A `log:` action whose lines the rate limit suppresses costs its loop
    /// no allocation: the level and the limit are asked before the line is
    /// made (boardd's own handler, the shared writer).
    func testASuppressedLogActionAllocatesNothingOnItsLoop() throws {
        try XCTSkipUnless(AllocationCounter.isActive, "malloc interposer not linked (ThreadSanitizer build)")
        var logger = Logger(label: "test") { l in BoarddLogHandler(label: l, level: .notice, journal: true) }
        logger.logLevel = .notice
        let h = try Harness(
            """
            board: demo
            log: { rate_limit: { lines: 1, per: 1h } }
            lines:
              button: { pin: BUTTON, input: { edge: both, active_low: true } }
              led: { pin: LED, output: {} }
            reactions:
              - { name: chatter, on: { line: button, edge: both }, do: [ toggle: led, log: { message: "button moved", level: notice } ] }
            """, logger: logger)
        let loop = h.daemon.loop
        var level = false
        func edge() throws {
            level.toggle()
            try h.chip.setLevel(17, level)
            _ = try loop.run(mode: .default, timeout: .zero)
        }
        for _ in 0..<10 { try edge() }  // the one line of the window, written
        let before = LogWriter.shared.suppressed("log \"button moved\"")
        let fired = h.fires("chatter")
        let m = try AllocationCounter.measure { () throws in for _ in 0..<1000 { try edge() } }
        XCTAssertEqual(h.fires("chatter") - fired, 1000)
        XCTAssertEqual(m.allocations, 0, "1,000 suppressed log lines: \(m.allocations) allocations (\(m.bytes) bytes)")
        XCTAssertEqual(LogWriter.shared.suppressed("log \"button moved\"") - before, 1000, "each suppressed line counted")
        h.daemon.shutdown()
    }
}
