import CLinux
import Glibc

/// An eventfd: a kernel counter one thread adds to and another waits on
/// (through epoll) and reads back to zero. The corresponding C functions are
/// `eventfd`, `write` and `read`. Its owner closes it (close-on-exec).
/// Package access: the mock GPIO chips wake their requests' pollers with it.
/// The type and `fd` are `@usableFromInline` so that `signal()` and
/// `drain()` inline into the mock: without it the compiler leaves a package
/// function's body out of the module and every injected edge paid two calls
/// (13 instructions in the GPIO instruction scenario).
@usableFromInline package struct EventFD {
    @usableFromInline package let fd: Int32

    package init() throws(SystemError) {
        let fd = bl_eventfd(0, 0)
        guard fd >= 0 else { throw SystemError(call: "eventfd", errno: Glibc.errno) }
        self.fd = fd
    }

    /// Closes the descriptor; the owner calls it once, when done.
    package func close() { Kernel.close(fd) }

    /// Adds one to the counter, making the fd readable. Retried on EINTR;
    /// safe from any thread. A counter at its maximum (2^64 - 2: only an fd
    /// that is never read, after that many writes) is read back to zero
    /// and written again. Inlinable: a mock chip signals once per injected edge.
    @inlinable @inline(__always)
    package func signal() {
        while bl_eventfd_write(fd, 1) != 0 {
            let e = Glibc.errno
            if e == EAGAIN {
                drain()
            } else if e != EINTR {
                return
            }
        }
    }

    /// Reads the counter back to zero (nothing happens if it was zero: the
    /// fd is non-blocking).
    @inlinable @inline(__always)
    package func drain() {
        var value: UInt64 = 0
        _ = bl_eventfd_read(fd, &value)
    }
}
