import BoardControl
import Boardloop
import BoardSupport
import Glibc
import Logging

/// boardd on an MQTT broker (the config's `mqtt:`, docs/mqtt.md): it
/// publishes its lines' states and events, its modes, its sequences and a
/// stats summary, takes commands for what the config lets be commanded,
/// and announces itself to Home Assistant by discovery.
///
/// Main loop only. What it publishes comes from the trace log's event
/// feed (the same records `boardctl events` reads), made on the log
/// writer's thread: MQTT's allocations stay on the main loop and off the
/// worker loops' allocation-free event path. Its command topics are a
/// codec of the command service (`RemoteCommands`): a payload becomes a
/// call, with what `mqtt.commands` permits and the origin `mqtt`, and a
/// refusal an answer on the error topic.
///
/// While the broker is out of reach, states are kept (the last of each)
/// and events queued, the most recent `queue` of them; on reconnect every
/// retained state is published again and the queue sent, and what did not
/// fit is counted, logged and in the stats.
final class MQTTBridge {
    let daemon: Daemon
    private(set) var config: MQTTConfig
    var names: DaemonConfig
    let client: MQTTClient
    var loop: BoardRunLoop { daemon.loop }
    var logger: Logger { daemon.logger }

    private var consumer: EventFeed.Consumer?
    private var feedItem: PerformWorkItem?
    /// The last payload of each retained state topic (republished on reconnect).
    var states: [String: [UInt8]] = [:]
    /// States changed while they could not be published.
    private var dirty: Set<String> = []
    /// Events waiting for the broker, oldest first (at most `config.queue`).
    var queued: [(topic: String, payload: [UInt8])] = []
    var queuedHead = 0
    var stats = Stats()
    /// Sequences' runs in progress (the state topics' `running`/`idle`).
    private var running: [String: Int] = [:]
    /// Discovery's components published last, by id: their platform.
    var discovered: [String: String] = [:]
    var statsTimer: RunLoopTimer?
    var discoveryTimer: RunLoopTimer?
    /// The trace records and feed events lost so far
    /// (`TraceLog.missedRecords` and the feed queue's overflow): when it
    /// grows, a state change may be among them, and the lines' states are
    /// checked against their values.
    private var missedSeen: UInt64 = 0
    /// How many times that check ran (for the tests).
    private(set) var resyncs: UInt64 = 0
    /// When the connection went down (for the log line on reconnect).
    private var downSince: UInt64?

    struct Stats {
        var published: UInt64 = 0
        var commands: UInt64 = 0
        var refused: UInt64 = 0
        var queuedSent: UInt64 = 0
        /// Events that did not fit the queue while the broker was out of reach.
        var dropped: UInt64 = 0
        /// Edges and state changes while disconnected (their states republished).
        var whileDown: UInt64 = 0
        /// Events the log writer's feed dropped before the bridge took them.
        var feedOverflowed: UInt64 = 0
    }

    /// The most a command's payload may be.
    static let maxPayload = 256

    /// The MQTT client and the bridge's timers (stats, discovery).
    static let budget = LoopBudget(timers: 2, performs: 2) + MQTTClient.budget

    init(daemon: Daemon, config: MQTTConfig) {
        self.daemon = daemon
        self.config = config
        names = daemon.config
        client = MQTTClient(loop: daemon.loop, settings: Self.settings(config), logger: daemon.logger)
    }

    static func settings(_ c: MQTTConfig) -> MQTTClient.Settings {
        MQTTClient.Settings(
            host: c.broker, port: c.port, clientID: c.clientID, username: c.username, password: c.password?.value, tls: c.tls,
            keepalive: Int(c.keepalive.nanosecondsClamped / 1_000_000_000),
            will: (topic: "\(c.topicPrefix)/status", payload: "offline", qos: 1, retain: true), reconnectMin: c.reconnectMin,
            reconnectMax: c.reconnectMax)
    }

    // MARK: Start, reload, stop

