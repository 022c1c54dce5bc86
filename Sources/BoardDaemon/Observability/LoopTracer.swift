import Boardloop

/// One loop's activity while a trace runs (`boardctl trace`, the control
/// protocol's `trace`): the loop's passes and waits (from an observer the
/// trace adds), each daemon handler with its start and duration (an input
/// line's batch, a line's deadline timer, a task with its lateness, a
/// sequence's step, an action posted from another loop, a control client's
/// request), and every record the loop's event sink makes (edges at their
/// kernel timestamps, writes, reactions from trigger to done, mode switches,
/// held and delivered events, sequence steps, losses).
///
/// A fixed ring, allocated when the trace starts and freed when it is
/// collected: recording is a store into it (no allocation, no system call
/// beyond the clock's vDSO read). When it is full the oldest spans are
/// overwritten and counted (`overwritten`), as a tracing ring buffer does.
///
/// Used on the loop's thread only: the trace starts and ends by requests
/// the loop runs (`LoopRuntime.startTracing`/`stopTracing`), which order
/// it with the control server that reads it afterwards.
final class LoopTracer {
    enum Kind: UInt8 {
        /// The loop's work between waking and its next wait (observer).
        case pass = 1
        /// Asleep in the kernel (observer: before waiting to after waiting).
        case wait
        /// A run of the loop began (`a`: the daemon's mode index) (observer).
        case entry
        /// A run of the loop ended (observer).
        case exit
        /// An input line's batch of kernel events (`a`: the line, `b`: events in it).
        case line
        /// An input line's timer: filter, gesture and hold deadlines (`a`: the line).
        case lineTimer
        /// A task's run (`a`: the task, `b`: its lateness in ns, `flag`: periods skipped, clamped).
        case task
        /// A sequence's step (`a`: the sequence).
        case sequenceStep
        /// Actions posted from another loop (`a`: the op).
        case message
        /// A control client's request (`a`: the client's fd).
        case control
        /// An event sink record (`record`; `start` its time; an edge's start is its kernel timestamp).
        case record
    }

    struct Span: BitwiseCopyable {
        var start: UInt64
        /// Nanoseconds; `instant` for an event without duration.
        var duration: UInt64
        var kind: Kind
        /// The program `a` is an index of (a reload mid-trace).
        var generation: Int32
        var a: Int32
        var b: Int64
        var record: TraceRecord

        static let instant = UInt64.max
    }

    /// Spans a loop keeps (a power of two): 16 Ki spans, about 1.3 MiB while a trace runs.
    static let defaultCapacity = 1 << 14

    let capacity: Int
    private let mask: Int
    private let slots: UnsafeMutablePointer<Span>
    /// Spans recorded in all (the newest `capacity` are kept).
    @exclusivity(unchecked) private(set) var count = 0
    /// The last wake-up and wait start, for the pass and wait spans.
    @exclusivity(unchecked) private var passStart: UInt64 = 0
    @exclusivity(unchecked) private var waitStart: UInt64 = 0
    /// The observer that records passes and waits, while the trace runs.
    @exclusivity(unchecked) var observer: RunLoopObserver?
    /// The loop's thread, as the kernel numbers it (a track per thread).
    let threadID: Int32
    let started: UInt64
    /// Which trace it records for (a tracer a stuck worker kept from an
    /// earlier trace is not taken for a later one's).
    let serial: UInt64
    /// The program the loop runs (set at the start and at a reload).
    @exclusivity(unchecked) var generation: Int32 = 0

    private static let blank = Span(
        start: 0, duration: 0, kind: .pass, generation: 0, a: 0, b: 0, record: TraceRecord(kind: .edge, line: -1, generation: 0))

    init(capacity: Int = LoopTracer.defaultCapacity, threadID: Int32, now: UInt64, serial: UInt64 = 0) {
        precondition(capacity > 0 && capacity & (capacity - 1) == 0, "a tracer's capacity is a power of two")
        self.capacity = capacity
        mask = capacity - 1
        slots = .allocate(capacity: capacity)
        slots.initialize(repeating: Self.blank, count: capacity)
        self.threadID = threadID
        self.serial = serial
        started = now
        passStart = now
    }

    deinit { slots.deallocate() }

    /// Spans overwritten because the ring was full.
    var overwritten: Int { max(0, count - capacity) }

    @inline(__always) private func put(_ s: Span) {
        slots[count & mask] = s
        count &+= 1
    }

    /// A handler ran from `start` to `end`.
    @inline(__always) func slice(_ kind: Kind, _ a: Int, _ b: Int64 = 0, from start: UInt64, to end: UInt64) {
        put(
            Span(
                start: start, duration: end >= start ? end - start : 0, kind: kind, generation: generation, a: Int32(truncatingIfNeeded: a),
                b: b, record: Self.blank.record))
    }

    /// An event sink record, at `t` (lasting `duration`, or an instant).
    @inline(__always) func record(_ r: TraceRecord, at t: UInt64, duration: UInt64 = Span.instant) {
        put(Span(start: t, duration: duration, kind: .record, generation: r.generation, a: 0, b: 0, record: r))
    }

    /// The observer's activities: a pass from waking to the next wait, the
    /// wait itself, and each run's entry and exit.
    func observed(_ activity: RunLoopActivity, at now: UInt64, mode: Int) {
        switch activity {
        case .beforeWaiting:
            slice(.pass, 0, from: passStart, to: now)
            waitStart = now
        case .afterWaiting:
            if waitStart != 0 { slice(.wait, 0, from: waitStart, to: now) }
            waitStart = 0
            passStart = now
        case .entry, .exit:
            put(
                Span(
                    start: now, duration: Span.instant, kind: activity == .entry ? .entry : .exit, generation: generation, a: Int32(mode), b: 0,
                    record: Self.blank.record))
        default:
            break
        }
    }

    /// The `i`th span recorded (of the kept ones: from `count - capacity`).
    func span(_ i: Int) -> Span { slots[i & mask] }
}

extension LoopRuntime {
    /// Starts recording this loop's activity into `tracer` (on the loop's
    /// thread): its observer joins the loop's modes (they are all in the
    /// common set) and the event sink hands it every record.
    func startTracing(_ tracer: LoopTracer) throws {
        _ = stopTracing()
        let o = RunLoopObserver(activities: [.entry, .beforeWaiting, .afterWaiting, .exit], order: Int.min) {
            [unowned self, unowned tracer] _, activity in
            // The mode of the run that begins or ends (a nested run's, at its exit too).
            let running = self.loop.currentMode
            var mode = self.effectiveMode
            var i = 0
            while i < self.runModes.count {
                if self.runModes[i] == running { mode = i }
                i += 1
            }
            tracer.observed(activity, at: self.nowNanoseconds, mode: mode)
        }
        try loop.add(o, mode: .common)
        tracer.observer = o
        tracer.generation = program.generation
        self.tracer = tracer
        events.trace(tracer)
        for case let i? in inputs { i.traced(true) }
    }

    /// Ends the recording (on the loop's thread); the tracer it returns
    /// holds what was recorded.
    func stopTracing() -> LoopTracer? {
        guard let t = tracer else { return nil }
        t.observer?.invalidate()
        t.observer = nil
        tracer = nil
        events.trace(nil)
        for case let i? in inputs { i.traced(false) }
        return t
    }
}
