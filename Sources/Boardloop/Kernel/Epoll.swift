import CLinux
import Glibc

/// epoll, level-triggered (the corresponding C functions are `epoll_create1`,
/// `epoll_ctl` and `epoll_wait`). A ready descriptor that is not serviced is
/// reported again by the next wait: that is how readiness is held for a source
/// whose mode is not running. Each mode of a loop has its own epoll instance,
/// so switching modes costs no system call.
enum Epoll {
    static func create() throws(SystemError) -> Int32 {
        let fd = bl_epoll_create()
        if fd < 0 { throw SystemError(call: "epoll_create1", errno: errno) }
        return fd
    }

    static func add(_ epfd: Int32, _ target: Int32, events: UInt32, data: UInt64) throws(SystemError) {
        _ = try Kernel.call("epoll_ctl(ADD)") { bl_epoll_ctl(epfd, BL_EPOLL_CTL_ADD, target, events, data) }
    }

    static func modify(_ epfd: Int32, _ target: Int32, events: UInt32, data: UInt64) throws(SystemError) {
        _ = try Kernel.call("epoll_ctl(MOD)") { bl_epoll_ctl(epfd, BL_EPOLL_CTL_MOD, target, events, data) }
    }

    /// Removes `target`. A descriptor the user already closed has left every
    /// epoll set by itself (ENOENT/EBADF): that is not an error here.
    static func remove(_ epfd: Int32, _ target: Int32) {
        _ = bl_epoll_ctl(epfd, BL_EPOLL_CTL_DEL, target, 0, 0)
    }

    /// Waits for events; `timeoutMilliseconds` -1 blocks, 0 polls. Returns
    /// the number of events (0 on timeout or EINTR: the pass then finds
    /// nothing ready and goes round again).
    static func wait(_ epfd: Int32, into buffer: borrowing EventBuffer, timeoutMilliseconds: Int32) throws(SystemError) -> Int {
        let n = bl_epoll_wait(epfd, buffer.raw, Int32(buffer.capacity), timeoutMilliseconds)
        if n >= 0 { return Int(n) }
        let err = errno
        if err == EINTR { return 0 }
        throw SystemError(call: "epoll_wait", errno: err)
    }
}

/// The fixed buffer `epoll_wait` fills, reserved once when the loop is made.
struct EventBuffer: ~Copyable {
    let raw: UnsafeMutableRawPointer
    let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
        raw = .allocate(byteCount: capacity * bl_epoll_event_size(), alignment: 8)
    }

    deinit { raw.deallocate() }
}
