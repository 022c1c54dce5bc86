import Glibc

/// A child process watched by a loop, as sd-event's child sources
/// (`sd_event_add_child_pidfd`): a port source on the child's pidfd
/// (Linux 5.3+), which the kernel makes readable when the child exits. The
/// loop then reaps the child (`waitid` on the pidfd) and calls the handler,
/// on its thread, with how the child ended: once, and never after the
/// source was invalidated. No SIGCHLD handler, no `waitpid(-1)`: children
/// the program does not watch are left alone.
///
/// The child must be a child of this process (pidfds of other processes
/// cannot be reaped) that nobody else reaps: a `waitpid(-1)` elsewhere in
/// the process, or SIGCHLD set to be ignored, takes its status first, and
/// the handler then gets `.lost`.
///
/// Signals: `send(signal:)` goes through the pidfd, so it can never reach
/// another process that got the pid after the child was reaped;
/// `signalProcessGroup(_:)` reaches every process of the group the child
/// leads (a child spawned with `POSIX_SPAWN_SETPGROUP` and a group id of 0),
/// and only until the child is reaped: until then neither its pid nor its
/// group's id can be reused.
///
/// Invalidating the source before the child exits stops the watching: the
/// handler is not called, and the child is left unreaped (reap it with
/// `waitForExit()`, or it stays a zombie until this process ends). The
/// pidfd is the source's: it is closed when the source goes.
///
/// Without a loop to run (a shutdown whose loop's clock is manual, say),
/// `waitForAnyExit(of:until:)` sleeps until one of several children exits,
/// and `reapIfExited()` or `waitForExit()` reap them and call their
/// handlers as the loop would.
public final class ChildSource: @unchecked Sendable {
    /// How a child ended (`waitid`'s `si_code` and `si_status`).
    public enum Status: Equatable, Sendable, CustomStringConvertible {
        /// It exited (returned from main, called exit) with this status.
        case exited(code: Int32)
        /// A signal ended it, with a core dump or not.
        case killed(signal: Int32, coreDumped: Bool)
        /// Someone else reaped it (a `waitpid(-1)` elsewhere in the process,
        /// or SIGCHLD ignored): its status is gone.
        case lost

        public var description: String {
            switch self {
            case let .exited(code): "exited with status \(code)"
            case let .killed(signal, dumped): "killed by \(SignalMask.name(signal))\(dumped ? " (core dumped)" : "")"
            case .lost: "reaped elsewhere (status unknown)"
            }
        }
    }

    /// The child's process id.
    public let pid: pid_t
    /// The port source on its loop (order, dispatch count, validity).
    public private(set) var source: PortSource!
    /// How the child ended, once it is reaped; nil until then.
    @exclusivity(unchecked) public private(set) var status: Status?
    /// The pidfd, owned by the source.
    private let pidfd: PidFD
    private let handler: (ChildSource, Status) -> Void

    /// Opens a pidfd for `pid` (`pidfd_open`). The handler is called on the
    /// loop's thread once the child is reaped, with how it ended.
    /// - Throws: `pidfd_open`'s error: ENOSYS before Linux 5.3, ESRCH if
    ///   there is no such process, EMFILE and the like.
    public convenience init(pid: pid_t, order: Int = 0, handler: @escaping (ChildSource, Status) -> Void) throws(SystemError) {
        self.init(pidfd: try PidFD.open(pid).fd, pid: pid, order: order, handler: handler)
    }

    /// Watches the child `pid` through a pidfd the caller opened (as
    /// sd-event's `sd_event_add_child_pidfd` with the pidfd owned): one
    /// made where the child was spawned, so there is no moment when the
    /// child runs unwatched. The source owns `pidfd` from now on and closes
    /// it when it goes.
    public init(pidfd: Int32, pid: pid_t, order: Int = 0, handler: @escaping (ChildSource, Status) -> Void) {
        self.pid = pid
        self.pidfd = PidFD(adopting: pidfd)
        self.handler = handler
        source = PortSource(fd: pidfd, order: order) { [unowned self] _, _ in _ = self.reapIfExited() }
        // While scheduled, the loop keeps the child source alive (as CF's
        // sources); `invalidate()`, the reap or the loop's end lets it go.
        source.lifetimeOwner = self
    }

