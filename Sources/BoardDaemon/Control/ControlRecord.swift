import Boardloop
import BoardSupport
import Glibc

/// The control protocol's `record` (docs/control.md, docs/recording.md):
/// every loop records what it saw and did for a while (`LoopRecorder`) —
/// edges as read from the kernel, held events delivered, losses, writes
/// with who made them, reactions, gestures, mode switches, sequence steps —
/// and the records stream to the client as they are drained, a few times a
/// second, time-ordered across the loops, each line of a recording file
/// wrapped in a reply line (`"record":{…}`); the first reply carries the
/// file's header, the last its footer. One recording at a time; a client
/// that hangs up ends it, one that stops reading is dropped as a slow
/// `events` follower is.
extension ControlServer {
    /// The recording that runs.
    final class RecordRun {
        unowned let client: Client
        let id: JSON
        let serial: UInt64
        /// When it started on the main loop's clock (the records' `t` is from it).
        let start: UInt64
        let endsAt: UInt64
        /// Per line index, whether its edges, writes, deliveries, losses
        /// and gestures are recorded (nil: every line's).
        let lines: [Bool]?
        /// Per loop (main first): its name and recorder (nil: it did not answer).
        var loops: [(name: String, recorder: LoopRecorder?)] = []
        /// The programs the records name things by (a reload adds one).
        var programs: [Program] = []
        var records = 0
        /// Records whose program was not known (a reload during the recording).
        var stale = 0
        var timer: RunLoopTimer?
        /// What each of its lines starts with, up to the record: `{"v":1,"id":N,"record":`.
        let prefix: [UInt8]

        init(client: Client, id: JSON, serial: UInt64, start: UInt64, endsAt: UInt64, lines: [Bool]?) {
            self.client = client
            self.id = id
            self.serial = serial
            self.start = start
            self.endsAt = endsAt
            self.lines = lines
            prefix = Array(#"{"v":\#(ControlServer.version),"id":\#(id.text),"record":"#.utf8)
        }
    }

    /// The longest recording a request may ask for (records stream as they
    /// come: nothing grows with its length).
    static let maxRecord = Duration.seconds(3600)
    /// How often the loops' recorders are drained and their records sent.
    static let recordDrainEvery = Duration.milliseconds(50)
    /// The file format's version (docs/recording.md).
    static let recordingVersion: Int64 = 1

