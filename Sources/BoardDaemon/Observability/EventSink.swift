import Boardloop
import BoardloopGPIO
import Logging
import Synchronization

/// Where a loop's components report what happened: an edge, an output
/// write, a reaction fired or skipped, a gesture decided, events held or
/// lost, a sequence's step, a mode switch. One sink per loop, used on its
/// thread; the components neither format nor log.
///
/// Each event the log level shows becomes a fixed-size record of indices
/// in the loop's trace ring (no allocation), formatted on the log writer's
/// thread (`TraceLog`); one ring per loop keeps a loop's lines in order.
/// Debug records leave a quarter of the ring free for the rest, so a flood
/// of edge lines cannot crowd out a loss or a sequence's refusal. Only a
/// failed write is logged here directly (its error carries text).
///
/// The control socket's `events` reads the same records (the log writer
/// hands what it formats to `TraceLog.feed`); while a client follows,
/// edges and writes are recorded at every level (`recordsLines`), and
/// printed only at debug. No component changes for it.
final class EventSink: @unchecked Sendable {
    let ring: TraceRing
    let logger: Logger
    /// The loop's clock, for how late an edge is handled (strong: an
    /// unowned load checks and retains on every use; the loop does not own
    /// the sink, so there is no cycle).
    private let loop: BoardRunLoop
    /// `logger`'s level, read once: reading a swift-log level costs an
    /// exclusivity check and an existential copy (about 110 instructions),
    /// which the event path would ask up to three times per edge.
    let level: Logger.Level
    /// The program the records' indices belong to (set at start and at a
    /// reload, before the first event of the new program).
    @exclusivity(unchecked) private(set) var generation: Int32 = 0
    /// Per reaction, where its firing goes: `toRing` when `level` shows it
    /// (`Program.traceLevels`), `toTracer` while a trace runs; decided once
    /// per program and when a trace starts or ends.
    @exclusivity(unchecked) private var traced: [UInt8] = []
    /// Where edges and output writes go: `toRing` at debug or while a
    /// control client follows the events (`TraceLog.watch`), `toTracer`
    /// while a trace runs. Read relaxed: one byte's load, as the level's
    /// check it replaces; a record made or missed around the moment a
    /// follower comes or goes is all it decides.
    let recordsLines: Atomic<UInt8>
    static let toRing: UInt8 = 1
    static let toTracer: UInt8 = 2
    /// While a recording runs (`record`): edges as read from the kernel
    /// and writes go to the recorder (`rawEdge`, `output`).
    static let toRecorder: UInt8 = 4
    /// The loop's tracer while a trace runs (`LoopTracer`; set on the
    /// loop's thread): every record goes to it too, whatever the level.
    @exclusivity(unchecked) private(set) var tracer: LoopTracer?
    /// The loop's recorder while a recording runs (`LoopRecorder`; set on
    /// the loop's thread): the records a replay needs go to it too.
    @exclusivity(unchecked) private(set) var recorder: LoopRecorder?
    /// Who writes the outputs now (set by the handlers that run actions
    /// while a recording runs; `WriteBy` and its index).
    @exclusivity(unchecked) private(set) var writer: (by: UInt8, index: Int32) = (0, -1)
    /// Whether records of each level are made at all: the level shows
    /// them, or a trace runs (read instead of comparing `level`, at the
    /// same cost).
    @exclusivity(unchecked) private var debugOn: Bool
    @exclusivity(unchecked) private var infoOn: Bool
    @exclusivity(unchecked) private var warningOn: Bool

    init(ring: TraceRing, logger: Logger, loop: BoardRunLoop) {
        self.ring = ring
        self.loop = loop
        self.logger = logger
        level = logger.logLevel
        recordsLines = Atomic(logger.logLevel <= .debug ? Self.toRing : 0)
        debugOn = logger.logLevel <= .debug
        infoOn = logger.logLevel <= .info
        warningOn = logger.logLevel <= .warning
        ring.attach(self)
    }

    /// A follower came or the last one went, or a trace or a recording
    /// started or ended (`TraceRing.watch`, `.trace`, `.record`, under the
    /// ring's lock).
    func watch(_ on: Bool, tracing: Bool, recording: Bool = false) {
        recordsLines.store(
            (on || level <= .debug ? Self.toRing : 0) | (tracing ? Self.toTracer : 0) | (recording ? Self.toRecorder : 0), ordering: .relaxed)
    }

