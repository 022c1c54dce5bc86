import BoardloopTestSupport
import Foundation
import Glibc
import XCTest

/// The built boardd (`--mock`) against a real mosquitto broker each test
/// starts: discovery, states and events, commands, refusals, credentials,
/// TLS, a broker that restarts, a queue that overflows, a reload.
final class MQTTTests: XCTestCase {
    /// A board with a button (gestures), two outputs (one commandable), a
    /// sequence (runnable) and a task.
    static func config(
        port: Int, extra: String = "", publish: String = "", id: String = "bench-1", reconnect: String = "{ min: 200ms, max: 1s }"
    ) -> String {
        """
        board: demo
        lines:
          button:
            pin: BUTTON
            input: { edge: both, active_low: true, debounce: 5ms }
            gestures: { one_of: [click, double_click, hold], gap: 150ms, hold: 800ms }
          relay: { pin: VALVE, output: { initial: off, safe: off } }
          lamp: { pin: LED, output: { initial: off, safe: off } }
        priorities: [low, high]
        modes:
          quiet: { admits: [high] }
        sequences:
          blink:
            steps:
              - set: { lamp: on }
              - wait: 3s
              - set: { lamp: off }
        tasks:
          tick: { every: 500ms, do: [ log: { level: debug, message: tick } ] }
        reactions:
          - name: flip
            on: { line: button, gesture: click }
            do: [ toggle: relay ]
        mqtt:
          broker: 127.0.0.1
          port: \(port)
          client_id: \(id)
          commands: { outputs: [relay], sequences: [blink], modes: [quiet] }
          discovery: { enabled: true }
          stats_interval: 1s
          reconnect: \(reconnect)
        \(publish)\(extra)
        """
    }

    final class Run {
        let dir: String
        let socket: String
        let file: String
        let daemon: Spawned

        init(_ yaml: String, files: [String: String] = [:]) throws {
            dir = NSTemporaryDirectory() + "mqtt-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            for (name, text) in files {
                try text.write(toFile: dir + "/" + name, atomically: true, encoding: .utf8)
                chmod(dir + "/" + name, 0o600)
            }
            file = dir + "/board.yaml"
            socket = dir + "/boardd.sock"
            try yaml.replacingOccurrences(of: "$DIR", with: dir).write(toFile: file, atomically: true, encoding: .utf8)
            chmod(file, 0o644)
            daemon = try Spawned(["--config", file, "--mock", "--socket", socket, "--log-level", "info"])
        }

        deinit {
            daemon.signal(SIGTERM)
            _ = daemon.exitStatus(seconds: 20)
            try? FileManager.default.removeItem(atPath: dir)
        }