    func startRecording(_ r: JSON, from c: Client) throws -> [(String, JSON)] {
        let length = try duration(r, "for", required: true)!
        guard length <= Self.maxRecord else { throw Failure("bad-argument", "for: at most \(DurationText.format(Self.maxRecord))") }
        let d = daemon
        let config = d.config
        var wanted: [Bool]?
        if let l = r["lines"], l != .null {
            guard case let .array(names) = l else { throw Failure("bad-argument", "lines: expected an array of line names, found \(l.kind)") }
            var w = [Bool](repeating: false, count: config.lines.count)
            for n in names {
                guard case let .string(name) = n else { throw Failure("bad-argument", "lines: expected line names, found \(n.kind)") }
                guard let id = config.line(named: name) else {
                    let all = config.lines.map(\.name)
                    throw Failure("unknown-line", "no line named '\(name)'\(DidYouMean.hint(name, in: all)) (lines: \(list(all)))")
                }
                w[id.index] = true
            }
            if !names.isEmpty { wanted = w }
        }
        if let run = recording {
            let left = Duration.nanoseconds(Int64(clamping: run.endsAt &- min(run.endsAt, loop.now.nanoseconds)))
            throw Failure("busy", "a recording is already running (\(left.short) left); one runs at a time")
        }
        if c.follow != nil || c.traceDump != nil || trace?.client === c {
            throw Failure("busy", "this connection follows the events or waits for a trace; record on a connection of its own")
        }
        traceSerial += 1
        let serial = traceSerial
        let start = loop.now.nanoseconds
        let run = RecordRun(
            client: c, id: r["id"] ?? .null, serial: serial, start: start, endsAt: start &+ UInt64(length.nanosecondsClamped), lines: wanted)
        run.programs = [d.main.program]
        var levels: [(line: Int, high: Bool)] = []
        let main = LoopRecorder(serial: serial)
        levels += d.main.startRecording(main)
        run.loops = [(d.main.name, main)]
        for i in d.workers.indices {
            let rec = LoopRecorder(serial: serial)
            if case let .success(l) = d.onWorker(i, timeout: .seconds(1), { rt in UncheckedLevels(levels: rt.startRecording(rec)) }) {
                levels += l.levels
                run.loops.append((d.workers[i].name, rec))
            } else {
                // It stops once it runs again (after the start, if that still comes).
                d.postToWorker(i) { rt in if rt.events.recorder === rec { rt.stopRecording() } }
                run.loops.append((d.workers[i].name, nil))
                logger.warning("control: loop '\(d.workers[i].name)' did not start recording within a second; the recording leaves it out")
            }
        }
        recording = run
        let t = RunLoopTimer.rearmable { [unowned self] _ in self.recordTick() }
        do { try loop.add(t, mode: .common) } catch {
            endRecording(send: false)
            throw Failure("internal", "cannot schedule the recording's drain: \(error)")
        }
        run.timer = t
        armRecordTimer()
        // The client waits without a request: no idle timeout while it records.
        c.idleAt = .max
        armIdle()
        let names = config.lines.enumerated().filter { wanted?[$0.offset] ?? true }.map(\.element.name)
        var levelFields: [(String, JSON)] = []
        for (i, high) in levels.sorted(by: { $0.line < $1.line }) where wanted?[i] ?? true {
            levelFields.append((config.lines[i].name, .int(high ? 1 : 0)))
        }
        let digest: JSON
        if case let .success(bytes) = FileSystem.readBytes(config.file, limit: FileSystem.maximumConfigSize, regularOnly: true) {
            digest = .string(SHA256.hex(bytes))
        } else {
            digest = .null
        }
        let seconds = Double(length.nanosecondsClamped) / 1e9
        let header: JSON = .object([
            ("boardd_recording", .int(Self.recordingVersion)), ("config", .string(config.file)), ("config_sha256", digest),
            ("board", .string(config.board.name)), ("gpio", .string(d.mock != nil ? "mock" : d.gpio.backendName)),
            ("start_ns", .int(Int64(clamping: start))),
            ("seconds", seconds == seconds.rounded() ? .int(Int64(seconds)) : .double(seconds)),
            ("lines", .array(names.map(JSON.string))), ("loops", .array(config.loops.map { .string($0.name) })),
            ("levels", .object(levelFields)),
        ])
        let missing = run.loops.filter { $0.recorder == nil }.map(\.name)
        logger.info(
            "control: recording \(wanted == nil ? "every line" : names.joined(separator: ", ")) for \(DurationText.format(length))\(missing.isEmpty ? "" : " (without loop \(missing.joined(separator: ", ")))") (\(c.peer))"
        )
        return [("recording", .bool(true)), ("for_ns", .int(length.nanosecondsClamped)), ("header", header)]
    }

    private func armRecordTimer() {
        guard let run = recording else { return }
        let next = min(loop.now.nanoseconds &+ UInt64(Self.recordDrainEvery.nanosecondsClamped), run.endsAt)
        run.timer?.arm(at: MonotonicInstant(nanoseconds: next))
    }

    /// The drain timer: the records so far go to the client; at the end,
    /// the last ones and the footer.
    func recordTick() {
        guard let run = recording else { return }
        if loop.now.nanoseconds >= run.endsAt {
            endRecording(send: true)
            return
        }
        drainRecording(run)
        armRecordTimer()
    }