    /// The program whose reactions and lines the events name from now on.
    func use(_ program: Program) {
        generation = program.generation
        reactionLevels = program.traceLevels()
        routeReactions()
    }

    /// A trace starts (`t`) or ends (nil), on the loop's thread: from now
    /// on every record also goes to `t`, whatever the level.
    func trace(_ t: LoopTracer?) {
        tracer = t
        levelsOn()
        routeReactions()
        ring.trace(t != nil)
    }

    /// A recording starts (`r`) or ends (nil), on the loop's thread: from
    /// now on every record also goes to `r`, whatever the level.
    func record(_ r: LoopRecorder?) {
        recorder = r
        writer = (0, -1)
        levelsOn()
        routeReactions()
        ring.record(r != nil)
    }

    private func levelsOn() {
        let all = tracer != nil || recorder != nil
        debugOn = all || level <= .debug
        infoOn = all || level <= .info
        warningOn = all || level <= .warning
    }

    /// The actions run from now on are `by`'s (while a recording runs);
    /// returns who wrote before, for `restore`.
    @inline(__always) func writing(_ by: WriteBy, _ index: Int = -1) -> (by: UInt8, index: Int32) {
        guard recorder != nil else { return (0, -1) }
        let was = writer
        writer = (by.rawValue, Int32(truncatingIfNeeded: index))
        return was
    }

    /// The actions of `context`'s origin (a post from another loop, a control request).
    @inline(__always) func writing(_ context: Context) -> (by: UInt8, index: Int32) {
        switch context.origin {
        case .reaction: writing(.reaction, Int(context.reaction))
        case .task: writing(.task, Int(context.task))
        case .control: writing(.control)
        case .mqtt: writing(.mqtt)
        }
    }

    @inline(__always) func restore(_ was: (by: UInt8, index: Int32)) {
        if recorder != nil { writer = was }
    }

    /// The level each reaction of the program in use is traced at.
    @exclusivity(unchecked) private var reactionLevels: [Logger.Level] = []

    /// `traced` from the reactions' levels and whether a trace runs.
    private func routeReactions() {
        let level = level
        let tracing: UInt8 = (tracer != nil ? Self.toTracer : 0) | (recorder != nil ? Self.toRecorder : 0)
        traced = reactionLevels.map { (level <= $0 ? Self.toRing : 0) | tracing }
    }

    /// A record for the ring when `shown` (the log level shows it), and
    /// for the tracer while a trace runs, at the loop's time now. A ring
    /// record is stamped where it happens (`boardctl events` shows that
    /// time, not when the log writer read it).
    @inline(__always) private func emit(_ r: TraceRecord, shown: Bool) {
        if shown {
            var stamped = r
            if stamped.at == 0 { stamped.at = loop.now.nanoseconds }
            ring.push(stamped)
        }
        if let t = tracer { t.record(r, at: loop.now.nanoseconds) }
        if let rc = recorder { rc.push(r, at: loop.now.nanoseconds) }
    }

    // MARK: Lines

    /// A line's filtered level changed at `t` (its kernel timestamp);
    /// traced with how late it is handled.
    @inline(__always) func edge(line: Int, rising: Bool, at t: UInt64) {
        let m = recordsLines.load(ordering: .relaxed)
        guard m & (Self.toRing | Self.toTracer) != 0 else { return }
        let now = loop.now.nanoseconds
        let r = TraceRecord(kind: .edge, flag: rising, line: Int32(truncatingIfNeeded: line), generation: generation, nanoseconds: now > t ? now - t : 0, at: t)
        if m & Self.toRing != 0 { ring.push(debug: r) }
        // At its kernel timestamp, lasting until it was handled.
        if m & Self.toTracer != 0, let tr = tracer { tr.record(r, at: t, duration: now > t ? now - t : 0) }
    }

    /// An output was written.
    @inline(__always) func output(line: Int, value: Bool) {
        let m = recordsLines.load(ordering: .relaxed)
        guard m != 0 else { return }
        output(line: line, value: value, to: m)
    }

