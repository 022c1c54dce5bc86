import Boardloop
import BoardDaemon
import BoardloopGPIOMock
import BoardloopTestSupport
import Foundation
import Glibc
import XCTest

/// Outputs of one loop on one chip share one line request: an action that
/// sets several of them is one kernel call, and a reload keeps, changes in
/// place or releases lines without touching the request's other outputs.
final class OutputGroupTests: XCTestCase {
    static let three = """
        board: demo
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true, debounce: 0ms } }
          valve: { pin: VALVE, output: { initial: off, safe: off } }
          fan: { pin: FAN, output: { initial: off, safe: off } }
          led: { pin: LED, output: { initial: off, safe: off } }
        reactions:
          - on: { line: button, press: true }
            do: [{ set: { valve: on, fan: on, led: on } }]
          - on: { line: button, release: true }
            do: [{ set: { valve: off } }, { set: { fan: off } }, { log: "between" }, { set: { led: off } }]

        """

    private func state(_ h: Harness) throws -> [String: Bool] {
        var out: [String: Bool] = [:]
        for pin in ["VALVE", "FAN", "LED"] { out[pin] = try h.chip.outputHistory(.offset(Harness.offset(pin))).last?.value }
        return out
    }

    /// Three outputs, one request; `set: { a, b, c }` is one set-values call.
    /// Consecutive sets are one call too; a `log` between them ends the
    /// group (what was set before it is on the lines before it runs).
    func testSettingSeveralOutputsIsOneKernelCall() throws {
        let h = try Harness(Self.three)
        let start = h.chip.calls
        XCTAssertEqual(start.requests, 2, "the button's request and one for the three outputs")
        try h.press()
        var now = h.chip.calls
        XCTAssertEqual(now.setValues - start.setValues, 1, "three outputs set in one call")
        XCTAssertEqual(try state(h), ["VALVE": true, "FAN": true, "LED": true])
        for pin in ["VALVE", "FAN", "LED"] { XCTAssertEqual(try h.writes(pin), [true], pin) }
        try h.press(false)
        let before = now
        now = h.chip.calls
        XCTAssertEqual(now.setValues - before.setValues, 2, "valve and fan in one call, the led after the log in another")
        XCTAssertEqual(try state(h), ["VALVE": false, "FAN": false, "LED": false])
        for pin in ["VALVE", "FAN", "LED"] { XCTAssertEqual(try h.writes(pin), [true, false], pin) }
    }

    /// Outputs on a worker set by a reaction on the main loop: the whole
    /// `set` goes to the worker and is one call there.
    static let onAWorker = """
        board: demo
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true, debounce: 0ms } }
          valve: { pin: VALVE, output: { initial: off, safe: off } }
          fan: { pin: FAN, output: { initial: off, safe: off } }
        workers:
          io: { lines: [valve, fan] }
        reactions:
          - on: { line: button, press: true }
            do: [{ set: { valve: on, fan: on } }]

        """

    func testAGroupedSetOnAnotherLoopIsOneCallThere() throws {
        let h = try Harness(Self.onAWorker)
        let start = h.chip.calls
        try h.press()
        try h.waitForWrites("FAN", [true])
        XCTAssertEqual(try h.writes("VALVE"), [true])
        XCTAssertEqual(try h.writes("FAN"), [true])
        XCTAssertEqual(h.chip.calls.setValues - start.setValues, 1)
    }

    /// A reload that changes nothing of the outputs keeps their request
    /// (no request, release or write), and their values.
    func testReloadKeepsAnUnchangedGroup() throws {
        let file = try ConfigFile(Self.three)
        let h = try Harness(path: file.path)
        try h.press()
        let before = h.chip.calls
        try file.write(Self.three.replacingOccurrences(of: "{ log: \"between\" }", with: "{ log: \"in between\" }"))
        h.daemon.reload()
        XCTAssertEqual(h.daemon.reloads.applied, 1, h.log)
        XCTAssertEqual(h.chip.calls, before, "no kernel call for kept outputs")
        XCTAssertEqual(try state(h), ["VALVE": true, "FAN": true, "LED": true])
        XCTAssertTrue(h.log.contains("4 lines kept as they were, 0 requested, 0 released"), h.log)
    }

