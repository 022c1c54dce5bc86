import BoardControl
import Boardloop
import BoardSupport
import Glibc
import Logging

/// The control protocol's `trace` (docs/control.md): every loop records
/// its activity for a while (`LoopTracer`), then the spans go to the
/// client as Chrome trace events, a chunk at a time as its socket drains,
/// one track (`tid`) per loop thread. One trace at a time; a client that
/// hangs up ends its trace and nothing is sent.
extension ControlServer {
    /// The trace that runs: who asked, the request's id, when it ends.
    final class TraceRun {
        unowned let client: Client
        let id: JSON
        let endsAt: UInt64
        /// Tells this trace's tracers from an earlier one's.
        let serial: UInt64

        init(client: Client, id: JSON, endsAt: UInt64, serial: UInt64) {
            self.client = client
            self.id = id
            self.endsAt = endsAt
            self.serial = serial
        }
    }

    /// A finished trace on its way to the client: the loops' tracers and
    /// how far the sending got (spans turn into JSON a chunk at a time, so
    /// a trace never sits in memory as text).
    final class TraceDump {
        let id: JSON
        /// Per loop: its index, name and tracer (nil: the loop did not answer).
        let loops: [(index: Int, name: String, tracer: LoopTracer?)]
        let program: Program
        /// The program's trace levels and names.
        let names: TraceNames
        let origin: UInt64
        var loop = 0
        var next = 0
        var metadataSent = false
        var sent = 0

        init(id: JSON, loops: [(index: Int, name: String, tracer: LoopTracer?)], program: Program) {
            self.id = id
            self.loops = loops
            self.program = program
            names = TraceNames(program)
            origin = loops.compactMap { $0.tracer?.started }.min() ?? 0
        }
    }

    /// The longest trace a request may ask for.
    static let maxTrace = Duration.seconds(300)
    /// Spans per reply line.
    static let traceChunk = 256

    func startTrace(_ r: JSON, from c: Client) throws -> [(String, JSON)] {
        let length = try duration(r, "for", required: true)!
        guard length <= Self.maxTrace else {
            throw Failure("bad-argument", "for: at most \(DurationText.format(Self.maxTrace)) (a loop keeps its last \(LoopTracer.defaultCapacity) spans)")
        }
        if let t = trace {
            let left = Duration.nanoseconds(Int64(clamping: t.endsAt &- min(t.endsAt, loop.now.nanoseconds)))
            throw Failure("busy", "a trace is already running (\(left.short) left); one runs at a time")
        }
        if c.traceDump != nil { throw Failure("busy", "this connection's last trace is still being sent; ask again once it is done") }
        try roomToSchedule(1)
        let d = daemon
        traceSerial += 1
        let serial = traceSerial
        do { try d.main.startTracing(LoopTracer(threadID: OSThread.currentID, now: d.main.nowNanoseconds, serial: serial)) } catch {
            throw Failure("internal", "the main loop cannot trace: \(error)")
        }
        var names = [d.main.name]
        for i in d.workers.indices {
            let started = d.onWorker(i, timeout: .seconds(1)) { rt in
                try rt.startTracing(LoopTracer(threadID: OSThread.currentID, now: rt.nowNanoseconds, serial: serial))
            }
            if case .success = started {
                names.append(d.workers[i].name)
            } else {
                logger.warning("control: loop '\(d.workers[i].name)' did not start tracing within a second; the trace leaves it out")
            }
        }
        let id = r["id"] ?? .null
        let endsAt = loop.now.nanoseconds &+ UInt64(length.nanosecondsClamped)
        trace = TraceRun(client: c, id: id, endsAt: endsAt, serial: serial)
        schedule(.endTrace(serial: serial), at: endsAt)
        // The client waits without a request for as long: no idle timeout
        // until its trace is sent (then each chunk it reads counts as
        // activity: a client that stops reading is closed at the timeout).
        c.idleAt = .max
        armIdle()
        logger.info("control: tracing \(names.joined(separator: ", ")) for \(DurationText.format(length)) (\(c.peer))")
        return [("tracing", .bool(true)), ("for_ns", .int(length.nanosecondsClamped)), ("loops", .array(names.map(JSON.string)))]
    }

