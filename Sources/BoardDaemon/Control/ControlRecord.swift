import BoardControl
import Boardloop
import BoardSupport
import Glibc

/// The control protocol's `record` (docs/control.md, docs/testing-configs.md):
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
        /// Per loop, a drain's records and how far the merge took them
        /// (kept from drain to drain: no allocation once they have grown).
        var batches: [[LoopRecorder.Entry]] = []
        var next: [Int] = []
        /// What each of its lines starts with, up to the record: `{"v":1,"id":N,"record":`.
        let prefix: [UInt8]

        init(client: Client, id: JSON, serial: UInt64, start: UInt64, endsAt: UInt64, lines: [Bool]?) {
            self.client = client
            self.id = id
            self.serial = serial
            self.start = start
            self.endsAt = endsAt
            self.lines = lines
            prefix = Array(#"{"v":\#(ControlServer.version),"id":\#(id.serialized),"record":"#.utf8)
        }
    }

    /// The longest recording a request may ask for (records stream as they
    /// come: nothing grows with its length).
    static let maxRecord = Duration.seconds(3600)
    /// How often the loops' recorders are drained and their records sent.
    static let recordDrainEvery = Duration.milliseconds(50)
    /// The file format's version (docs/testing-configs.md).
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
                    throw Failure("unknown-line", "no line named \(Echo(name))\(DidYouMean.hint(name, in: all)) (lines: \(RemoteCommands.list(all)))")
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
        run.batches = Array(repeating: [], count: run.loops.count)
        run.next = Array(repeating: 0, count: run.loops.count)
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
        // Each output's logical value now (its cell), for a replay to start from.
        let cells = d.main.program.cells
        var outputFields: [(String, JSON)] = []
        for (i, l) in config.lines.enumerated() where l.isOutput && (wanted?[i] ?? true) && i < cells.count {
            outputFields.append((l.name, .int(cells[i].value.load(ordering: .relaxed) ? 1 : 0)))
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
            ("levels", .object(levelFields)), ("outputs", .object(outputFields)),
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

    /// Sends what the loops recorded since the last drain, in time order:
    /// each loop's records sorted by time (they nearly are: an edge's time
    /// is its kernel timestamp, read a little later), then the loops merged.
    /// Written straight into the client's output as bytes, into buffers the
    /// recording keeps: the drain allocates nothing per record.
    private func drainRecording(_ run: RecordRun) {
        let c = run.client
        guard !c.closed else { return }
        let program = daemon.main.program
        if run.programs.last?.generation != program.generation {
            run.programs.append(program)
            if run.programs.count > TraceLog.generationsKept { run.programs.removeFirst() }
        }
        // (Worked on as locals and put back: each access to a class's
        // array member through its accessor costs an allocation in a debug
        // build.)
        var batches = run.batches
        var next = run.next
        run.batches = []
        run.next = []
        defer {
            run.batches = batches
            run.next = next
        }
        var any = false
        for i in batches.indices {
            batches[i].removeAll(keepingCapacity: true)
            next[i] = 0
            guard let rec = run.loops[i].recorder else { continue }
            var batch = batches[i]
            batches[i] = []
            if rec.consume({ e in batch.append(e) }) > 0 {
                any = true
                Self.sortByTime(&batch)
            }
            batches[i] = batch
        }
        guard any else { return }
        var out = c.output
        c.output = []
        var wrote = false
        var slow = false
        while true {
            // The loop whose next record is the earliest.
            var pick = -1
            var t = UInt64.max
            for i in batches.indices where next[i] < batches[i].count {
                let ti = batches[i][next[i]].t
                if pick < 0 || ti < t {
                    pick = i
                    t = ti
                }
            }
            guard pick >= 0 else { break }
            let e = batches[pick][next[pick]]
            next[pick] += 1
            // (An index loop: `last(where:)` allocates in a debug build.)
            var program: Program?
            var k = run.programs.count - 1
            while k >= 0 && program == nil {
                if run.programs[k].generation == e.record.generation { program = run.programs[k] }
                k -= 1
            }
            guard let p = program else {
                run.stale += 1
                continue
            }
            let mark = out.count
            out += run.prefix
            guard write(e, loop: pick, run: run, config: p.config, into: &out) else {
                out.removeSubrange(mark...)
                continue
            }
            out.append(0x7d)
            out.append(0x0a)
            guard out.count <= options.maxOutput else {
                out.removeSubrange(mark...)
                slow = true
                break
            }
            run.records += 1
            wrote = true
        }
        c.output = out
        if slow {
            recordingTooSlow(run)
        } else if wrote {
            flush(c)
        }
    }

    /// Stable, in place, for nearly sorted records (no allocation).
    private static func sortByTime(_ a: inout [LoopRecorder.Entry]) {
        guard a.count > 1 else { return }
        for i in 1..<a.count {
            let x = a[i]
            var j = i
            while j > 0 && a[j - 1].t > x.t {
                a[j] = a[j - 1]
                j -= 1
            }
            if j != i { a[j] = x }
        }
    }

    /// Appends one record as a line of the recording file (docs/testing-configs.md)
    /// to `out`; false for a kind a recording leaves out or a line it does
    /// not record (`out` is then left as it may be: the caller cuts it).
    private func write(_ e: LoopRecorder.Entry, loop: Int, run: RecordRun, config: DaemonConfig, into out: inout [UInt8]) -> Bool {
        let r = e.record
        let line = r.line >= 0 && Int(r.line) < config.lines.count ? Int(r.line) : -1
        if line >= 0, let wanted = run.lines, line < wanted.count, !wanted[line], r.kind != .reaction { return false }
        var w = RecordWriter(out: out)
        defer { out = w.out }
        out = []  // (`w` holds the buffer: no copy on write)
        w.raw("{\"t\":")
        w.int(Int64(bitPattern: e.t &- run.start))
        w.raw(",\"loop\":")
        w.string(run.loops[loop].name)
        w.raw(",\"kind\":")
        switch r.kind {
        case .rawEdge:
            guard line >= 0 else { return false }
            w.raw("\"edge\"")
            if line >= 0 { w.field("line", config.lines[line].name) }
            w.raw(r.flag ? ",\"edge\":\"rising\"" : ",\"edge\":\"falling\"")
            if r.sequence != 0 { w.field("seq", Int64(clamping: r.sequence)) }
            if r.nanoseconds != 0 { w.field("line_seq", Int64(clamping: r.nanoseconds)) }
            w.raw(r.step & 1 != 0 ? ",\"held\":true" : ",\"held\":false")
        case .heldDelivered:
            guard line >= 0 else { return false }
            w.raw("\"delivered\"")
            if line >= 0 { w.field("line", config.lines[line].name) }
            w.field("count", Int64(r.number))
        case .lost:
            guard line >= 0 else { return false }
            w.raw("\"lost\"")
            if line >= 0 { w.field("line", config.lines[line].name) }
            w.field("count", Int64(clamping: r.nanoseconds))
        case .output:
            guard line >= 0 else { return false }
            w.raw("\"write\"")
            if line >= 0 { w.field("line", config.lines[line].name) }
            w.raw(r.flag ? ",\"value\":1,\"by\":" : ",\"value\":0,\"by\":")
            w.by(r.step, r.index, config)
        case .reaction:
            guard r.index >= 0 && Int(r.index) < config.reactions.count else { return false }
            w.raw("\"reaction\"")
            w.field("name", config.reactions[Int(r.index)].name)
            if line >= 0 { w.field("line", config.lines[line].name) }
        case .gesture:
            guard line >= 0, let g = GestureKind(code: r.index) else { return false }
            w.raw("\"gesture\"")
            if line >= 0 { w.field("line", config.lines[line].name) }
            w.field("gesture", g.rawValue)
        case .mode:
            let modes = config.modes
            guard r.index >= 0 && Int(r.index) < modes.count && r.number >= 0 && Int(r.number) < modes.count else { return false }
            w.raw("\"mode\"")
            w.field("from", modes[Int(r.number)].name)
            w.field("to", modes[Int(r.index)].name)
            w.raw(",\"why\":")
            let sequences = config.sequences
            switch EventSink.ModeReason(code: r.step, sequence: Int(r.other)) {
            case .action?:
                if r.repeatCount > 0 { w.by(UInt8(truncatingIfNeeded: r.repeatCount), r.other, config) } else { w.raw("\"action\"") }
            case let .sequenceStarted(s)? where s >= 0 && s < sequences.count: w.joined("sequence:", sequences[s].name)
            case let .sequenceEnded(s)? where s >= 0 && s < sequences.count: w.joined("sequence-end:", sequences[s].name)
            default: w.raw("\"unknown\"")
            }
        case .sequence:
            guard r.index >= 0 && Int(r.index) < config.sequences.count,
                let step = EventSink.SequenceStep(code: r.step, number: Int(r.number), max: Int(r.other))
            else { return false }
            w.raw("\"sequence\"")
            w.field("name", config.sequences[Int(r.index)].name)
            switch step {
            case .started, .began, .restarted: w.raw(",\"step\":\"start\"")
            case .completed: w.raw(",\"step\":\"end\"")
            case .stopped: w.raw(",\"step\":\"stop\"")
            case .refused: w.raw(",\"step\":\"refused\"")
            case .queued: w.raw(",\"step\":\"queued\"")
            }
        case .command:
            guard r.index >= 0 && Int(r.index) < config.commands.count else { return false }
            w.raw("\"command\"")
            w.field("name", config.commands[Int(r.index)].name)
            switch r.step {
            case 0:
                w.raw(",\"event\":\"start\"")
                w.field("pid", Int64(r.number))
            case 1:
                w.raw(",\"event\":\"exit\"")
                w.field("status", Int64(r.other))
            case 2:
                w.raw(",\"event\":\"exit\"")
                w.field("signal", Int64(r.other))
            case 4:
                w.raw(",\"event\":\"refused\"")
                w.field("running", Int64(r.number))
            default:
                w.raw(",\"event\":\"exit\"")
            }
        case .edge, .skipped, .ringFull, .deadlinesDeferred, .skippedPeriods:
            return false
        }
        w.raw("}")
        return true
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
        endRecording(send: false)
        logger.warning("control: dropped a recording client (\(c.peer)) that does not read its records (\(c.output.count) bytes waiting)")
        dropTooSlow(c, id: run.id, "the records were not read as fast as they came (\(c.output.count) bytes waiting); the recording ends")
    }
}