    deinit {
        source.invalidate()
        pidfd.close()
    }

    /// Adds the source to `loop` in `mode` (the loop's thread only).
    public func add(to loop: BoardRunLoop, mode: RunLoopMode = .default) throws(RunLoopError) {
        try loop.add(source, mode: mode)
    }

    /// Stops watching the child: the handler is not called from now on
    /// (see `PortSource.invalidate()` for invalidation from another
    /// thread). The child is not reaped.
    public func invalidate() { source.invalidate() }

    /// Whether the handler may still be called: the source was not
    /// invalidated and the child not reaped.
    public var isValid: Bool { status == nil && source.isValid }

    /// Sends `signal` to the child through its pidfd (`pidfd_send_signal`,
    /// Linux 5.1+): never to another process that got its pid later.
    /// - Throws: ESRCH once the child has exited (until then a zombie
    ///   child takes signals without effect), EPERM, EINVAL.
    public func send(signal: Int32) throws(SystemError) {
        guard status == nil else { throw SystemError(call: "pidfd_send_signal", errno: ESRCH) }
        try pidfd.send(signal: signal)
    }

    /// Sends `signal` to every process of the group whose id is the child's
    /// pid (`kill(-pid, signal)`): the child and what it started, when the
    /// child leads its own group. When there is no such group (the child
    /// did not lead one, and every process of it is gone), the signal goes
    /// to the child alone, through its pidfd.
    /// - Throws: ESRCH once the child is reaped (its pid, and so the
    ///   group's id, may then belong to someone else), EPERM, EINVAL.
    public func signalProcessGroup(_ signal: Int32) throws(SystemError) {
        guard status == nil else { throw SystemError(call: "kill", errno: ESRCH) }
        if try !PidFD.signalGroup(pid, signal) { try send(signal: signal) }
    }

    /// Reaps the child if it has exited (`waitid` with WNOHANG), without
    /// waiting; then, unless the source was invalidated, the handler is
    /// called, and the source leaves its loop. Returns the status (the one
    /// reaped before, if it was). On the loop's thread.
    @discardableResult
    public func reapIfExited() -> Status? {
        if let status { return status }
        return reap(waiting: false)
    }

    /// Waits until the child exits and reaps it, as `reapIfExited()`
    /// otherwise. Blocks the calling thread: send the child a signal that
    /// ends it first (SIGKILL) when it must not take long. On the loop's
    /// thread.
    @discardableResult
    public func waitForExit() -> Status {
        if let status { return status }
        while true {
            if let s = reap(waiting: true) { return s }
            // A PIDFD_NONBLOCK pidfd does not wait in waitid: sleep on it.
            _ = PidFD.waitForAny([pidfd.fd], until: .distantFuture)
        }
    }

    private func reap(waiting: Bool) -> Status? {
        let s: Status
        switch pidfd.reap(pid: pid, waiting: waiting) {
        case .running:
            return nil  // not exited yet (a wake-up without an exit)
        case .failed:
            // ECHILD: reaped by someone else. Anything else would be a bug
            // here; either way the pidfd stays readable, and the source
            // must end rather than make the loop spin.
            s = .lost
        case let .exited(code):
            s = .exited(code: code)
        case let .killed(signal, dumped):
            s = .killed(signal: signal, coreDumped: dumped)
        }
        let deliver = isValid
        status = s
        // The handler first, then the source leaves its loop: the path from
        // the exit to the handler allocates nothing (leaving a loop may).
        if deliver { handler(self, s) }
        source.invalidate()
        return s
    }

    /// Sleeps until one of `children` that is not reaped yet has exited,
    /// or until `deadline` (on the monotonic clock, not a loop's: this
    /// runs no loop) passes; returns whether one has. Reap them with
    /// `reapIfExited()`. Returns at once when every child is reaped.
    public static func waitForAnyExit(of children: [ChildSource], until deadline: MonotonicInstant) -> Bool {
        let fds = children.compactMap { $0.status == nil ? $0.pidfd.fd : nil }
        guard !fds.isEmpty else { return true }
        return PidFD.waitForAny(fds, until: deadline)
    }
}