    /// Ends the running trace (`serial`: only if it is that one): each loop
    /// stops recording; with `send`, what they recorded goes to the client
    /// that asked. Without `send` (the client hung up, the daemon stops)
    /// nothing waits for a worker: each is told to stop when it can.
    func endTrace(send: Bool, serial: UInt64? = nil) {
        guard let run = trace, serial == nil || serial == run.serial else { return }
        trace = nil
        scheduled.removeAll { if case .endTrace = $0.action { true } else { false } }
        armDrive()
        let d = daemon
        let mine = { (t: LoopTracer?) in t?.serial == run.serial ? t : nil }
        var loops: [(index: Int, name: String, tracer: LoopTracer?)] = [(0, d.main.name, mine(d.main.stopTracing()))]
        var late: [String] = []
        for i in d.workers.indices {
            guard send else {
                d.postToWorker(i) { _ = $0.stopTracing() }
                continue
            }
            var got: LoopTracer?
            if case let .success(t) = d.onWorker(i, timeout: .seconds(1), { UncheckedTracer(tracer: $0.stopTracing()) }) {
                got = mine(t.tracer)
            } else {
                // Stuck: it stops recording once it runs again.
                d.postToWorker(i) { _ = $0.stopTracing() }
                late.append(d.workers[i].name)
            }
            loops.append((i + 1, d.workers[i].name, got))
        }
        if !late.isEmpty { logger.warning("control: loop(s) \(late.joined(separator: ", ")) did not hand in their trace within a second; the trace leaves them out") }
        guard send, !run.client.closed else { return }
        let c = run.client
        c.traceDump = TraceDump(id: run.id, loops: loops, program: d.main.program)
        c.idleAt = deadline()
        armIdle()
        flush(c)
    }

    /// Appends the next chunk of `c`'s trace to its output; false when
    /// there was nothing left (the dump is then gone).
    func sendTraceChunk(_ c: Client) -> Bool {
        guard let dump = c.traceDump else { return false }
        var events: [JSON] = []
        let pid = Int64(getpid())
        if !dump.metadataSent {
            dump.metadataSent = true
            events.append(metadata("process_name", pid: pid, tid: nil, name: "boardd (\(daemon.config.board.name))"))
            for l in dump.loops {
                guard let t = l.tracer else { continue }
                events.append(metadata("thread_name", pid: pid, tid: t.threadID, name: "loop \(l.name)"))
                events.append(metadata("thread_sort_index", pid: pid, tid: t.threadID, index: l.index))
            }
        }
        while events.count < Self.traceChunk, dump.loop < dump.loops.count {
            let l = dump.loops[dump.loop]
            guard let t = l.tracer else {
                dump.loop += 1
                dump.next = 0
                continue
            }
            let first = max(0, t.count - t.capacity)
            let i = first + dump.next
            guard i < t.count else {
                dump.loop += 1
                dump.next = 0
                continue
            }
            dump.next += 1
            if let e = chromeEvent(t.span(i), loop: l.index, tid: t.threadID, pid: pid, dump: dump) { events.append(e) }
        }
        // The client read what went before: it is active.
        c.idleAt = c.follow != nil ? .max : deadline()
        armIdle()
        if !events.isEmpty {
            dump.sent += events.count
            append(.object([("v", .int(Self.version)), ("id", dump.id), ("trace_events", .array(events))]), to: &c.output)
            return true
        }
        c.traceDump = nil
        let overwritten = dump.loops.reduce(0) { $0 + ($1.tracer?.overwritten ?? 0) }
        let missing = dump.loops.filter { $0.tracer == nil }.map { JSON.string($0.name) }
        append(
            .object([
                ("v", .int(Self.version)), ("id", dump.id), ("ok", .bool(true)), ("done", .bool(true)), ("events", .int(Int64(dump.sent))),
                ("overwritten", .int(Int64(overwritten))), ("loops_missing", .array(missing)),
            ]), to: &c.output)
        return true
    }

    private func metadata(_ what: String, pid: Int64, tid: Int32?, name: String? = nil, index: Int? = nil) -> JSON {
        var f: [(String, JSON)] = [("name", .string(what)), ("ph", .string("M")), ("pid", .int(pid))]
        if let tid { f.append(("tid", .int(Int64(tid)))) }
        if let name { f.append(("args", .object([("name", .string(name))]))) }
        if let index { f.append(("args", .object([("sort_index", .int(Int64(index)))]))) }
        return .object(f)
    }

