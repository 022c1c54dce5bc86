import Boardloop
import Glibc
import Logging
import Synchronization

/// One per-event log line, as a loop records it: indices and integers only
/// (no String, no existential), so recording it is a few stores.
struct TraceRecord: BitwiseCopyable {
    enum Kind: UInt8 {
        /// A reaction fired: `line`, `index` the reaction, `repeatCount`,
        /// `nanoseconds` from its trigger to its actions done.
        case reaction = 1
        /// A reaction's condition did not hold (debug): `line`, `index`.
        case skipped
        /// An edge (debug): `line`, `flag` rising, `nanoseconds` late.
        case edge
        /// An output write (debug): `line`, `flag` the value; `step` and
        /// `index` who wrote it (`EventSink.WriteBy`, its index).
        case output
        /// A gesture decided (debug): `line`, `index` the kind (`GestureKind.code`).
        case gesture
        /// A sequence's step (info; notice for a stop or a refusal):
        /// `index` the sequence, `step` an `EventSink.SequenceStep` code,
        /// `number` the runs running or starts waiting, `other` the policy's
        /// maximum.
        case sequence
        /// The loop's mode changed (info): `index` the new mode, `number`
        /// the old one, `step` an `EventSink.ModeReason` code, `other` its
        /// sequence.
        case mode
        /// Held events delivered once their mode is back (info): `line`,
        /// `number` how many.
        case heldDelivered
        /// Events lost in the kernel (warning): `line`, `nanoseconds` the
        /// count, `step` how it is known (`EventSink.LossKind`).
        case lost
        /// A held event found the line's ring full (warning): `line`,
        /// `number` the ring's capacity, `nanoseconds` the events lost so far.
        case ringFull
        /// More deadlines were due at once than one advance fires
        /// (warning): `line`, `number` how many it fired.
        case deadlinesDeferred
        /// A task's timer skipped periods (traces only): `index` the task,
        /// `nanoseconds` how many.
        case skippedPeriods
        /// An edge as read from the kernel (recordings only, `LoopRecorder`).
        case rawEdge
        /// A command started (`step` 0, `number` its pid) or ended (`step`
        /// 1 exited with status `other`, 2 killed by signal `other`, 3 its
        /// status lost): `index` the command (recordings only).
        case command
    }

    var kind: Kind
    var flag: Bool = false
    /// A sub-kind (per `kind`).
    var step: UInt8 = 0
    var line: Int32
    var index: Int32 = -1
    var repeatCount: Int32 = -1
    /// The program the indices belong to.
    var generation: Int32
    /// Numbers some kinds carry (per `kind`).
    var number: Int32 = 0
    var other: Int32 = 0
    var nanoseconds: UInt64 = 0
    /// When it happened on the monotonic clock: an edge's kernel timestamp,
    /// a reaction's trigger, a write's and the other ring records' loop
    /// time when made (0: not known; the writer stamps it when it reads it).
    var at: UInt64 = 0
}

/// A loop's trace ring: fixed size, allocated when the daemon starts, one
/// producer (the loop's thread) and one consumer (the log writer, under
/// `TraceLog`'s lock). When it is full a record is dropped and counted.
final class TraceRing: @unchecked Sendable {
    let capacity: Int
    private let mask: Int
    private let slots: UnsafeMutablePointer<TraceRecord>
    /// Records written (the producer's).
    private let tail = Atomic<Int>(0)
    /// Records read (the consumer's).
    private let head = Atomic<Int>(0)
    /// Records dropped because the ring was full.
    let dropped = Atomic<UInt64>(0)
    private let wake: WriterWake
    /// The sink that fills the ring, told when a control client starts or
    /// stops following the events (`watch`).
    private let sinkLock = Lock()
    private weak var sink: EventSink?
    private var watched = false
    private var traced = false
    private var recorded = false

    init(capacity: Int, wake: WriterWake) {
        precondition(capacity > 0 && capacity & (capacity - 1) == 0, "a trace ring's capacity is a power of two")
        self.capacity = capacity
        mask = capacity - 1
        slots = .allocate(capacity: capacity)
        slots.initialize(repeating: TraceRecord(kind: .edge, line: -1, generation: 0), count: capacity)
        self.wake = wake
    }

    deinit { slots.deallocate() }

    func attach(_ s: EventSink) {
        let (on, tracing, recording) = sinkLock.withLock {
            sink = s
            return (watched, traced, recorded)
        }
        if on || tracing || recording { s.watch(on, tracing: tracing, recording: recording) }
    }

    /// Edges and writes recorded at every level while `on` (a follower).
    func watch(_ on: Bool) {
        sinkLock.withLock {
            watched = on
            sink?.watch(on, tracing: traced, recording: recorded)
        }
    }

    /// Edges and writes also go to the sink's tracer while `on` (a trace
    /// runs; on the loop's thread).
    func trace(_ on: Bool) {
        sinkLock.withLock {
            traced = on
            sink?.watch(watched, tracing: on, recording: recorded)
        }
    }

