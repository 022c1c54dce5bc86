import BoardSupport
import Foundation
import Glibc
import XCTest

@testable import BoardDaemon

/// Names from the wire (the control socket, MQTT topics and payloads) are
/// refused with a bounded message whatever their length, the suggestion
/// for them costs a bounded number of distance cells, and what they carry
/// of control or bidi characters is echoed escaped.
final class LongNameTests: XCTestCase {
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

    var dir = ""

    override func setUpWithError() throws {
        var template = Array("/tmp/boardd-longname-XXXXXX".utf8CString)
        guard let p = mkdtemp(&template) else { throw POSIXError(.EIO) }
        dir = String(cString: p)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: dir) }

    static func message(_ reply: [String: Any]) -> String { (reply["error"] as? [String: Any])?["message"] as? String ?? "" }

    func testAGetOfA65000CharacterLineNameIsRefusedWithABoundedMessageAndBoundedWork() throws {
        let h = try Harness(Self.yaml, control: ControlServer.Options(path: dir + "/boardd.sock"))
        let c = try ControlClient(dir + "/boardd.sock")
        let name = String(repeating: "A", count: 65_000)
        let cells = DidYouMean.cellsComputed
        let r = try c.request(#"{"v":1,"id":1,"cmd":"get","line":""# + name + #""}"#, h)
        let work = DidYouMean.cellsComputed - cells
        XCTAssertEqual(ControlTests.code(r), "unknown-line")
        let m = Self.message(r)
        XCTAssertLessThan(m.utf8.count, 300, "a bounded message: \(m.prefix(300))")
        XCTAssertTrue(m.hasPrefix("no line named '" + String(repeating: "A", count: 64) + "…' (65000 characters)"), m)
        XCTAssertTrue(m.hasSuffix("(lines: button, led, fan, valve)"), m)
        XCTAssertLessThanOrEqual(work, 1_000, "distance cells computed for the suggestion")
        // The same for a sequence, a loop and a mode.
        for (request, code) in [
            (#"{"v":1,"cmd":"sequence","action":"start","name":""# + name + #""}"#, "unknown-sequence"),
            (#"{"v":1,"cmd":"mode","loop":""# + name + #""}"#, "unknown-loop"),
            (#"{"v":1,"cmd":"mode","loop":"main","mode":""# + name + #""}"#, "unknown-mode"),
            (#"{"v":1,"cmd":""# + name + #""}"#, "unknown-command"),
        ] {
            let before = DidYouMean.cellsComputed
            let r = try c.request(request, h)
            XCTAssertEqual(ControlTests.code(r), code)
            XCTAssertLessThan(Self.message(r).utf8.count, 400, "\(code): \(Self.message(r).prefix(300))")
            XCTAssertLessThanOrEqual(DidYouMean.cellsComputed - before, 1_000, code)
        }
        // A near miss still gets its suggestion.
        let near = try c.request(#"{"v":1,"cmd":"get","line":"lde"}"#, h)
        XCTAssertEqual(Self.message(near), "no line named 'lde'; did you mean 'led'? (lines: button, led, fan, valve)")
    }

    func testALineNameWithABidiOverrideAndAnEscapeIsEchoedEscaped() throws {
        let h = try Harness(Self.yaml, control: ControlServer.Options(path: dir + "/boardd.sock"))
        let c = try ControlClient(dir + "/boardd.sock")
        let r = try c.request(#"{"v":1,"cmd":"get","line":"le\u202ed\u001b[2J\u2066x\u0085"}"#, h)
        let m = Self.message(r)
        XCTAssertTrue(m.hasPrefix(#"no line named 'le\u{202E}d\u{1B}[2J\u{2066}x\u{85}'"#), m)
        for s: Unicode.Scalar in ["\u{202E}", "\u{1B}", "\u{2066}", "\u{85}"] {
            XCTAssertFalse(m.unicodeScalars.contains(s), "no raw U+\(String(s.value, radix: 16)) in \(m)")
        }
    }

    /// Over MQTT: a 60,000-character line name in the topic, and a mode
    /// name with a bidi override and an escape in the payload. The error
    /// topic's message and the log line stay short and escaped.
    func testAnMQTTCommandToA60000CharacterLineIsRefusedWithABoundedMessageAndLogLine() throws {
        let broker = try Broker()
        let prefix = "boardd/longname"
        let probe = try Probe(port: broker.port, subscribe: prefix + "/error")
        let h = try Harness(
            Self.yaml + """

                mqtt:
                  broker: 127.0.0.1
                  port: \(broker.port)
                  client_id: longname
                  commands: { outputs: [led], modes: [quiet] }
                """, level: .info)
        let d = h.daemon
        let bridge = try XCTUnwrap(d.mqtt)
        func until(_ done: () -> Bool) throws {
            let end = Date().addingTimeInterval(30)
            while !done() && Date() < end {
                try d.advance(by: .milliseconds(10))
                usleep(5_000)
            }
        }
        try until { bridge.client.state == .up }
        XCTAssertEqual(bridge.client.state, .up, h.log)

        let name = String(repeating: "A", count: 60_000)
        let cells = DidYouMean.cellsComputed
        probe.publish("\(prefix)/line/\(name)/set", "ON")
        try until { !probe.messages.isEmpty }
        let work = DidYouMean.cellsComputed - cells
        let e = try XCTUnwrap(probe.messages.first, h.log.suffix(500).description)
        XCTAssertLessThan(e.payload.utf8.count, 600, "a bounded error message: \(e.payload.prefix(600))")
        let why = e.json?["error"] as? String ?? ""
        XCTAssertTrue(why.hasPrefix("no line named '" + String(repeating: "A", count: 64) + "…' (60000 characters)"), why)
        XCTAssertLessThanOrEqual(work, 1_000, "distance cells computed for the suggestion")
        let refused = h.log.split(separator: "\n").filter { $0.contains("mqtt: refused") }
        XCTAssertEqual(refused.count, 1, h.log.suffix(2000).description)
        XCTAssertLessThan(refused.first?.utf8.count ?? 0, 600, "a bounded log line: \(refused.first?.prefix(600) ?? "")")

        probe.clear()
        probe.publish("\(prefix)/loop/main/mode/set", "qu\u{202E}iet\u{1B}[2J")
        try until { !probe.messages.isEmpty }
        let bidi = try XCTUnwrap(probe.messages.first?.json?["error"] as? String, h.log)
        XCTAssertTrue(bidi.hasPrefix(#"no mode named 'qu\u{202E}iet\u{1B}[2J'"#), bidi)
        let line = h.log.split(separator: "\n").last { $0.contains("mqtt: refused") }.map(String.init) ?? ""
        XCTAssertFalse(line.unicodeScalars.contains("\u{202E}"), "no raw bidi override in the log: \(line)")
        XCTAssertFalse(line.unicodeScalars.contains("\u{1B}"), "no raw ESC in the log: \(line)")
    }
}
