import BoardControl
import BoardSupport
import BoardloopGPIO

/// A short, readable account of a resolved config: what `boardd --check`
/// prints (as text, or as JSON with `--json`).
public struct ConfigSummary: Codable, Sendable, Equatable {
    public struct Line: Codable, Sendable, Equatable {
        public var name: String
        /// The board's name for the pin (`GPIO17`, `LED`).
        public var pin: String?
        /// The pin as the config gives it, when that is another of its
        /// names (`MOCK0_27` for `LED`, `PIN11` for `GPIO17`).
        public var given: String?
        public var physical: Int?
        /// `pinctrl-bcm2711:17`.
        public var address: String
        public var direction: String
        /// `edge=both bias=pull-up active-low debounce=20ms`.
        public var settings: String
        public var priority: String
        public var loop: String
    }
    public struct Item: Codable, Sendable, Equatable {
        public var name: String
        public var detail: String
    }
    /// How a line a mode can hold keeps its events (`HeldPlan`).
    public struct Held: Codable, Sendable, Equatable {
        public var line: String
        /// The modes that hold it.
        public var modes: [String]
        /// The longest hold (`150ms`); nil: no sequence bounds it.
        public var longestHold: String?
        /// What makes the longest hold (`sequence 'pour'`).
        public var holdBy: String
        /// The planned edge rate (`4kHz`) and whether the config declares it.
        public var maxRate: String
        public var maxRateDeclared: Bool
        /// Events the kernel keeps for the line (libgpiod 2.x; 1.6 keeps 16).
        public var kernelBuffer: Int
        public var kernelBufferRaised: Bool
        /// The drain ring (0: none) and whether it was chosen by default.
        public var drain: Int
        public var drainDefaulted: Bool
        /// The drain period (nil: read as they come, or no drain), and the
        /// task whose period it took when chosen by default.
        public var drainEvery: String?
        public var drainEveryTask: String?
        /// Events the line can keep while held, and how long that lasts at `maxRate`.
        public var canHold: Int
        public var canHoldFor: String
        /// Events that can come during the longest hold at `maxRate`.
        public var expected: Int?
    }
    public struct Loop: Codable, Sendable, Equatable {
        public var name: String
        public var lines: [String]
        public var settings: String
        public var capacities: [String: Int]
    }

    public var config: String
    public var board: String
    public var boardTitle: String
    public var boardFile: String
    public var detected: Bool
    public var lines: [Line]
    public var modes: [Item]
    public var tasks: [Item]
    public var reactions: [Item]
    public var sequences: [Item]
    public var commands: [Item]
    public var loops: [Loop]
    /// The lines a mode can hold, in the config's order.
    public var held: [Held]
    /// The MQTT client in words (nil: none); never the password.
    public var mqtt: String?
    public var warnings: [String]

