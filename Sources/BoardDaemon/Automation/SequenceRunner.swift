import Boardloop

/// A sequence on its loop: timed steps, each `wait` on a loop timer (in
/// every mode: the sequence's own timers run in its mode), and its policy
/// when started while running (ESPHome's script modes). Every ignored or
/// refused start is counted.
final class SequenceRunner {
    let index: Int
    let config: SequenceConfig
    unowned let rt: LoopRuntime
    let events: EventSink
    let range: OpRange
    /// What a stopped run does (`Program.sequenceStops`).
    let stopRange: OpRange

    struct Run {
        var pc: Int32 = -1
        var ctx = Context()
        var timer: RunLoopTimer?
        var active: Bool { pc >= 0 }
    }
    @exclusivity(unchecked) private var runs: [Run]
    @exclusivity(unchecked) private(set) var queued = 0

    @exclusivity(unchecked) private(set) var started: UInt64 = 0
    @exclusivity(unchecked) private(set) var completed: UInt64 = 0
    @exclusivity(unchecked) private(set) var ignored: UInt64 = 0
    @exclusivity(unchecked) private(set) var refused: UInt64 = 0
    @exclusivity(unchecked) private(set) var restarted: UInt64 = 0
    @exclusivity(unchecked) private(set) var stopped: UInt64 = 0
    /// Each queued start's own context, in order: a ring of the policy's
    /// `max` entries, made once (`queued` of them from `queueHead`).
    @exclusivity(unchecked) private var queue: [Context]
    @exclusivity(unchecked) private var queueHead = 0

    init(index: Int, config: SequenceConfig, runtime: LoopRuntime, range: OpRange, stopRange: OpRange) {
        self.index = index
        self.config = config
        rt = runtime
        events = runtime.events
        self.range = range
        self.stopRange = stopRange
        runs = Array(repeating: Run(), count: config.policy.concurrentRuns)
        if case let .queued(max) = config.policy {
            queue = Array(repeating: Context(), count: max)
        } else {
            queue = []
        }
    }

    func makeTimers() throws {
        for i in runs.indices {
            let t = RunLoopTimer.rearmable { [unowned self] _ in
                self.step(i)
            }
            try rt.loop.add(t, mode: .common)
            runs[i].timer = t
        }
    }

    /// (Index loops over `runs` here: iterating an array of a struct that
    /// holds a reference goes through a generic iterator, which allocates
    /// where the optimizer does not specialize it.)
    var activeRuns: Int {
        var n = 0
        var i = 0
        while i < runs.count {
            if runs[i].active { n += 1 }
            i += 1
        }
        return n
    }

    /// A run slot not in use.
    private var freeRun: Int? {
        var i = 0
        while i < runs.count {
            if !runs[i].active { return i }
            i += 1
        }
        return nil
    }
    var isRunning: Bool { activeRuns > 0 }

    func start(_ ctx: Context) {
        if !isRunning {
            begin(0, ctx)
            return
        }
        switch config.policy {
        case .single:
            ignored &+= 1
            events.sequence(index, .refused(.single))
        case .restart:
            restarted &+= 1
            // The new run takes the outputs over: only an `on_stop:` runs
            // between (the default's safe values would glitch them).
            halt(exiting: false, cleanup: config.onStop != nil ? ctx : nil)
            events.sequence(index, .restarted)
            begin(0, ctx)
        case let .queued(max):
            if queued < max {
                enqueue(ctx)
                events.sequence(index, .queued(waiting: queued))
            } else {
                refused &+= 1
                events.sequence(index, .refused(.queueFull(queued: queued, max: max)))
            }
        case let .parallel(max):
            if let free = freeRun {
                begin(free, ctx)
            } else {
                refused &+= 1
                events.sequence(index, .refused(.parallelFull(max: max)))
            }
        }
    }

    /// A start behind the others, with its own context (room is checked by the caller).
    private func enqueue(_ ctx: Context) {
        queue[(queueHead + queued) % queue.count] = ctx
        queued += 1
    }

    private func begin(_ slot: Int, _ ctx: Context) {
        let first = !isRunning
        started &+= 1
        runs[slot].pc = range.start
        runs[slot].ctx = ctx
        if first {
            events.sequence(index, .started)
            rt.sequenceEntered(self)
        } else {
            events.sequence(index, .began(running: activeRuns))
        }
        step(slot)
    }