    func start() throws {
        client.onUp = { [unowned self] in self.up() }
        client.onDown = { [unowned self] why in self.down(why) }
        client.onMessage = { [unowned self] topic, payload, retained in self.message(topic, payload, retained: retained) }
        client.onDrained = { [unowned self] in self.flush() }
        let d = RunLoopTimer.rearmable { [unowned self] _ in self.publishDiscovery(states: true) }
        try loop.add(d, mode: .common)
        discoveryTimer = d
        let s = RunLoopTimer.rearmable { [unowned self] _ in self.statsTick() }
        try loop.add(s, mode: .common)
        statsTimer = s
        if let i = config.statsInterval { s.arm(after: i) }
        let box = WeakBridge(self)
        let item = PerformWorkItem(modes: [.common]) { box.bridge?.takeEvents() }
        feedItem = item
        let loop = self.loop
        consumer = daemon.traceLog.feed.attach { _ = try? loop.perform(item) }
        daemon.traceLog.watch(true)
        missedSeen = daemon.traceLog.missedRecords
        seedStates()
        try client.start()
        logger.info(
            "mqtt: broker \(config.broker):\(config.port)\(config.tls != nil ? " (TLS)" : ""), client id \(config.clientID), topics \(config.topicPrefix)/…\(config.discovery != nil ? ", Home Assistant discovery under \(config.discovery!.prefix)" : "")"
        )
    }

    /// A reload's config, once it is in force: names and topics from it;
    /// the connection made again when its settings changed; discovery
    /// published again (entities the reload removed are removed).
    func reload(_ new: MQTTConfig, _ all: DaemonConfig) {
        let old = config
        config = new
        names = all
        // States of lines no longer published are cleared on the broker.
        let keep = Set(stateTopics())
        for t in states.keys where !keep.contains(t) && t.hasPrefix(old.topicPrefix + "/") && states[t] != [] {
            // Cleared on the broker (an empty retained message), now or
            // on reconnect; forgotten once published.
            states[t] = []
            if client.state == .up && publish(t, [], qos: old.qos.states, retain: true) { states[t] = nil } else { dirty.insert(t) }
        }
        if let i = new.statsInterval { statsTimer?.arm(after: i) } else { statsTimer?.disarm() }
        seedStates()
        if new.connection != old.connection || new.topicPrefix != old.topicPrefix {
            if old.discovery != nil && client.state == .up { publish(discoveryTopic(old), [], qos: 1, retain: true) }
            if client.state == .up { publish("\(old.topicPrefix)/status", Array("offline".utf8), qos: 1, retain: true) }
            discovered = [:]
            client.reconnect(with: Self.settings(new), because: "the mqtt: block changed")
            return
        }
        if Self.settings(new) != client.settings { client.adopt(Self.settings(new)) }
        guard client.state == .up else { return }
        resubscribe(old)
        publishDiscovery(states: true)
    }

    /// At the daemon's stop, once the outputs are safe: their states (the
    /// safe values, read from the lines), then `offline`, then a clean
    /// disconnect.
    func stop() {
        if client.state == .up {
            syncLines()
            publish("\(config.topicPrefix)/status", Array("offline".utf8), qos: 1, retain: true)
        }
        client.stop()
        if let c = consumer { daemon.traceLog.feed.detach(c) }
        consumer = nil
        daemon.traceLog.watch(false)
        statsTimer?.invalidate()
        discoveryTimer?.invalidate()
    }

    // MARK: Topics

    var prefix: String { config.topicPrefix }
    func lineTopic(_ name: String, _ leaf: String) -> String { "\(prefix)/line/\(name)/\(leaf)" }
    func sequenceTopic(_ name: String, _ leaf: String) -> String { "\(prefix)/sequence/\(name)/\(leaf)" }
    func modeTopic(_ loop: String) -> String { "\(prefix)/loop/\(loop)/mode" }
    var errorTopic: String { "\(prefix)/error" }
    var statsTopic: String { "\(prefix)/stats" }

    private func stateTopics() -> [String] {
        config.published.map { lineTopic(names[$0].name, "state") } + names.sequences.map { sequenceTopic($0.name, "state") }
            + names.loops.map { modeTopic($0.name) }
    }

    private func onOff(_ v: Bool) -> [UInt8] { Array((v ? "ON" : "OFF").utf8) }

