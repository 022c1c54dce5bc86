import CLinux
import Glibc

/// An error from a Linux system call: which call, on which fd, and the errno
/// it set.
public struct SystemError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The C function that failed, e.g. `epoll_ctl`.
    public let call: StaticString
    /// The errno value.
    public let errno: Int32
    /// The caller's file descriptor the call was about, or -1.
    public let fd: Int32

    public init(call: StaticString, errno: Int32, fd: Int32 = -1) {
        self.call = call
        self.errno = errno
        self.fd = fd
    }

    public var description: String {
        let on = fd >= 0 ? " on fd \(fd)" : ""
        return "\(call)\(on) failed: \(String(cString: strerror(errno))) (errno \(errno))"
    }

    public static func == (a: SystemError, b: SystemError) -> Bool {
        a.errno == b.errno && a.fd == b.fd && a.call.description == b.call.description
    }
}

/// The engine's one place that classifies errno after a system call, in the
/// spirit of SwiftNIO's `syscall` helper:
/// - EINTR is retried;
/// - EAGAIN/EWOULDBLOCK is reported as "would block" (`nil`), not as an error;
/// - EBADF and EFAULT mean the engine passed a bad fd or pointer: a bug here,
///   so they trap with the call's name instead of being thrown at a user;
/// - anything else is thrown as a `SystemError` naming the call.
enum Kernel {
    @inline(__always)
    static func call(
        _ name: StaticString, fd: Int32 = -1, trapOnBadFD: Bool = true, _ body: () -> Int32
    ) throws(SystemError) -> Int32? {
        while true {
            let rc = body()
            if rc >= 0 { return rc }
            let err = Glibc.errno
            switch err {
            case EINTR:
                continue
            case EAGAIN:
                return nil
            case EBADF where trapOnBadFD, EFAULT:
                fatalError("boardloop: \(name) failed with \(String(cString: strerror(err))); this is a bug in boardloop")
            default:
                throw SystemError(call: name, errno: err, fd: fd)
            }
        }
    }

    /// Closes a descriptor the engine owns. `close` is never retried (on Linux
    /// the descriptor is released even when close reports EINTR).
    static func close(_ fd: Int32) {
        if fd >= 0 { _ = Glibc.close(fd) }
    }
}
