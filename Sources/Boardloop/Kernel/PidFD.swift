import CLinux
import Glibc

/// A pidfd: a process as a descriptor that becomes readable when the
/// process exits. The corresponding C functions are `pidfd_open`,
/// `pidfd_send_signal`, `waitid(P_PIDFD)` and `poll`; `kill` for a
/// process group. Its owner closes it (close-on-exec, blocking: `waitid`
/// on a non-blocking pidfd never waits).
struct PidFD {
    let fd: Int32

    init(adopting fd: Int32) { self.fd = fd }

    /// `pidfd_open(pid, 0)`.
    static func open(_ pid: pid_t) throws(SystemError) -> PidFD {
        let fd = bl_pidfd_open(pid)
        guard fd >= 0 else { throw SystemError(call: "pidfd_open", errno: Glibc.errno) }
        return PidFD(adopting: fd)
    }

    /// Closes the descriptor; the owner calls it once, when done.
    func close() { Kernel.close(fd) }

    /// `pidfd_send_signal(fd, signal, NULL, 0)`.
    func send(signal: Int32) throws(SystemError) {
        if bl_pidfd_send_signal(fd, signal) != 0 { throw SystemError(call: "pidfd_send_signal", errno: Glibc.errno, fd: fd) }
    }

    /// `kill(-group, signal)`; false with ESRCH when the group has no
    /// process left.
    static func signalGroup(_ group: pid_t, _ signal: Int32) throws(SystemError) -> Bool {
        if bl_kill_group(group, signal) == 0 { return true }
        let e = Glibc.errno
        if e == ESRCH { return false }
        throw SystemError(call: "kill", errno: e)
    }

    /// What `reap` found.
    enum Reaped {
        /// Not exited yet (without waiting, or on a non-blocking pidfd).
        case running
        /// Exited (CLD_EXITED) with this status.
        case exited(Int32)
        /// Killed by this signal (CLD_KILLED), or with a core dump (CLD_DUMPED).
        case killed(Int32, coreDumped: Bool)
        /// `waitid` failed: ECHILD when someone else reaped the process.
        case failed(errno: Int32)
    }

    /// Reaps the process (`waitid(P_PIDFD, ...)`, or on a kernel without
    /// P_PIDFD `waitid(P_PID, pid, ...)`), waiting for its exit or not.
    func reap(pid: pid_t, waiting: Bool) -> Reaped {
        var code: Int32 = 0
        var status: Int32 = 0
        let r = bl_pidfd_reap(fd, pid, waiting ? 0 : 1, &code, &status)
        if r > 0 { return code == BL_CLD_EXITED ? .exited(status) : .killed(status, coreDumped: code == BL_CLD_DUMPED) }
        if r == 0 { return .running }
        let e = Glibc.errno
        // A PIDFD_NONBLOCK pidfd reports a process that has not exited with EAGAIN.
        return e == EAGAIN ? .running : .failed(errno: e)
    }

    /// Sleeps until one of `fds` is readable (its process exited) or
    /// `deadline` (the monotonic clock's) passes; whether one is.
    static func waitForAny(_ fds: [Int32], until deadline: MonotonicInstant) -> Bool {
        while true {
            let now = MonotonicInstant.now
            let ns = deadline.nanoseconds > now.nanoseconds ? deadline.nanoseconds - now.nanoseconds : 0
            // Rounded up: a wait that ends early would only wait again.
            let ms = Int32(clamping: ns / 1_000_000 + (ns % 1_000_000 == 0 ? 0 : 1))
            let n = fds.withUnsafeBufferPointer { bl_pidfds_wait($0.baseAddress, Int32($0.count), ms) }
            if n > 0 { return true }
            if n < 0 || MonotonicInstant.now >= deadline { return false }
        }
    }
}
