import BoardControl
@testable import BoardDaemon
import Foundation
import Glibc
import Testing

/// Every discovery payload boardd builds, read by Home Assistant's own
/// code: `tests-ha/check_discovery.py`, in the venv with Home Assistant
/// 2025.4.4 that `scripts/install-deps.sh` makes, expands each payload's
/// abbreviations and validates the device and each component with HA's
/// schemas, as HA does when the message arrives; a schema error, a key HA
/// drops (misspelt) or a unique_id twice makes it exit non-zero.
@Suite struct MQTTHomeAssistantSchemaTests {
    /// The python of the venv scripts/install-deps.sh makes, or a failure
    /// saying to make it: these tests do not skip.
    static func python() throws -> String {
        try PythonTools.python(venv: "ha-venv", "python", installs: "Home Assistant 2025.4.4")
    }

    static let checker = Fixtures.packageRoot + "/tests-ha/check_discovery.py"

    /// A discovery message as boardd publishes it: its topic and the
    /// payload's JSON text.
    struct Message { var topic: String; var payload: String }

    static func config(_ yaml: String) throws -> DaemonConfig {
        let loaded = ConfigLoader.load(text: yaml, file: "t.yaml", options: Fixtures.options())
        return try #require(loaded.config, "\(loaded.diagnostics.map(\.description))")
    }

    /// The message boardd publishes for a config, `before` what the last
    /// one had (empty: the first after a start).
    static func message(_ config: DaemonConfig, before: [String: String] = [:]) throws -> Message {
        let mqtt = try #require(config.mqtt)
        let (root, _) = MQTTDiscovery.payload(config: mqtt, names: config, removed: before)
        return Message(topic: MQTTBridge.discoveryTopic(mqtt), payload: root.serialized)
    }

    /// The checker on the messages: its exit status and what it printed.
    static func check(_ messages: [Message], prefix: String? = nil) throws -> (status: Int32, output: String) {
        let python = try python()
        let file = NSTemporaryDirectory() + "ha-discovery-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).json"
        defer { try? FileManager.default.removeItem(atPath: file) }
        let list = JSON.array(messages.map { .object([("topic", .string($0.topic)), ("payload", .string($0.payload))]) })
        try list.serialized.write(toFile: file, atomically: true, encoding: .utf8)
        return try PythonTools.run(python, [checker, file] + (prefix.map { ["--prefix", $0] } ?? []))
    }

    static func expectAccepted(_ messages: [Message], prefix: String? = nil, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let (status, output) = try check(messages, prefix: prefix)
        #expect(status == 0, "Home Assistant 2025.4.4 does not read it as sent:\n\(output)\n\(messages.map(\.payload))", sourceLocation: sourceLocation)
        #expect(output.contains("ok: \(messages.count) discovery message(s)"), "\(output)", sourceLocation: sourceLocation)
    }

    /// MQTTDiscoveryTests' config: every kind of component (binary
    /// sensors of inputs and outputs, a gesture event, a switch, a
    /// sequence's button, the mode select, the three stats sensors), names
    /// that made one key in the old scheme; the first discovery after a
    /// start (an earlier version's keys removed) and a later one removing
    /// a component that went.
    @Test func everyKindOfComponentAsTheFirstAndALaterDiscovery() throws {
        let c = try Self.config(MQTTDiscoveryTests.yaml)
        try Self.expectAccepted([try Self.message(c)])
        try Self.expectAccepted([try Self.message(c, before: ["line_gone": "switch", "gesture_gone": "event"])])
    }

