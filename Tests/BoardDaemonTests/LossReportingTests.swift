import BoardloopGPIOMock
import BoardloopTestSupport
import Logging
import XCTest

@testable import BoardDaemon

/// Lost events on libgpiod 1.6 (mock chips with the v1 event model: no
/// sequence numbers, a 16-event FIFO per line that drops newer edges): the
/// count is a lower bound and says so, a full FIFO always shows in the
/// summary, and the line's level is read again after it.
final class LossReportingTests: XCTestCase {
    static let config = """
        board: demo
        lines:
          contact: { pin: CHATTER, input: { edge: both } }
          led: { pin: LED, output: {} }
        reactions:
          - { name: p, on: { line: contact, press: true }, do: [ toggle: led ] }

        """

    func harness() throws -> (Harness, Locked<String>) {
        let log = Locked("")
        var logger = Logger(label: "t") { l in CollectingHandler(label: l, into: log) }
        logger.logLevel = .info
        return (try Harness(Self.config, eventModel: .v1, logger: logger), log)
    }

    func contact(_ h: Harness) throws -> InputLine {
        let i = h.daemon.config.lines.firstIndex { $0.name == "contact" }!
        return try XCTUnwrap(h.daemon.main.inputs[i])
    }

    func summary(_ h: Harness, _ log: Locked<String>) -> [Substring] {
        log.withLock { $0 = "" }
        h.daemon.main.logSummary()
        return log.withLock { $0 }.split(separator: "\n").filter { $0.hasPrefix("line contact:") }
    }

    /// A flood of 17 edges from on: the FIFO keeps the first 16 (the last
    /// kept is rising), the pin ends low. The level is read again: the
    /// daemon's level follows the pin, and the next press fires.
    func testAfterAFullFIFOTheLevelIsReadAgainAndTheLossIsALowerBound() throws {
        let (h, log) = try harness()
        try h.setLevel("CHATTER", true)
        XCTAssertEqual(h.fires("p"), 1)
        try h.chip.burst(.offset(23), edges: 17, spacing: .microseconds(10))
        try h.daemon.settle()
        XCTAssertEqual(h.fires("p"), 9, "8 rising edges among the 16 kept")
        XCTAssertFalse(try h.chip.level(.offset(23)), "the pin ended low")
        XCTAssertFalse(try contact(h).level, "the daemon's level is the pin's, read again after the full FIFO")
        let warnings = log.withLock { $0 }.split(separator: "\n").filter { $0.hasPrefix("contact:") && $0.contains("FIFO") }
        XCTAssertEqual(warnings.count, 1, log.withLock { $0 })
        let w = String(warnings.first ?? "")
        XCTAssertTrue(w.contains("at least 1") && w.contains("libgpiod 1.6 cannot count"), w)
        XCTAssertFalse(w.contains("sequence numbers"), w)
        // The next press is seen.
        try h.advance(10)
        try h.setLevel("CHATTER", true)
        XCTAssertEqual(h.fires("p"), 10, "the press after the flood fires")
        let s = summary(h, log)
        XCTAssertEqual(s.count, 1, log.withLock { $0 })
        XCTAssertTrue(s.first?.contains("at least 1 lost (libgpiod 1.6 cannot count)") == true, "\(s)")
        XCTAssertTrue(s.first?.contains("1 full FIFO") == true, "\(s)")
    }

    /// A flood of 18 edges from on: the pin ends where the kept edges left
    /// it, so nothing can be inferred lost — but the FIFO was full, and the
    /// summary says so.
    func testAFullFIFOShowsInTheSummaryEvenWhenNothingCouldBeCounted() throws {
        let (h, log) = try harness()
        try h.setLevel("CHATTER", true)
        try h.chip.burst(.offset(23), edges: 18, spacing: .microseconds(10))
        try h.daemon.settle()
        XCTAssertEqual(h.counters.lines["contact"]?.suspectedOverflows, 1)
        XCTAssertEqual(h.counters.lines["contact"]?.lost, 0)
        XCTAssertTrue(try contact(h).level)
        let s = summary(h, log)
        XCTAssertEqual(s.count, 1, "the line's summary line: \(log.withLock { $0 })")
        XCTAssertTrue(s.first?.contains("1 full FIFO") == true, "\(s)")
        XCTAssertTrue(s.first?.contains("at least 0 lost") == true, "\(s)")
    }

    /// On v2 (sequence numbers) the count is exact, and says so.
    func testOnV2TheLossIsCountedExactly() throws {
        let log = Locked("")
        var logger = Logger(label: "t") { l in CollectingHandler(label: l, into: log) }
        logger.logLevel = .info
        // A kernel buffer of 16 (the mock keeps what the request asks for).
        let h = try Harness(Self.config.replacingOccurrences(of: "edge: both }", with: "edge: both, buffer: 16 }"), logger: logger)
        try h.chip.burst(.offset(23), edges: 20, spacing: .microseconds(10))
        try h.daemon.settle()
        let warnings = log.withLock { $0 }.split(separator: "\n").filter { $0.hasPrefix("contact:") && $0.contains("dropped") }
        XCTAssertEqual(warnings.count, 1, log.withLock { $0 })
        XCTAssertTrue(warnings.first?.contains("dropped 4 event(s)") == true, "\(warnings)")
        XCTAssertTrue(warnings.first?.contains("counted from sequence numbers") == true, "\(warnings)")
        let s = summary(h, log)
        XCTAssertTrue(s.first?.contains(", 4 lost") == true, "\(s)")
    }
}