    /// Every retained state from the daemon as it is now (at the start,
    /// after a reload, and on reconnect).
    private func seedStates() {
        let program = daemon.main.program
        for id in config.published {
            setState(lineTopic(names[id].name, "state"), onOff(program.cells[id.index].value.load(ordering: .relaxed)))
        }
        let counters = daemon.counters
        for s in names.sequences {
            let n = running[s.name] ?? counters.sequence[s.name]?.running ?? 0
            running[s.name] = n
            setState(sequenceTopic(s.name, "state"), Array((n > 0 ? "running" : "idle").utf8))
        }
        setState(modeTopic(names.loops[0].name), Array(daemon.mainMode.utf8))
        // A worker's mode as last heard of (its changes come as events);
        // the default mode until then.
        for l in names.loops.dropFirst() where states[modeTopic(l.name)] == nil {
            setState(modeTopic(l.name), Array(names.modes[0].name.utf8))
        }
    }

    /// Each published line's state against its value now: run when trace
    /// records or feed events were lost (an edge flood that filled a trace
    /// ring, counted and logged as dropped trace lines; a full feed queue),
    /// so a lost change cannot leave a retained state wrong; and at the
    /// stop. Nothing lost, nothing to check: idle, the bridge sleeps.
    private func syncLines() {
        let program = daemon.main.program
        for id in config.published where id.index < program.cells.count {
            setState(lineTopic(names[id].name, "state"), onOff(program.cells[id.index].value.load(ordering: .relaxed)))
        }
    }

    // MARK: Connection

    private func up() {
        let was = downSince
        downSince = nil
        resubscribe(nil)
        publish("\(prefix)/status", Array("online".utf8), qos: 1, retain: true)
        publishDiscovery(states: false)
        // Every retained state, so the broker's view is right again.
        seedStates()
        for (t, p) in states.sorted(by: { $0.key < $1.key }) where publish(t, p, qos: config.qos.states, retain: true) && p.isEmpty {
            states[t] = nil
        }
        dirty = []
        let waiting = queued.count - queuedHead
        flush()
        if let was {
            let tenths = (MonotonicClock.nanoseconds &- was) / 100_000_000
            logger.notice(
                "mqtt: back after \(tenths / 10).\(tenths % 10) s: \(states.count) states republished, \(waiting) queued events sent\(stats.dropped > 0 ? ", \(stats.dropped) events dropped in all (the queue holds \(config.queue); raise mqtt.queue)" : "")"
            )
        }
    }

    private func down(_ why: String) {
        downSince = MonotonicClock.nanoseconds
    }

    private func resubscribe(_ old: MQTTConfig?) {
        if let old, let d = old.discovery, d.prefix != config.discovery?.prefix { client.unsubscribe("\(d.prefix)/status") }
        let q = config.qos.commands
        client.subscribe("\(prefix)/line/+/set", qos: q)
        client.subscribe("\(prefix)/sequence/+/run", qos: q)
        client.subscribe("\(prefix)/loop/+/mode/set", qos: q)
        if let d = config.discovery { client.subscribe("\(d.prefix)/status", qos: 1) }
    }

    /// Publishes, counted; false when it could not be handed to libmosquitto.
    @discardableResult
    func publish(_ topic: String, _ payload: [UInt8], qos: Int, retain: Bool) -> Bool {
        guard client.publish(topic, payload, qos: qos, retain: retain) else { return false }
        stats.published &+= 1
        return true
    }

    /// A retained state: published now if it can be, else kept for later.
    private func setState(_ topic: String, _ payload: [UInt8]) {
        if states[topic] == payload { return }
        states[topic] = payload
        if client.state == .up && !client.backlogged {
            if publish(topic, payload, qos: config.qos.states, retain: true) { return }
        }
        if client.state != .up { stats.whileDown &+= 1 }
        dirty.insert(topic)
    }

    /// An event: published now if it can be, else queued (the oldest
    /// dropped, counted, past `config.queue`).
    private func event(_ topic: String, _ payload: [UInt8]) {
        if client.state == .up && !client.backlogged && queued.count == queuedHead {
            if publish(topic, payload, qos: config.qos.events, retain: false) { return }
        }
        guard config.queue > 0 else {
            stats.dropped &+= 1
            return
        }
        if queued.count - queuedHead >= config.queue {
            queuedHead += 1
            stats.dropped &+= 1
        }
        queued.append((topic, payload))
        if queuedHead > 1024 && queuedHead * 2 > queued.count {
            queued.removeFirst(queuedHead)
            queuedHead = 0
        }
    }

