import Boardloop
import BoardSupport
@testable import BoardDaemon
import Foundation
import XCTest

/// MQTT command topics and payloads as anyone who may publish to the
/// broker can send them: valid commands, then mutated ones (odd levels,
/// long and binary names, wildcards, bidi and control characters, long
/// payloads, the retain flag). Nothing not granted is ever acted on, a
/// retained message never, each message costs bounded work (suggestion
/// cells, the log line it makes), and the loop goes on: its task runs on.
final class MQTTFuzzTests: XCTestCase {
    static let yaml = """
        board: demo
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true } }
          led: { pin: LED, output: { initial: off } }
          fan: { pin: FAN, output: { initial: off } }
          valve: { pin: VALVE, output: { initial: off } }
        modes:
          quiet: { admits: [high] }
          critical: { admits: [high] }
        sequences:
          blink: { steps: [ set: { led: on }, wait: 10ms, set: { led: off } ] }
          pour: { steps: [ set: { valve: on }, wait: 10ms, set: { valve: off } ] }
        tasks:
          tick: { every: 10ms, in_modes: [default, quiet], do: [ log: { level: debug, message: tick } ] }
        mqtt:
          broker: 127.0.0.1
          port: 1
          client_id: fz
          commands: { outputs: [led], sequences: [blink], modes: [quiet] }
        """

    typealias RNG = ConfigFuzzTests.Random

    static let prefix = "boardd/fz"
    static let topics = [
        "line/led/set", "line/fan/set", "line/valve/set", "line/button/set", "line/nosuch/set", "sequence/blink/run",
        "sequence/pour/run", "sequence/nosuch/run", "loop/main/mode/set", "loop/nosuch/mode/set", "line/led", "line/led/set/x",
        "stats", "status", "line//set", "error",
    ]
    static let payloads = [
        "ON", "OFF", "TOGGLE", "PULSE 5ms", "PULSE 0ms", "PULSE 25h", "PULSE -1ms", "START", "STOP", "quiet", "critical", "default",
        "on", "1", "true", "", " ", "\u{202E}ON", "ON\n", "PULSE", "PULSE 1e309ms", "{}", "null",
    ]

    /// Commands the config grants, as a controller sends them.
    static let granted = [
        ("line/led/set", "ON"), ("line/led/set", "OFF"), ("line/led/set", "TOGGLE"), ("line/led/set", "PULSE 5ms"),
        ("sequence/blink/run", "START"), ("sequence/blink/run", "STOP"), ("loop/main/mode/set", "quiet"),
        ("loop/main/mode/set", "default"),
    ]

    static func mutate(_ s: String, _ rng: inout RNG) -> String {
        var u = Array(s.unicodeScalars)
        for _ in 0..<Int.random(in: 1...3, using: &rng) {
            let at = u.isEmpty ? 0 : Int.random(in: 0...u.count, using: &rng)
            switch Int.random(in: 0..<9, using: &rng) {
            case 0: if at < u.count { u.remove(at: at) }
            case 1: u.insert(contentsOf: "/".unicodeScalars, at: at)
            case 2: u.insert(contentsOf: ["+", "#", "\u{0}", "\u{1B}", "\u{202E}", "\u{2066}", "é", "😀"].randomElement(using: &rng)!.unicodeScalars, at: at)
            case 3: u.insert(contentsOf: String(repeating: "A", count: Int.random(in: 60...70_000, using: &rng)).unicodeScalars, at: at)
            case 4: if at < u.count { u[at] = Unicode.Scalar(UInt8.random(in: 0x20...0x7e, using: &rng)) }
            case 5: u = Array(u.reversed())
            case 6: u.insert(contentsOf: "lde".unicodeScalars, at: at)
            case 7: u += Array(repeating: "/".unicodeScalars.first!, count: Int.random(in: 1...300, using: &rng))
            default: u.insert(contentsOf: " ".unicodeScalars, at: at)
            }
        }
        return String(String.UnicodeScalarView(u))
    }

    /// What the test may see change, and what it may not.
    struct Guarded: Equatable {
        var fan: [Bool], valve: [Bool], button: Bool
        var pourStarted: UInt64
        var critical: Bool
    }

