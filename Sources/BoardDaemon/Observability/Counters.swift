import Boardloop
import Logging

/// What a loop counts (fires, skips, lateness, held and lost events,
/// sequence starts, children), read as `Daemon.Counters` and logged as the
/// periodic summary.
extension Daemon {
    /// Counters of the main loop (read on its thread).
    public struct Counters: Sendable, Equatable {
        public var reactionFires: [String: UInt64] = [:]
        public var reactionSkipped: [String: UInt64] = [:]
        /// Trigger to actions done, per reaction that fired on this loop.
        public var reactionTimes: [String: LatencyFigures] = [:]
        public var sequence: [String: SequenceCounters] = [:]
        public var lines: [String: LineCounters] = [:]
        public var tasks: [String: TaskCounters] = [:]
        public var commandsRefused: [String: UInt64] = [:]
        public var commandsStarted: [String: UInt64] = [:]
        public var commandsRunning = 0
        public var postsStale: UInt64 = 0
    }
    public struct SequenceCounters: Sendable, Equatable {
        public var started: UInt64, completed: UInt64, ignored: UInt64, refused: UInt64, restarted: UInt64, stopped: UInt64
        public var running: Int, queued: Int
    }
    public struct LineCounters: Sendable, Equatable {
        public var events: UInt64, heldInRing: UInt64, lost: UInt64, rateLimitHolds: UInt64, suspectedOverflows: UInt64
        /// Drain timer fires (`drain_every`) that found events waiting in the kernel.
        public var drainReads: UInt64 = 0
        /// The last level change read from the kernel (an edge, or a level
        /// read again): rising, and its kernel timestamp (monotonic clock;
        /// 0: none yet).
        public var lastEdgeRising = false
        public var lastEdgeAt: UInt64 = 0
    }
    public struct LatencyFigures: Sendable, Equatable {
        public var count: UInt64, p50: Duration, p99: Duration, max: Duration
    }
    public struct TaskCounters: Sendable, Equatable {
        public var runs: UInt64, skippedPeriods: UInt64
        public var p50: Duration, p99: Duration, max: Duration
    }
}

extension LoopRuntime {
    /// This loop's counters (and with `commands`, the commands'): its
    /// figures read in place (`fill`), made into dictionaries here.
    func counters(_ commands: CommandRunner?) -> Daemon.Counters {
        let f = LoopFigures(for: config)
        fill(f)
        var c = f.counters
        if let commands {
            for (i, cmd) in config.commands.enumerated() where i < commands.refused.count {
                c.commandsRefused[cmd.name] = commands.refused[i]
                c.commandsStarted[cmd.name] = commands.started[i]
            }
            c.commandsRunning = commands.runningChildren
        }
        return c
    }

    /// The summary lines: at `info` from the summary timer, at `notice` at
    /// stop (so a daemon run at `--log-level notice`, without the per-reaction
    /// trace, still ends with its figures).
    func logSummary(level: Logger.Level = .info) {
        for (r, h) in reactionTimes.enumerated() where reactionFires[r] > summarizedFires[r] {
            guard let h else { continue }
            logger.log(
                level: level,
                "reaction \(config.reactions[r].name): \(reactionFires[r] - summarizedFires[r]) fires (\(reactionFires[r]) in all), trigger to actions done p50 \(h.percentile(0.5).short) p99 \(h.percentile(0.99).short) max \(h.max.short)")
            summarizedFires[r] = reactionFires[r]
        }
        for t in tasks where t.runs > t.summarizedRuns {
            let h = t.lateness
            logger.log(
                level: level,
                "task \(t.config.name): \(t.runs - t.summarizedRuns) runs (\(t.runs) in all), lateness p50 \(h.percentile(0.5).short) p99 \(h.percentile(0.99).short) max \(h.max.short), \(t.skippedPeriods) skipped periods")
            t.summarizedRuns = t.runs
        }
        for case let l? in inputs where l.heldInRing > 0 || l.lost > 0 || l.rateLimitHolds > 0 || l.suspectedOverflows > 0 {
            let lost = l.lossIsExact ? "\(l.lost) lost" : "at least \(l.lost) lost (libgpiod 1.6 cannot count)"
            let full = l.suspectedOverflows > 0 ? ", \(l.suspectedOverflows) full FIFO(s)" : ""
            logger.log(
                level: level,
                "line \(l.config.name): \(l.eventsSeen) events, \(l.heldInRing) held in its ring, \(l.rateLimitHolds) held by its rate limit, \(lost)\(full)")
        }
    }
}

/// Counters by index (a reaction's fires), fixed in number: a count on the
/// event path is an increment in place, without the uniqueness check an
/// array's element write makes. Used on its loop's thread only (others read
/// copies through `LoopFigures`).
final class Tally {
    private let base: UnsafeMutablePointer<UInt64>
    let count: Int

    init(count: Int) {
        self.count = count
        base = .allocate(capacity: max(count, 1))
        base.initialize(repeating: 0, count: max(count, 1))
    }

    deinit { base.deallocate() }

    /// Adds one to counter `i`, which the caller has checked is below
    /// `count` (a reaction's fire checks its index once for every table).
    @inline(__always) func increment(checked i: Int) {
        assert(i >= 0 && i < count)
        base[i] &+= 1
    }

    subscript(i: Int) -> UInt64 {
        get {
            precondition(i >= 0 && i < count, "Tally: index \(i) out of 0..<\(count)")
            return base[i]
        }
        set {
            precondition(i >= 0 && i < count, "Tally: index \(i) out of 0..<\(count)")
            base[i] = newValue
        }
    }
}