    /// Sends what the loops recorded since the last drain, in time order
    /// (the loops' records merged by time; a loop's own stay in order).
    private func drainRecording(_ run: RecordRun) {
        let c = run.client
        guard !c.closed else { return }
        let program = daemon.main.program
        if run.programs.last?.generation != program.generation {
            run.programs.append(program)
            if run.programs.count > TraceLog.generationsKept { run.programs.removeFirst() }
        }
        var got: [(t: UInt64, loop: Int, n: Int, entry: LoopRecorder.Entry)] = []
        for (i, l) in run.loops.enumerated() {
            guard let rec = l.recorder else { continue }
            rec.consume { e in got.append((e.t, i, got.count, e)) }
        }
        guard !got.isEmpty else { return }
        got.sort { ($0.t, $0.loop, $0.n) < ($1.t, $1.loop, $1.n) }
        var wrote = false
        for g in got {
            guard let p = run.programs.last(where: { $0.generation == g.entry.record.generation }) else {
                run.stale += 1
                continue
            }
            guard let j = recordJSON(g.entry, loop: run.loops[g.loop].name, run: run, config: p.config) else { continue }
            let text = Array(j.text.utf8)
            guard c.output.count + run.prefix.count + text.count + 2 <= options.maxOutput else {
                recordingTooSlow(run)
                return
            }
            c.output += run.prefix
            c.output += text
            c.output.append(0x7d)
            c.output.append(0x0a)
            run.records += 1
            wrote = true
        }
        if wrote { flush(c) }
    }

    /// One record as a line of the recording file (nil: a kind a recording
    /// leaves out, or a line it does not record).
    private func recordJSON(_ e: LoopRecorder.Entry, loop: String, run: RecordRun, config: DaemonConfig) -> JSON? {
        let r = e.record
        let lineName = r.line >= 0 && Int(r.line) < config.lines.count ? config.lines[Int(r.line)].name : nil
        if r.line >= 0, let wanted = run.lines, Int(r.line) < wanted.count, !wanted[Int(r.line)], r.kind != .reaction { return nil }
        var f: [(String, JSON)] = [("t", .int(Int64(bitPattern: e.t &- run.start))), ("loop", .string(loop))]
        func name(_ list: [String], _ i: Int32) -> String { i >= 0 && Int(i) < list.count ? list[Int(i)] : "#\(i)" }
        switch r.kind {
        case .rawEdge:
            guard let l = lineName else { return nil }
            f += [("kind", .string("edge")), ("line", .string(l)), ("edge", .string(r.flag ? "rising" : "falling"))]
            if r.sequence != 0 { f.append(("seq", .int(Int64(clamping: r.sequence)))) }
            if r.nanoseconds != 0 { f.append(("line_seq", .int(Int64(clamping: r.nanoseconds)))) }
            f.append(("held", .bool(r.step & 1 != 0)))
        case .heldDelivered:
            guard let l = lineName else { return nil }
            f += [("kind", .string("delivered")), ("line", .string(l)), ("count", .int(Int64(r.number)))]
        case .lost:
            guard let l = lineName else { return nil }
            f += [("kind", .string("lost")), ("line", .string(l)), ("count", .int(Int64(clamping: r.nanoseconds)))]
        case .output:
            guard let l = lineName else { return nil }
            f += [
                ("kind", .string("write")), ("line", .string(l)), ("value", .int(r.flag ? 1 : 0)),
                ("by", .string(Self.writer(r.step, r.index, config))),
            ]
        case .reaction:
            f += [("kind", .string("reaction")), ("name", .string(name(config.reactions.map(\.name), r.index)))]
            if let l = lineName { f.append(("line", .string(l))) }
        case .gesture:
            guard let l = lineName, let g = GestureKind(code: r.index) else { return nil }
            f += [("kind", .string("gesture")), ("line", .string(l)), ("gesture", .string(g.rawValue))]
        case .mode:
            let modes = config.modes.map(\.name)
            let why: String
            switch EventSink.ModeReason(code: r.step, sequence: Int(r.other)) {
            case .action?:
                let by = Self.writer(UInt8(truncatingIfNeeded: r.repeatCount), r.other, config)
                why = by == "unknown" ? "action" : by
            case let .sequenceStarted(s)?: why = "sequence:\(name(config.sequences.map(\.name), Int32(s)))"
            case let .sequenceEnded(s)?: why = "sequence-end:\(name(config.sequences.map(\.name), Int32(s)))"
            case nil: why = "unknown"
            }
            f += [("kind", .string("mode")), ("from", .string(name(modes, r.number))), ("to", .string(name(modes, r.index))), ("why", .string(why))]
        case .sequence:
            guard let step = EventSink.SequenceStep(code: r.step, number: Int(r.number), max: Int(r.other)) else { return nil }
            let s: String
            switch step {
            case .started, .began, .restarted: s = "start"
            case .completed: s = "end"
            case .stopped: s = "stop"
            case .refused: s = "refused"
            case .queued: s = "queued"
            }
            f += [("kind", .string("sequence")), ("name", .string(name(config.sequences.map(\.name), r.index))), ("step", .string(s))]
        case .edge, .skipped, .ringFull, .deadlinesDeferred, .skippedPeriods:
            return nil
        }
        return .object(f)
    }