    func testMutatedCommandsActOnlyOnWhatIsGrantedAndCostBoundedWork() throws {
        let h = try Harness(Self.yaml, level: .info)
        let d = h.daemon
        let bridge = try XCTUnwrap(d.mqtt)
        var rng = RNG(state: 0x0F22_2026)
        func guarded() throws -> Guarded {
            Guarded(
                fan: try h.chip.outputHistory(.offset(Harness.offset("FAN"))).map(\.value),
                valve: try h.chip.outputHistory(.offset(Harness.offset("VALVE"))).map(\.value),
                button: try h.chip.level(.offset(Harness.offset("BUTTON"))),
                pourStarted: d.counters.sequence["pour"]?.started ?? 0, critical: d.mainMode == "critical")
        }
        func ledWrites() throws -> Int { try h.chip.outputHistory(.offset(Harness.offset("LED"))).count }
        let start = try guarded()
        let ticks0 = d.counters.tasks["tick"]?.runs ?? 0
        let deadline = Date().addingTimeInterval(240)
        var acted = 0, retainedSent = 0
        let refusedBefore = bridge.stats.refused
        let rounds = 3000
        for n in 0..<rounds {
            guard Date() < deadline else { return XCTFail("the fuzz run passed its deadline after \(n) messages: a hang?") }
            var topic = Self.prefix + "/" + Self.topics.randomElement(using: &rng)!
            var payload = Self.payloads.randomElement(using: &rng)!
            let kind = Int.random(in: 0..<100, using: &rng)
            if kind < 20 {
                let g = Self.granted.randomElement(using: &rng)!
                (topic, payload) = (Self.prefix + "/" + g.0, g.1)
            }
            if kind >= 30 { topic = Self.mutate(topic, &rng) }
            if kind >= 60 { payload = Self.mutate(payload, &rng) }
            if kind >= 97 { payload = String(repeating: "x", count: Int.random(in: 200...5000, using: &rng)) }
            let retained = Int.random(in: 0..<10, using: &rng) == 0
            let ledBefore = try ledWrites(), modeBefore = d.mainMode
            let blinkBefore = d.counters.sequence["blink"]?.started ?? 0
            let cells = DidYouMean.cellsComputed
            let logBefore = h.log.utf8.count
            Array(payload.utf8).withUnsafeBytes { bridge.message(topic, $0, retained: retained) }
            XCTAssertLessThanOrEqual(DidYouMean.cellsComputed - cells, DidYouMean.budget, "message \(n): \(Echo(topic))")
            try h.advance(5)
            let logged = h.log.utf8.count - logBefore
            XCTAssertLessThan(logged, 2048, "message \(n) logged \(logged) bytes: \(Echo(topic)) \(Echo(payload))")
            let changed = try ledWrites() != ledBefore || d.mainMode != modeBefore || (d.counters.sequence["blink"]?.started ?? 0) != blinkBefore
            if retained {
                retainedSent += 1
                XCTAssertFalse(changed && d.mainMode != modeBefore, "a retained message changed the mode: \(Echo(topic)) \(Echo(payload))")
                XCTAssertEqual(d.counters.sequence["blink"]?.started ?? 0, blinkBefore, "a retained message started blink")
            }
            if changed { acted += 1 }
            let now = try guarded()
            XCTAssertEqual(now.fan, start.fan, "message \(n) drove fan, which is not granted: \(Echo(topic)) \(Echo(payload))")
            XCTAssertEqual(now.valve.filter { $0 }.count, 0, "message \(n) opened the valve: \(Echo(topic)) \(Echo(payload))")
            XCTAssertEqual(now.button, start.button, "message \(n) moved an input")
            XCTAssertEqual(now.pourStarted, 0, "message \(n) started pour, which is not granted")
            XCTAssertFalse(now.critical, "message \(n) set a mode that is not granted: \(Echo(topic)) \(Echo(payload))")
        }
        // The loop went on: the 10 ms task ran through the whole run's
        // manual time (5 ms a message), and the run reached the commands.
        let ticks = (d.counters.tasks["tick"]?.runs ?? 0) - ticks0
        XCTAssertGreaterThanOrEqual(ticks, UInt64(rounds * 5 / 10 - 1), "the task's runs over \(rounds * 5) ms")
        XCTAssertGreaterThan(bridge.stats.commands, UInt64(rounds / 10), "the granted commands were taken")
        XCTAssertGreaterThan(acted, 0)
        XCTAssertGreaterThan(bridge.stats.refused - refusedBefore, UInt64(rounds / 3), "refused, most of them")
        XCTAssertGreaterThan(retainedSent, rounds / 20)
    }
}
