import Boardloop
@testable import BoardDaemon
import Foundation
import Glibc
import XCTest

/// The command service under the control socket and MQTT, on the manual
/// clock: one table of pulse ends for every front end, the permissions and
/// names with their refusals, who a recording says acted, and a stopping
/// daemon that takes nothing more.
final class RemoteCommandsTests: XCTestCase {
    var dir: TempDir?

    override func setUpWithError() throws { dir = try TempDir("remote") }

    override func tearDown() { dir = nil }

    var socketPath: String { (dir?.path ?? "/nonexistent") + "/boardd.sock" }

    static let yaml = """
        board: demo
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true } }
          led: { pin: LED, output: { initial: off } }
          fan: { pin: FAN, output: { initial: off } }
          valve: { pin: VALVE, output: { initial: off } }
        modes:
          quiet: { admits: [high] }
        sequences:
          blink: { steps: [ set: { fan: on }, wait: 100ms, set: { fan: off } ] }
        """

    func harness() throws -> (Harness, RemoteCommands) {
        let h = try Harness(Self.yaml, level: .info, control: ControlServer.Options(path: socketPath))
        return (h, try XCTUnwrap(h.daemon.remote, "a front end runs, so the command service does"))
    }

    func id(_ h: Harness, _ name: String) throws -> LineID { try XCTUnwrap(h.daemon.config.line(named: name)) }

    /// A pulse from the control socket whose output MQTT then sets on stays
    /// on past the pulse's end (one table: the later command replaces the
    /// end, whoever sent either); a second pulse ends at its own time, once.
    func testALaterCommandFromEitherFrontEndReplacesAPulsesEnd() throws {
        let (h, remote) = try harness()
        let c = try ControlClient(socketPath)
        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"pulse","line":"fan","duration":"100ms"}"#, h)["ok"] as? Bool, true)
        XCTAssertEqual(remote.pulsesInFlight, 1)
        try h.advance(50)
        try remote.set(try id(h, "fan"), true, by: .mqtt)
        XCTAssertEqual(remote.pulsesInFlight, 0, "the set replaced the pulse's end")
        try h.advance(200)
        XCTAssertEqual(try h.writes("FAN"), [true], "still on after the control pulse's end (a set to its value writes nothing)")

