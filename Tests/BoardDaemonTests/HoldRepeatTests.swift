import BoardDaemon
import BoardloopTestSupport
import Foundation
import Glibc
import Logging
import XCTest

/// Holds that repeat: the gesture group's hold with `repeat:`, and the count
/// of the repeat passed to the actions (`{repeat}` in a log message,
/// `BOARDD_REPEAT` in a command's environment).
final class HoldRepeatTests: XCTestCase {
    static let gestureLines = """
        board: demo
        lines:
          button:
            pin: BUTTON
            input: { edge: both, active_low: true }
            gestures: { one_of: [click, double_click, hold], gap: 250ms, hold: 800ms }
          led: { pin: LED, output: {} }

        """

    /// A logger that keeps the message of every line at info and above.
    static func collecting() -> (Logger, Locked<String>) {
        let log = Locked("")
        var logger = Logger(label: "t") { l in CollectingHandler(label: l, into: log) }
        logger.logLevel = .info
        return (logger, log)
    }

    func testGestureHoldRepeatsWhileHeldWithItsCountAndNoClick() throws {
        let (logger, log) = Self.collecting()
        let h = try Harness(
            Self.gestureLines + """
                reactions:
                  - { name: h, on: { line: button, gesture: hold, repeat: 300ms }, do: [ log: "held, repeat {repeat}" ] }
                  - { name: c, on: { line: button, gesture: click }, do: [ toggle: led ] }
                  - { name: d, on: { line: button, gesture: double_click }, do: [ toggle: led ] }
                """, logger: logger)
        try h.press()
        try h.advance(799)
        XCTAssertEqual(h.fires("h"), 0)
        try h.advance(1)
        XCTAssertEqual(h.fires("h"), 1, "at the hold")
        try h.advance(299)
        XCTAssertEqual(h.fires("h"), 1)
        try h.advance(1)
        XCTAssertEqual(h.fires("h"), 2, "at hold + repeat")
        try h.advance(300)
        XCTAssertEqual(h.fires("h"), 3, "at hold + 2 repeats")
        try h.advance(150)
        try h.press(false)
        try h.advance(2000)
        XCTAssertEqual(h.fires("h"), 3, "a release stops the repeats")
        XCTAssertEqual([h.fires("c"), h.fires("d")], [0, 0], "a hold's release is no click")
        let held = log.withLock { $0 }.split(separator: "\n").filter { $0.hasPrefix("held, repeat ") }
        XCTAssertEqual(held, ["held, repeat 0", "held, repeat 1", "held, repeat 2"], "the count: 0 at the hold, then 1, 2, …")
        // The next interaction starts afresh: a click is a click, a new hold counts from 0.
        try h.click(hold: 100)
        try h.advance(300)
        XCTAssertEqual([h.fires("c"), h.fires("h")], [1, 3])
        try h.press()
        try h.advance(1100)
        try h.press(false)
        try h.advance(1000)
        XCTAssertEqual([h.fires("c"), h.fires("d"), h.fires("h")], [1, 0, 5])
        let again = log.withLock { $0 }.split(separator: "\n").filter { $0.hasPrefix("held, repeat ") }
        XCTAssertEqual(again.suffix(2), ["held, repeat 0", "held, repeat 1"])
    }

    func testAGestureHoldWithoutRepeatFiresOnce() throws {
        let h = try Harness(
            Self.gestureLines + """
                reactions:
                  - { name: h, on: { line: button, gesture: hold }, do: [ toggle: led ] }
                """)
        try h.press()
        try h.advance(5000)
        try h.press(false)
        XCTAssertEqual(h.fires("h"), 1)
    }

    /// The count reaches commands as BOARDD_REPEAT, from a gesture hold and
    /// from a plain hold trigger.
    func testTheRepeatCountReachesCommandsAsBOARDD_REPEAT() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("boardd-repeat-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let g = dir.appendingPathComponent("gesture").path
        let p = dir.appendingPathComponent("plain").path
        let h = try Harness(
            """
            board: demo
            lines:
              button:
                pin: BUTTON
                input: { edge: both, active_low: true }
                gestures: { one_of: [click, hold], hold: 800ms }
              chatter: { pin: CHATTER, input: { edge: both } }
            commands:
              g: { argv: ["/bin/sh", "-c", "echo \\"r=${BOARDD_REPEAT-unset}\\" >> \(g)"], max_running: 8 }
              p: { argv: ["/bin/sh", "-c", "echo \\"r=${BOARDD_REPEAT-unset}\\" >> \(p)"], max_running: 8 }
            reactions:
              - { name: gh, on: { line: button, gesture: hold, repeat: 200ms }, do: [ run: g ] }
              - { name: ph, on: { line: chatter, hold: { delay: 500ms, repeat: 100ms } }, do: [ run: p ] }
              - { name: pp, on: { line: chatter, press: true }, do: [ run: p ] }
            """)
        try h.press()
        try h.setLevel("CHATTER", true)
        try h.advance(1200)  // gesture: 0.8, 1.0, 1.2 s; plain: 0.5 … 1.2 s every 100 ms (8)
        try h.press(false)
        try h.setLevel("CHATTER", false)
        XCTAssertEqual(h.fires("gh"), 3)
        XCTAssertEqual(h.fires("ph"), 8)
        func lines(_ path: String, _ n: Int) throws -> [String] {
            let end = Date().addingTimeInterval(20)
            var got: [String] = []
            while Date() < end {
                try h.daemon.settle()  // the children's pidfds and pipes are sources of the main loop
                got = ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
                if got.count >= n { break }
                usleep(5000)
            }
            return got
        }
        // Children may finish in any order: compare as sets.
        XCTAssertEqual(Set(try lines(g, 3)), ["r=0", "r=1", "r=2"])
        XCTAssertEqual(Set(try lines(p, 9)), Set(["r=unset"] + (0..<8).map { "r=\($0)" }), "a press has no repeat count")
    }
}
