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

    /// The errno value by name, for `catch let e where e.code == .wouldBlock`.
    public var code: Errno { Errno(rawValue: errno) }

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
///
/// Package access for the few calls other layers need (`isReadable`); the
/// rest stays internal to the engine.
package enum Kernel {
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

    /// A close-on-exec duplicate of `fd` (`fcntl(F_DUPFD_CLOEXEC)`); the
    /// caller owns it. A bad `fd` is thrown: it came from the user.
    static func duplicate(_ fd: Int32) throws(SystemError) -> Int32 {
        let d = bl_dup_cloexec(fd)
        guard d >= 0 else { throw SystemError(call: "fcntl(F_DUPFD_CLOEXEC)", errno: Glibc.errno, fd: fd) }
        return d
    }

    /// Which open file an fd refers to: fstat's device and inode.
    struct FileIdentity: Equatable {
        let device: UInt64
        let inode: UInt64
    }

    /// The identity of the file `fd` refers to; nil if it is not open.
    static func identity(of fd: Int32) -> FileIdentity? {
        var dev: UInt64 = 0, ino: UInt64 = 0
        guard bl_file_identity(fd, &dev, &ino) == 0 else { return nil }
        return FileIdentity(device: dev, inode: ino)
    }

    /// Whether `fd` is not an open descriptor (a caller's fd it closed).
    /// Sets errno to EBADF when it is not.
    static func isClosed(_ fd: Int32) -> Bool { bl_fd_is_closed(fd) != 0 }

    /// Whether the calling thread's errno is EBADF: inline, one load.
    @inline(__always) static var lastErrorIsBadFD: Bool { bl_errno_is_ebadf() != 0 }

    /// Sets the calling thread's errno to 0.
    static func clearLastError() { bl_errno_clear() }

    /// Runs `body` and leaves the calling thread's errno as it was before:
    /// for the engine's own checks between a handler and the program (a
    /// failed probe's EBADF must not reach either).
    static func preservingLastError<T>(_ body: () -> T) -> T {
        let saved = Glibc.errno
        defer { Glibc.errno = saved }
        return body()
    }

    /// Closes a descriptor the engine owns. `close` is never retried (on Linux
    /// the descriptor is released even when close reports EINTR).
    static func close(_ fd: Int32) {
        if fd >= 0 { _ = Glibc.close(fd) }
    }

    /// Whether `fd` is readable now, without blocking (`poll` with a zero
    /// timeout): the GPIO layer's "do edge events wait in the kernel?".
    /// False for -1 and on any error.
    package static func isReadable(_ fd: Int32) -> Bool {
        guard fd >= 0 else { return false }
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while true {
            let rc = poll(&p, 1, 0)
            if rc >= 0 { return rc > 0 && p.revents & Int16(POLLIN) != 0 }
            if Glibc.errno != EINTR { return false }
        }
    }
}

/// An errno value with a name, as swift-system's `Errno`: errors are caught
/// by name rather than by number.
public struct Errno: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// EPERM: e.g. epoll refusing a regular file.
    public static let operationNotPermitted = Errno(rawValue: EPERM)
    /// ENOENT
    public static let noSuchFileOrDirectory = Errno(rawValue: ENOENT)
    /// EINTR
    public static let interrupted = Errno(rawValue: EINTR)
    /// EBADF
    public static let badFileDescriptor = Errno(rawValue: EBADF)
    /// EAGAIN (EWOULDBLOCK)
    public static let wouldBlock = Errno(rawValue: EAGAIN)
    /// ENOMEM
    public static let noMemory = Errno(rawValue: ENOMEM)
    /// EACCES
    public static let permissionDenied = Errno(rawValue: EACCES)
    /// EBUSY
    public static let resourceBusy = Errno(rawValue: EBUSY)
    /// EEXIST
    public static let fileExists = Errno(rawValue: EEXIST)
    /// ENODEV
    public static let noSuchDevice = Errno(rawValue: ENODEV)
    /// EINVAL
    public static let invalidArgument = Errno(rawValue: EINVAL)
    /// EMFILE
    public static let tooManyOpenFiles = Errno(rawValue: EMFILE)
    /// ENOSPC
    public static let noSpace = Errno(rawValue: ENOSPC)

    public var description: String { String(cString: strerror(rawValue)) }
}
