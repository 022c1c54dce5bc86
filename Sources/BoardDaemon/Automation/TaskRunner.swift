import Boardloop

/// A periodic task: a repeating grid timer (a late run does not shift the
/// next; missed periods are skipped and counted) in the task's modes, with
/// its lateness in a fixed-size histogram.
final class TaskRunner {
    let index: Int
    let config: TaskConfig
    unowned let rt: LoopRuntime
    let range: OpRange
    let lateness = LatencyHistogram()
    @exclusivity(unchecked) private(set) var runs: UInt64 = 0
    @exclusivity(unchecked) private(set) var skippedPeriods: UInt64 = 0
    @exclusivity(unchecked) private var timer: RunLoopTimer?
    /// Runs and skips at the last summary.
    @exclusivity(unchecked) var summarizedRuns: UInt64 = 0

    init(index: Int, config: TaskConfig, runtime: LoopRuntime, range: OpRange) {
        self.index = index
        self.config = config
        rt = runtime
        self.range = range
    }

    func start() throws {
        let t = RunLoopTimer(fireAt: rt.loop.now + config.every, interval: config.every) { [unowned self] timer in
            self.fired(timer)
        }
        for m in config.modes { try rt.loop.add(t, mode: rt.runLoopMode(m)) }
        timer = t
    }

    private func fired(_ t: RunLoopTimer) {
        // A fire in the pass the stop began in does not run: it is not a
        // run (the stop's figures count what ran).
        guard !rt.stopping else { return }
        runs &+= 1
        var late = Duration.zero
        var skipped: UInt64 = 0
        if let f = t.lastFire {
            late = f.lateness
            skipped = f.skippedPeriods
            lateness.record(f.lateness)
            skippedPeriods &+= f.skippedPeriods
        }
        let start = rt.nowNanoseconds
        let end = rt.runTask(self)
        let took = end &- min(start, end)
        if took > longestRun { longestRun = took }
        if let tr = rt.tracer {
            tr.slice(.task, index, late.nanosecondsClamped, from: start, to: end)
            if skipped > 0 { tr.record(TraceRecord(kind: .skippedPeriods, line: -1, index: Int32(index), generation: rt.program.generation, nanoseconds: skipped), at: start) }
        }
    }

    /// The longest run of its actions so far (their synchronous part).
    @exclusivity(unchecked) private(set) var longestRun: UInt64 = 0

    /// A task whose modes the loop enters starts its grid then: periods
    /// while the mode was not running are neither late nor skipped.
    func modeChanged(from old: Int, to new: Int) {
        var inOld = false, inNew = false
        var i = 0
        while i < config.modes.count {
            inOld = inOld || config.modes[i].index == old
            inNew = inNew || config.modes[i].index == new
            i += 1
        }
        if inNew && !inOld { timer?.fireDate = rt.loop.now + config.every }
    }

    func stop() {
        timer?.invalidate()
        timer = nil
    }
}