        func control(_ json: String) throws -> String { try controlRequest(socket, json) }
    }

    let prefix = "boardd/bench-1"

    func testDiscoveryStatesEventsCommandsAndRefusals() throws {
        let broker = try Broker()
        let probe = try Probe(port: broker.port)
        let p = prefix
        // A command left retained on the broker would run at every
        // connection: refused, not acted on.
        probe.publish("\(p)/line/relay/set", "ON", retain: true)
        let run = try Run(Self.config(port: broker.port))
        XCTAssertNotNil(probe.wait("\(p)/status", "online"), "\(probe.messages)\n\(run.daemon.log)")
        let stale = try XCTUnwrap(probe.wait { $0.topic == "\(p)/error" && ($0.json?["error"] as? String ?? "").contains("retained") })
        XCTAssertEqual(stale.json?["topic"] as? String, "\(p)/line/relay/set")
        XCTAssertEqual(
            stale.json?["error"] as? String, "a retained command is ignored and cleared from the broker (publish commands without the retain flag)")
        XCTAssertTrue(run.daemon.waitFor("mqtt: \(p)/line/relay/set: an empty payload is not a command; ignored"), run.daemon.log)
        // A new subscriber gets no retained command: boardd cleared it (a
        // retained marker published after shows the retained ones came).
        probe.publish("\(p)/marker", "here", retain: true)
        let newcomer = try Probe(port: broker.port, subscribe: "\(p)/#")
        XCTAssertNotNil(newcomer.wait("\(p)/marker", "here"), "\(newcomer.messages)")
        XCTAssertNil(newcomer.messages.first { $0.topic == "\(p)/line/relay/set" }, "cleared from the broker: \(newcomer.messages)")
        probe.publish("\(p)/marker", "", retain: true)

        // Discovery: device-based, with Home Assistant's required keys.
        let disc = try XCTUnwrap(probe.wait("homeassistant/device/bench-1/config"), "\(probe.messages)")
        XCTAssertTrue(disc.retained || probe.on(disc.topic).count == 1)
        let d = try XCTUnwrap(disc.json)
        let dev = try XCTUnwrap(d["dev"] as? [String: Any])
        XCTAssertEqual(dev["ids"] as? [String], ["boardd_bench-1"])
        XCTAssertEqual(dev["name"] as? String, "bench-1")
        XCTAssertEqual((d["o"] as? [String: Any])?["name"] as? String, "boardd")
        XCTAssertEqual(d["avty_t"] as? String, "\(p)/status")
        let cmps = try XCTUnwrap(d["cmps"] as? [String: [String: Any]])
        for (k, c) in cmps {
            XCTAssertNotNil(c["p"] as? String, "component \(k) has no platform")
            // (A platform alone: an earlier version's id, removed at the first discovery.)
            if c.count > 1 { XCTAssertEqual(c["unique_id"] as? String, "boardd_bench-1_\(k)") }
        }
        XCTAssertEqual(cmps["button"]?.count, 1, "an earlier version's id for the button, removed")
        XCTAssertEqual(cmps["line_button"]?["p"] as? String, "binary_sensor")
        XCTAssertEqual(cmps["line_button"]?["stat_t"] as? String, "\(p)/line/button/state")
        XCTAssertEqual(cmps["gesture_button"]?["p"] as? String, "event")
        XCTAssertEqual(cmps["gesture_button"]?["evt_typ"] as? [String], ["click", "double_click", "hold"])
        XCTAssertEqual(cmps["line_relay"]?["p"] as? String, "switch")
        XCTAssertEqual(cmps["line_relay"]?["cmd_t"] as? String, "\(p)/line/relay/set")
        XCTAssertEqual(cmps["line_lamp"]?["p"] as? String, "binary_sensor", "not commandable: a sensor, not a switch")
        XCTAssertEqual(cmps["sequence_blink"]?["p"] as? String, "button")
        XCTAssertEqual(cmps["sequence_blink"]?["cmd_t"] as? String, "\(p)/sequence/blink/run")
        XCTAssertEqual(cmps["stats_task_lateness_p99"]?["unit_of_meas"] as? String, "ms")
        XCTAssertEqual(cmps["stats_task_lateness_p99"]?["stat_cla"] as? String, "measurement")
        XCTAssertEqual(cmps["stats_lost_events"]?["stat_cla"] as? String, "total_increasing")
        XCTAssertEqual(cmps["loop_main_mode"]?["p"] as? String, "select")
        XCTAssertEqual(cmps["loop_main_mode"]?["options"] as? [String], ["default", "quiet"])
        XCTAssertEqual(cmps["loop_main_mode"]?["cmd_t"] as? String, "\(p)/loop/main/mode/set")

        // Retained states at the start.
        XCTAssertNotNil(probe.wait("\(p)/line/button/state", "OFF"))
        XCTAssertNotNil(probe.wait("\(p)/line/relay/state", "OFF"))
        XCTAssertNotNil(probe.wait("\(p)/sequence/blink/state", "idle"))
        XCTAssertNotNil(probe.wait("\(p)/loop/main/mode", "default"))

        // A press on the mock line: its state, its edges (with kernel
        // timestamps), the click gesture, and the reaction's write.
        XCTAssertTrue(try run.control(#"{"v":1,"id":1,"cmd":"click","line":"button"}"#).contains(#""ok":true"#))
        XCTAssertNotNil(probe.wait("\(p)/line/button/state", "ON"), "\(probe.messages)")
        let edge = try XCTUnwrap(probe.wait { $0.topic == "\(p)/line/button/edge" }?.json)
        XCTAssertEqual(edge["value"] as? String, "ON")
        XCTAssertGreaterThan(edge["t_ns"] as? Int64 ?? (edge["t_ns"] as? Int).map(Int64.init) ?? 0, 1_700_000_000_000_000_000)
        XCTAssertNotNil(edge["mono_ns"])
        let g = try XCTUnwrap(probe.wait { $0.topic == "\(p)/line/button/gesture" }?.json)
        XCTAssertEqual(g["event_type"] as? String, "click")
        XCTAssertNotNil(probe.wait("\(p)/line/relay/state", "ON"), "the click's reaction toggled relay")

        // set reaches the mock line, through the same action path.
        probe.publish("\(p)/line/relay/set", "OFF")
        XCTAssertNotNil(probe.wait { $0.topic == "\(p)/line/relay/state" && $0.payload == "OFF" && !$0.retained })
        XCTAssertTrue(run.daemon.waitFor("mqtt: set relay off (origin mqtt)"), run.daemon.log)
        XCTAssertTrue(try run.control(#"{"v":1,"id":2,"cmd":"get","line":"relay"}"#).contains(#""value":false"#))
        probe.publish("\(p)/line/relay/set", "ON")
        XCTAssertTrue(run.daemon.waitFor("mqtt: set relay on (origin mqtt)"), run.daemon.log)
        XCTAssertTrue(try run.control(#"{"v":1,"id":3,"cmd":"get","line":"relay"}"#).contains(#""value":true"#))

        // A pulse: on, then off by itself.
        probe.publish("\(p)/line/relay/set", "OFF")
        XCTAssertTrue(run.daemon.waitFor("mqtt: set relay off (origin mqtt)"))
        probe.clear()
        probe.publish("\(p)/line/relay/set", "PULSE 300ms")
        XCTAssertNotNil(probe.wait("\(p)/line/relay/state", "ON"), "\(probe.messages)")
        XCTAssertNotNil(probe.wait { $0.topic == "\(p)/line/relay/state" && $0.payload == "OFF" && !$0.retained })
        XCTAssertTrue(run.daemon.waitFor("mqtt: pulse relay for 300ms (origin mqtt)"), run.daemon.log)
        // An ON after a PULSE replaces the pulse's end: still on after it.
        func count(_ s: String) -> Int { run.daemon.log.components(separatedBy: s).count - 1 }
        func waitForMore(_ s: String, than n: Int) -> Bool {
            let end = Date().addingTimeInterval(20)
            while count(s) <= n && Date() < end { usleep(10_000) }
            return count(s) > n
        }
        XCTAssertTrue(waitForMore("pulse of relay ends", than: 0), run.daemon.log)
        let ons = count("mqtt: set relay on (origin mqtt)")
        probe.publish("\(p)/line/relay/set", "PULSE 300ms")
        probe.publish("\(p)/line/relay/set", "ON")
        XCTAssertTrue(waitForMore("mqtt: set relay on (origin mqtt)", than: ons), run.daemon.log)
        usleep(600_000)
        XCTAssertTrue(try run.control(#"{"v":1,"id":6,"cmd":"get","line":"relay"}"#).contains(#""value":true"#), "the ON stays")
        XCTAssertEqual(count("pulse of relay ends"), 1, "only the first pulse ended: \(run.daemon.log)")
        let offs = count("mqtt: set relay off (origin mqtt)")
        probe.publish("\(p)/line/relay/set", "OFF")
        XCTAssertTrue(waitForMore("mqtt: set relay off (origin mqtt)", than: offs), run.daemon.log)

        // run starts the sequence.
        probe.clear()
        probe.publish("\(p)/sequence/blink/run", "START")
        XCTAssertNotNil(probe.wait("\(p)/sequence/blink/state", "running"), "\(probe.messages)")
        XCTAssertEqual(probe.wait { $0.topic == "\(p)/sequence/blink/event" }?.json?["event"] as? String, "started")
        XCTAssertNotNil(probe.wait("\(p)/sequence/blink/state", "idle"))
        XCTAssertNotNil(probe.wait("\(p)/line/lamp/state", "ON"), "the sequence's write is published, whoever made it")

        // An empty payload (how a client clears a retained message) is no
        // command: ignored, with no error. STOP ends a run early, and the
        // lamp its step turned on goes to its safe value.
        probe.clear()
        probe.publish("\(p)/sequence/blink/run", "")
        XCTAssertTrue(run.daemon.waitFor("mqtt: \(p)/sequence/blink/run: an empty payload is not a command; ignored"), run.daemon.log)
        probe.publish("\(p)/sequence/blink/run", "START")
        XCTAssertNotNil(probe.wait("\(p)/line/lamp/state", "ON"), "\(probe.messages)")
        XCTAssertNotNil(probe.wait { $0.topic == "\(p)/sequence/blink/event" && $0.json?["event"] as? String == "started" })
        XCTAssertEqual(probe.messages.filter { $0.topic == "\(p)/sequence/blink/event" }.count, 1, "one start: the empty payload started nothing")
        probe.publish("\(p)/sequence/blink/run", "STOP")
        XCTAssertNotNil(probe.wait { $0.topic == "\(p)/sequence/blink/event" && $0.json?["event"] as? String == "stopped" }, "\(probe.messages)")
        XCTAssertNotNil(probe.wait("\(p)/line/lamp/state", "OFF"), "the stopped run's lamp went to its safe value")
        XCTAssertNil(probe.messages.first { $0.topic == "\(p)/error" }, "an empty payload is not refused either")

        // A mode, set remotely: held back, the button's edges wait.
        probe.clear()
        probe.publish("\(p)/loop/main/mode/set", "quiet")
        XCTAssertNotNil(probe.wait("\(p)/loop/main/mode", "quiet"), "\(probe.messages)")
        XCTAssertTrue(run.daemon.waitFor("mqtt: mode main quiet (origin mqtt)"), run.daemon.log)
        probe.publish("\(p)/loop/main/mode/set", "default")
        XCTAssertNotNil(probe.wait { $0.topic == "\(p)/error" && ($0.json?["error"] as? String ?? "").contains("mode 'default' may not be set") })

        // Refusals: answered on the error topic and logged, never acted on.
        probe.clear()
        for (topic, payload, why) in [
            ("\(p)/line/lamp/set", "ON", "output 'lamp' may not be commanded over MQTT (mqtt.commands.outputs: relay)"),
            ("\(p)/line/button/set", "ON", "line 'button' is an input; set, toggle and pulse drive outputs"),
            ("\(p)/line/relay/set", "BANANA", "expected ON, OFF, TOGGLE or PULSE with a duration (PULSE 500ms)"),
            ("\(p)/line/relay/set", "PULSE 5", "PULSE: "),
            ("\(p)/line/rleay/set", "ON", "no line named 'rleay'; did you mean 'relay'?"),
            ("\(p)/sequence/blink/run", "DANCE", "expected START (or RUN, or PRESS) or STOP"),
        ] {
            probe.publish(topic, payload)
            let e = try XCTUnwrap(
                probe.wait { $0.topic == "\(p)/error" && ($0.json?["topic"] as? String) == topic && ($0.json?["payload"] as? String) == payload },
                "no error for \(topic) \(payload): \(probe.messages)")
            XCTAssertTrue((e.json?["error"] as? String ?? "").contains(why), "\(e)")
        }
        XCTAssertNil(probe.messages.first { $0.topic == "\(p)/line/lamp/state" }, "a refused command is not acted on")
        XCTAssertTrue(try run.control(#"{"v":1,"id":4,"cmd":"get","line":"lamp"}"#).contains(#""value":false"#))
        XCTAssertTrue(run.daemon.waitFor("mqtt: refused \(p)/line/lamp/set \"ON\": output 'lamp' may not be commanded"), run.daemon.log)

        // The control socket's status says how MQTT is.
        let status = try run.control(#"{"v":1,"id":5,"cmd":"status"}"#)
        XCTAssertTrue(status.contains(#""mqtt":{"broker":"127.0.0.1:\#(broker.port)","client_id":"bench-1","topic_prefix":"boardd/bench-1","state":"connected","last_error":null,"connections":1,"losses":0"#), status)

        // Stats: periodic, retained.
        let stats = try XCTUnwrap(probe.wait { $0.topic == "\(p)/stats" }?.json, "\(probe.messages)")
        XCTAssertNotNil(stats["task_late_p99_ms"])
        XCTAssertNotNil((stats["tasks"] as? [String: Any])?["tick"])
        XCTAssertEqual((stats["mqtt"] as? [String: Any])?["connections"] as? Int, 1)

        // A clean stop: the outputs' safe values, then offline, retained.
        probe.publish("\(p)/line/relay/set", "ON")
        XCTAssertNotNil(probe.wait { $0.topic == "\(p)/line/relay/state" && $0.payload == "ON" && !$0.retained })
        probe.clear()
        run.daemon.signal(SIGTERM)
        XCTAssertEqual(run.daemon.exitStatus(), 0, run.daemon.log)
        XCTAssertNotNil(probe.wait("\(p)/status", "offline"), "\(probe.messages)")
        XCTAssertEqual(probe.on("\(p)/line/relay/state").map(\.payload), ["OFF"], "the safe value, published before offline: \(probe.messages)")
        XCTAssertLessThan(
            probe.messages.firstIndex { $0.topic == "\(p)/line/relay/state" } ?? .max, probe.messages.firstIndex { $0.topic == "\(p)/status" } ?? -1)
        let late = try Probe(port: broker.port, subscribe: "\(p)/status")
        XCTAssertEqual(late.wait("\(p)/status")?.payload, "offline", "retained for who comes later")
    }

    /// A retained command published while boardd is connected: the broker
    /// forwards it live, and with MQTT 5's retain-as-published it still says
    /// it is retained, so it is refused and cleared like one found at
    /// connection, never acted on.
    func testARetainedCommandPublishedWhileConnectedIsRefusedAndCleared() throws {
        let broker = try Broker()
        let probe = try Probe(port: broker.port)
        let p = prefix
        let run = try Run(Self.config(port: broker.port))
        XCTAssertNotNil(probe.wait("\(p)/status", "online"), "\(probe.messages)\n\(run.daemon.log)")
        XCTAssertTrue(run.daemon.waitFor("mqtt: connected to 127.0.0.1:\(broker.port) as bench-1"), run.daemon.log)
        XCTAssertFalse(run.daemon.log.contains("with MQTT 3.1.1"), run.daemon.log)
        // Subscribed: a live command is acted on.
        probe.publish("\(p)/line/relay/set", "ON")
        XCTAssertTrue(run.daemon.waitFor("mqtt: set relay on (origin mqtt)"), run.daemon.log)
        probe.clear()

        probe.publish("\(p)/line/relay/set", "OFF", retain: true)
        let refusal = try XCTUnwrap(
            probe.wait { $0.topic == "\(p)/error" && ($0.json?["error"] as? String ?? "").contains("retained") }, "\(probe.messages)")
        XCTAssertEqual(refusal.json?["payload"] as? String, "OFF")
        XCTAssertTrue(run.daemon.waitFor("an empty payload is not a command; ignored"), "boardd's clear came back: \(run.daemon.log)")
        XCTAssertTrue(try run.control(#"{"v":1,"id":1,"cmd":"get","line":"relay"}"#).contains(#""value":true"#), "not acted on")
        XCTAssertFalse(run.daemon.log.contains("mqtt: set relay off"), run.daemon.log)
        // Cleared from the broker: a new subscriber finds no retained command.
        probe.publish("\(p)/marker", "here", retain: true)
        let newcomer = try Probe(port: broker.port, subscribe: "\(p)/#")
        XCTAssertNotNil(newcomer.wait("\(p)/marker", "here"), "\(newcomer.messages)")
        XCTAssertNil(newcomer.messages.first { $0.topic == "\(p)/line/relay/set" }, "\(newcomer.messages)")
        probe.publish("\(p)/marker", "", retain: true)
    }

    /// A broker that speaks only MQTT 3.1.1 answers boardd's version-5
    /// CONNECT with "unacceptable protocol version": boardd connects again
    /// with 3.1.1, and says so. (A stand-in broker that checks the
    /// protocol level of each CONNECT, then accepts a 3.1.1 one.)
    func testABrokerWithoutMQTT5IsSpokenToIn311() throws {
        let fake = try Only311Broker()
        let run = try Run(Self.config(port: fake.port))
        XCTAssertTrue(run.daemon.waitFor("mqtt: connected to 127.0.0.1:\(fake.port) as bench-1 with MQTT 3.1.1", seconds: 30), run.daemon.log)
        XCTAssertTrue(run.daemon.log.contains("it does not speak MQTT 5; boardd connects with MQTT 3.1.1"), run.daemon.log)
        XCTAssertEqual(Array(fake.levels.prefix(2)), [5, 4], "\(fake.levels)")
    }

    func testWrongCredentialsAreLoggedAndRetriedWithBackoffThenRightOnesConnect() throws {
        let creds = Broker.Credentials(user: "board", password: "s3cret-pw")
        let broker = try Broker(credentials: creds)
        let extra = "  username: board\n  password_file: $DIR/mqtt-password\n"
        let wrong = try Run(Self.config(port: broker.port, extra: extra), files: ["mqtt-password": "not-the-password\n"])
        let log = { wrong.daemon.log }
        XCTAssertTrue(wrong.daemon.waitFor("trying again in", seconds: 20), log())
        // Four attempts: each refused with a clear reason, each wait longer (back-off).
        let end = Date().addingTimeInterval(20)
        while log().components(separatedBy: "the broker refused the connection").count < 5 && Date() < end { usleep(50_000) }
        let refusals = log().split(separator: "\n").filter { $0.contains("mqtt: the broker refused the connection: ") }
        XCTAssertGreaterThanOrEqual(refusals.count, 4, log())
        XCTAssertTrue(refusals[0].contains("check mqtt.username and the password"), String(refusals[0]))
        XCTAssertFalse(log().contains("not-the-password"), "the password is never printed")
        let waits = refusals.compactMap { line -> Double? in
            guard let r = line.range(of: "trying again in ") else { return nil }
            let t = line[r.upperBound...]
            if t.hasSuffix("ms") { return Double(t.dropLast(2)) .map { $0 / 1000 } }
            return Double(t.dropLast(1))
        }
        XCTAssertEqual(waits.count, refusals.count, "\(refusals)")
        // min 200ms, doubling, jitter between half and all: 0.1–0.2, 0.2–0.4, 0.4–0.8, 0.5–1.
        XCTAssertTrue(waits[0] >= 0.1 && waits[0] <= 0.2, "\(waits)")
        XCTAssertTrue(waits[2] >= 0.4 && waits[2] <= 0.8, "\(waits)")
        XCTAssertGreaterThan(waits[2], waits[0])
        XCTAssertFalse(log().contains("mqtt: connected"), log())

        let right = try Run(
            Self.config(port: broker.port, extra: extra, id: "bench-2"), files: ["mqtt-password": "s3cret-pw\n"])
        XCTAssertTrue(right.daemon.waitFor("mqtt: connected to 127.0.0.1:\(broker.port) as bench-2"), right.daemon.log)
    }

    func testTLSWithTheRightCAConnectsAndWithAWrongOneIsRefused() throws {
        let ca = try TestCA.make("right"), other = try TestCA.make("wrong")
        let broker = try Broker(tls: ca)
        let good = try Run(Self.config(port: broker.port, extra: "  tls: { ca_file: \(ca.caCert) }\n"))
        XCTAssertTrue(good.daemon.waitFor("mqtt: connected to 127.0.0.1:\(broker.port) as bench-1 (TLS)"), good.daemon.log)

        let bad = try Run(Self.config(port: broker.port, extra: "  tls: { ca_file: \(other.caCert) }\n", id: "bench-3"))
        XCTAssertTrue(bad.daemon.waitFor("trying again in"), bad.daemon.log)
        XCTAssertTrue(bad.daemon.waitFor("certificate verify failed"), bad.daemon.log)
        XCTAssertFalse(bad.daemon.log.contains("mqtt: connected"), bad.daemon.log)
    }

    /// The broker is killed while the config runs and started again: boardd
    /// connects again by itself, publishes availability, discovery and
    /// every state again, and sends the events of the outage.
    func testBrokerRestartRepublishesAndDeliversTheOutagesEvents() throws {
        let broker = try Broker()
        // Its attempts 1 to 2 s apart: the probe below subscribes to the
        // restarted broker before boardd is back and sends the queue.
        let run = try Run(Self.config(port: broker.port, reconnect: "{ min: 2s, max: 2s }"))
        XCTAssertTrue(run.daemon.waitFor("mqtt: connected"), run.daemon.log)
        broker.kill()
        XCTAssertTrue(run.daemon.waitFor("mqtt: connection to 127.0.0.1:\(broker.port) lost"), run.daemon.log)
        let waiting = try run.control(#"{"v":1,"id":8,"cmd":"status"}"#)
        XCTAssertTrue(waiting.contains(#""state":"waiting","last_error":"#) || waiting.contains(#""state":"connecting""#), waiting)
        // During the outage: two clicks (four edges, two gestures, two writes).
        for i in 0..<2 {
            XCTAssertTrue(try run.control(#"{"v":1,"id":\#(i),"cmd":"click","line":"button"}"#).contains(#""ok":true"#))
            usleep(400_000)
        }
        // Both gestures recognised (each after its 150 ms gap) before the
        // broker is back: all six events wait in the queue.
        let flipsEnd = Date().addingTimeInterval(20)
        func flips() -> Int { run.daemon.log.components(separatedBy: "button: click -> flip").count - 1 }
        while flips() < 2 && Date() < flipsEnd { usleep(20_000) }
        XCTAssertEqual(flips(), 2, run.daemon.log)
        try broker.start()
        let probe = try Probe(port: broker.port)
        XCTAssertTrue(run.daemon.waitFor("mqtt: back after"), run.daemon.log)
        let p = prefix
        XCTAssertNotNil(probe.wait("\(p)/status", "online"), "\(probe.messages)")
        XCTAssertNotNil(probe.wait { $0.topic == "homeassistant/device/bench-1/config" })
        XCTAssertNotNil(probe.wait("\(p)/line/relay/state", "OFF"), "two flips: off again, \(probe.messages)")
        XCTAssertNotNil(probe.wait("\(p)/line/button/state", "OFF"))
        // The outage's events, in order (sent after the broker came back, not retained).
        let end = Date().addingTimeInterval(10)
        // The queue is sent in order, the last gesture after the last edge:
        // wait for both counts, not for the edges alone.
        while (probe.on("\(p)/line/button/edge").count < 4 || probe.on("\(p)/line/button/gesture").count < 2)
            && Date() < end { usleep(20_000) }
        XCTAssertEqual(probe.on("\(p)/line/button/edge").compactMap { $0.json?["value"] as? String }, ["ON", "OFF", "ON", "OFF"])
        XCTAssertEqual(probe.on("\(p)/line/button/gesture").count, 2)
        let line = run.daemon.log.split(separator: "\n").first { $0.contains("mqtt: back after") }.map(String.init) ?? ""
        XCTAssertTrue(line.contains("6 queued events sent"), line)
        XCTAssertFalse(line.contains("dropped"), line)
        let status = try run.control(#"{"v":1,"id":9,"cmd":"status"}"#)
        XCTAssertTrue(status.contains(#""state":"connected","last_error":null,"connections":2,"losses":1"#), status)
    }

    /// More events in an outage than the queue holds: the most recent are
    /// sent, the rest counted, logged, and in the stats.
    func testAnOutageLongerThanTheQueueCountsWhatDidNotFit() throws {
        let broker = try Broker()
        let run = try Run(Self.config(port: broker.port, extra: "  queue: 4\n"))
        XCTAssertTrue(run.daemon.waitFor("mqtt: connected"), run.daemon.log)
        broker.kill()
        XCTAssertTrue(run.daemon.waitFor("lost"), run.daemon.log)
        XCTAssertTrue(try run.control(#"{"v":1,"id":1,"cmd":"click","line":"button","count":3}"#).contains(#""ok":true"#))
        XCTAssertTrue(run.daemon.waitFor("-> flip"), run.daemon.log)
        usleep(500_000)
        try broker.start()
        let probe = try Probe(port: broker.port)
        XCTAssertTrue(run.daemon.waitFor("mqtt: back after"), run.daemon.log)
        let line = run.daemon.log.split(separator: "\n").first { $0.contains("mqtt: back after") }.map(String.init) ?? ""
        XCTAssertTrue(line.contains("4 queued events sent"), line)
        XCTAssertTrue(line.contains("events dropped in all (the queue holds 4; raise mqtt.queue)"), line)
        let stats = try XCTUnwrap(probe.wait { $0.topic == "\(prefix)/stats" && !$0.retained }?.json, "\(probe.messages)")
        let dropped = (stats["mqtt"] as? [String: Any])?["dropped"] as? Int ?? 0
        XCTAssertGreaterThan(dropped, 0, "\(stats)")
        XCTAssertNotNil(probe.wait("\(prefix)/line/button/state", "OFF"), "states are republished whatever the queue dropped")
    }

    /// A reload that stops publishing a line: its retained state is
    /// cleared and Home Assistant told to remove its entities.
    func testReloadRemovesWhatIsNoLongerPublished() throws {
        let broker = try Broker()
        let probe = try Probe(port: broker.port)
        let run = try Run(Self.config(port: broker.port))
        XCTAssertNotNil(probe.wait("\(prefix)/line/button/state", "OFF"))
        XCTAssertNotNil(probe.wait { $0.topic == "homeassistant/device/bench-1/config" })
        probe.clear()
        let text = try String(contentsOfFile: run.file, encoding: .utf8)
        try text.replacingOccurrences(of: "  commands: {", with: "  publish: [relay, lamp]\n  commands: {").write(
            toFile: run.file, atomically: true, encoding: .utf8)
        run.daemon.signal(SIGHUP)
        XCTAssertTrue(run.daemon.waitFor("reloaded"), run.daemon.log)
        XCTAssertNotNil(probe.wait("\(prefix)/line/button/state", ""), "cleared: \(probe.messages)")
        let d = try XCTUnwrap(probe.wait { $0.topic == "homeassistant/device/bench-1/config" }?.json)
        let cmps = try XCTUnwrap(d["cmps"] as? [String: [String: Any]])
        XCTAssertEqual(cmps["line_button"]?.count, 1, "only its platform: removed")
        XCTAssertEqual(cmps["line_button"]?["p"] as? String, "binary_sensor")
        XCTAssertEqual(cmps["gesture_button"]?.count, 1)
        XCTAssertEqual(cmps["line_relay"]?["p"] as? String, "switch")
    }

    /// A reload that moves boardd to another broker: `offline` and the
    /// device removed on the old one, everything published on the new one;
    /// a reload with a broken mqtt: block changes nothing.
    func testReloadToAnotherBrokerAndABrokenReload() throws {
        let a = try Broker(), b = try Broker()
        let probeA = try Probe(port: a.port), probeB = try Probe(port: b.port)
        let run = try Run(Self.config(port: a.port))
        XCTAssertNotNil(probeA.wait("\(prefix)/status", "online"), run.daemon.log)
        let text = try String(contentsOfFile: run.file, encoding: .utf8)
        // Broken: refused with its position, still on broker a.
        try text.replacingOccurrences(of: "  port: \(a.port)", with: "  port: 70000").write(toFile: run.file, atomically: true, encoding: .utf8)
        run.daemon.signal(SIGHUP)
        XCTAssertTrue(run.daemon.waitFor("mqtt.port: 70000 is out of range"), run.daemon.log)
        XCTAssertTrue(run.daemon.waitFor("reload refused"), run.daemon.log)
        XCTAssertTrue(try run.control(#"{"v":1,"id":1,"cmd":"status"}"#).contains(#""broker":"127.0.0.1:\#(a.port)""#))
        // Moved to b.
        try text.replacingOccurrences(of: "  port: \(a.port)", with: "  port: \(b.port)").write(toFile: run.file, atomically: true, encoding: .utf8)
        run.daemon.signal(SIGHUP)
        XCTAssertTrue(run.daemon.waitFor("mqtt: connecting again (the mqtt: block changed)"), run.daemon.log)
        XCTAssertTrue(run.daemon.waitFor("mqtt: connected to 127.0.0.1:\(b.port)"), run.daemon.log)
        XCTAssertNotNil(probeA.wait("\(prefix)/status", "offline"), "\(probeA.messages)")
        XCTAssertNotNil(probeA.wait("homeassistant/device/bench-1/config", ""), "the device removed from the old broker: \(probeA.messages)")
        XCTAssertNotNil(probeB.wait("\(prefix)/status", "online"))
        XCTAssertNotNil(probeB.wait { $0.topic == "homeassistant/device/bench-1/config" && !$0.payload.isEmpty })
        XCTAssertNotNil(probeB.wait("\(prefix)/line/relay/state", "OFF"))
        XCTAssertTrue(try run.control(#"{"v":1,"id":2,"cmd":"click","line":"button"}"#).contains(#""ok":true"#))
        XCTAssertNotNil(probeB.wait("\(prefix)/line/relay/state", "ON"), "events go to the new broker: \(probeB.messages)")
    }

    /// Home Assistant's birth message: discovery again after a short delay.
    func testHomeAssistantBirthRepublishesDiscovery() throws {
        let broker = try Broker()
        let probe = try Probe(port: broker.port)
        let run = try Run(Self.config(port: broker.port))
        XCTAssertNotNil(probe.wait { $0.topic == "homeassistant/device/bench-1/config" }, run.daemon.log)
        probe.clear()
        probe.publish("homeassistant/status", "online")
        XCTAssertNotNil(probe.wait(seconds: 10) { $0.topic == "homeassistant/device/bench-1/config" }, "\(probe.messages)")
        XCTAssertNotNil(probe.wait { $0.topic == "\(self.prefix)/line/button/state" && !$0.retained })
    }
}

/// A stand-in for a broker that speaks only MQTT 3.1.1: it refuses a
/// CONNECT of protocol level 5 (CONNACK return code 1, as MQTT 3.1.1 says)
/// and accepts a level-4 one, then reads whatever comes. It records the
/// level of every CONNECT.
final class Only311Broker {
    let port: Int
    private let fd: Int32
    private let seen = Locked<[UInt8]>([])
    private let done = Locked(false)
    private var thread: Thread?
    var levels: [UInt8] { seen.withLock { $0 } }

    init() throws {
        let l = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(l, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard l >= 0, bound == 0, listen(l, 8) == 0 else { throw POSIXError(.EADDRINUSE) }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(l, $0, &len) } }
        fd = l
        port = Int(UInt16(bigEndian: a.sin_port))
        let (listener, seen, done) = (self.fd, self.seen, self.done)
        let t = Thread {
            while !done.withLock({ $0 }) {
                var pfd = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
                guard poll(&pfd, 1, 100) > 0 else { continue }
                let c = accept(listener, nil, nil)
                guard c >= 0 else { continue }
                var buf = [UInt8](repeating: 0, count: 1024)
                var tv = timeval(tv_sec: 5, tv_usec: 0)
                setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
                let n = read(c, &buf, buf.count)
                // Fixed header (1 byte, a length of 1 to 4 bytes), then the
                // protocol name's length (2), "MQTT" (4) and the level.
                var i = 1
                while i < n && buf[i] & 0x80 != 0 { i += 1 }
                let at = i + 1 + 6
                guard n > at, buf[0] == 0x10 else {
                    close(c)
                    continue
                }
                let level = buf[at]
                seen.withLock { $0.append(level) }
                let connack: [UInt8] = [0x20, 0x02, 0x00, level == 4 ? 0x00 : 0x01]
                _ = connack.withUnsafeBytes { send(c, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if level == 4 {
                    // Accepted: read what comes until the test ends or boardd hangs up.
                    while !done.withLock({ $0 }) {
                        var p = pollfd(fd: c, events: Int16(POLLIN), revents: 0)
                        if poll(&p, 1, 100) > 0 && read(c, &buf, buf.count) <= 0 { break }
                    }
                }
                close(c)
            }
        }
        t.start()
        thread = t
    }

    deinit {
        done.withLock { $0 = true }
        while thread?.isFinished == false { usleep(1000) }
        close(fd)
    }
}

