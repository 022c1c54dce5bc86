import BoardControl
import Boardloop
import BoardSupport
import Logging

/// The stats topic and the control protocol's `status.mqtt`.
extension MQTTBridge {
    // MARK: Stats

    func statsTick() {
        if let i = config.statsInterval { statsTimer?.arm(after: i) }
        guard client.state == .up else { return }
        publish(statsTopic, Array(statsJSON().serialized.utf8), qos: config.qos.states, retain: true)
    }

    func statsJSON() -> JSON {
        let all = daemon.allCounters()
        func ms(_ d: Duration) -> JSON { .double((Double(d.nanosecondsClamped) / 1e3).rounded() / 1e3) }
        var tasks: [(String, JSON)] = []
        var reactions: [(String, JSON)] = []
        var lateP99 = Duration.zero, reactionP99 = Duration.zero
        var held: UInt64 = 0, lost: UInt64 = 0
        for c in all {
            for t in names.tasks {
                guard let tc = c.tasks[t.name] else { continue }
                lateP99 = max(lateP99, tc.p99)
                tasks.append((t.name, .object([
                    ("runs", .int(Int64(clamping: tc.runs))), ("skipped_periods", .int(Int64(clamping: tc.skippedPeriods))),
                    ("late_p50_ms", ms(tc.p50)), ("late_p99_ms", ms(tc.p99)), ("late_max_ms", ms(tc.max)),
                ])))
            }
            for r in names.reactions {
                guard let fires = c.reactionFires[r.name] else { continue }
                let t = c.reactionTimes[r.name]
                reactionP99 = max(reactionP99, t?.p99 ?? .zero)
                reactions.append((r.name, .object([
                    ("fires", .int(Int64(clamping: fires))), ("p50_ms", ms(t?.p50 ?? .zero)), ("p99_ms", ms(t?.p99 ?? .zero)),
                ])))
            }
            for (_, l) in c.lines {
                held &+= l.heldInRing
                lost &+= l.lost
            }
        }
        return .object([
            ("task_late_p99_ms", ms(lateP99)), ("reaction_p99_ms", ms(reactionP99)), ("held", .int(Int64(clamping: held))),
            ("lost", .int(Int64(clamping: lost))), ("tasks", .object(tasks)), ("reactions", .object(reactions)),
            ("mqtt", .object([
                ("connections", .int(Int64(clamping: client.connections))), ("losses", .int(Int64(clamping: client.losses))),
                ("published", .int(Int64(clamping: stats.published))), ("commands", .int(Int64(clamping: stats.commands))),
                ("refused", .int(Int64(clamping: stats.refused))), ("queued", .int(Int64(queued.count - queuedHead))),
                ("queued_sent", .int(Int64(clamping: stats.queuedSent))), ("dropped", .int(Int64(clamping: stats.dropped))),
                ("while_down", .int(Int64(clamping: stats.whileDown))),
            ])),
        ])
    }

    /// The control protocol's `status.mqtt`.
    var status: JSON {
        let state: String
        switch client.state {
        case .idle: state = "stopped"
        case .opening, .handshaking: state = "connecting"
        case .up: state = "connected"
        case .waiting: state = "waiting"
        }
        return .object([
            ("broker", .string("\(config.broker):\(config.port)")), ("client_id", .string(config.clientID)),
            ("topic_prefix", .string(config.topicPrefix)), ("state", .string(state)),
            ("last_error", client.lastError.map(JSON.string) ?? .null),
            ("connections", .int(Int64(clamping: client.connections))), ("losses", .int(Int64(clamping: client.losses))),
            ("published", .int(Int64(clamping: stats.published))), ("queued", .int(Int64(queued.count - queuedHead))),
            ("dropped", .int(Int64(clamping: stats.dropped))), ("refused", .int(Int64(clamping: stats.refused))),
        ])
    }
}
