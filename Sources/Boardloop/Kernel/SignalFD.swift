import CLinux
import Glibc

/// A signalfd: signals blocked in every thread, read as records from a
/// descriptor. The corresponding C functions are `signalfd` and `read`.
/// Its owner closes it (close-on-exec, non-blocking).
struct SignalFD {
    let fd: Int32

    init(signals: [Int32]) throws(SystemError) {
        let fd = signals.withUnsafeBufferPointer { bl_signalfd_create($0.baseAddress, Int32($0.count)) }
        guard fd >= 0 else { throw SystemError(call: "signalfd", errno: Glibc.errno) }
        self.fd = fd
    }

    /// Closes the descriptor; the owner calls it once, when done.
    func close() { Kernel.close(fd) }

    /// Reads up to `max` records into `buffer`; returns how many (0 when
    /// none are pending).
    @inline(__always)
    func read(into buffer: UnsafeMutablePointer<bl_siginfo>, max: Int) -> Int {
        let n = bl_signalfd_read(fd, buffer, Int32(max))
        return n > 0 ? Int(n) : 0
    }
}
