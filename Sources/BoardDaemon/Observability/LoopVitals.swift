import Boardloop
import Glibc

/// How a loop's thread is doing, for `status`: where it runs, how much it
/// has done, and its slowest handler so far. Read on the loop's thread,
/// without allocating (the names are looked up by the control server).
struct LoopVitals: Sendable {
    var threadID: Int32
    /// The CPU the thread ran on when asked (-1: unknown).
    var cpu: Int32
    /// SCHED_OTHER, SCHED_FIFO, SCHED_RR... and the real-time priority (0 for SCHED_OTHER).
    var policy: StaticString
    var priority: Int32
    /// Waits in the kernel (passes that slept or polled) and callouts made
    /// (timers fired, sources handled, performs run).
    var waits: UInt64
    var handled: UInt64
    /// The slowest of the daemon's handlers so far: a reaction's (from the
    /// start of the handler that fired it to its actions' end:
    /// `LoopRuntime.slowestReaction`) or a task's run. Nil before any ran.
    var slowest: Slowest?

    struct Slowest: Sendable {
        var isTask: Bool
        /// The reaction's or the task's index in the config.
        var index: Int
        var nanoseconds: UInt64

        /// "reaction NAME", "task NAME" (on the control server's thread).
        func what(_ config: DaemonConfig) -> String {
            if isTask { return index < config.tasks.count ? "task \(config.tasks[index].name)" : "a task" }
            return index < config.reactions.count ? "reaction \(config.reactions[index].name)" : "a reaction"
        }
    }
}

extension LoopRuntime {
    func vitals() -> LoopVitals {
        let policyName: StaticString
        let sched = OSThread.scheduling
        if let (policy, _) = sched {
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
        var slowest: LoopVitals.Slowest?
        if slowestReactionIndex >= 0 {
            slowest = .init(isTask: false, index: slowestReactionIndex, nanoseconds: UInt64(max(slowestReaction, 0)))
        }
        var i = 0
        while i < tasks.count {
            let t = tasks[i]
            if t.runs > 0 && t.longestRun > (slowest?.nanoseconds ?? 0) { slowest = .init(isTask: true, index: t.index, nanoseconds: t.longestRun) }
            i += 1
        }
        return LoopVitals(
            threadID: OSThread.currentID, cpu: OSThread.currentCPU, policy: policyName, priority: sched?.priority ?? 0, waits: loop.waitCount,
            handled: loop.handledCount, slowest: slowest)
    }
}