    /// Edges and writes also go to the sink's recorder while `on` (a
    /// recording runs; on the loop's thread).
    func record(_ on: Bool) {
        sinkLock.withLock {
            recorded = on
            sink?.watch(watched, tracing: traced, recording: on)
        }
    }

    /// On the loop's thread: no allocation, no system call unless the
    /// writer sleeps (then a one-byte write wakes it).
    @inline(__always) func push(_ r: TraceRecord) { push(r, room: capacity) }

    /// A debug record (an edge, a write): dropped once the ring is three
    /// quarters full, so the last quarter stays for the lines that matter
    /// (a loss, a refusal, a reaction).
    @inline(__always) func push(debug r: TraceRecord) { push(r, room: capacity - capacity / 4) }

    @inline(__always) private func push(_ r: TraceRecord, room: Int) {
        let t = tail.load(ordering: .relaxed)
        if t &- head.load(ordering: .acquiring) >= room {
            dropped.add(1, ordering: .relaxed)
            return
        }
        slots[t & mask] = r
        tail.store(t &+ 1, ordering: .sequentiallyConsistent)
        wake.poke()
    }

    /// Whether records wait (the writer checks before it sleeps).
    var pending: Bool { tail.load(ordering: .sequentiallyConsistent) != head.load(ordering: .relaxed) }

    /// The consumer: hands every waiting record to `body`, in order.
    func consume(_ body: (TraceRecord) -> Void) -> Int { consumeRing(slots, mask: mask, head: head, tail: tail, body) }
}

/// The consumer's side of a single-producer ring (`TraceRing`,
/// `LoopRecorder`): hands every element between `head` and `tail` to
/// `body`, in order, then frees their slots; returns how many.
@inline(__always) func consumeRing<T>(
    _ slots: UnsafeMutablePointer<T>, mask: Int, head: borrowing Atomic<Int>, tail: borrowing Atomic<Int>, _ body: (T) -> Void
) -> Int {
    let h = head.load(ordering: .relaxed)
    let t = tail.load(ordering: .acquiring)
    var i = h
    while i != t {
        body(slots[i & mask])
        i &+= 1
    }
    head.store(t, ordering: .releasing)
    return t &- h
}

/// A daemon's trace: a ring per loop, and what the log writer needs to make
/// lines of the records — the programs they refer to, by generation (a
/// program is immutable; a reload registers the new one before swapping it
/// into the loops, and the last few stay known for records still in the
/// rings). Drained by the log writer's thread, and a last time by the
/// daemon's stop (`LogWriter.detach`).
final class TraceLog: @unchecked Sendable {
    static let ringCapacity = 2048
    /// Programs kept for records of earlier generations.
    static let generationsKept = 4

    let rings: [TraceRing]
    let logger: Logger
    let writer: LogWriter
    /// The logger's handler when it is boardd's own, writing through
    /// `writer`: then a record's level and its source's rate limit are
    /// decided before the record is described, so a line that is not
    /// written costs a counter (nil: another handler, as tests use, which
    /// gets every record at its level).
    private let direct: BoarddLogHandler?
    /// Every formatted record, for the control socket's `events`.
    let feed = EventFeed()
    private let lock = Lock()
    // With `lock` held:
    @exclusivity(unchecked) private var programs: [TraceNames] = []
    private var droppedReported: [UInt64]
    /// A stale record in this drain.
    private var staleSeen = false
    /// The drain's time, for the rate limit (one clock read a batch).
    @exclusivity(unchecked) private var batchNow: UInt64 = 0
    /// Records of a program no longer kept (not written).
    private let stale = Atomic<UInt64>(0)
    /// Its own lock (not `lock`, which the log writer holds while it
    /// formats a batch): with it held, `watchers`.
    private let watchLock = Lock()
    private var watchers = 0
    /// CLOCK_REALTIME minus CLOCK_MONOTONIC, read at each drain (and kept
    /// while it moves less than `offsetTolerance`): puts an edge's kernel
    /// timestamp on the wall clock.
    private var clockOffset: UInt64 = 0
    /// How far the wall clock may move against the monotonic one before
    /// the events follow it (ns).
    static let offsetTolerance: Int64 = 1_000_000

    init(loops: Int, program: Program, logger: Logger, writer: LogWriter, capacity: Int = TraceLog.ringCapacity) {
        rings = (0..<loops).map { _ in TraceRing(capacity: capacity, wake: writer.wake) }
        droppedReported = Array(repeating: 0, count: loops)
        self.logger = logger
        self.writer = writer
        direct = BoarddLogHandler.direct(logger, writer: writer)
        programs = [TraceNames(program)]
    }

    /// While a control client follows the events or the MQTT bridge runs,
    /// every loop records its edges and writes (at info, only then; printed
    /// only at debug). Counted: each watcher that starts (`true`) stops
    /// (`false`) once.
    func watch(_ on: Bool) {
        let changed: Bool = watchLock.withLock {
            let was = watchers > 0
            watchers = max(0, watchers + (on ? 1 : -1))
            return (watchers > 0) != was
        }
        if changed { for r in rings { r.watch(on) } }
    }

