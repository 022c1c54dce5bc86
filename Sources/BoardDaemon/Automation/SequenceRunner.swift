import Boardloop

/// A sequence on its loop: timed steps, each `wait` on a loop timer (in
/// every mode: the sequence's own timers run in its mode), and its policy
/// when started while running (ESPHome's script modes). Every ignored or
/// refused start is counted.
final class SequenceRunner {
    let index: Int
    let config: SequenceConfig
    unowned let rt: LoopRuntime
    let range: OpRange

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
    @exclusivity(unchecked) private var queuedCtx = Context()

    init(index: Int, config: SequenceConfig, runtime: LoopRuntime, range: OpRange) {
        self.index = index
        self.config = config
        rt = runtime
        self.range = range
        runs = Array(repeating: Run(), count: config.policy.concurrentRuns)
    }

    func makeTimers() throws {
        for i in runs.indices {
            let t = RunLoopTimer(fireAt: .distantFuture, interval: .seconds(86_400 * 365)) { [unowned self] timer in
                timer.fireDate = .distantFuture
                self.step(i)
            }
            try rt.loop.add(t, mode: .common)
            runs[i].timer = t
        }
    }

    var activeRuns: Int {
        var n = 0
        for r in runs where r.active { n += 1 }
        return n
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
            rt.sequenceRefused(self, "already running; the start is ignored (policy single)")
        case .restart:
            restarted &+= 1
            halt(exiting: false)
            rt.sequenceRestarted(self)
            begin(0, ctx)
        case let .queued(max):
            if queued < max {
                queued += 1
                queuedCtx = ctx
                rt.sequenceQueued(self)
            } else {
                refused &+= 1
                rt.sequenceRefused(self, "\(queued) starts already queued; the start is refused (policy queued, max \(max))")
            }
        case let .parallel(max):
            if let free = runs.firstIndex(where: { !$0.active }) {
                begin(free, ctx)
            } else {
                refused &+= 1
                rt.sequenceRefused(self, "\(max) runs in progress; the start is refused (policy parallel, max \(max))")
            }
        }
    }

    private func begin(_ slot: Int, _ ctx: Context) {
        let first = !isRunning
        started &+= 1
        runs[slot].pc = range.start
        runs[slot].ctx = ctx
        if first { rt.sequenceEntered(self) } else { rt.sequenceBegan(self) }
        step(slot)
    }

    private func step(_ slot: Int) {
        guard runs[slot].active else { return }
        var wait: Int64 = -1
        let pc = rt.run(from: runs[slot].pc, to: range.end, runs[slot].ctx, wait: &wait)
        guard runs[slot].active else { return }  // a step stopped this sequence
        if wait >= 0 {
            runs[slot].pc = pc
            runs[slot].timer?.fireDate = MonotonicInstant(nanoseconds: rt.nowNanoseconds &+ UInt64(wait))
            return
        }
        runs[slot].pc = -1
        completed &+= 1
        if queued > 0 {
            queued -= 1
            rt.sequenceCompleted(self, next: true)
            runs[slot].pc = range.start
            runs[slot].ctx = queuedCtx
            started &+= 1
            step(slot)
            return
        }
        rt.sequenceCompleted(self, next: false)
        if !isRunning { rt.sequenceExited(self) }
    }

    /// Stops every run and drops queued starts.
    func stop() {
        guard isRunning || queued > 0 else { return }
        stopped &+= 1
        halt(exiting: true)
    }

    private func halt(exiting: Bool) {
        let was = isRunning
        for i in runs.indices {
            runs[i].pc = -1
            runs[i].timer?.fireDate = .distantFuture
        }
        queued = 0
        if was && exiting { rt.sequenceStopped(self) }
        if was && exiting { rt.sequenceExited(self) }
    }

    func detach() {
        for i in runs.indices {
            runs[i].timer?.invalidate()
            runs[i].timer = nil
            runs[i].pc = -1
        }
        queued = 0
    }
}