    /// Everything on (gestures of every kind, several commanded outputs,
    /// sequences and modes, stats), then everything off (published lines
    /// only, no commands, no gestures, no stats), and a config with its own
    /// topic prefix, discovery prefix and a client id that is no object id.
    @Test func everythingOnEverythingOffAndOwnPrefixes() throws {
        let on = """
            board: demo
            lines:
              button: { pin: BUTTON, input: { edge: both, active_low: true }, gestures: { one_of: [click, double_click, triple_click, hold] } }
              estop: { pin: ESTOP, input: { edge: both }, gestures: { one_of: [click, hold] } }
              valve: { pin: VALVE, output: {} }
              led: { pin: LED, output: {} }
            modes:
              critical: { admits: [high] }
              quiet: { admits: [high] }
              away: { admits: [high] }
            sequences:
              water: { mode: critical, steps: [ set: { valve: on }, wait: 1s, set: { valve: off } ] }
              blink: { steps: [ set: { led: on }, wait: 100ms, set: { led: off } ] }
            tasks:
              tick: { every: 1s, do: [ toggle: led ] }
            reactions:
              - { on: { line: button, gesture: click }, do: [ sequence: water ] }
            mqtt:
              broker: 127.0.0.1
              client_id: board-on
              commands: { outputs: [valve, led], sequences: [water, blink], modes: [quiet, away] }
              stats_interval: 5s
              discovery: { enabled: true }
            """
        let off = """
            board: demo
            lines:
              button: { pin: BUTTON, input: { edge: both, active_low: true } }
              valve: { pin: VALVE, output: {} }
            mqtt:
              broker: 127.0.0.1
              client_id: board-off
              stats_interval: off
              discovery: { enabled: true }
            """
        let own = """
            board: demo
            lines:
              button: { pin: BUTTON, input: { edge: both }, gestures: { one_of: [click, hold] } }
              valve: { pin: VALVE, output: {} }
            sequences:
              water: { steps: [ set: { valve: on }, wait: 1s, set: { valve: off } ] }
            mqtt:
              broker: 127.0.0.1
              client_id: Büro.1
              topic_prefix: house/ground floor/board
              commands: { outputs: [valve], sequences: [water] }
              discovery: { enabled: true, prefix: ha-discovery }
            """
        let onMessage = try Self.message(try Self.config(on))
        for kind in ["double_click", "triple_click", "hold"] { #expect(onMessage.payload.contains("\"\(kind)\""), "\(onMessage.payload)") }
        try Self.expectAccepted([onMessage, try Self.message(try Self.config(off))])
        let ownMessage = try Self.message(try Self.config(own))
        #expect(ownMessage.topic == "ha-discovery/device/B_ro_1/config")
        try Self.expectAccepted([ownMessage], prefix: "ha-discovery")
    }

    /// examples/fleet's three greenhouses, each with the fleet's MQTT
    /// package, as one Home Assistant sees them: three devices, no
    /// unique_id shared.
    @Test func theFleetsThreeBoards() throws {
        let dir = try PythonTools.fleetDirectory(password: "fleet")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var messages: [Message] = []
        for n in 1...3 {
            let board = try String(contentsOfFile: Fixtures.examples + "/fleet/greenhouse-\(n).yaml", encoding: .utf8)
            let include = "  common: !include common.yaml\n"
            #expect(board.contains(include))
            let file = dir + "/greenhouse-\(n).yaml"
            try board.replacingOccurrences(of: include, with: include + "  mqtt: !include mqtt.yaml\n")
                .write(toFile: file, atomically: true, encoding: .utf8)
            let loaded = ConfigLoader.load(path: file, options: Fixtures.options())
            messages.append(try Self.message(try #require(loaded.config, "\(loaded.diagnostics.map(\.description))")))
        }
        #expect(messages.map(\.topic) == (1...3).map { "homeassistant/device/greenhouse-\($0)/config" })
        try Self.expectAccepted(messages)
    }

    /// The check is no formality: a payload with a misspelt key (HA would
    /// drop it without a word) and one with a unique_id twice each make the
    /// checker fail, naming the component; the same payload unchanged
    /// passes.
    @Test func theCheckerCatchesAMisspeltKeyAndADuplicateUniqueID() throws {
        let good = try Self.message(try Self.config(MQTTDiscoveryTests.yaml), before: ["line_gone": "switch"])
        try Self.expectAccepted([good])

        var misspelt = good
        misspelt.payload = good.payload.replacingOccurrences(of: "\"pl_prs\":", with: "\"pl_press\":")
        #expect(misspelt.payload != good.payload)
        let m = try Self.check([misspelt])
        #expect(m.status != 0, "\(m.output)")
        #expect(m.output.contains("component 'sequence_water'") && m.output.contains("'pl_press'"), "\(m.output)")

        var twice = good
        twice.payload = good.payload.replacingOccurrences(of: "\"boardd_gh-1_line_water\"", with: "\"boardd_gh-1_line_mode\"")
        #expect(twice.payload != good.payload)
        let d = try Self.check([twice])
        #expect(d.status != 0, "\(d.output)")
        #expect(d.output.contains("the unique_id 'boardd_gh-1_line_mode' is also"), "\(d.output)")

        // Two boards with one client id: one device id, and every unique_id twice.
        let both = try Self.check([good, good])
        #expect(both.status != 0 && both.output.contains("the device id 'gh-1'"), "\(both.output)")
    }
}
