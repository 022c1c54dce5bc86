import CLinux
import Glibc

/// A timerfd on CLOCK_MONOTONIC, armed to absolute deadlines. The
/// corresponding C functions are `timerfd_create`, `timerfd_settime` and
/// `read`. Its owner closes it (close-on-exec).
struct TimerFD {
    let fd: Int32

    init() throws(SystemError) {
        let fd = bl_timerfd_create()
        guard fd >= 0 else { throw SystemError(call: "timerfd_create", errno: Glibc.errno) }
        self.fd = fd
    }

    /// Closes the descriptor; the owner calls it once, when done.
    func close() { Kernel.close(fd) }

    /// Arms the timer to expire at `deadline` (CLOCK_MONOTONIC nanoseconds),
    /// then every `interval` nanoseconds on that grid (0: once); a deadline
    /// of 0 disarms it. Cannot fail with valid arguments on an fd we own.
    @inline(__always)
    func arm(absolute deadline: UInt64, interval: UInt64) {
        _ = bl_timerfd_arm_abs(fd, deadline, interval)
    }

    /// Reads the expiration count back to zero (non-blocking) and returns
    /// it: the grid points that passed since the last read or arm (0 when
    /// none did).
    @inline(__always)
    func drain() -> UInt64 {
        var expirations: UInt64 = 0
        return bl_timerfd_read(fd, &expirations) == 0 ? expirations : 0
    }
}

/// CLOCK_MONOTONIC (the corresponding C function is `clock_gettime`).
package enum MonotonicClock {
    @inline(__always) package static var nanoseconds: UInt64 { bl_monotonic_ns() }
}