    /// A span as a Chrome trace event: a complete event (`X`) for what has a
    /// duration, a thread-scoped instant (`i`) for the rest; `ts` and `dur`
    /// in microseconds from the trace's start.
    private func chromeEvent(_ s: LoopTracer.Span, loop: Int, tid: Int32, pid: Int64, dump: TraceDump) -> JSON? {
        let config = dump.program.config
        var name: String
        var cat: String
        var args: [(String, JSON)] = []
        var instant = s.duration == LoopTracer.Span.instant
        if s.kind != .record, s.generation != dump.program.generation, ![.pass, .wait, .message, .control].contains(s.kind) {
            // A reload came during the trace: the index is of an earlier config.
            name = "\(s.kind) #\(s.a) (an earlier config)"
            cat = s.kind == .line ? "source" : s.kind == .entry || s.kind == .exit ? "mode" : s.kind == .sequenceStep ? "sequence" : "timer"
            return event(name, cat, instant, s, tid: tid, pid: pid, dump: dump, args: [])
        }
        switch s.kind {
        case .pass:
            (name, cat) = ("pass", "loop")
        case .wait:
            (name, cat) = ("wait", "loop")
        case .entry, .exit:
            let mode = Int(s.a) < config.modes.count ? config.modes[Int(s.a)].name : "\(s.a)"
            (name, cat) = (s.kind == .entry ? "run \(mode)" : "run \(mode) ends", "mode")
        case .line:
            (name, cat) = ("line \(lineName(Int(s.a), config))", "source")
            args = [("events", .int(s.b))]
        case .lineTimer:
            (name, cat) = ("line \(lineName(Int(s.a), config)) deadlines", "timer")
        case .task:
            let task = Int(s.a) < config.tasks.count ? config.tasks[Int(s.a)].name : "\(s.a)"
            (name, cat) = ("task \(task)", "timer")
            args = [("lateness_ns", .int(s.b))]
        case .sequenceStep:
            let seq = Int(s.a) < config.sequences.count ? config.sequences[Int(s.a)].name : "\(s.a)"
            (name, cat) = ("sequence \(seq) step", "sequence")
        case .message:
            (name, cat) = ("action from another loop", "source")
        case .control:
            (name, cat) = ("control request", "source")
        case .record:
            let r = s.record
            guard r.generation == dump.program.generation,
                let described = TraceLog.describe(r, loop: loop, names: dump.names)
            else {
                (name, cat) = ("an event of an earlier config", "event")
                instant = true
                break
            }
            (name, cat) = (described.text, described.kind)
            for (k, v) in described.fields {
                switch v {
                case let .string(x): args.append((k, .string(x)))
                case let .int(x): args.append((k, .int(x)))
                case let .bool(x): args.append((k, .bool(x)))
                }
            }
            // Instants: an edge at its kernel timestamp (how late it was
            // handled in its args), a reaction where its actions ended.
            if r.kind == .edge { args.append(("handled_after_ns", .int(Int64(clamping: s.duration)))) }
            instant = true
        }
        return event(name, cat, instant, s, tid: tid, pid: pid, dump: dump, args: args)
    }

    private func event(
        _ name: String, _ cat: String, _ instant: Bool, _ s: LoopTracer.Span, tid: Int32, pid: Int64, dump: TraceDump, args: [(String, JSON)]
    ) -> JSON {
        let ts = Double(Int64(bitPattern: s.start &- dump.origin)) / 1000
        var f: [(String, JSON)] = [
            ("name", .string(name)), ("cat", .string(cat)), ("ph", .string(instant ? "i" : "X")), ("ts", .double(ts)), ("pid", .int(pid)),
            ("tid", .int(Int64(tid))),
        ]
        if instant {
            f.append(("s", .string("t")))
        } else {
            f.append(("dur", .double(Double(s.duration) / 1000)))
        }
        if !args.isEmpty { f.append(("args", .object(args))) }
        return .object(f)
    }

    private func lineName(_ i: Int, _ config: DaemonConfig) -> String { i >= 0 && i < config.lines.count ? config.lines[i].name : "\(i)" }
}

/// A tracer handed from a worker's thread to the main one (the worker has
/// stopped using it: `stopTracing` ran there first).
struct UncheckedTracer: @unchecked Sendable {
    let tracer: LoopTracer?
}
