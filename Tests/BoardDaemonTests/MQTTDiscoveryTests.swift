import BoardControl
@testable import BoardDaemon
import Testing

/// Home Assistant's discovery payload, as built from a config: ids no two
/// entities share whatever they are named, the mode select's options, each
/// component's QoS, an earlier version's ids removed once.
@Suite struct MQTTDiscoveryTests {
    static let yaml = """
        board: demo
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true }, gestures: { one_of: [click, hold] } }
          button_gesture: { pin: ESTOP, input: { edge: both } }
          water_run: { pin: CHATTER, input: { edge: both } }
          mode: { pin: LED, output: {} }
          water: { pin: VALVE, output: {} }
        modes:
          critical: { admits: [high] }
          quiet: { admits: [high] }
        sequences:
          water: { mode: critical, steps: [ set: { water: on }, wait: 1s, set: { water: off } ] }
        tasks:
          tick: { every: 1s, do: [ toggle: mode ] }
        reactions:
          - { on: { line: button, gesture: click }, do: [ sequence: water ] }
        mqtt:
          broker: 127.0.0.1
          client_id: gh-1
          qos: { states: 1, commands: 2 }
          commands: { outputs: [water], sequences: [water], modes: [quiet] }
          discovery: { enabled: true }
        """

    func payload(_ yaml: String = Self.yaml, before: [String: String] = ["x": "y"]) throws -> (cmps: [(String, JSON)], now: [String: String]) {
        let config = try #require(ConfigLoader.load(text: yaml, file: "t.yaml", options: Fixtures.options()).config)
        let mqtt = try #require(config.mqtt)
        let (root, now) = MQTTDiscovery.payload(config: mqtt, names: config, removed: before)
        return (try #require(root["cmps"]?.members), now)
    }

    /// Names that made the same key in the old scheme (`button_gesture`
    /// beside `button`'s gestures, `water_run` beside the sequence `water`,
    /// a line `mode`): every entity keeps its own key and unique_id.
    @Test func namesOfDifferentKindsNeverShareAnID() throws {
        let (cmps, now) = try payload()
        let live = cmps.filter { $0.1.members?.count ?? 0 > 1 }
        let keys = live.map(\.0)
        #expect(Set(keys).count == keys.count, "\(keys)")
        let ids = live.compactMap { $0.1["unique_id"]?.string }
        #expect(Set(ids).count == ids.count && ids.count == keys.count, "\(ids)")
        // 5 lines, 1 gesture event, 1 sequence button, 1 mode select, 3 stats sensors.
        #expect(keys.count == 11, "\(keys)")
        #expect(now.count == 11)
        let c = Dictionary(uniqueKeysWithValues: live)
        #expect(c["line_button"]?["p"] == .string("binary_sensor"))
        #expect(c["gesture_button"]?["p"] == .string("event"))
        #expect(c["line_button_gesture"]?["p"] == .string("binary_sensor"))
        #expect(c["line_water_run"]?["p"] == .string("binary_sensor"))
        #expect(c["sequence_water"]?["p"] == .string("button"))
        #expect(c["line_water"]?["p"] == .string("switch"))
        #expect(c["line_mode"]?["p"] == .string("binary_sensor"))
        #expect(c["loop_main_mode"]?["p"] == .string("select"))
        #expect(c["line_button"]?["unique_id"] == .string("boardd_gh-1_line_button"))
    }

    /// The select's state is any mode the loop is in (a sequence's
    /// `critical`, the `default`): every mode is an option, so Home
    /// Assistant never sees a state outside them.
    @Test func theModeSelectOffersEveryModeItsStateCanBe() throws {
        let c = Dictionary(uniqueKeysWithValues: try payload().cmps)
        #expect(c["loop_main_mode"]?["options"] == .array([.string("default"), .string("critical"), .string("quiet")]))
    }

    /// The root's qos is not passed on to a device's components: each
    /// says its own — the states' for what it reads, the commands' for
    /// what it commands.
    @Test func everyComponentSaysItsQoS() throws {
        for (k, v) in try payload().cmps where v.members?.count ?? 0 > 1 {
            let commanded = v["cmd_t"] != nil
            #expect(v["qos"] == .int(commanded ? 2 : 1), "\(k): \(v.serialized)")
        }
    }

    /// The first discovery after a start removes what an earlier version
    /// published under its keys (the name alone, NAME_gesture, NAME_run,
    /// mode); later ones only what this one published and is gone.
    @Test func theFirstDiscoveryRemovesAnEarlierVersionsIDs() throws {
        let first = Dictionary(uniqueKeysWithValues: try payload(before: [:]).cmps)
        // (`water_run` was the key of both the line and the sequence's
        // button; the payload's last, the button, is what it removes.)
        for (k, p) in [("button", "binary_sensor"), ("water_run", "button"), ("water", "switch"), ("mode", "select"), ("lost_events", "sensor")] {
            #expect(first[k] == .object([("p", .string(p))]), "\(k)")
        }
        // `button_gesture`: the old key of both the line and button's
        // gestures; removed once, as the one platform the old payload kept last.
        #expect(first["button_gesture"]?.members?.count == 1)
        let later = try payload(before: ["line_gone": "switch"]).cmps
        #expect(later.filter { $0.1.members?.count == 1 }.map(\.0) == ["line_gone"])
    }
}