    public init(_ c: DaemonConfig) {
        config = c.file
        board = c.board.name
        boardTitle = c.board.title
        boardFile = c.board.file
        detected = c.board.detected
        lines = c.lines.map { l in
            var s: [String] = []
            let st = l.settings
            if l.isInput {
                s.append("edge=\(st.edgeDetection)")
                if st.bias != .asIs { s.append("bias=\(st.bias)") }
                if st.activeLow { s.append("active-low") }
                if st.debounce > .zero { s.append("debounce=\(DurationText.format(st.debounce))") }
                if l.filters.delayedOn > .zero { s.append("delayed_on=\(DurationText.format(l.filters.delayedOn))") }
                if l.filters.delayedOff > .zero { s.append("delayed_off=\(DurationText.format(l.filters.delayedOff))") }
                if l.filters.settle > .zero { s.append("settle=\(DurationText.format(l.filters.settle))") }
                if let r = l.rateLimit { s.append("rate_limit=\(r.events)/\(DurationText.format(r.period))") }
                if let g = l.gestures { s.append("gestures=\(g.kinds.map(\.rawValue).joined(separator: "|"))") }
                // Held events as the config gives them (the plan of a held line: `held`).
                if l.held.bufferSet { s.append("buffer=\(l.held.kernelBuffer)") }
                if l.held.drainSet { s.append("drain=\(l.held.drain)") }
                if l.held.drainEverySet { s.append("drain_every=\(DurationText.format(l.held.drainEvery))") }
                if let r = l.held.maxRate { s.append("max_rate=\(RateText.format(r))") }
            } else {
                s.append("initial=\(st.outputValue ? "on" : "off")")
                if let v = l.safeValue { s.append("safe=\(v ? "on" : "off")") }
                if st.drive != .pushPull { s.append("drive=\(st.drive)") }
                if st.bias != .asIs { s.append("bias=\(st.bias)") }
                if st.activeLow { s.append("active-low") }
            }
            return Line(
                name: l.name, pin: l.boardPin ?? l.pin,
                given: l.pin.flatMap { p in l.boardPin.map { $0.uppercased() == p.uppercased() ? nil : p } ?? nil },
                physical: l.physical, address: l.address.description,
                direction: l.isInput ? "input" : "output", settings: s.joined(separator: " "),
                priority: c.priorities[l.priority.index], loop: c.loops[l.loop.index].name)
        }
        modes = c.modes.enumerated().map { i, m in
            Item(
                name: m.name,
                detail: i == 0 ? "admits every priority" : "admits " + (m.admits.isEmpty ? "no priority" : m.admits.map { c.priorities[$0.index] }.joined(separator: ", ")))
        }
        let text = ActionText(config: c)
        tasks = c.tasks.map { t in
            Item(
                name: t.name,
                detail: "every \(DurationText.format(t.every)) in \(t.modes.map { c.modes[$0.index].name }.joined(separator: ", ")) on \(c.loops[t.loop.index].name): \(text.list(t.actions))")
        }
        reactions = c.reactions.map { r in
            var d = "\(c.lines[r.line.index].name) \(r.trigger.summary)"
            if let cond = r.condition { d += " when \(text.condition(cond))" }
            return Item(name: r.name, detail: d + " -> \(text.list(r.actions))")
        }
        sequences = c.sequences.map { s in
            Item(
                name: s.name,
                detail: "mode \(s.mode.map { c.modes[$0.index].name } ?? "(current)"), policy \(s.policy), on \(c.loops[s.loop.index].name): \(text.list(s.steps))"
                    + (s.onStop.map { $0.isEmpty ? "; on_stop: nothing" : "; on_stop: \(text.list($0))" } ?? ""))
        }
        commands = c.commands.map { cmd in
            var d = cmd.argv.map { "argv \($0)" } ?? "argv from run"
            if cmd.shell { d += ", shell" }
            d += ", timeout \(DurationText.format(cmd.timeout)) (then SIGKILL after \(DurationText.format(cmd.killAfter))), at most \(cmd.maxRunning) running"
            return Item(name: cmd.name, detail: d)
        }
        loops = c.loops.map { l in
            var s: [String] = []
            if !l.cpus.isEmpty { s.append("cpu \(l.cpus.map(String.init).joined(separator: ","))") }
            if let p = l.realtimePriority { s.append("SCHED_FIFO \(p)") }
            if let t = l.timerSlack { s.append("timer slack \(DurationText.format(t))") }
            if l.lockMemory { s.append("mlockall") }
            let k = l.capacities
            return Loop(
                name: l.name, lines: l.lines.map { c.lines[$0.index].name }, settings: s.joined(separator: ", "),
                capacities: [
                    "sources": k.sources, "timers": k.timers, "observers": k.observers, "modes": k.modes,
                    "pendingPerforms": k.pendingPerforms, "eventsPerWait": k.eventsPerWait, "nestingDepth": k.nestingDepth,
                ])
        }
        held = c.lines.compactMap { l in
            guard let p = l.heldPlan else { return nil }
            let h = l.held
            let ns = Double(h.capacity) * 1e9 / Double(h.rate)
            return Held(
                line: l.name, modes: p.modes.map { c.modes[$0.index].name }, longestHold: p.longestHold.map(DurationText.format),
                holdBy: p.holdBy, maxRate: RateText.format(h.rate), maxRateDeclared: h.maxRate != nil, kernelBuffer: h.kernelEvents,
                kernelBufferRaised: p.bufferRaised, drain: h.drain, drainDefaulted: p.drainDefaulted,
                drainEvery: h.drainsOnTimer ? DurationText.format(h.drainEvery) : nil, drainEveryTask: p.drainEveryTask,
                canHold: h.capacity,
                canHoldFor: ns >= 9e18 ? "long" : DurationText.format(.nanoseconds(Int64(ns.rounded(.down)))),
                expected: p.expected(rate: h.rate))
        }
        warnings = c.warnings.map(\.description)
        mqtt = c.mqtt.map { m in
            var parts = ["broker \(m.broker):\(m.port)\(m.tls != nil ? " (TLS\(m.tls!.verify ? "" : ", not verified"))" : "")"]
            parts.append("client id \(m.clientID)")
            if let u = m.username { parts.append("user \(u)\(m.password != nil ? " with a password" : "")") }
            parts.append("topics \(m.topicPrefix)/…")
            let published = m.published.map { c.lines[$0.index].name }
            parts.append("publishes \(published.count == c.lines.count ? "every line" : published.isEmpty ? "no line" : published.joined(separator: ", "))")
            var commanded = m.writableOutputs.map { c.lines[$0.index].name } + m.writableSequences.map { "sequence \(c.sequences[$0.index].name)" }
                + m.writableModes.map { "mode \(c.modes[$0.index].name)" }
            // Merged from several files (packages): each says where it was given.
            let places = m.commandOrigins.places
            if places.count == commanded.count && Set(places.map(\.file)).count > 1 {
                commanded = zip(commanded, places).map { "\($0) (\($1))" }
            }
            parts.append("commands: \(commanded.isEmpty ? "none" : commanded.joined(separator: ", "))")
            parts.append(m.discovery.map { "Home Assistant discovery under \($0.prefix)" } ?? "no Home Assistant discovery")
            return parts.joined(separator: "; ")
        }
    }

