import BoardControl

/// Home Assistant's MQTT discovery for a board, device-based: one retained
/// message on `<prefix>/device/<id>/config` with the device (`dev`), the
/// origin (`o`), availability on the will's topic, and one component per
/// entity under `cmps`, each with its platform (`p`) and a `unique_id`:
///
/// - each published input: a `binary_sensor`, and when it has gestures an
///   `event` with their types;
/// - each output: a `switch` when MQTT may command it, else a `binary_sensor`;
/// - each sequence MQTT may run: a `button`;
/// - the main loop's mode, when MQTT may set modes: a `select` of those modes;
/// - task lateness, reaction latency (`sensor`, ms, measurement) and lost
///   events (`sensor`, total_increasing), from the stats topic.
///
/// A component published before and gone now (a reload removed it) is sent
/// once more as its platform alone, which is how Home Assistant is told to
/// remove it from a device.
enum MQTTDiscovery {
    /// A component's key under `cmps` (its `unique_id` is
    /// `boardd_<client id>_<key>`): one prefix per kind of entity, so no
    /// name of one kind can make the key of another (a line `water_run`
    /// beside a sequence `water`, a line `mode`); within a kind the names
    /// are the config's own, distinct, and already made of what an id may
    /// hold (letters, digits, `_` and `-`).
    enum Key {
        static func line(_ name: String) -> String { "line_" + MQTTBridge.objectID(name) }
        static func gesture(_ line: String) -> String { "gesture_" + MQTTBridge.objectID(line) }
        static func sequence(_ name: String) -> String { "sequence_" + MQTTBridge.objectID(name) }
        static func mode(_ loop: String) -> String { "loop_" + MQTTBridge.objectID(loop) + "_mode" }
        static let taskLateness = "stats_task_lateness_p99"
        static let reactionLatency = "stats_reaction_latency_p99"
        static let lostEvents = "stats_lost_events"
    }

    /// The keys earlier versions of boardd gave the same entities (the
    /// name alone, `NAME_gesture`, `NAME_run`, `mode`, the stats' names),
    /// with their platforms: sent once as removed after a start, so an
    /// upgraded board leaves no stale entity behind.
    static func legacyKeys(config c: MQTTConfig, names: DaemonConfig) -> [String: String] {
        var out: [String: String] = [:]
        for lid in c.published {
            let l = names[lid]
            out[MQTTBridge.objectID(l.name)] = l.isOutput && c.writableOutputs.contains(lid) ? "switch" : "binary_sensor"
            if l.isInput, let g = l.gestures, !g.kinds.isEmpty { out[MQTTBridge.objectID("\(l.name)_gesture")] = "event" }
        }
        for sid in c.writableSequences { out[MQTTBridge.objectID("\(names[sid].name)_run")] = "button" }
        if !c.writableModes.isEmpty { out["mode"] = "select" }
        if c.statsInterval != nil {
            for k in ["task_lateness_p99", "reaction_latency_p99", "lost_events"] { out[k] = "sensor" }
        }
        return out
    }

    static func payload(config c: MQTTConfig, names: DaemonConfig, removed before: [String: String]) -> (JSON, [String: String]) {
        let id = MQTTBridge.objectID(c.clientID)
        let p = c.topicPrefix
        var cmps: [(String, JSON)] = []
        var now: [String: String] = [:]
        // Home Assistant does not pass the root's `qos` on to the
        // components of a device: each says its own.
        let states: (String, JSON) = ("qos", .int(Int64(c.qos.states))), commands: (String, JSON) = ("qos", .int(Int64(c.qos.commands)))
        func add(_ key: String, _ name: String, _ platform: String, _ fields: [(String, JSON)]) {
            now[key] = platform
            cmps.append((key, .object([("p", .string(platform)), ("unique_id", .string("boardd_\(id)_\(key)")), ("name", .string(name))] + fields)))
        }
        for lid in c.published {
            let l = names[lid]
            let state = "\(p)/line/\(l.name)/state"
            if l.isOutput && c.writableOutputs.contains(lid) {
                add(Key.line(l.name), l.name, "switch", [("stat_t", .string(state)), ("cmd_t", .string("\(p)/line/\(l.name)/set")),
                    ("pl_on", .string("ON")), ("pl_off", .string("OFF")), commands])
            } else {
                add(Key.line(l.name), l.name, "binary_sensor", [("stat_t", .string(state)), ("pl_on", .string("ON")), ("pl_off", .string("OFF")), states])
            }
            if l.isInput, let g = l.gestures, !g.kinds.isEmpty {
                add(Key.gesture(l.name), "\(l.name) gesture", "event", [
                    ("stat_t", .string("\(p)/line/\(l.name)/gesture")), ("evt_typ", .array(g.kinds.map { .string($0.rawValue) })), states,
                ])
            }
        }
        for sid in c.writableSequences {
            let s = names[sid]
            add(Key.sequence(s.name), "\(s.name) run", "button", [("cmd_t", .string("\(p)/sequence/\(s.name)/run")), ("pl_prs", .string("START")), commands])
        }
        if !c.writableModes.isEmpty {
            // The main loop's mode. Its state can be any of the config's
            // modes (a sequence's, a reaction's), so every mode is an
            // option; one MQTT may not set is refused on the error topic.
            let loop = names.loops[0].name
            add(Key.mode(loop), "mode", "select", [
                ("stat_t", .string("\(p)/loop/\(loop)/mode")), ("cmd_t", .string("\(p)/loop/\(loop)/mode/set")),
                ("options", .array(names.modes.map { .string($0.name) })), commands,
            ])
        }
        if c.statsInterval != nil {
            let stats = "\(p)/stats"
            if !names.tasks.isEmpty {
                add(Key.taskLateness, "task lateness p99", "sensor", [("stat_t", .string(stats)), ("val_tpl", .string("{{ value_json.task_late_p99_ms }}")),
                    ("unit_of_meas", .string("ms")), ("stat_cla", .string("measurement")), ("ent_cat", .string("diagnostic")), states])
            }
            if !names.reactions.isEmpty {
                add(Key.reactionLatency, "reaction latency p99", "sensor", [("stat_t", .string(stats)), ("val_tpl", .string("{{ value_json.reaction_p99_ms }}")),
                    ("unit_of_meas", .string("ms")), ("stat_cla", .string("measurement")), ("ent_cat", .string("diagnostic")), states])
            }
            add(Key.lostEvents, "lost events", "sensor", [("stat_t", .string(stats)), ("val_tpl", .string("{{ value_json.lost }}")),
                ("stat_cla", .string("total_increasing")), ("ent_cat", .string("diagnostic")), states])
        }
        // Gone since the last discovery (or, at the first after a start,
        // an earlier version's keys): the platform alone removes it.
        let gone = before.isEmpty ? legacyKeys(config: c, names: names) : before
        for (k, platform) in gone.sorted(by: { $0.key < $1.key }) where now[k] == nil {
            cmps.append((k, .object([("p", .string(platform))])))
        }
        let version = Release.version
        let root: JSON = .object([
            ("dev", .object([
                ("ids", .array([.string("boardd_\(id)")])), ("name", .string(c.clientID)), ("mf", .string("boardloop")),
                ("mdl", .string(names.board.title.isEmpty ? names.board.name : names.board.title)), ("sw", .string(version)),
            ])),
            ("o", .object([("name", .string("boardd")), ("sw", .string(version))])),
            ("avty_t", .string("\(p)/status")), ("pl_avail", .string("online")), ("pl_not_avail", .string("offline")),
            ("qos", .int(Int64(c.qos.states))),
            ("cmps", .object(cmps)),
        ])
        return (root, now)
    }
}