    /// `output` where a record is made (debug, a trace, a recording): out
    /// of line, off the write's inline path.
    @inline(never) private func output(line: Int, value: Bool, to m: UInt8) {
        // Stamped at the write (`boardctl events` shows when it happened).
        let r = TraceRecord(
            kind: .output, flag: value, step: writer.by, line: Int32(truncatingIfNeeded: line), index: writer.index, generation: generation,
            at: loop.now.nanoseconds)
        if m & Self.toRing != 0 { ring.push(debug: r) }
        if m & Self.toTracer != 0, let tr = tracer { tr.record(r, at: loop.now.nanoseconds) }
        if m & Self.toRecorder != 0, let rc = recorder { rc.push(r, at: loop.now.nanoseconds) }
    }

    /// An edge as read from the kernel, while a recording runs (`physical`:
    /// the wire's change, before active-low; `held`: the line's mode does
    /// not admit it, it waits; the sequence numbers 0 when not known).
    @inline(__always) func rawEdge(line: Int, physical rising: Bool, at t: UInt64, held: Bool, sequence: UInt64, lineSequence: UInt64) {
        guard let rc = recorder else { return }
        rc.push(
            .rawEdge(line: line, rising: rising, at: t, held: held, sequence: sequence, lineSequence: lineSequence, generation: generation),
            at: t)
    }

    /// A command started (`pid`) or ended (`exit`: 1 exited with `status`,
    /// 2 killed by signal `status`, 3 its status lost), while a recording
    /// runs (the main loop's, where commands run).
    func command(_ index: Int, started pid: Int32) {
        guard let rc = recorder else { return }
        rc.push(TraceRecord(kind: .command, line: -1, index: Int32(index), generation: generation, number: pid), at: loop.now.nanoseconds)
    }

    /// A run refused because `running` of the command's children run
    /// already (`max_running`), while a recording runs.
    func command(_ index: Int, refusedWith running: Int) {
        guard let rc = recorder else { return }
        rc.push(
            TraceRecord(kind: .command, step: 4, line: -1, index: Int32(index), generation: generation, number: Int32(clamping: running)),
            at: loop.now.nanoseconds)
    }

    func command(_ index: Int, ended how: UInt8, status: Int32) {
        guard let rc = recorder else { return }
        rc.push(
            TraceRecord(kind: .command, step: how, line: -1, index: Int32(index), generation: generation, other: status),
            at: loop.now.nanoseconds)
    }

    /// A line's gesture group decided an interaction (before its reactions fire).
    @inline(__always) func gesture(line: Int, _ kind: GestureKind) {
        let watched = self.watched
        guard debugOn || watched else { return }
        let r = TraceRecord(kind: .gesture, line: Int32(line), index: kind.code, generation: generation)
        if level <= .debug || watched { ring.push(debug: r) }
        if let t = tracer { t.record(r, at: loop.now.nanoseconds) }
        if let rc = recorder { rc.push(r, at: loop.now.nanoseconds) }
    }

    func writeFailed(_ name: String, _ e: GPIOError) {
        logger.error("\(name): write failed: \(e)")
    }

    /// How a loss is known.
    enum LossKind: UInt8 {
        /// Counted from the kernel's sequence numbers (libgpiod 2.x).
        case counted
        /// libgpiod 1.6: a full FIFO, the level read again.
        case fifoFull
        /// libgpiod 1.6: two equal edges in a row.
        case inferred

        func text(_ n: UInt64) -> String {
            switch self {
            case .counted: "the kernel dropped \(n) event(s) (its buffer was full; counted from sequence numbers)"
            case .fifoFull:
                "the kernel's event FIFO was full: at least \(n) event(s) lost (libgpiod 1.6 cannot count; more may be); the line's level was read again"
            case .inferred: "at least \(n) event(s) lost (libgpiod 1.6 cannot count; two equal edges in a row)"
            }
        }
    }

    /// Events the kernel dropped: `n` counted from sequence numbers
    /// (`exact`), or on libgpiod 1.6 at least `n` (inferred from two equal
    /// edges in a row, or a level that disagrees after a full FIFO).
    func lost(line: Int, _ n: UInt64, exact: Bool, fifoFull: Bool) {
        guard warningOn else { return }
        let kind: LossKind = exact ? .counted : fifoFull ? .fifoFull : .inferred
        emit(TraceRecord(kind: .lost, step: kind.rawValue, line: Int32(line), generation: generation, nanoseconds: n), shown: level <= .warning)
    }

