import BoardDaemon
import Foundation
import XCTest

/// A change in flight in an input's filters is not lost across a reload,
/// and an input already active at start fires as the config says.
final class FilterReloadTests: XCTestCase {
    /// A thermostat contact: on after 2 s on, off after 30 s off; press
    /// turns the fan on, release off.
    static let thermostat = """
        board: demo
        lines:
          thermostat: { pin: ESTOP, input: { edge: both, active_low: true, debounce: 0ms, delayed_on: 2s, delayed_off: 30s } }
          fan: { pin: FAN, output: { initial: off, safe: off } }
          led: { pin: LED, output: { initial: off } }
        reactions:
          - on: { line: thermostat, press: true }
            do: [{ set: { fan: on } }]
          - on: { line: thermostat, release: true }
            do: [{ set: { fan: off } }]

        """

    /// The file again with something else changed (the LED's initial value).
    static let thermostatOtherChange = thermostat.replacingOccurrences(
        of: "led: { pin: LED, output: { initial: off } }", with: "led: { pin: LED, output: { initial: on } }")

    /// A reload 1 s into a pending `delayed_on` keeps it: the fan comes on
    /// at 2 s, as without the reload.
    func testAPendingDelayedOnSurvivesAReload() throws {
        let file = try ConfigFile(Self.thermostat)
        let h = try Harness(path: file.path)
        try h.setLevel("ESTOP", false)
        try h.advance(1000)
        try file.write(Self.thermostatOtherChange)
        h.daemon.reload()
        XCTAssertEqual(h.daemon.reloads.applied, 1, h.log)
        try h.advance(990)
        XCTAssertEqual(try h.writes("FAN"), [], "not before the 2 s")
        try h.advance(20)
        XCTAssertEqual(try h.writes("FAN"), [true], "on at 2 s, the filter's pending change carried over")
    }

    /// The same with an identical file: nothing to swap, the filter goes on.
    func testAReloadOfAnIdenticalFileLosesNothing() throws {
        let file = try ConfigFile(Self.thermostat)
        let h = try Harness(path: file.path)
        try h.setLevel("ESTOP", false)
        try h.advance(1000)
        h.daemon.reload()
        try h.advance(1010)
        XCTAssertEqual(try h.writes("FAN"), [true])
    }

    /// A reload that changes the filter's timing starts it again from the
    /// level the daemon believed (off) with the new timing: the fan comes
    /// on 3 s after the reload instead of never.
    func testAChangedFilterStartsAgainWithItsNewTiming() throws {
        let file = try ConfigFile(Self.thermostat)
        let h = try Harness(path: file.path)
        try h.setLevel("ESTOP", false)
        try h.advance(1000)
        try file.write(Self.thermostat.replacingOccurrences(of: "delayed_on: 2s", with: "delayed_on: 3s"))
        h.daemon.reload()
        XCTAssertEqual(h.daemon.reloads.applied, 1, h.log)
        try h.advance(2990)
        XCTAssertEqual(try h.writes("FAN"), [])
        try h.advance(20)
        XCTAssertEqual(try h.writes("FAN"), [true], "on 3 s after the reload")
    }

    /// A line whose request must be made again (its bias changed) also
    /// keeps the believed level and feeds the level read now through its
    /// filters: the fan still comes on (after the new request's delay).
    func testAReRequestedLineDoesNotLoseTheChange() throws {
        let file = try ConfigFile(Self.thermostat)
        let h = try Harness(path: file.path)
        try h.setLevel("ESTOP", false)
        try h.advance(1000)
        try file.write(Self.thermostat.replacingOccurrences(of: "active_low: true,", with: "active_low: true, bias: pull-up,"))
        h.daemon.reload()
        XCTAssertEqual(h.daemon.reloads.applied, 1, h.log)
        try h.advance(2100)
        XCTAssertEqual(try h.writes("FAN"), [true])
    }

    /// A pending `delayed_off` survives a reload too: the fan goes off 30 s
    /// after the contact opened, not never.
    func testAPendingDelayedOffSurvivesAReload() throws {
        let file = try ConfigFile(Self.thermostat)
        let h = try Harness(path: file.path)
        try h.setLevel("ESTOP", false)
        try h.advance(2100)
        XCTAssertEqual(try h.writes("FAN"), [true])
        try h.setLevel("ESTOP", true)
        try h.advance(10_000)
        try file.write(Self.thermostatOtherChange)
        h.daemon.reload()
        try h.advance(19_900)
        XCTAssertEqual(try h.writes("FAN"), [true])
        try h.advance(200)
        XCTAssertEqual(try h.writes("FAN"), [true, false], "off 30 s after the contact opened")
    }

    /// A line already active at start: by default nothing fires (a button
    /// held at boot is not a press); with `initial_edge: true` the level
    /// goes through the filters as an edge at start (a thermostat already
    /// on turns its fan on after its delay).
    func testALineActiveAtStartFiresOnlyWithInitialEdge() throws {
        let quiet = try Harness(Self.thermostat, levels: ["ESTOP": false])
        try quiet.advance(3000)
        XCTAssertEqual(try quiet.writes("FAN"), [], "default: the level at start fires nothing")

        let edge = try Harness(
            Self.thermostat.replacingOccurrences(of: "delayed_off: 30s }", with: "delayed_off: 30s, initial_edge: true }"),
            levels: ["ESTOP": false])
        try edge.advance(1990)
        XCTAssertEqual(try edge.writes("FAN"), [])
        try edge.advance(20)
        XCTAssertEqual(try edge.writes("FAN"), [true], "initial_edge: press after delayed_on")
    }
}

/// What a reload refuses or removes is said in words a person acts on.
final class ReloadMessageTests: XCTestCase {
    static let config = """
        board: demo
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true } }
          led: { pin: LED, output: { initial: off } }
          fan: { pin: FAN, output: { initial: off } }
        workers:
          io: { lines: [fan] }
        tasks:
          one: { every: 1s, do: [ toggle: led ] }
          two: { every: 2s, do: [ toggle: led ] }
          three: { every: 3s, do: [ toggle: fan ] }

        """

    /// A line moved to another loop is named, not reported as a capacity.
    func testAMovedLineIsNamed() throws {
        let file = try ConfigFile(Self.config)
        let h = try Harness(path: file.path)
        try file.write(Self.config.replacingOccurrences(of: "io: { lines: [fan] }", with: "io: { lines: [fan, led] }"))
        h.daemon.reload()
        XCTAssertEqual(h.daemon.reloads.refused, 1)
        XCTAssertTrue(h.log.contains("reload refused: line 'led' moved from loop 'main' to 'io'"), h.log)
    }

    /// A file saved half-way (a valid prefix) loses most of the config: the
    /// reload says what it removes, as a warning when that is more than it keeps.
    func testAReloadThatRemovesMoreThanItKeepsSaysSo() throws {
        let file = try ConfigFile(Self.config)
        let h = try Harness(path: file.path)
        let prefix = Self.config.components(separatedBy: "workers:")[0]
            .replacingOccurrences(of: "  fan: { pin: FAN, output: { initial: off } }\n", with: "")
        try file.write(prefix + "workers:\n  io: { lines: [] }\n")
        h.daemon.reload()
        XCTAssertTrue(
            h.log.contains("warning reload: the new config removes more than it keeps: lines fan; tasks one, two, three"), h.log)
    }
}