        // MQTT pulses the LED for 300 ms; the control socket pulses it again
        // for 100 ms at 100 ms: it goes off at 200 ms, once.
        try remote.pulse(try id(h, "led"), for: .milliseconds(300), by: .mqtt)
        try h.advance(100)
        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"pulse","line":"led","duration":"100ms"}"#, h)["ok"] as? Bool, true)
        try h.advance(99)
        XCTAssertEqual(try h.writes("LED"), [true], "not before the second pulse's end")
        try h.advance(2)
        XCTAssertEqual(try h.writes("LED"), [true, false])
        _ = try c.request(#"{"v":1,"cmd":"set","line":"led","value":true}"#, h)
        try h.advance(300)
        XCTAssertEqual(try h.writes("LED"), [true, false, true], "the first pulse's end was replaced, not kept")
        XCTAssertTrue(h.log.contains("mqtt: pulse led for 300ms (origin mqtt)"), h.log)
        XCTAssertTrue(h.log.contains("control: pulse led for 100ms (uid \(getuid()) gid \(getgid()) pid \(getpid()), origin control)"), h.log)
        XCTAssertTrue(h.log.contains("control: pulse of led ends ("), "the end is the asker's: \(h.log)")
    }

    /// Pulses in flight are bounded for every front end together; one
    /// refused changes nothing, and a second pulse of a line replaces its
    /// own end, so it is taken even at the bound.
    func testPulsesInFlightAreBoundedAndARefusalChangesNothing() throws {
        let (h, remote) = try harness()
        remote.maxPulses = 1
        try remote.pulse(try id(h, "led"), for: .milliseconds(100), by: .mqtt)
        XCTAssertThrowsError(try remote.pulse(try id(h, "fan"), for: .milliseconds(100), by: .mqtt)) {
            XCTAssertEqual(($0 as? RemoteError)?.code, .busy)
        }
        try remote.pulse(try id(h, "led"), for: .milliseconds(200), by: .mqtt)
        XCTAssertEqual(remote.pulsesInFlight, 1)
        try h.advance(201)
        XCTAssertEqual(try h.writes("LED"), [true, false], "the led's own end kept, and ended")
        XCTAssertEqual(try h.writes("FAN"), [], "the refused pulse did nothing")
    }

    /// What a front end may not command is refused with the key that
    /// grants it and what it grants; unknown names get the nearest name and
    /// the list; inputs are not outputs; a pulse's duration is bounded.
    func testRefusalsNameWhatWhereAndWhy() throws {
        let (h, remote) = try harness()
        let mqtt = RemotePermissions(
            outputs: [try id(h, "led")], sequences: [], modes: [ModeID(1)], key: "mqtt.commands", over: "over MQTT")
        func refusal(_ body: () throws -> Void) -> RemoteError? {
            do { try body() } catch let e as RemoteError { return e } catch { XCTFail("\(error)") }
            return nil
        }
        XCTAssertEqual(
            refusal { _ = try remote.output("fan", mqtt) },
            RemoteError(.notPermitted, "output 'fan' may not be commanded over MQTT (mqtt.commands.outputs: led)"))
        XCTAssertEqual(try remote.output("led", mqtt), try id(h, "led"))
        XCTAssertEqual(try remote.output("fan", .all), try id(h, "fan"))
        XCTAssertEqual(
            refusal { _ = try remote.sequence("blink", mqtt) },
            RemoteError(.notPermitted, "sequence 'blink' may not be run over MQTT (mqtt.commands.sequences: none)"))
        XCTAssertEqual(
            refusal { _ = try remote.mode("default", mqtt) },
            RemoteError(.notPermitted, "mode 'default' may not be set over MQTT (mqtt.commands.modes: quiet)"))
        XCTAssertEqual(
            refusal { _ = try remote.output("fna", .all) },
            RemoteError(.unknownLine, "no line named 'fna'; did you mean 'fan'? (lines: button, led, fan, valve)"))
        XCTAssertEqual(
            refusal { _ = try remote.output("button", .all) },
            RemoteError(.notOutput, "line 'button' is an input; set, toggle and pulse drive outputs"))
        XCTAssertEqual(refusal { _ = try remote.sequence("blnk", .all) }?.code, .unknownSequence)
        XCTAssertEqual(refusal { _ = try remote.loopIndex("worker") }?.code, .unknownLoop)
        XCTAssertEqual(refusal { _ = try remote.mode("loud", .all) }?.code, .unknownMode)
        for bad in ["0ms", "25h", "soon"] {
            XCTAssertEqual(refusal { _ = try RemoteCommands.pulseDuration(bad) }?.code, .badArgument, bad)
        }
        XCTAssertEqual(try RemoteCommands.pulseDuration("24h"), .seconds(86400))
        XCTAssertEqual(try h.writes("FAN"), [], "nothing refused was acted on")
    }

    /// A recording tells MQTT's writes and mode changes from the control
    /// socket's.
    func testARecordingTellsMQTTFromControl() throws {
        let (h, remote) = try harness()
        let rec = LoopRecorder(serial: 1)
        _ = h.daemon.main.startRecording(rec)
        let c = try ControlClient(socketPath)
        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"set","line":"valve","value":true}"#, h)["ok"] as? Bool, true)
        try remote.set(try id(h, "valve"), false, by: .mqtt)
        try remote.setMode(loop: 0, try remote.mode("quiet", .all), by: .mqtt)
        try h.advance(10)
        h.daemon.main.stopRecording()
        var writes: [String] = [], modes: [UInt8] = []
        rec.consume { e in
            if e.record.kind == .output { writes.append("\(e.record.flag) \(EventSink.WriteBy(rawValue: e.record.step).map { "\($0)" } ?? "?")") }
            if e.record.kind == .mode { modes.append(UInt8(truncatingIfNeeded: e.record.repeatCount)) }
        }
        XCTAssertEqual(writes, ["true control", "false mqtt"])
        XCTAssertEqual(modes, [EventSink.WriteBy.mqtt.rawValue])
    }

    /// Once the daemon stops, the service takes no command and no pulse
    /// ends (the stop set the outputs safe).
    func testAStoppingDaemonTakesNoCommand() throws {
        let (h, remote) = try harness()
        try remote.pulse(try id(h, "led"), for: .milliseconds(100), by: .mqtt)
        h.daemon.shutdown()
        XCTAssertEqual(remote.pulsesInFlight, 0)
        do {
            try remote.set(try id(h, "led"), true, by: .mqtt)
            XCTFail("taken while stopping")
        } catch let e as RemoteError {
            XCTAssertEqual(e.code, .stopping)
        }
    }
}

/// The services beside the loops are one list: in the order they started,
/// told of an applied reload, stopped the last first, those that take
/// requests before the outputs go safe.
final class SupervisedServiceTests: XCTestCase {
    func testTheDaemonKeepsItsServicesInOneListAndStopsThemInTwoPhases() throws {
        let dir = try TempDir("services")
        let h = try Harness(
            RemoteCommandsTests.yaml + "\ncommands:\n  hello: { argv: [\"/bin/true\"] }\n", level: .info,
            control: ControlServer.Options(path: dir.path + "/boardd.sock"))
        let d = h.daemon
        XCTAssertEqual(d.services.map(\.serviceName), ["the command service", "the control socket", "the command runner"])
        XCTAssertEqual(d.services.map(\.stopsBeforeOutputsAreSafe), [true, true, false])
        let remote = try XCTUnwrap(d.remote)
        try remote.set(try XCTUnwrap(d.config.line(named: "led")), true, by: .mqtt)
        XCTAssertTrue(d.shutdown())
        XCTAssertTrue(d.services.isEmpty, "let go once stopped")
        XCTAssertThrowsError(try remote.set(try XCTUnwrap(d.config.line(named: "led")), true, by: .mqtt))
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.path + "/boardd.sock"), "the control socket stopped: its file is gone")
        // The stop's order in the log: the socket and the service before the
        // outputs go safe; the summary line after.
        XCTAssertTrue(h.log.contains("stopped: "), h.log)
    }
}