    /// New settings for one output of the group apply in place: the line
    /// starts again at its (new) initial value; the other two keep theirs,
    /// untouched (no write recorded), and nothing is released.
    func testReloadChangesOneOutputInPlace() throws {
        let file = try ConfigFile(Self.three)
        let h = try Harness(path: file.path)
        try h.press()
        let before = h.chip.calls
        try file.write(Self.three.replacingOccurrences(of: "fan: { pin: FAN, output: { initial: off, safe: off } }", with: "fan: { pin: FAN, output: { initial: off, safe: on } }")
            .replacingOccurrences(of: "led: { pin: LED, output: { initial: off, safe: off } }", with: "led: { pin: LED, output: { initial: off, safe: off, drive: open-drain } }"))
        h.daemon.reload()
        XCTAssertEqual(h.daemon.reloads.applied, 1, h.log)
        let after = h.chip.calls
        XCTAssertEqual(after.requests, before.requests, "nothing requested again")
        XCTAssertEqual(after.releases, before.releases, "nothing released")
        XCTAssertEqual(after.reconfigures - before.reconfigures, 1, "the led's new settings, in place (the fan's safe value is the daemon's own)")
        XCTAssertEqual(try h.writes("VALVE"), [true], "the valve is not touched")
        XCTAssertEqual(try h.writes("FAN"), [true], "nor the fan")
        XCTAssertEqual(try h.writes("LED"), [true, false], "the led starts again at its initial value")
        XCTAssertTrue(h.log.contains("3 lines kept as they were, 0 requested, 0 released, 1 reconfigured in place"), h.log)
        // The group still writes as one.
        try h.press(false)
        XCTAssertEqual(try state(h), ["VALVE": false, "FAN": false, "LED": false])
    }

    /// A reload that drops one output of the group: it goes to its safe
    /// value and stays requested (a line cannot leave a request alone)
    /// while the others stay on; a later reload that wants the line again
    /// makes the request again, the others at their values. Dropping the
    /// rest releases the request.
    func testReloadDroppingOneOutputKeepsTheOthersAndItsLineUntilNeeded() throws {
        let file = try ConfigFile(Self.three)
        let h = try Harness(path: file.path)
        try h.press()
        let before = h.chip.calls
        let withoutFan = Self.three.replacingOccurrences(of: "  fan: { pin: FAN, output: { initial: off, safe: off } }\n", with: "")
            .replacingOccurrences(of: "{ set: { valve: on, fan: on, led: on } }", with: "{ set: { valve: on, led: on } }")
            .replacingOccurrences(of: "{ set: { fan: off } }, ", with: "")
        try file.write(withoutFan)
        h.daemon.reload()
        XCTAssertEqual(h.daemon.reloads.applied, 1, h.log)
        XCTAssertEqual(try h.writes("FAN"), [true, false], "the dropped fan goes to its safe value")
        XCTAssertEqual(try h.writes("VALVE"), [true], "the valve is not touched")
        XCTAssertEqual(try h.writes("LED"), [true])
        XCTAssertEqual(h.chip.calls.releases, before.releases, "the request stays, for the valve and the led")
        XCTAssertEqual(try h.chip.consumer(.offset(Harness.offset("FAN"))), "boardd", "the fan's line stays requested")
        XCTAssertTrue(h.log.contains("fan: stays requested at off while other outputs of its request are kept"), h.log)

        // The fan comes back (its line is needed): the request is made again,
        // the valve and the led at their values.
        try file.write(Self.three)
        h.daemon.reload()
        XCTAssertEqual(h.daemon.reloads.applied, 2, h.log)
        XCTAssertEqual(try state(h), ["VALVE": true, "FAN": false, "LED": true])
        XCTAssertTrue(h.log.contains("fan: its line stayed requested when an earlier reload dropped 'fan'"), h.log)
        XCTAssertTrue(h.log.contains("(led, valve requested again at their values)"), h.log)
        try h.press(false)
        try h.press()
        XCTAssertEqual(try state(h), ["VALVE": true, "FAN": true, "LED": true], "the group works as before")

        // Every output gone: the request is released.
        let noOutputs = """
            board: demo
            lines:
              button: { pin: BUTTON, input: { edge: both, active_low: true, debounce: 0ms } }

            """
        let released = h.chip.calls.releases
        try file.write(noOutputs)
        h.daemon.reload()
        XCTAssertEqual(h.daemon.reloads.applied, 3, h.log)
        XCTAssertEqual(h.chip.calls.releases - released, 1, "one request released for the three")
        XCTAssertEqual(try state(h), ["VALVE": false, "FAN": false, "LED": false], "each at its safe value first")
        for pin in ["VALVE", "FAN", "LED"] { XCTAssertNil(try h.chip.consumer(.offset(Harness.offset(pin))), pin) }
    }