/// A worker's input levels handed to the main thread.
struct UncheckedLevels: @unchecked Sendable {
    let levels: [(line: Int, high: Bool)]
}

/// A recording's line written as JSON bytes into a buffer it holds (no
/// intermediate values: numbers by their digits, strings escaped in place).
struct RecordWriter {
    var out: [UInt8]

    mutating func raw(_ s: StaticString) {
        s.withUTF8Buffer { out.append(contentsOf: $0) }
    }

    mutating func int(_ n: Int64) {
        if n < 0 { out.append(0x2d) }
        var m = n.magnitude
        let start = out.count
        repeat {
            out.append(0x30 + UInt8(m % 10))
            m /= 10
        } while m > 0
        // Reversed in place (a slice's `reverse()` and `swapAt` allocate in a debug build).
        var i = start, j = out.count - 1
        while i < j {
            let x = out[i]
            out[i] = out[j]
            out[j] = x
            i += 1
            j -= 1
        }
    }

    /// `s` as a JSON string, quoted and escaped.
    mutating func string(_ s: String) {
        out.append(0x22)
        body(s)
        out.append(0x22)
    }

    /// `prefix` and `s` as one JSON string (`"sequence:pour"`).
    mutating func joined(_ prefix: StaticString, _ s: String) {
        out.append(0x22)
        prefix.withUTF8Buffer { out.append(contentsOf: $0) }
        body(s)
        out.append(0x22)
    }