    /// Sends what waits (states first) while the socket takes it.
    private func flush() {
        guard client.state == .up else { return }
        for t in dirty.sorted() where !client.backlogged {
            guard let p = states[t] else {
                dirty.remove(t)
                continue
            }
            if publish(t, p, qos: config.qos.states, retain: true) {
                dirty.remove(t)
                if p.isEmpty { states[t] = nil }
            }
        }
        while queuedHead < queued.count && !client.backlogged {
            let (t, p) = queued[queuedHead]
            if !publish(t, p, qos: config.qos.events, retain: false) {
                // Still connected and the socket takes more: libmosquitto
                // refused this one for good (its size, its topic): dropped,
                // counted, so it cannot hold the queue back.
                guard client.state == .up && !client.backlogged else { break }
                stats.dropped &+= 1
            } else {
                stats.queuedSent &+= 1
            }
            queuedHead += 1
        }
        if queuedHead == queued.count {
            queued = []
            queuedHead = 0
        }
    }

    // MARK: Events from the feed

    private func takeEvents() {
        guard let c = consumer else { return }
        let (batch, overflowed) = daemon.traceLog.feed.take(c)
        stats.feedOverflowed = overflowed
        for e in batch { handle(e) }
        // The writer pokes the feed when it finds records lost.
        let missed = daemon.traceLog.missedRecords &+ overflowed
        if missed != missedSeen {
            missedSeen = missed
            resyncs &+= 1
            syncLines()
        }
    }

    private func published(_ line: String) -> Bool {
        guard let id = names.line(named: line) else { return false }
        return config.published.contains(id)
    }

    private func handle(_ e: TraceEvent) {
        func field(_ k: String) -> TraceEvent.Value? { e.fields.first { $0.0 == k }?.1 }
        switch e.kind {
        case "edge", "output":
            guard let line = e.line, published(line), case let .bool(v)? = field("value") else { return }
            setState(lineTopic(line, "state"), onOff(v))
            if e.kind == "edge" {
                var o: [(String, JSON)] = [("value", .string(v ? "ON" : "OFF")), ("t_ns", .int(Int64(clamping: e.nanoseconds)))]
                if case let .int(m)? = field("mono_ns") { o.append(("mono_ns", .int(m))) }
                event(lineTopic(line, "edge"), Array(JSON.object(o).serialized.utf8))
            }
        case "gesture":
            guard let line = e.line, published(line), case let .string(g)? = field("gesture") else { return }
            let kind = GestureKind.allCases.first { $0.traceName == g }?.rawValue ?? g
            let o: JSON = .object([("event_type", .string(kind)), ("t_ns", .int(Int64(clamping: e.nanoseconds)))])
            event(lineTopic(line, "gesture"), Array(o.serialized.utf8))
        case "mode":
            guard case let .string(m)? = field("mode") else { return }
            setState(modeTopic(e.loop), Array(m.utf8))
        case "sequence":
            guard case let .string(s)? = field("sequence"), case let .string(step)? = field("step") else { return }
            var n = running[s] ?? 0
            switch step {
            case "started", "restarted": n = max(n, 1)
            case "began": n += 1
            case "stopped": n = 0
            case "completed": n = max(0, n - 1)
            default: break
            }
            running[s] = n
            event(sequenceTopic(s, "event"), Array(JSON.object([("event", .string(step)), ("t_ns", .int(Int64(clamping: e.nanoseconds)))]).serialized.utf8))
            setState(sequenceTopic(s, "state"), Array((n > 0 ? "running" : "idle").utf8))
        default:
            break
        }
    }

}

private final class WeakBridge: @unchecked Sendable {
    weak var bridge: MQTTBridge?
    init(_ b: MQTTBridge) { bridge = b }
}

extension String {
    var trimmingWhitespace: String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s = s.dropFirst() }
        while let l = s.last, l.isWhitespace { s = s.dropLast() }
        return String(s)
    }
}
