import Boardloop
import BoardDaemon
import XCTest

/// Every trigger on the engine's manual clock: no sleeping, exact times.
final class TriggerTests: XCTestCase {
    static let lines = """
        board: demo
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true } }
          led: { pin: LED, output: {} }
          fan: { pin: FAN, output: {} }
          valve: { pin: VALVE, output: {} }
        """

    func testPressAndReleaseRespectActiveLow() throws {
        let h = try Harness(Self.lines + """

            reactions:
              - { name: p, on: { line: button, press: true }, do: [ set: { led: on } ] }
              - { name: r, on: { line: button, release: true }, do: [ set: { led: off } ] }
              - { name: e, on: { line: button, edge: rising }, do: [ toggle: fan ] }
            """)
        try h.press()
        XCTAssertEqual(h.fires("p"), 1)
        XCTAssertEqual(h.fires("r"), 0)
        XCTAssertEqual(h.fires("e"), 1, "a logical rising edge is a press of an active-low button (a falling wire)")
        try h.press(false)
        XCTAssertEqual(h.fires("r"), 1)
        XCTAssertEqual(try h.writes("LED"), [true, false])
        XCTAssertEqual(try h.writes("FAN"), [true])
    }

    func testClickMinAndMax() throws {
        let h = try Harness(Self.lines + """

            reactions:
              - { name: c, on: { line: button, click: { min: 50ms, max: 350ms } }, do: [ toggle: led ] }
            """)
        try h.click(hold: 20)  // too short
        try h.advance(100)
        try h.click(hold: 400)  // too long
        try h.advance(100)
        XCTAssertEqual(h.fires("c"), 0)
        try h.click(hold: 50)  // exactly min
        try h.advance(100)
        try h.click(hold: 350)  // exactly max
        XCTAssertEqual(h.fires("c"), 2)
    }

    func testHoldWithRepeatAndReleaseDuringHold() throws {
        let h = try Harness(Self.lines + """

            reactions:
              - { name: h, on: { line: button, hold: { delay: 1s, repeat: 200ms } }, do: [ toggle: fan ] }
            """)
        try h.press()
        try h.advance(999)
        XCTAssertEqual(h.fires("h"), 0)
        try h.advance(1)
        XCTAssertEqual(h.fires("h"), 1, "at exactly the delay")
        try h.advance(450)  // 1.2 s and 1.4 s
        XCTAssertEqual(h.fires("h"), 3)
        try h.press(false)
        try h.advance(2000)
        XCTAssertEqual(h.fires("h"), 3, "a release stops the repeats")
        // A release before the delay: nothing.
        try h.press()
        try h.advance(600)
        try h.press(false)
        try h.advance(2000)
        XCTAssertEqual(h.fires("h"), 3)
    }

    func testMultiPressWindowAndAThirdPressOutsideIt() throws {
        let h = try Harness(Self.lines + """

            reactions:
              - { name: m, on: { line: button, multi_press: { count: 3, within: 1s } }, do: [ toggle: valve ] }
            """)
        try h.click(hold: 50)  // t = 0
        try h.advance(250)
        try h.click(hold: 50)  // t = 0.3
        try h.advance(850)
        try h.click(hold: 50)  // t = 1.2: outside the window of the first; a new count starts
        XCTAssertEqual(h.fires("m"), 0)
        try h.advance(150)
        try h.click(hold: 50)  // 1.4
        try h.advance(150)
        try h.click(hold: 50)  // 1.6: third within 1 s of 1.2
        XCTAssertEqual(h.fires("m"), 1)
        try h.advance(100)
        try h.click(hold: 50)  // a fresh count after firing
        XCTAssertEqual(h.fires("m"), 1)
    }

    func testGestureGroupFiresExactlyOneAlternative() throws {
        let h = try Harness("""
            board: demo
            lines:
              button:
                pin: BUTTON
                input: { edge: both, active_low: true }
                gestures: { one_of: [click, double_click, hold], gap: 250ms, hold: 800ms }
              led: { pin: LED, output: {} }
            reactions:
              - { name: c, on: { line: button, gesture: click }, do: [ toggle: led ] }
              - { name: d, on: { line: button, gesture: double_click }, do: [ toggle: led ] }
              - { name: h, on: { line: button, gesture: hold }, do: [ toggle: led ] }
            """)
        // A click is decided `gap` after its release (a double click could follow).
        try h.click(hold: 100)
        try h.advance(249)
        XCTAssertEqual(h.fires("c"), 0)
        try h.advance(1)
        XCTAssertEqual(h.fires("c"), 1)
        // A double click: no click fires for its first press.
        try h.advance(500)
        try h.click(hold: 100)
        try h.advance(150)
        try h.click(hold: 100)
        XCTAssertEqual(h.fires("d"), 1, "the longest click in the group fires at its last release")
        try h.advance(1000)
        XCTAssertEqual(h.fires("c"), 1)
        // A hold: decided while pressed; no click at release.
        try h.press()
        try h.advance(800)
        XCTAssertEqual(h.fires("h"), 1)
        try h.advance(500)
        try h.press(false)
        try h.advance(1000)
        XCTAssertEqual([h.fires("c"), h.fires("d"), h.fires("h")], [1, 1, 1])
        // A press between click_max and hold is no gesture.
        try h.click(hold: 500)
        try h.advance(1000)
        XCTAssertEqual([h.fires("c"), h.fires("d"), h.fires("h")], [1, 1, 1])
    }

    func testConditionsIfAndModeAction() throws {
        let h = try Harness(Self.lines + """

            modes:
              quiet: { admits: [] }
            reactions:
              - name: guarded
                on: { line: button, press: true }
                when: { line: fan, is: on }
                do: [ toggle: led ]
              - name: branch
                on: { line: button, release: true }
                do:
                  - if: { condition: { line: led, is: on }, then: [ set: { valve: on } ], else: [ set: { valve: off }, set: { fan: on } ] }
            """)
        try h.click()
        XCTAssertEqual(h.fires("guarded"), 0)
        XCTAssertEqual(h.counters.reactionSkipped["guarded"], 1, "the condition did not hold")
        XCTAssertEqual(try h.writes("VALVE"), [], "off while off: no change on the wire")
        XCTAssertEqual(try h.writes("FAN"), [true], "the else branch ran")
        try h.advance(10)
        try h.click()
        XCTAssertEqual(h.fires("guarded"), 1)
        XCTAssertEqual(try h.writes("LED"), [true])
        XCTAssertEqual(try h.writes("VALVE"), [true], "the then branch ran")
    }

    func testPulseEndsOnTheLoopTimer() throws {
        let h = try Harness(Self.lines + """

            reactions:
              - { name: p, on: { line: button, press: true }, do: [ pulse: { led: 100ms } ] }
            """)
        try h.press()
        XCTAssertEqual(try h.writes("LED"), [true])
        try h.advance(99)
        XCTAssertEqual(try h.writes("LED"), [true])
        try h.advance(1)
        XCTAssertEqual(try h.writes("LED"), [true, false])
    }
}
