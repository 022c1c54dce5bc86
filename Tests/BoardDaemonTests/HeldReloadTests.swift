import BoardDaemon
import Foundation
import XCTest

/// A reload during a hold loses no held event without a count: a line
/// whose request is kept keeps its held ring (delivered in order when the
/// hold ends), a line requested again with the same settings carries it
/// into its new request, and one whose settings changed counts every held
/// event it drops as lost and says so.
final class HeldReloadTests: XCTestCase {
    /// A flow sensor chattering at 4 kHz on a low-priority line, held
    /// through a 150 ms pour in the critical mode; a 10 ms task there
    /// drains it into its ring as the edges come.
    static func config(drain: Int = 1200, text: String = "button released", extra: String = "") -> String {
        """
        board: demo
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true }, priority: low }
          flow: { pin: CHATTER, input: { edge: both, max_rate: 4kHz, drain: \(drain)\(extra) }, priority: low }
          led: { pin: LED, output: { safe: off } }
          valve: { pin: VALVE, output: { safe: off } }
          fan: { pin: FAN, output: {} }
        modes:
          critical: { admits: [high] }
        tasks:
          tick: { every: 10ms, in_modes: [critical], do: [ toggle: fan ] }
        sequences:
          pour:
            mode: critical
            steps: [ set: { valve: on }, wait: 150ms, set: { valve: off } ]
        reactions:
          - { name: start, on: { line: button, press: true }, do: [ sequence: pour ] }
          - { name: note, on: { line: button, release: true }, do: [ log: "\(text)" ] }
          - { name: count, on: { line: flow, edge: both }, do: [ toggle: led ] }

        """
    }

    /// 600 edges at 4 kHz through the pour, the file rewritten to `next`
    /// and reloaded 40 ms in (after 160 edges); returns the harness after
    /// the pour.
    func pour(reloadingTo next: String) throws -> Harness {
        let file = try ConfigFile(Self.config())
        let h = try Harness(path: file.path)
        try h.press()
        XCTAssertEqual(h.daemon.mainMode, "critical")
        var level = false
        for i in 0..<600 {
            if i == 160 {
                try file.write(next)
                let outcome = h.daemon.reload()
                XCTAssertTrue(outcome.applied, "\(outcome.errors)\n\(h.log)")
                XCTAssertEqual(h.daemon.mainMode, "critical", "the pour goes on under the new config")
            }
            level.toggle()
            try h.chip.setLevel(.offset(23), level)
            if i == 599 { XCTAssertEqual(h.fires("count"), 0, "held: nothing dispatched during the pour") }
            try h.daemon.advance(by: .microseconds(250), step: .microseconds(250))
        }
        try h.advance(2)
        XCTAssertEqual(h.daemon.mainMode, "default")
        XCTAssertEqual(try h.writes("VALVE"), [true, false], "the valve opened and closed once")
        try h.advance(1)
        return h
    }

    func testAReloadOfAnIdenticalFileMidHoldDeliversEveryHeldEdge() throws {
        let h = try pour(reloadingTo: Self.config())
        XCTAssertEqual(h.fires("count"), 600, "every edge, held before and after the reload, delivered in order")
        XCTAssertEqual(h.counters.lines["flow"]?.lost, 0)
        XCTAssertEqual(h.counters.lines["flow"]?.events, 600)
    }

    func testAReloadThatChangesAnotherPartKeepsTheHeldRing() throws {
        let h = try pour(reloadingTo: Self.config(text: "button let go"))
        XCTAssertTrue(h.log.contains("sequence pour: goes on under the new config"), h.log)
        XCTAssertEqual(h.fires("count"), 600, "the 160 edges held before the reload are delivered too, first")
        XCTAssertEqual(h.counters.lines["flow"]?.lost, 0)
        XCTAssertEqual(h.counters.lines["flow"]?.heldInRing, 600, "held is counted since the start, not since the reload")
        XCTAssertEqual(h.counters.lines["flow"]?.events, 600)
    }

    /// A new `drain` makes the line's request anew; its settings are the
    /// same, so what it held goes into the new ring and nothing is lost.
    func testAReloadThatChangesOnlyTheDrainCarriesTheHeldEdges() throws {
        let h = try pour(reloadingTo: Self.config(drain: 2000))
        XCTAssertEqual(h.counters.lines["flow"]?.lost, 0, h.log)
        XCTAssertEqual(h.fires("count"), 600, "every edge delivered in order")
    }

    /// A ring made smaller than what it holds keeps the oldest and counts
    /// the rest as lost, with a warning.
    func testARingMadeTooSmallByAReloadCountsWhatItDrops() throws {
        let h = try pour(reloadingTo: Self.config(drain: 100))
        let lost = try XCTUnwrap(h.counters.lines["flow"]?.lost)
        let fires = h.fires("count")
        XCTAssertEqual(fires + lost, 600, "every edge delivered or counted as lost: \(fires) + \(lost)\n\(h.log)")
        XCTAssertGreaterThanOrEqual(lost, 60, "the 160 held edges do not fit a ring of 100")
        XCTAssertTrue(h.log.contains("flow: 60 held events dropped by the reload"), h.log)
    }

    /// New settings (a bias) make a new request whose edges the held ones
    /// cannot be put before: each is counted as lost, and the log says so.
    func testAReloadThatChangesTheLinesSettingsCountsTheHeldEdgesAsLost() throws {
        let h = try pour(reloadingTo: Self.config(extra: ", bias: pull-down"))
        let lost = try XCTUnwrap(h.counters.lines["flow"]?.lost)
        XCTAssertGreaterThanOrEqual(lost, 150, "the edges held before the reload: \(lost)\n\(h.log)")
        XCTAssertTrue(h.log.contains("held events dropped by the reload"), h.log)
    }

    /// Every hold whose ring overflows says so, not only the first since
    /// the start (the log's rate limit bounds the repeats).
    func testEachHoldThatOverflowsItsRingIsLogged() throws {
        let h = try Harness(Self.config(drain: 100), level: .warning)
        for _ in 0..<2 {
            try h.press()
            try h.press(false)
            var level = false
            for _ in 0..<400 {
                level.toggle()
                try h.chip.setLevel(.offset(23), level)
                try h.daemon.advance(by: .microseconds(250), step: .microseconds(250))
            }
            try h.advance(100)
            XCTAssertEqual(h.daemon.mainMode, "default")
        }
        let lost = try XCTUnwrap(h.counters.lines["flow"]?.lost)
        XCTAssertEqual(lost + h.fires("count"), 800, "every edge delivered or counted")
        let warnings = h.log.components(separatedBy: "held-event ring full").count - 1
        XCTAssertEqual(warnings, 2, "one warning per hold that lost events:\n\(h.log)")
    }
}