    private func step(_ slot: Int) {
        guard runs[slot].active else { return }
        var wait: Int64 = -1
        let tr = rt.tracer
        let t0 = tr == nil ? 0 : rt.nowNanoseconds
        rt.activity.store(Activity.sequence.code(index), ordering: .relaxed)
        let was = events.writing(.sequence, index)
        let pc = rt.run(from: runs[slot].pc, to: range.end, runs[slot].ctx, wait: &wait)
        events.restore(was)
        rt.activity.store(0, ordering: .relaxed)
        if let tr { tr.slice(.sequenceStep, index, Int64(runs[slot].pc), from: t0, to: rt.nowNanoseconds) }
        guard runs[slot].active else { return }  // a step stopped this sequence
        if wait >= 0 {
            runs[slot].pc = pc
            runs[slot].timer?.arm(at: MonotonicInstant(nanoseconds: rt.nowNanoseconds &+ UInt64(wait)))
            return
        }
        runs[slot].pc = -1
        completed &+= 1
        if queued > 0 {
            let ctx = queue[queueHead]
            queueHead = (queueHead + 1) % queue.count
            queued -= 1
            events.sequence(index, .completed(next: true))
            runs[slot].pc = range.start
            runs[slot].ctx = ctx
            started &+= 1
            step(slot)
            return
        }
        events.sequence(index, .completed(next: false))
        if !isRunning { rt.sequenceExited(self) }
    }

    /// Stops every run and drops queued starts; a run that was in
    /// progress ends with the stop's actions (`on_stop:`, or its outputs
    /// to their safe values), before the sequence's mode is left. `ctx`:
    /// the stop's own cause (a reaction, a front end).
    func stop(_ ctx: Context = Context()) {
        guard isRunning || queued > 0 else { return }
        stopped &+= 1
        halt(exiting: true, cleanup: ctx)
    }

    private func halt(exiting: Bool, cleanup ctx: Context? = nil) {
        let was = isRunning
        for i in runs.indices {
            runs[i].pc = -1
            runs[i].timer?.disarm()
        }
        queued = 0
        if was, let ctx { runStopActions(ctx) }
        if was && exiting { events.sequence(index, .stopped) }
        if was && exiting { rt.sequenceExited(self) }
    }

    /// The stop's actions, run at once (they hold no `wait`), as the
    /// sequence's: written as by the sequence in the event stream.
    func runStopActions(_ ctx: Context) {
        guard !stopRange.isEmpty else { return }
        rt.activity.store(Activity.sequence.code(index), ordering: .relaxed)
        let was = events.writing(.sequence, index)
        rt.execute(stopRange, ctx)
        events.restore(was)
        rt.activity.store(0, ordering: .relaxed)
    }

    func detach() {
        for i in runs.indices {
            runs[i].timer?.invalidate()
            runs[i].timer = nil
            runs[i].pc = -1
        }
        queued = 0
    }

    // MARK: Across a reload

    /// A sequence's progress, carried to the same sequence in a new config:
    /// per run slot the step it waits before (relative to the sequence's
    /// first op), its context and when its `wait` ends; the queued starts.
    struct Progress {
        struct RunState {
            var offset: Int32
            var ctx: Context
            var resumeAt: MonotonicInstant
        }
        var runs: [RunState?]
        var queue: [Context]
    }

    /// Where the sequence is, if it runs or has starts queued.
    var progress: Progress? {
        guard isRunning || queued > 0 else { return nil }
        return Progress(
            runs: runs.map { r in
                r.active ? Progress.RunState(offset: r.pc - range.start, ctx: r.ctx, resumeAt: r.timer?.fireDate ?? .distantFuture) : nil
            },
            queue: (0..<queued).map { queue[(queueHead + $0) % queue.count] })
    }

    /// Takes over a sequence's progress from the previous config (same
    /// steps, so the same ops from `range.start`): each run waits for the
    /// rest of its `wait` and goes on. Contexts are already translated to
    /// this config's indices. Logs nothing and enters no mode: the reload
    /// does both, once for every sequence that goes on.
    func resume(_ p: Progress) {
        for (i, r) in p.runs.enumerated() where i < runs.count {
            guard let r else { continue }
            runs[i].pc = range.start + r.offset
            runs[i].ctx = r.ctx
            runs[i].timer?.arm(at: r.resumeAt)
        }
        for ctx in p.queue.prefix(queue.count) { enqueue(ctx) }
    }

    /// Stops every run for a reload that drops or changes the sequence:
    /// nothing is logged here (the reload says why).
    func abandon() {
        stopped &+= 1
        halt(exiting: false)
    }
}
