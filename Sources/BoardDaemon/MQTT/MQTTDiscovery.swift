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
    static func payload(config c: MQTTConfig, names: DaemonConfig, removed before: [String: String]) -> (JSON, [String: String]) {
        let id = MQTTBridge.objectID(c.clientID)
        let p = c.topicPrefix
        var cmps: [(String, JSON)] = []
        var now: [String: String] = [:]
        func add(_ key: String, _ platform: String, _ fields: [(String, JSON)]) {
            let k = MQTTBridge.objectID(key)
            now[k] = platform
            cmps.append((k, .object([("p", .string(platform)), ("unique_id", .string("boardd_\(id)_\(k)")), ("name", .string(key))] + fields)))
        }
        for lid in c.published {
            let l = names[lid]
            let state = "\(p)/line/\(l.name)/state"
            if l.isOutput && c.writableOutputs.contains(lid) {
                add(l.name, "switch", [("stat_t", .string(state)), ("cmd_t", .string("\(p)/line/\(l.name)/set")), ("pl_on", .string("ON")),
                    ("pl_off", .string("OFF")), ("qos", .int(Int64(c.qos.commands)))])
            } else {
                add(l.name, "binary_sensor", [("stat_t", .string(state)), ("pl_on", .string("ON")), ("pl_off", .string("OFF"))])
            }
            if l.isInput, let g = l.gestures, !g.kinds.isEmpty {
                add("\(l.name)_gesture", "event", [
                    ("stat_t", .string("\(p)/line/\(l.name)/gesture")), ("evt_typ", .array(g.kinds.map { .string($0.rawValue) })),
                ])
            }
        }
        for sid in c.writableSequences {
            let s = names[sid]
            add("\(s.name)_run", "button", [("cmd_t", .string("\(p)/sequence/\(s.name)/run")), ("pl_prs", .string("START")),
                ("qos", .int(Int64(c.qos.commands)))])
        }
        if !c.writableModes.isEmpty {
            // The main loop's mode, among those MQTT may set.
            let loop = names.loops[0].name
            add("mode", "select", [
                ("stat_t", .string("\(p)/loop/\(loop)/mode")), ("cmd_t", .string("\(p)/loop/\(loop)/mode/set")),
                ("options", .array(c.writableModes.map { .string(names[$0].name) })), ("qos", .int(Int64(c.qos.commands))),
            ])
        }
        if c.statsInterval != nil {
            let stats = "\(p)/stats"
            if !names.tasks.isEmpty {
                add("task_lateness_p99", "sensor", [("stat_t", .string(stats)), ("val_tpl", .string("{{ value_json.task_late_p99_ms }}")),
                    ("unit_of_meas", .string("ms")), ("stat_cla", .string("measurement")), ("ent_cat", .string("diagnostic"))])
            }
            if !names.reactions.isEmpty {
                add("reaction_latency_p99", "sensor", [("stat_t", .string(stats)), ("val_tpl", .string("{{ value_json.reaction_p99_ms }}")),
                    ("unit_of_meas", .string("ms")), ("stat_cla", .string("measurement")), ("ent_cat", .string("diagnostic"))])
            }
            add("lost_events", "sensor", [("stat_t", .string(stats)), ("val_tpl", .string("{{ value_json.lost }}")),
                ("stat_cla", .string("total_increasing")), ("ent_cat", .string("diagnostic"))])
        }
        // Gone since the last discovery: the platform alone removes it.
        for (k, platform) in before.sorted(by: { $0.key < $1.key }) where now[k] == nil {
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