    /// A held event found the line's ring full (reported at the first of
    /// each hold and every thousandth; a recording counts each as lost).
    func ringFull(line: Int, capacity: Int, lost: UInt64, firstOfHold: Bool) {
        if let rc = recorder { rc.push(TraceRecord(kind: .lost, line: Int32(line), generation: generation, nanoseconds: 1), at: loop.now.nanoseconds) }
        guard warningOn, firstOfHold || lost % 1000 == 0 else { return }
        emit(
            TraceRecord(kind: .ringFull, line: Int32(line), generation: generation, number: Int32(clamping: capacity), nanoseconds: lost),
            shown: level <= .warning)
    }

    /// The line's mode is back: the events it held are delivered now.
    func heldDelivered(line: Int, count: Int) {
        guard infoOn else { return }
        emit(TraceRecord(kind: .heldDelivered, line: Int32(line), generation: generation, number: Int32(clamping: count)), shown: level <= .info)
    }

    /// More deadlines fell due at once than one call handles (a short hold
    /// repeat on a line held back for long): the rest fire in the next pass.
    func deadlinesDeferred(line: Int, handled: Int) {
        guard warningOn else { return }
        emit(
            TraceRecord(kind: .deadlinesDeferred, line: Int32(line), generation: generation, number: Int32(clamping: handled)),
            shown: level <= .warning)
    }

    // MARK: Reactions

    /// A reaction's actions ran (`took`: from its trigger, at `trigger`, to their synchronous end).
    @inline(__always) func fired(reaction r: Int, line: Int, repeat count: Int32, trigger: UInt64, took: UInt64) {
        // Unchecked: `r` is a reaction of the program in use.
        let to = traced.withUnsafeBufferPointer { $0[r] }
        guard to != 0 else { return }
        let rec = TraceRecord(
            kind: .reaction, line: Int32(truncatingIfNeeded: line), index: Int32(truncatingIfNeeded: r), repeatCount: count, generation: generation, nanoseconds: took, at: trigger)
        if to & Self.toRing != 0 {
            ring.push(rec)
            // The common case, at info: the ring only.
            if to == Self.toRing { return }
        }
        // Where its actions ended (`took` from its trigger in the args).
        if to & Self.toTracer != 0, let t = tracer { t.record(rec, at: loop.now.nanoseconds) }
        if to & Self.toRecorder != 0, let rc = recorder { rc.push(rec, at: loop.now.nanoseconds) }
    }

    /// A reaction's condition did not hold.
    @inline(__always) func skipped(reaction r: Int, line: Int) {
        guard debugOn else { return }
        let rec = TraceRecord(kind: .skipped, line: Int32(line), index: Int32(r), generation: generation)
        if level <= .debug { ring.push(debug: rec) }
        if let t = tracer { t.record(rec, at: loop.now.nanoseconds) }
    }

    // MARK: Sequences and modes

    /// A step in a sequence's life.
    enum SequenceStep {
        /// Its first run started (and its mode, if it has one, is entered).
        case started
        /// Another run started beside those running (policy parallel).
        case began(running: Int)
        case queued(waiting: Int)
        case restarted
        case stopped
        case refused(Refusal)
        /// A run reached its end (`next`: a queued start runs now).
        case completed(next: Bool)

        /// Why a start was not run.
        enum Refusal {
            case single
            case queueFull(queued: Int, max: Int)
            case parallelFull(max: Int)
        }

        /// As a trace record's `step`, `number` and `other`.
        var record: (code: UInt8, number: Int, max: Int) {
            switch self {
            case .started: (0, 0, 0)
            case let .began(n): (1, n, 0)
            case let .queued(n): (2, n, 0)
            case .restarted: (3, 0, 0)
            case .stopped: (4, 0, 0)
            case .refused(.single): (5, 0, 0)
            case let .refused(.queueFull(q, max)): (6, q, max)
            case let .refused(.parallelFull(max)): (7, 0, max)
            case let .completed(next): (8, next ? 1 : 0, 0)
            }
        }