    /// A write's `by` (`EventSink.WriteBy` and its index).
    static func writer(_ by: UInt8, _ index: Int32, _ config: DaemonConfig) -> String {
        func name(_ list: [String]) -> String { index >= 0 && Int(index) < list.count ? list[Int(index)] : "#\(index)" }
        switch EventSink.WriteBy(rawValue: by) {
        case .reaction?: return "reaction:\(name(config.reactions.map(\.name)))"
        case .sequence?: return "sequence:\(name(config.sequences.map(\.name)))"
        case .task?: return "task:\(name(config.tasks.map(\.name)))"
        case .safe?: return "safe"
        case .control?: return "control"
        case .pulse?: return "pulse"
        case .unknown?, nil: return "unknown"
        }
    }

    /// Ends the recording: each loop stops recording; with `send`, what
    /// is left goes to the client and the footer after it. Without `send`
    /// (the client hung up or reads too slowly, the daemon stops) nothing
    /// waits for a worker: each is told to stop when it can.
    func endRecording(send: Bool) {
        guard let run = recording else { return }
        recording = nil
        run.timer?.invalidate()
        run.timer = nil
        let d = daemon
        d.main.stopRecording()
        var missing = run.loops.filter { $0.recorder == nil }.map(\.name)
        for i in d.workers.indices {
            guard i + 1 < run.loops.count, let rec = run.loops[i + 1].recorder else { continue }
            let stop: @Sendable (LoopRuntime) -> Void = { rt in if rt.events.recorder === rec { rt.stopRecording() } }
            guard send else {
                d.postToWorker(i, stop)
                continue
            }
            if case .failure = d.onWorker(i, timeout: .seconds(1), stop) {
                // Stuck: it stops recording once it runs again; what it
                // recorded until now is sent, the rest is not.
                d.postToWorker(i, stop)
                missing.append(run.loops[i + 1].name)
                logger.warning("control: loop '\(run.loops[i + 1].name)' did not end its recording within a second; its last records are left out")
            }
        }
        let c = run.client
        guard send, !c.closed else { return }
        drainRecording(run)
        guard !c.closed, !c.closeWhenFlushed else { return }
        let dropped = run.loops.reduce(UInt64(run.stale)) { $0 + ($1.recorder?.dropped.load(ordering: .relaxed) ?? 0) }
        var end: [(String, JSON)] = [("end", .bool(true)), ("records", .int(Int64(run.records))), ("dropped", .int(Int64(clamping: dropped)))]
        if !missing.isEmpty { end.append(("loops_missing", .array(missing.map(JSON.string)))) }
        append(.object([("v", .int(Self.version)), ("id", run.id), ("ok", .bool(true)), ("done", .bool(true)), ("end", .object(end))]), to: &c.output)
        logger.info("control: recording done (\(run.records) records, \(dropped) dropped) (\(c.peer))")
        c.idleAt = deadline()
        armIdle()
        flush(c)
    }

    /// A client whose unread records fill its output: the recording ends,
    /// it gets a last line saying why after what waits, and is closed once
    /// that is written (as a slow `events` follower is).
    private func recordingTooSlow(_ run: RecordRun) {
        let c = run.client
        counters.errors["too-slow", default: 0] += 1
        endRecording(send: false)
        logger.warning("control: dropped a recording client (\(c.peer)) that does not read its records (\(c.output.count) bytes waiting)")
        append(
            error(id: run.id, "too-slow", "the records were not read as fast as they came (\(c.output.count) bytes waiting); the recording ends"),
            to: &c.output)
        c.closeWhenFlushed = true
        c.idleAt = deadline()
        armIdle()
        flush(c)
    }
}

/// A worker's input levels handed to the main thread.
struct UncheckedLevels: @unchecked Sendable {
    let levels: [(line: Int, high: Bool)]
}
