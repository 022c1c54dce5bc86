import CLinux
import Glibc

/// The calling kernel thread: its id, name, CPU affinity, timer slack and
/// scheduling (the corresponding C functions are `gettid`,
/// `pthread_setname_np`, `sched_setaffinity`, `prctl(PR_SET_TIMERSLACK)` and
/// `pthread_setschedparam`). Setters return the errno of a failure, or nil.
package enum OSThread {
    /// The calling thread's kernel id (cached per thread: no system call).
    @inline(__always) package static var currentID: Int32 { bl_cached_tid() }
    /// The kernel id of the process's main thread.
    @inline(__always) static var mainID: Int32 { bl_main_tid() }
    /// The calling thread's kernel id, asked of the kernel.
    static var uncachedID: Int32 { bl_gettid() }
    /// CPUs the process may run on.
    static var cpuCount: Int { Int(bl_cpu_count()) }

    /// Names the calling thread (the kernel keeps 15 bytes).
    package static func setName(_ name: String) {
        _ = name.withCString { bl_set_thread_name($0) }
    }

    /// The calling thread's timer slack, in nanoseconds.
    static var timerSlack: Int { bl_get_timer_slack() }

    static func setTimerSlack(nanoseconds: UInt) -> Errno? {
        bl_set_timer_slack(nanoseconds) == 0 ? nil : Errno(rawValue: Glibc.errno)
    }

    /// The calling thread's CPU affinity, to restore later.
    static func affinity() -> bl_cpuset {
        var set = bl_cpuset()
        _ = bl_get_affinity(&set)
        return set
    }

    static func restoreAffinity(_ set: bl_cpuset) {
        var set = set
        _ = bl_restore_affinity(&set)
    }

    static func setAffinity(_ cpus: [Int]) -> Errno? {
        let rc = cpus.map(Int32.init).withUnsafeBufferPointer { bl_set_affinity($0.baseAddress, Int32($0.count)) }
        return rc == 0 ? nil : Errno(rawValue: Glibc.errno)
    }

    static func setFIFOPriority(_ priority: Int32) -> Errno? {
        bl_set_fifo_priority(priority) == 0 ? nil : Errno(rawValue: Glibc.errno)
    }

    /// The calling thread's scheduling policy (`SCHED_OTHER`, `SCHED_FIFO`...)
    /// and real-time priority, or nil if the kernel would not say.
    package static var scheduling: (policy: Int32, priority: Int32)? {
        var policy: Int32 = 0, priority: Int32 = 0
        return bl_get_scheduling(&policy, &priority) == 0 ? (policy, priority) : nil
    }

    /// The CPU the calling thread runs on now (-1: unknown).
    package static var currentCPU: Int32 { bl_current_cpu() }
}

/// The signal mask of the calling thread and the real-time signal range
/// (the corresponding C functions are `pthread_sigmask` and `SIGRTMIN`/`SIGRTMAX`).
enum SignalMaskCalls {
    static func block(_ signals: [Int32]) throws(SystemError) {
        let rc = signals.withUnsafeBufferPointer { bl_block_signals($0.baseAddress, Int32($0.count)) }
        if rc != 0 { throw SystemError(call: "pthread_sigmask", errno: Glibc.errno) }
    }

    static func unblock(_ signals: [Int32]) {
        _ = signals.withUnsafeBufferPointer { bl_unblock_signals($0.baseAddress, Int32($0.count)) }
    }

    static func isBlocked(_ signal: Int32) -> Bool { bl_signal_is_blocked(signal) == 1 }

    static var realtimeMinimum: Int32 { bl_sigrtmin() }
    static var realtimeMaximum: Int32 { bl_sigrtmax() }
}