    private mutating func body(_ s: String) {
        let hex: StaticString = "0123456789abcdef"
        for b in s.utf8 {
            switch b {
            case 0x22, 0x5c:
                out.append(0x5c)
                out.append(b)
            case 0x0a: raw("\\n")
            case 0x0d: raw("\\r")
            case 0x09: raw("\\t")
            case 0..<0x20:
                raw("\\u00")
                hex.withUTF8Buffer { h in
                    out.append(h[Int(b >> 4)])
                    out.append(h[Int(b & 0xf)])
                }
            default: out.append(b)
            }
        }
    }

    mutating func field(_ name: StaticString, _ value: String) {
        out.append(0x2c)
        out.append(0x22)
        raw(name)
        raw("\":")
        string(value)
    }

    mutating func field(_ name: StaticString, _ value: Int64) {
        out.append(0x2c)
        out.append(0x22)
        raw(name)
        raw("\":")
        int(value)
    }

    /// A write's `by` (`EventSink.WriteBy` and its index), as a JSON string.
    mutating func by(_ by: UInt8, _ index: Int32, _ config: DaemonConfig) {
        let i = Int(index)
        switch EventSink.WriteBy(rawValue: by) {
        case .reaction? where i >= 0 && i < config.reactions.count: joined("reaction:", config.reactions[i].name)
        case .sequence? where i >= 0 && i < config.sequences.count: joined("sequence:", config.sequences[i].name)
        case .task? where i >= 0 && i < config.tasks.count: joined("task:", config.tasks[i].name)
        case .safe?: raw("\"safe\"")
        case .control?: raw("\"control\"")
        case .mqtt?: raw("\"mqtt\"")
        case .pulse?: raw("\"pulse\"")
        default: raw("\"unknown\"")
        }
    }
}
