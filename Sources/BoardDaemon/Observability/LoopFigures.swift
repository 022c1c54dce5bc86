import Boardloop

/// A worker's counters read on its thread without allocating there: the
/// main loop makes the tables (sized for the config, one slot per reaction,
/// sequence, line and task), the worker fills them in place, and the main
/// loop turns them into `Daemon.Counters` (the dictionaries are made on the
/// main loop, not on the worker). The `status` and `stats` commands read a
/// worker this way, so a client polling them costs the worker's thread no
/// allocation.
final class LoopFigures: @unchecked Sendable {
    struct Reaction {
        var name = "", fires: UInt64 = 0, skipped: UInt64 = 0
        var times: Daemon.LatencyFigures?
    }
    struct Sequence {
        var name = ""
        var counters = Daemon.SequenceCounters(started: 0, completed: 0, ignored: 0, refused: 0, restarted: 0, stopped: 0, running: 0, queued: 0)
    }
    struct Line {
        var name = ""
        var counters = Daemon.LineCounters(events: 0, heldInRing: 0, lost: 0, rateLimitHolds: 0, suspectedOverflows: 0)
    }
    struct Task {
        var name = ""
        var counters = Daemon.TaskCounters(runs: 0, skippedPeriods: 0, p50: .zero, p99: .zero, max: .zero)
    }

    // Written on the worker's thread while the main loop waits for it; read
    // on the main loop after.
    var reactions: [Reaction]
    var sequences: [Sequence]
    var lines: [Line]
    var tasks: [Task]
    /// The slots the worker filled in each table.
    var used = (reactions: 0, sequences: 0, lines: 0, tasks: 0)
    var postsStale: UInt64 = 0
    /// False when the worker's config had more than the tables hold (they
    /// were made for another config): nothing was filled.
    var fits = false
    /// The loop's thread and its slowest handler, and its effective mode's
    /// index (`Daemon.workerStatus` reads them with the tables).
    var vitals: LoopVitals?
    var mode = 0

    init(for config: DaemonConfig) {
        reactions = Array(repeating: Reaction(), count: config.reactions.count)
        sequences = Array(repeating: Sequence(), count: config.sequences.count)
        lines = Array(repeating: Line(), count: config.lines.count)
        tasks = Array(repeating: Task(), count: config.tasks.count)
    }

    /// Whether the tables have a slot for everything of `config`.
    func holds(_ config: DaemonConfig) -> Bool {
        config.reactions.count <= reactions.count && config.sequences.count <= sequences.count && config.lines.count <= lines.count
            && config.tasks.count <= tasks.count
    }

    /// The figures as `LoopRuntime.counters(nil)` gives them (on the caller's thread).
    var counters: Daemon.Counters {
        var c = Daemon.Counters()
        for r in reactions[..<used.reactions] {
            c.reactionFires[r.name] = r.fires
            c.reactionSkipped[r.name] = r.skipped
            if let t = r.times { c.reactionTimes[r.name] = t }
        }
        for s in sequences[..<used.sequences] { c.sequence[s.name] = s.counters }
        for l in lines[..<used.lines] { c.lines[l.name] = l.counters }
        for t in tasks[..<used.tasks] { c.tasks[t.name] = t.counters }
        c.postsStale = postsStale
        return c
    }
}

extension LoopRuntime {
    /// Fills `f` with this loop's counters, in place: no allocation (the
    /// names are the config's strings, retained, not copied).
    func fill(_ f: LoopFigures) {
        let config = self.config
        f.fits = f.holds(config) && tasks.count <= f.tasks.count
        guard f.fits else { return }
        for i in config.reactions.indices {
            var times: Daemon.LatencyFigures?
            if let h = reactionTimes[i], h.count > 0 {
                times = Daemon.LatencyFigures(count: h.count, p50: h.percentile(0.5), p99: h.percentile(0.99), max: h.max)
            }
            f.reactions[i] = LoopFigures.Reaction(
                name: config.reactions[i].name, fires: reactionFires[i], skipped: reactionSkipped[i], times: times)
        }
        f.used.reactions = config.reactions.count
        // Index loops: a for-in over an array of optionals goes through the
        // unspecialized iterator in a debug build, which allocates.
        var k = 0
        for i in sequences.indices {
            guard let s = sequences[i] else { continue }
            f.sequences[k] = LoopFigures.Sequence(
                name: s.config.name,
                counters: Daemon.SequenceCounters(
                    started: s.started, completed: s.completed, ignored: s.ignored, refused: s.refused, restarted: s.restarted,
                    stopped: s.stopped, running: s.activeRuns, queued: s.queued))
            k += 1
        }
        f.used.sequences = k
        k = 0
        for i in inputs.indices {
            guard let l = inputs[i] else { continue }
            f.lines[k] = LoopFigures.Line(
                name: l.config.name,
                counters: Daemon.LineCounters(
                    events: l.eventsSeen, heldInRing: l.heldInRing, lost: l.lost, rateLimitHolds: l.rateLimitHolds,
                    suspectedOverflows: l.suspectedOverflows, drainReads: l.drainReads, lastEdgeRising: l.rawLevel, lastEdgeAt: l.rawTime))
            k += 1
        }
        f.used.lines = k
        k = 0
        for i in tasks.indices {
            let t = tasks[i]
            f.tasks[k] = LoopFigures.Task(
                name: t.config.name,
                counters: Daemon.TaskCounters(
                    runs: t.runs, skippedPeriods: t.skippedPeriods, p50: t.lateness.percentile(0.5), p99: t.lateness.percentile(0.99),
                    max: t.lateness.max))
            k += 1
        }
        f.used.tasks = k
        f.postsStale = postsStale
    }
}

extension Daemon {
    /// Worker `i`'s counters, as `counters(nil)` on its thread gives them,
    /// read into tables made here (`LoopFigures`) so the worker allocates
    /// nothing; waits at most `timeout`. Main loop only.
    func workerCounters(_ i: Int, timeout: Duration) -> Result<Counters, any Error> {
        workerStatus(i, timeout: timeout).map(\.counters)
    }

    /// Worker `i`'s counters, its thread's vitals and its mode's name (as
    /// `status` shows them), in one wait of at most `timeout`.
    func workerStatus(_ i: Int, timeout: Duration) -> Result<(counters: Counters, vitals: LoopVitals?, mode: String?), any Error> {
        let box = boxes[i + 1]
        let f: LoopFigures
        if let kept = box.figures, kept.holds(config) { f = kept } else { f = LoopFigures(for: config) }
        // Not kept until the worker has answered: one that answers late
        // writes into tables nobody reads.
        box.figures = nil
        switch onWorker(i, timeout: timeout, { rt in
            rt.fill(f)
            f.vitals = rt.vitals()
            f.mode = rt.effectiveMode
        }) {
        case .success:
            box.figures = f
            let mode = f.mode < config.modes.count ? config.modes[f.mode].name : nil
            if f.fits { return .success((f.counters, f.vitals, mode)) }
            // A worker still on a config with more than these tables hold (a reload in flight).
            return onWorker(i, timeout: timeout) { $0.counters(nil) }.map { ($0, f.vitals, mode) }
        case let .failure(e):
            return .failure(e)
        }
    }
}
