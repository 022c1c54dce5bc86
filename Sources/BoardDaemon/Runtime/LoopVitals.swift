import Boardloop
import CDaemon
import Glibc

/// How a loop's thread is doing, for `status`: where it runs, how much it
/// has done, and its slowest handler so far. Read on the loop's thread.
struct LoopVitals: Sendable {
    var threadID: Int32
    /// The CPU the thread ran on when asked (-1: unknown).
    var cpu: Int32
    /// SCHED_OTHER, SCHED_FIFO, SCHED_RR... and the real-time priority (0 for SCHED_OTHER).
    var policy: String
    var priority: Int32
    /// Waits in the kernel (passes that slept or polled) and callouts made
    /// (timers fired, sources handled, performs run).
    var waits: UInt64
    var handled: UInt64
    /// The slowest of the daemon's handlers so far: a reaction's (from the
    /// start of the handler that fired it to its actions' end:
    /// `LoopRuntime.reactionLongest`) or a task's run. Nil before any ran.
    var slowest: (what: String, nanoseconds: UInt64)?
}

extension LoopRuntime {
    func vitals() -> LoopVitals {
        var policy: Int32 = 0, priority: Int32 = 0
        let policyName: String
        if bd_thread_scheduling(&policy, &priority) == 0 {
            switch policy {
            case SCHED_FIFO: policyName = "fifo"
            case SCHED_RR: policyName = "rr"
            case 3: policyName = "batch"  // SCHED_BATCH
            case 5: policyName = "idle"  // SCHED_IDLE
            default: policyName = "other"
            }
        } else {
            policyName = "unknown"
        }
        var slowest: (String, UInt64)?
        for (i, ns) in reactionLongest.enumerated() where ns > (slowest?.1 ?? 0) {
            slowest = ("reaction \(config.reactions[i].name)", ns)
        }
        for t in tasks where t.runs > 0 && t.longestRun > (slowest?.1 ?? 0) {
            slowest = ("task \(t.config.name)", t.longestRun)
        }
        return LoopVitals(
            threadID: bd_gettid(), cpu: bd_current_cpu(), policy: policyName, priority: priority, waits: loop.waitCount,
            handled: loop.handledCount, slowest: slowest)
    }
}
