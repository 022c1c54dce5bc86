/// Every way an engine call can fail. Each case carries what a reader needs
/// to act: which capacity and its limit, which thread owns the loop, which call
/// failed and why.
public enum RunLoopError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A fixed capacity of the loop would be exceeded; nothing was changed.
    case capacityExceeded(RunLoopCapacity, limit: Int)
    /// An owner-only call was made from another thread.
    case notOwner(operation: String, ownerThread: Int32, callingThread: Int32)
    /// The item already belongs to a different run loop.
    case belongsToAnotherLoop(item: String)
    /// The item was invalidated; it cannot be scheduled again.
    case invalidated(item: String)
    /// A wait-until-done request on the loop's own thread in a mode the loop is
    /// not running could never complete.
    case wouldDeadlock(operation: String, mode: String, running: String?)
    /// The calling thread already has a current run loop.
    case currentLoopExists(thread: Int32)
    /// An argument is out of range.
    case invalidArgument(String)
    /// A perform request timed out while waiting for the target loop; it was
    /// cancelled before it ran.
    case waitTimedOut(operation: String)
    /// The loop's owner thread has exited: the loop ended and accepts no more
    /// work (see `BoardRunLoop.hasEnded`).
    case loopEnded(thread: Int32)
    /// A port source's fd number no longer refers to the file the source
    /// was made for: the fd was closed and the number reused by another
    /// file. The source would watch and read the new file; make a new one.
    case fdReused(fd: Int32)
    /// A system call failed.
    case system(SystemError)

    public var description: String {
        switch self {
        case let .capacityExceeded(capacity, limit):
            "run loop capacity exceeded: \(capacity) is limited to \(limit) (raise BoardRunLoop.Capacities.\(capacity.fieldName) when creating the loop)"
        case let .notOwner(operation, owner, caller):
            "\(operation) must be called on the run loop's own thread (tid \(owner)), not from tid \(caller)"
        case let .belongsToAnotherLoop(item):
            "\(item) is already scheduled on another run loop; an item belongs to one loop"
        case let .invalidated(item):
            "\(item) was invalidated and cannot be scheduled again"
        case let .wouldDeadlock(operation, mode, running):
            "\(operation) on the loop's own thread would wait forever: the request is for mode '\(mode)' but the loop is \(running.map { "running '\($0)'" } ?? "not running")"
        case let .currentLoopExists(thread):
            "thread \(thread) already has a current run loop; configure capacities before its first use"
        case let .invalidArgument(message):
            "invalid argument: \(message)"
        case let .waitTimedOut(operation):
            "\(operation) timed out before the target loop ran the request; it was cancelled"
        case let .loopEnded(thread):
            "the run loop of thread \(thread) has ended (its thread exited); it accepts no more work"
        case let .fdReused(fd):
            "fd \(fd) is no longer the file this PortSource was made for: it was closed and the number reused by another file (a stale source would read the new file's data); make a new PortSource for the new file"
        case let .system(error):
            error.description
        }
    }
}

/// The capacities a loop is created with; see `BoardRunLoop.Capacities`.
public enum RunLoopCapacity: String, Sendable, CustomStringConvertible {
    case sources, timers, observers, modes, pendingPerforms, eventsPerWait

    public var description: String {
        switch self {
        case .sources: "sources (custom and port sources)"
        case .timers: "timers"
        case .observers: "observers"
        case .modes: "modes"
        case .pendingPerforms: "pending perform requests"
        case .eventsPerWait: "fd events per wait"
        }
    }

    var fieldName: String { rawValue }
}
