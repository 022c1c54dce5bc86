import BoardControl
import Boardloop
import BoardSupport
import Logging

/// The command topics: a codec of the command service (`RemoteCommands`).
extension MQTTBridge {
    // MARK: Commands

    func message(_ topic: String, _ raw: UnsafeRawBufferPointer, retained: Bool) {
        if let d = config.discovery, topic == "\(d.prefix)/status" {
            if String(decoding: raw, as: UTF8.self) == "online" {
                // Home Assistant started: discovery again, after a short
                // random delay (a fleet does not answer at once).
                discoveryTimer?.arm(after: .milliseconds(Int64.random(in: 500...3000)))
            }
            return
        }
        guard topic.hasPrefix(prefix + "/") else { return }
        guard raw.contains(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0a && $0 != 0x0d }) else {
            // An empty publish is how MQTT clears a retained message: it is
            // never a command, and not an error either.
            logger.info("mqtt: \(Echo(topic).bare): an empty payload is not a command; ignored")
            return
        }
        let payload = String(decoding: raw.prefix(Self.maxPayload), as: UTF8.self)
        guard !retained else {
            // A retained command would run again at every connection: it
            // is refused, and cleared from the broker (an empty retained
            // message), so it is not there the next time either.
            refuse(topic, payload, "a retained command is ignored and cleared from the broker (publish commands without the retain flag)")
            _ = publish(topic, [], qos: config.qos.commands, retain: true)
            return
        }
        guard raw.count <= Self.maxPayload else {
            refuse(topic, payload, "the payload has \(raw.count) bytes; a command has at most \(Self.maxPayload)")
            return
        }
        let parts = topic.dropFirst(prefix.count + 1).split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        do {
            switch (parts.count, parts.first) {
            case (3, "line") where parts[2] == "set": try setLine(parts[1], payload)
            case (3, "sequence") where parts[2] == "run": try runSequence(parts[1], payload)
            case (4, "loop") where parts[2] == "mode" && parts[3] == "set": try setMode(parts[1], payload)
            default: throw Refusal("no such command topic (commands: line/NAME/set, sequence/NAME/run, loop/NAME/mode/set)")
            }
            stats.commands &+= 1
        } catch let r as Refusal {
            refuse(topic, payload, r.message)
        } catch {
            refuse(topic, payload, "\(error)")
        }
    }

    struct Refusal: Error {
        let message: String
        init(_ m: String) { message = m }
    }

    /// Logged and answered on the error topic. The topic and the payload
    /// come from the wire: the log line shows them bounded and escaped
    /// (`Echo`), the answer the topic bounded (a topic may be 64 KiB).
    private func refuse(_ topic: String, _ payload: String, _ why: String) {
        stats.refused &+= 1
        let shown = Echo(topic).bare
        logger.warning("mqtt: refused \(shown) \"\(Echo(payload).bare)\": \(why)")
        let o: JSON = .object([("topic", .string(shown)), ("payload", .string(payload)), ("error", .string(why))])
        publish(errorTopic, Array(o.serialized.utf8), qos: config.qos.commands, retain: false)
    }

    /// What `mqtt.commands` permits.
    private var permissions: RemotePermissions {
        RemotePermissions(
            outputs: config.writableOutputs, sequences: config.writableSequences, modes: config.writableModes, key: "mqtt.commands",
            over: "over MQTT")
    }

    /// Runs `body` on the command service; its refusal is refused here.
    private func remote(_ body: (RemoteCommands) throws -> Void) throws {
        guard let service = daemon.remote else { throw Refusal("the command service is not running") }
        do { try body(service) } catch let e as RemoteError { throw Refusal(e.message) }
    }

    private func setLine(_ name: String, _ payload: String) throws {
        let words = payload.trimmingWhitespace.split(separator: " ", omittingEmptySubsequences: true)
        let p = permissions
        try remote { r in
            let id = try r.output(name, p)
            switch words.first?.uppercased() {
            case "ON" where words.count == 1: try r.set(id, true, by: .mqtt)
            case "OFF" where words.count == 1: try r.set(id, false, by: .mqtt)
            case "TOGGLE" where words.count == 1: try r.toggle(id, by: .mqtt)
            case "PULSE" where words.count == 2:
                let d: Duration
                do throws(RemoteError) { d = try RemoteCommands.pulseDuration(String(words[1])) } catch {
                    throw RemoteError(error.code, "PULSE: \(error.message)")
                }
                try r.pulse(id, for: d, by: .mqtt)
            default:
                throw RemoteError(.badArgument, "expected ON, OFF, TOGGLE or PULSE with a duration (PULSE 500ms)")
            }
        }
    }

    private func runSequence(_ name: String, _ payload: String) throws {
        let p = permissions
        try remote { r in
            let s = try r.sequence(name, p)
            switch payload.trimmingWhitespace.uppercased() {
            case "START", "RUN", "PRESS": try r.start(s, by: .mqtt)
            case "STOP": try r.stop(s, by: .mqtt)
            default: throw RemoteError(.badArgument, "expected START (or RUN, or PRESS) or STOP")
            }
        }
    }

    private func setMode(_ loopName: String, _ payload: String) throws {
        let p = permissions
        try remote { r in try r.setMode(loop: try r.loopIndex(loopName), try r.mode(payload.trimmingWhitespace, p), by: .mqtt) }
    }
}
