import BoardControl
import Boardloop
import BoardSupport
import BoardloopGPIO
import BoardloopGPIOMock
import Glibc
import Logging

/// The control protocol's commands (docs/control.md): the codec of the
/// command service (`RemoteCommands`) for the socket's JSON requests, and
/// the reads (status, lines, stats) and mock-board drives of its own.
extension ControlServer {
    /// An error reply's code and message.
    struct Failure: Error {
        var code: String
        var message: String
        init(_ code: String, _ message: String) {
            self.code = code
            self.message = message
        }

        init(_ e: RemoteError) { self.init(e.code.rawValue, e.message) }
    }

    static let version: Int64 = 1
    static let mutating: Set<String> = ["set", "toggle", "pulse", "sequence", "mode", "reload", "press", "release", "click", "input", "flood"]

    func error(id: JSON, _ code: String, _ message: String) -> JSON {
        .object([
            ("v", .int(Self.version)), ("id", id), ("ok", .bool(false)),
            ("error", .object([("code", .string(code)), ("message", .string(message))])),
        ])
    }

    /// One request line to its reply; nil when the reply comes later
    /// (`reload`: the config is read off the main loop).
    func handle(_ line: ArraySlice<UInt8>, from c: Client) -> JSON? {
        let req: JSON
        do { req = try JSON.parse(line) } catch { return self.error(id: .null, "bad-json", "the request is not JSON: \(error.message)") }
        guard case .object = req else { return error(id: .null, "bad-json", "a request is a JSON object, not \(req.kind)") }
        let id = req["id"] ?? .null
        switch id {
        case .null, .int: break
        default: return error(id: .null, "bad-argument", "id: expected a whole number, found \(id.kind)")
        }
        guard req["v"] == .int(Self.version) else {
            let found = req["v"].map { "\"v\":\(Echo($0.serialized).bare)" } ?? "no \"v\""
            return error(id: id, "version", "this boardd speaks control protocol version 1 (\"v\":1); the request has \(found)")
        }
        guard case let .string(cmd)? = req["cmd"] else {
            return error(id: id, "bad-argument", "cmd: expected the command's name as a string, found \(req["cmd"]?.kind ?? "nothing")")
        }
        do {
            if cmd == "reload" {
                try reload(id: id, from: c)
                return nil
            }
            let fields = try run(cmd, req, from: c)
            return .object([("v", .int(Self.version)), ("id", id), ("ok", .bool(true))] + fields)
        } catch let f as Failure {
            return error(id: id, f.code, f.message)
        } catch {
            return self.error(id: id, "internal", "\(error)")
        }
    }

    static let commands = [
        "status", "lines", "get", "set", "toggle", "pulse", "sequence", "mode", "reload", "press", "release", "click", "input", "ping",
        "stats", "events", "flood", "trace", "record",
    ]

    private func run(_ cmd: String, _ r: JSON, from c: Client) throws -> [(String, JSON)] {
        switch cmd {
        case "ping": return [("pong", .bool(true))]
        case "status": return status()
        case "lines": return [("lines", .array(lineList()))]
        case "stats": return stats()
        case "get":
            let (i, l) = try line(r)
            return [("line", .string(l.name)), ("value", .bool(value(i)))]
        case "set":
            let (i, l) = try output(r)
            let v = try bool(r, "value")
            try remote { try $0.set(LineID(i), v, by: .control(c.peer)) }
            return [("line", .string(l.name)), ("value", .bool(v))]
        case "toggle":
            let (i, l) = try output(r)
            let v = try remote { try $0.toggle(LineID(i), by: .control(c.peer)) }
            return [("line", .string(l.name)), ("value", .bool(v))]
        case "pulse":
            let (i, l) = try output(r)
            let d = try duration(r, "duration", required: true)!
            try remote { try $0.pulse(LineID(i), for: d, by: .control(c.peer)) }
            return [("line", .string(l.name))]
        case "sequence":
            let action = try string(r, "action")
            guard action == "start" || action == "stop" else { throw Failure("bad-argument", "action: expected \"start\" or \"stop\", found \(Echo(action))") }
            let name = try string(r, "name")
            try remote {
                let s = try $0.sequence(name, .all)
                if action == "start" { try $0.start(s, by: .control(c.peer)) } else { try $0.stop(s, by: .control(c.peer)) }
            }
            return [("name", .string(name))]
        case "mode": return try mode(r, from: c)
        case "press", "release", "click", "input": return try drive(cmd, r, from: c)
        case "flood": return try flood(r, from: c)
        case "events", "cancel": return try events(cmd, r, from: c)
        case "trace": return try startTrace(r, from: c)
        case "record": return try startRecording(r, from: c)
        default:
            throw Failure("unknown-command", "no command \(Echo(cmd))\(DidYouMean.hint(cmd, in: Self.commands)) (commands: \(RemoteCommands.list(Self.commands)))")
        }
    }