        init?(code: UInt8, number: Int, max: Int) {
            switch code {
            case 0: self = .started
            case 1: self = .began(running: number)
            case 2: self = .queued(waiting: number)
            case 3: self = .restarted
            case 4: self = .stopped
            case 5: self = .refused(.single)
            case 6: self = .refused(.queueFull(queued: number, max: max))
            case 7: self = .refused(.parallelFull(max: max))
            case 8: self = .completed(next: number != 0)
            default: return nil
            }
        }

        var level: Logger.Level {
            switch self {
            case .stopped, .refused: .notice
            case .started, .began, .queued, .restarted, .completed: .info
            }
        }

        /// In one word (MQTT's sequence events, `events`' `step`).
        var name: String {
            switch self {
            case .started: "started"
            case .began: "began"
            case .queued: "queued"
            case .restarted: "restarted"
            case .stopped: "stopped"
            case .refused: "refused"
            case .completed: "completed"
            }
        }

        var text: String {
            switch self {
            case .started: "started"
            case let .began(n): "another run started (\(n) running)"
            case let .queued(n): "start queued (\(n) waiting)"
            case .restarted: "restarted"
            case .stopped: "stopped"
            case .refused(.single): "already running; the start is ignored (policy single)"
            case let .refused(.queueFull(q, max)): "\(q) starts already queued; the start is refused (policy queued, max \(max))"
            case let .refused(.parallelFull(max)): "\(max) runs in progress; the start is refused (policy parallel, max \(max))"
            case let .completed(next): "done\(next ? "; running the queued start" : "")"
            }
        }
    }

    func sequence(_ index: Int, _ step: SequenceStep) {
        let watched = self.watched
        guard level <= step.level || watched || tracer != nil || recorder != nil else { return }
        let r = step.record
        emit(
            TraceRecord(
                kind: .sequence, step: r.code, line: -1, index: Int32(index), generation: generation, number: Int32(clamping: r.number),
                other: Int32(clamping: r.max)), shown: level <= step.level || watched)
    }

    /// Why a loop's mode changed.
    enum ModeReason {
        /// A `mode:` action.
        case action
        /// A sequence with a mode started, or its last run ended.
        case sequenceStarted(Int)
        case sequenceEnded(Int)

        var record: (code: UInt8, sequence: Int) {
            switch self {
            case .action: (0, -1)
            case let .sequenceStarted(s): (1, s)
            case let .sequenceEnded(s): (2, s)
            }
        }

        init?(code: UInt8, sequence: Int) {
            switch code {
            case 0: self = .action
            case 1: self = .sequenceStarted(sequence)
            case 2: self = .sequenceEnded(sequence)
            default: return nil
            }
        }

        func text(_ config: DaemonConfig) -> String {
            switch self {
            case .action: "mode action"
            case let .sequenceStarted(s): "sequence \(config.sequences[s].name)"
            case let .sequenceEnded(s): "sequence \(config.sequences[s].name) ended"
            }
        }
    }

    /// The loop's effective mode changed from `old` to `new` (both modes
    /// of the current program).
    func modeChanged(to new: Int, from old: Int, because why: ModeReason) {
        let watched = self.watched
        guard infoOn || watched else { return }
        let r = why.record
        // (`repeatCount`: who ran a `mode:` action, `WriteBy`, with `other` its index.)
        let by: (by: UInt8, index: Int32) = r.code == 0 ? writer : (0, Int32(r.sequence))
        emit(
            TraceRecord(
                kind: .mode, step: r.code, line: -1, index: Int32(new), repeatCount: Int32(by.by), generation: generation, number: Int32(old),
                other: by.index), shown: level <= .info || watched)
    }

    /// Whether a watcher (an `events` follower, the MQTT bridge) takes the
    /// records: gestures, sequence steps and mode changes then reach the
    /// ring whatever the level (the log still prints only what its level
    /// shows).
    var watched: Bool { recordsLines.load(ordering: .relaxed) & Self.toRing != 0 }
}

extension GestureKind {
    /// A trace record's number for the kind (no allocation, unlike `allCases`).
    var code: Int32 {
        switch self {
        case .click: 0
        case .doubleClick: 1
        case .tripleClick: 2
        case .hold: 3
        }
    }

    init?(code: Int32) {
        switch code {
        case 0: self = .click
        case 1: self = .doubleClick
        case 2: self = .tripleClick
        case 3: self = .hold
        default: return nil
        }
    }
}
