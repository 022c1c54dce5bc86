import BoardDaemon
import Foundation
import Glibc
import XCTest

/// A stopped sequence leaves nothing unsafe: by default the outputs its
/// steps write that have a `safe:` value go to it; `on_stop:` says what
/// else to do (or `on_stop: []`, nothing). Stopped by a stop action, a
/// front end, a reload that stops it, or a `restart` start.
final class SequenceStopTests: XCTestCase {
    /// A 10-minute watering; the valve has a safe value, the pump none.
    static func config(onStop: String? = nil, policy: String = "single", extra: String = "") -> String {
        """
        board: demo
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true } }
          estop: { pin: ESTOP, input: { edge: falling } }
          valve: { pin: VALVE, output: { safe: off } }
          pump: { pin: FAN, output: {} }
          led: { pin: LED, output: { safe: off } }
        sequences:
          water:
            policy: \(policy)
            steps: [ set: { valve: on, pump: on }, wait: 10min, set: { valve: off, pump: off } ]\(onStop.map { "\n    on_stop: \($0)" } ?? "")\(extra)
        reactions:
          - { name: start, on: { line: button, press: true }, do: [ sequence: water ] }
          - { name: halt, on: { line: estop, edge: falling }, do: [ stop: water ] }

        """
    }

    func started(_ yaml: String) throws -> Harness {
        let h = try Harness(yaml)
        try h.press()
        try h.press(false)
        try h.advance(100)
        XCTAssertEqual(try h.writes("VALVE"), [true])
        XCTAssertEqual(try h.writes("FAN"), [true])
        return h
    }

    func testAStopActionSetsTheRunsOutputsWithASafeValueToIt() throws {
        let h = try started(Self.config())
        try h.setLevel("ESTOP", false)
        XCTAssertEqual(try h.writes("VALVE"), [true, false], "the valve goes to its safe value when the run is stopped")
        XCTAssertEqual(try h.writes("FAN"), [true], "the pump has no safe value: left as it is")
        XCTAssertEqual(h.counters.sequence["water"]?.stopped, 1)
        try h.daemon.advance(by: .seconds(20 * 60), step: .seconds(1))
        XCTAssertEqual(try h.writes("VALVE"), [true, false], "the rest of the steps never run")
    }

    /// An e-stop that sets the valve off itself, then stops the sequence:
    /// the valve is written once, not again by the stop.
    func testAnOutputAlreadyAtItsSafeValueIsNotWrittenAgain() throws {
        let yaml = Self.config().replacingOccurrences(of: "do: [ stop: water ]", with: "do: [ set: { valve: off }, stop: water ]")
        let h = try started(yaml)
        try h.setLevel("ESTOP", false)
        XCTAssertEqual(try h.writes("VALVE"), [true, false])
    }

    func testOnStopRunsInsteadOfTheDefault() throws {
        let h = try started(Self.config(onStop: "[ set: { pump: off }, pulse: { led: 200ms } ]"))
        try h.setLevel("ESTOP", false)
        XCTAssertEqual(try h.writes("FAN"), [true, false], "on_stop turned the pump off")
        XCTAssertEqual(try h.writes("VALVE"), [true], "on_stop replaces the default: the valve is left to it")
        XCTAssertEqual(try h.writes("LED"), [true])
        try h.advance(250)
        XCTAssertEqual(try h.writes("LED"), [true, false], "a pulse in on_stop ends on its timer")
    }

    func testAnEmptyOnStopLeavesTheOutputsAsTheyAre() throws {
        let h = try started(Self.config(onStop: "[]"))
        try h.setLevel("ESTOP", false)
        XCTAssertEqual(try h.writes("VALVE"), [true])
        XCTAssertEqual(h.counters.sequence["water"]?.stopped, 1)
    }

    func testARunThatCompletesDoesNotRunItsStopActions() throws {
        let h = try started(Self.config(onStop: "[ pulse: { led: 200ms } ]"))
        try h.daemon.advance(by: .seconds(10 * 60 + 1), step: .seconds(1))
        XCTAssertEqual(try h.writes("VALVE"), [true, false])
        XCTAssertEqual(try h.writes("LED"), [], "completed, not stopped")
    }

    /// A restart stops the run in flight: its `on_stop:` runs before the
    /// new run starts; without one the outputs are not glitched to safe.
    func testARestartRunsOnStopBetweenTheRuns() throws {
        let h = try started(Self.config(onStop: "[ set: { pump: off } ]", policy: "restart"))
        try h.press()
        XCTAssertEqual(try h.writes("FAN"), [true, false, true], "on_stop, then the new run's first step")
        let plain = try started(Self.config(policy: "restart"))
        try plain.press()
        XCTAssertFalse(try plain.writes("VALVE").contains(false), "no safe value between two runs of a restart")
        XCTAssertEqual(plain.counters.sequence["water"]?.restarted, 1)
    }

    func testAStopFromTheControlSocketSetsTheSafeValues() throws {
        var template = Array("/tmp/boardd-seqstop-XXXXXX".utf8CString)
        let dir = try XCTUnwrap(mkdtemp(&template).map { String(cString: $0) })
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/boardd.sock"
        let h = try Harness(Self.config(), control: ControlServer.Options(path: path))
        try h.press()
        try h.advance(100)
        let c = try ControlClient(path)
        let reply = try c.request(#"{"v":1,"cmd":"sequence","action":"stop","name":"water"}"#, h)
        XCTAssertEqual(reply["ok"] as? Bool, true, "\(reply)")
        try h.advance(10)
        XCTAssertEqual(try h.writes("VALVE"), [true, false], "boardctl sequence stop water closes the valve")
    }

    /// A reload that changes the sequence stops it: with an `on_stop:`,
    /// that runs (from the config the run was made under).
    func testAReloadThatStopsTheSequenceRunsItsOnStop() throws {
        let file = try ConfigFile(Self.config(onStop: "[ set: { pump: off } ]"))
        let h = try Harness(path: file.path)
        try h.press()
        try h.advance(100)
        try file.write(Self.config(onStop: "[ set: { pump: off } ]", policy: "restart"))
        XCTAssertTrue(h.daemon.reload().applied, h.log)
        XCTAssertTrue(h.log.contains("sequence water: stopped by the reload (its definition changed); its on_stop runs"), h.log)
        XCTAssertEqual(try h.writes("FAN"), [true, false])
        XCTAssertEqual(try h.writes("VALVE"), [true], "on_stop decides: the valve stays")
    }

    func testOnStopIsCheckedAtLoad() throws {
        let waits = ConfigLoader.load(text: Self.config(onStop: "[ wait: 1s ]"), file: "t.yaml")
        XCTAssertNil(waits.config)
        XCTAssertEqual(
            waits.errors.map(\.description),
            ["t.yaml:12:16: error: sequences.water.on_stop[0].wait: wait is not allowed in on_stop: its actions run at once, when the run is stopped"])
        let again = ConfigLoader.load(text: Self.config(onStop: "[ sequence: water ]"), file: "t.yaml")
        XCTAssertNil(again.config)
        XCTAssertEqual(
            again.errors.map(\.description),
            ["t.yaml:12:26: error: sequences.water.on_stop[0].sequence: on_stop cannot start 'water' again: it runs while 'water' is being stopped"])
        XCTAssertNotNil(ConfigLoader.load(text: Self.config(onStop: "[ stop: water, log: stopped ]"), file: "t.yaml").config)
    }
}