    /// The text `boardd --check` prints.
    public var text: String {
        var out: [String] = []
        out.append("\(config): OK")
        out.append("board: \(board)\(detected ? " (detected)" : "") — \(boardTitle) [\(boardFile)]")
        out.append("lines:")
        let w = lines.map(\.name.count).max() ?? 0
        for l in lines {
            // As written, then the board's name and the header pin when
            // they say more: "GPIO17 (pin 11)", "MOCK0_27 (LED)", "PIN11 (GPIO17)".
            let pin = l.pin.map { p -> String in
                let shown = l.given ?? p
                var more: [String] = []
                if l.given != nil { more.append(p) }
                if let n = l.physical, shown.uppercased() != "PIN\(n)" { more.append("pin \(n)") }
                return more.isEmpty ? shown : "\(shown) (\(more.joined(separator: ", ")))"
            }
            let pad = String(repeating: " ", count: w - l.name.count)
            out.append(
                "  \(l.name)\(pad)  \(pin.map { "\($0) -> " } ?? "")\(l.address)  \(l.direction) \(l.settings)  priority \(l.priority), loop \(l.loop)")
        }
        func section(_ title: String, _ items: [Item]) {
            out.append("\(title):" + (items.isEmpty ? " none" : ""))
            for i in items { out.append("  \(i.name): \(i.detail)") }
        }
        section("modes", modes)
        section("tasks", tasks)
        section("reactions", reactions)
        section("sequences", sequences)
        section("commands", commands)
        out.append("mqtt: " + (mqtt ?? "none"))
        out.append("held events:" + (held.isEmpty ? " none" : ""))
        for h in held {
            var parts = ["held in \(h.modes.joined(separator: ", "))"]
            parts.append("longest hold \(h.longestHold ?? "unbounded") (\(h.holdBy))")
            parts.append("max_rate \(h.maxRate)\(h.maxRateDeclared ? "" : " (default)")" + (h.expected.map { ": \($0) events" } ?? ""))
            parts.append("kernel buffer \(h.kernelBuffer)\(h.kernelBufferRaised ? " (raised)" : "") (libgpiod 1.6: 16)")
            parts.append(h.drain > 0 ? "drain \(h.drain)\(h.drainDefaulted ? " (default)" : "")" : "drain off")
            if let d = h.drainEvery {
                parts.append("drain_every \(d)" + (h.drainEveryTask.map { " (task \($0)'s period)" } ?? ""))
            } else if h.drain > 0 {
                parts.append("read as they come")
            }
            parts.append("holds \(h.canHold) events (\(h.canHoldFor) at \(h.maxRate))")
            out.append("  \(h.line): " + parts.joined(separator: "; "))
        }
        out.append("loops:")
        for l in loops {
            let k = l.capacities
            out.append(
                "  \(l.name)\(l.settings.isEmpty ? "" : " (\(l.settings))"): lines \(l.lines.isEmpty ? "none" : l.lines.joined(separator: ", "))")
            out.append(
                "    capacities: sources \(k["sources"]!), timers \(k["timers"]!), observers \(k["observers"]!), modes \(k["modes"]!), pending performs \(k["pendingPerforms"]!), events per wait \(k["eventsPerWait"]!), nesting \(k["nestingDepth"]!)"
            )
        }
        return out.joined(separator: "\n")
    }

    /// Pretty, key-sorted JSON.
    public var json: String {
        JSONValueEncoder.pretty(self)
    }
}

/// Actions, triggers and conditions as short text.
struct ActionText {
    let config: DaemonConfig

    func name(_ l: LineID) -> String { config.lines[l.index].name }

    func list(_ actions: [Action]) -> String { actions.map(action).joined(separator: "; ") }

    func action(_ a: Action) -> String {
        switch a {
        case let .set(l, v): "set \(name(l)) \(v ? "on" : "off")"
        case let .toggle(l): "toggle \(name(l))"
        case let .pulse(l, d): "pulse \(name(l)) \(DurationText.format(d))"
        case let .wait(d): "wait \(DurationText.format(d))"
        case let .run(c, argv): "run \(config.commands[c.index].shell ? "sh -c " : "")\(argv)"
        case let .log(level, m): "log \(level.rawValue) \"\(m)\""
        case let .mode(m): "mode \(config.modes[m.index].name)"
        case let .startSequence(s): "sequence \(config.sequences[s.index].name)"
        case let .stopSequence(s): "stop \(config.sequences[s.index].name)"
        case let .ifThen(c, t, e):
            "if \(condition(c)) then [\(list(t))]" + (e.isEmpty ? "" : " else [\(list(e))]")
        }
    }

    func condition(_ c: Condition) -> String {
        switch c {
        case let .line(l, v): "\(name(l)) is \(v ? "on" : "off")"
        case let .mode(m): "mode is \(config.modes[m.index].name)"
        case let .not(c): "not (\(condition(c)))"
        case let .all(cs): "(" + cs.map(condition).joined(separator: " and ") + ")"
        case let .any(cs): "(" + cs.map(condition).joined(separator: " or ") + ")"
        }
    }
}