    /// A dropped output's line that the new config takes as an input: the
    /// group's request is made again and the input gets the line.
    func testADroppedOutputLineCanBecomeAnInput() throws {
        // An input the new config drops: the loop's sources stay as many.
        let withEstop = Self.three.replacingOccurrences(
            of: "  valve:", with: "  estop: { pin: ESTOP, input: { edge: both } }\n  valve:")
        let file = try ConfigFile(withEstop)
        let h = try Harness(path: file.path)
        try h.press()
        try file.write(Self.three.replacingOccurrences(of: "fan: { pin: FAN, output: { initial: off, safe: off } }", with: "fan: { pin: FAN, input: { edge: both } }")
            .replacingOccurrences(of: "{ set: { valve: on, fan: on, led: on } }", with: "{ set: { valve: on, led: on } }")
            .replacingOccurrences(of: "{ set: { fan: off } }, ", with: ""))
        h.daemon.reload()
        XCTAssertEqual(h.daemon.reloads.applied, 1, h.log)
        XCTAssertEqual(try h.writes("VALVE"), [true, true], "the valve, requested again at its value")
        XCTAssertEqual(try h.writes("LED"), [true, true])
        XCTAssertTrue(h.log.contains("fan: its line stayed requested"), h.log)
        // Whatever level the wire was left at, one of these is an edge.
        try h.chip.setLevel(.offset(Harness.offset("FAN")), true)
        try h.chip.setLevel(.offset(Harness.offset("FAN")), false)
        try h.daemon.settle()
        XCTAssertGreaterThanOrEqual(h.counters.lines["fan"]?.events ?? 0, 1, "the fan's line is an input now")
        try h.press(false)
        XCTAssertEqual(try h.writes("VALVE").last, false, "the valve's group works")
    }

    /// A grouped write that fails (the chip went away) is reported for
    /// each of its lines, and the loop runs on.
    func testAFailedGroupWriteIsReportedForEachLine() throws {
        let h = try Harness(
            """
            board: demo
            lines:
              valve: { pin: VALVE, output: { initial: off, safe: off } }
              fan: { pin: FAN, output: { initial: off, safe: off } }
            tasks:
              both: { every: 1s, do: [{ set: { valve: on, fan: on } }] }

            """)
        try h.advance(1000)
        XCTAssertEqual(try h.writes("VALVE"), [true])
        XCTAssertEqual(try h.writes("FAN"), [true])
        XCTAssertFalse(h.log.contains("write failed"), h.log)
        h.chip.vanishSilently()
        try h.advance(1000)
        XCTAssertTrue(h.log.contains("valve: write failed"), h.log)
        XCTAssertTrue(h.log.contains("fan: write failed"), h.log)
        try h.advance(1000)
        XCTAssertEqual(h.daemon.counters.tasks["both"]?.runs, 3, "the task runs on")
    }

    /// A write of one output (the executor's inline write) that fails is
    /// reported on its line, and the loop goes on.
    func testAFailedWriteOfOneOutputIsReportedAndTheLoopGoesOn() throws {
        let h = try Harness(
            """
            board: demo
            lines:
              valve: { pin: VALVE, output: { initial: off } }
            tasks:
              flip: { every: 1s, do: [toggle: valve] }

            """)
        try h.advance(1000)
        XCTAssertEqual(try h.writes("VALVE"), [true])
        XCTAssertFalse(h.log.contains("write failed"), h.log)
        h.chip.vanishSilently()
        try h.advance(1000)
        XCTAssertTrue(h.log.contains("valve: write failed"), h.log)
        try h.advance(1000)
        XCTAssertEqual(h.daemon.counters.tasks["flip"]?.runs, 3, "the task runs on")
    }
}