    /// `reload`: answered once the config read off the main loop is
    /// applied or refused. Until then the client's further requests wait
    /// (replies stay in order) and it has no idle timeout.
    private func reload(id: JSON, from c: Client) throws {
        // Waiting before the request is made: a reload that cannot be read
        // off the loop answers before `reload` returns.
        c.awaiting = true
        c.idleAt = .max
        do {
            try remote { s in
                try s.reload(by: .control(c.peer)) { [weak self, weak c] o in
                    guard let self, let c, !c.closed else { return }
                    c.awaiting = false
                    self.reply(
                        .object([
                            ("v", .int(Self.version)), ("id", id), ("ok", .bool(true)), ("applied", .bool(o.applied)),
                            ("errors", .array(o.errors.map(JSON.string))),
                        ]), to: c)
                    self.resume(c)
                }
            }
        } catch {
            c.awaiting = false
            c.idleAt = deadline()
            throw error
        }
        flush(c)
    }

    /// Logged at notice for every mutating request, with the peer's credentials.
    func mutation(_ c: Client, _ what: String) {
        RemoteCommands.log(what, by: .control(c.peer), logger)
    }

    /// Runs `body` on the command service; its refusal becomes the reply's error.
    func remote<T>(_ body: (RemoteCommands) throws -> T) throws -> T {
        guard let service = daemon.remote else { throw Failure("internal", "the command service is not running") }
        do { return try body(service) } catch let e as RemoteError { throw Failure(e) }
    }

    func value(_ i: Int) -> Bool { daemon.main.program.cells[i].value.load(ordering: .relaxed) }

    // MARK: Arguments

    func field(_ r: JSON, _ name: String) throws -> JSON {
        guard let v = r[name], v != .null else { throw Failure("bad-argument", "\(name): missing") }
        return v
    }

    func string(_ r: JSON, _ name: String) throws -> String {
        let v = try field(r, name)
        guard case let .string(s) = v else { throw Failure("bad-argument", "\(name): expected a string, found \(v.kind)") }
        return s
    }

    func bool(_ r: JSON, _ name: String) throws -> Bool {
        let v = try field(r, name)
        guard case let .bool(b) = v else { throw Failure("bad-argument", "\(name): expected true or false, found \(v.kind)") }
        return b
    }

    /// A pulse's duration in the config's grammar ("100ms", "2s"): more
    /// than zero and at most 24 h (`RemoteCommands.pulseDuration`).
    func duration(_ r: JSON, _ name: String, required: Bool) throws -> Duration? {
        guard r[name] != nil || required else { return nil }
        let text = try string(r, name)
        do { return try RemoteCommands.pulseDuration(text) } catch { throw Failure(error.code.rawValue, "\(name): \(error.message)") }
    }

    func line(_ r: JSON) throws -> (Int, LineConfig) {
        let name = try string(r, "line")
        let id = try remote { try $0.line(name) }
        return (id.index, daemon.config[id])
    }

    func output(_ r: JSON) throws -> (Int, LineConfig) {
        let name = try string(r, "line")
        let id = try remote { try $0.output(name, .all) }
        return (id.index, daemon.config[id])
    }

    // MARK: Modes

    private func mode(_ r: JSON, from c: Client) throws -> [(String, JSON)] {
        let name = try string(r, "loop")
        let i = try remote { try $0.loopIndex(name) }
        guard r["mode"] != nil else {
            guard let m = loopMode(i) else { throw Failure("internal", "loop '\(name)' did not answer within a second") }
            return [("loop", .string(name)), ("mode", .string(m))]
        }
        let modeName = try string(r, "mode")
        try remote { try $0.setMode(loop: i, try $0.mode(modeName, .all), by: .control(c.peer)) }
        return [("loop", .string(name)), ("mode", .string(modeName))]
    }

    /// Loop `i`'s effective mode (a worker is asked, for at most a second).
    func loopMode(_ i: Int) -> String? {
        if i == 0 { return daemon.mainMode }
        if case let .success(m) = daemon.onWorker(i - 1, timeout: .seconds(1), { $0.config.modes[$0.effectiveMode].name }) { return m }
        return nil
    }


    // MARK: Status and lines