    /// A reload's program, before it is swapped into the loops.
    func register(_ p: Program) {
        let names = TraceNames(p)
        lock.withLock {
            programs.append(names)
            if programs.count > Self.generationsKept { programs.removeFirst() }
        }
    }

    /// Whether some ring holds records (an index loop: `contains(where:)`
    /// allocates a closure context in a debug build, and the tests' loops
    /// ask this after every pass they run).
    var pending: Bool {
        var i = 0
        while i < rings.count {
            if rings[i].pending { return true }
            i += 1
        }
        return false
    }

    /// Records lost before the feed, in all: dropped by a full ring, or of
    /// a program no longer kept. Any thread. A consumer that keeps state
    /// from the events (the MQTT bridge) is poked when it grows, and reads
    /// the truth again.
    var missedRecords: UInt64 {
        var n = stale.load(ordering: .relaxed)
        var i = 0
        while i < rings.count {
            n &+= rings[i].dropped.load(ordering: .relaxed)
            i += 1
        }
        return n
    }

    /// Formats and logs every waiting record; reports drops. Returns
    /// whether there was anything.
    @discardableResult
    func drain() -> Bool { lock.withLock { drainLocked() } }

    /// `drain`, with the lock held (a method, not a closure: a batch costs
    /// no allocation, whatever it holds).
    private func drainLocked() -> Bool {
        // One offset for the batch: its events keep their order. Kept
        // from batch to batch unless the wall clock moved by more than
        // a millisecond (a step, or that much slewing): the two clock
        // reads are a few nanoseconds apart, and a gap that varies
        // would put events at the same monotonic time (a manual clock's,
        // two edges within a nanosecond) out of order across batches.
        let fresh = EventFeed.now() &- MonotonicClock.nanoseconds
        let moved = Int64(bitPattern: fresh &- clockOffset)
        if clockOffset == 0 || moved > Self.offsetTolerance || moved < -Self.offsetTolerance { clockOffset = fresh }
        batchNow = MonotonicInstant.now.nanoseconds
        var any = false
        var lost = false
        staleSeen = false
        var i = 0
        while i < rings.count {
            let ring = rings[i]
            let loop = i
            if ring.consume({ r in log(r, loop: loop) }) > 0 { any = true }
            let d = ring.dropped.load(ordering: .relaxed)
            if d > droppedReported[i] {
                let name = programs.last!.program.config.loops[i].name
                logger.warning(
                    "loop \(name): \(d - droppedReported[i]) trace lines dropped (its trace ring of \(ring.capacity) records was full; \(d) in all)",
                    source: "trace")
                droppedReported[i] = d
                any = true
                lost = true
            }
            i += 1
        }
        if (lost || staleSeen) && feed.attached.load(ordering: .acquiring) { feed.poke() }
        return any
    }

    /// The program of `generation`, newest first (with the lock held; an
    /// index loop, no closure).
    private func program(_ generation: Int32) -> TraceNames? {
        var i = programs.count - 1
        while i >= 0 {
            if programs[i].program.generation == generation { return programs[i] }
            i -= 1
        }
        return nil
    }

    /// With the lock held.
    private func log(_ r: TraceRecord, loop: Int) {
        guard let names = program(r.generation) else {
            stale.add(1, ordering: .relaxed)
            staleSeen = true
            return
        }
        let feeding = feed.attached.load(ordering: .acquiring)
        if !feeding, let h = direct {
            // Level and rate limit first: a record that is not written is
            // not described.
            guard let (level, source) = Self.admission(r, names), level >= h.logLevel else { return }
            let w = names.window(source, writer)
            guard writer.admits(w, level: level, now: batchNow), let d = Self.describe(r, loop: loop, names: names) else { return }
            writer.submit(h.format(d.level, d.text), source: w.source, level: d.level, admitted: true)
            return
        }
        let config = names.program.config
        guard let d = Self.describe(r, loop: loop, names: names) else { return }
        let line = r.line >= 0 ? config.lines[Int(r.line)].name : ""
        if let source = d.source { logger.log(level: d.level, "\(d.text)", source: source) } else { logger.log(level: d.level, "\(d.text)") }
        if feeding {
            // An edge at its kernel timestamp, a reaction when its actions
            // ended (its trigger and the time they took): both on the
            // monotonic clock, put on the wall clock by the offset between
            // the two now. The rest: when read.
            var t = EventFeed.now()
            var fields = d.fields
            if r.at != 0 {
                let happened = r.kind == .reaction ? r.at &+ r.nanoseconds : r.at
                t = happened &+ clockOffset
                fields.append(("mono_ns", .int(Int64(clamping: happened))))
            }
            feed.push(
                TraceEvent(
                    nanoseconds: t, loop: config.loops[loop].name, kind: d.kind, line: r.line >= 0 ? line : nil, text: d.text,
                    level: "\(d.level)", fields: fields))
        }
    }
}