    private func status() -> [(String, JSON)] {
        let d = daemon
        let config = d.config
        let found = config.board.detected ? "detected" : (d.options.loadOptions.board != nil ? "--board" : "config")
        let backend = d.mock != nil ? "mock" : d.gpio.backendName
        // One wait per worker (at most a second) for its counters, thread and mode.
        var counters = [d.counters]
        var vitals: [LoopVitals?] = [d.main.vitals()]
        var modes: [String?] = [d.mainMode]
        for i in d.workers.indices {
            if case let .success(s) = d.workerStatus(i, timeout: .seconds(1)) {
                counters.append(s.counters)
                vitals.append(s.vitals)
                modes.append(s.mode)
            } else {
                vitals.append(nil)
                modes.append(nil)
            }
        }
        var loops: [JSON] = []
        for (i, plan) in config.loops.enumerated() {
            var f: [(String, JSON)] = [("name", .string(plan.name)), ("mode", (i < modes.count ? modes[i] : nil).map(JSON.string) ?? .null)]
            let vitals = i < vitals.count ? vitals[i] : nil
            f.append(("answered", .bool(vitals != nil)))
            if let v = vitals { f.append(("thread_tid", .int(Int64(v.threadID)))) }
            f.append(("cpus", .array(plan.cpus.map { .int(Int64($0)) })))
            f.append(("priority", plan.realtimePriority.map { .int(Int64($0)) } ?? .null))
            if let v = vitals {
                f.append(("thread", .object([
                    ("cpu_now", .int(Int64(v.cpu))), ("policy", .string("\(v.policy)")), ("priority_now", .int(Int64(v.priority))),
                ])))
                f.append(("waits", .int(Int64(clamping: v.waits))))
                f.append(("handled", .int(Int64(clamping: v.handled))))
                f.append((
                    "slowest_handler",
                    v.slowest.map { .object([("what", .string($0.what(config))), ("took_ns", .int(Int64(clamping: $0.nanoseconds)))]) } ?? .null
                ))
            }
            loops.append(.object(f))
        }
        var running: [JSON] = []
        var held: [(String, JSON)] = []
        var lost: [(String, JSON)] = []
        for s in config.sequences {
            guard let sc = counters.lazy.compactMap({ $0.sequence[s.name] }).first, sc.running > 0 || sc.queued > 0 else { continue }
            running.append(.object([("name", .string(s.name)), ("runs", .int(Int64(sc.running))), ("queued", .int(Int64(sc.queued)))]))
        }
        for l in config.lines {
            guard let lc = counters.lazy.compactMap({ $0.lines[l.name] }).first else { continue }
            if lc.heldInRing > 0 { held.append((l.name, .int(Int64(lc.heldInRing)))) }
            if lc.lost > 0 { lost.append((l.name, .int(Int64(lc.lost)))) }
        }
        let uptime = (loop.now.nanoseconds &- startedAt.nanoseconds) / 1_000_000_000
        return [
            ("board", .object([("name", .string(config.board.name)), ("found", .string(found)), ("backend", .string(backend))])),
            ("config", .object([("file", .string(config.file)), ("generation", .int(Int64(d.generation)))])),
            ("pid", .int(Int64(getpid()))), ("uptime_s", .int(Int64(uptime))), ("loops", .array(loops)),
            ("sequences_running", .array(running)), ("lines_held", .object(held)), ("lost", .object(lost)),
            ("children", .int(Int64(counters[0].commandsRunning))),
            ("reloads", .object([
                ("applied", .int(Int64(d.reloads.applied))), ("refused", .int(Int64(d.reloads.refused))),
                ("last_error", d.lastReloadError.map(JSON.string) ?? .null),
            ])),
            ("mqtt", d.mqtt?.status ?? .null),
        ]
    }

    private func lineList() -> [JSON] {
        let config = daemon.config
        let counters = daemon.allCounters()
        return config.lines.enumerated().map { i, l in
            let lc = counters.lazy.compactMap { $0.lines[l.name] }.first
            var chip: JSON = .null, offset: JSON = .null
            switch l.address {
            case let .offset(ref, o):
                chip = .string(ref.text)
                offset = .int(Int64(o))
            case let .named(ref, n):
                if let found = try? GPIOChip.findLine(named: n, backend: daemon.gpio) {
                    chip = .string(ref?.text ?? found.chip.name)
                    offset = .int(Int64(found.offset))
                } else if let ref {
                    chip = .string(ref.text)
                }
            }
            let n = { (v: UInt64?) in JSON.int(Int64(v ?? 0)) }
            var last: JSON = .null
            if let lc, lc.lastEdgeAt > 0 {
                let now = daemon.main.nowNanoseconds
                last = .object([
                    ("edge", .string(lc.lastEdgeRising ? "rising" : "falling")), ("t_ns", .int(Int64(clamping: lc.lastEdgeAt))),
                    ("ago_ns", .int(Int64(clamping: now &- min(now, lc.lastEdgeAt)))),
                ])
            }
            return .object([
                ("name", .string(l.name)), ("pin", l.pin.map(JSON.string) ?? .null), ("chip", chip), ("offset", offset),
                ("direction", .string(l.isInput ? "input" : "output")), ("value", .bool(value(i))),
                ("priority", .string(config.priorities[l.priority.index])), ("events", n(lc?.events)), ("held", n(lc?.heldInRing)),
                ("lost", n(lc?.lost)), ("rate_limited", n(lc?.rateLimitHolds)), ("last_edge", last),
            ])
        }
    }
}
