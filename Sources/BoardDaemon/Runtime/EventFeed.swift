import Boardloop
import Glibc
import Synchronization

/// One event as the control socket's `events` command gives it: what the
/// log writer made of a trace record (its line's text) and the few fields
/// a client may want without parsing the text. Made on the log writer's
/// thread, never on a loop's.
struct TraceEvent: Sendable {
    enum Value: Sendable, Equatable {
        case string(String)
        case int(Int64)
        case bool(Bool)
    }

    /// When it happened (CLOCK_REALTIME, nanoseconds since the epoch): an
    /// edge's kernel timestamp, a reaction's end; for the other kinds,
    /// whose records carry no time of their own, when the log writer read
    /// the record (up to its nap, `LogWriter.napMilliseconds`, after the event).
    var nanoseconds: UInt64
    var loop: String
    /// edge, output, reaction, skipped, gesture, sequence, mode, held,
    /// lost, ring-full, deadlines-deferred.
    var kind: String
    var line: String?
    /// The log line's text.
    var text: String
    /// The level the line is logged at (shown or not).
    var level: String
    /// Kind-specific fields (a reaction's name, an edge's value...).
    var fields: [(String, Value)] = []
}

/// From the log writer's thread to the control server on the main loop:
/// a bounded queue behind a lock, and a wake-up when it stops being empty
/// (one per batch, not per event). Nothing is queued while no consumer is
/// attached; past `capacity` waiting events, new ones are dropped and
/// counted.
final class EventFeed: @unchecked Sendable {
    static let capacity = 4096

    private let lock = Lock()
    // With `lock` held:
    private var queue: [TraceEvent] = []
    private var wake: (@Sendable () -> Void)?
    private var overflowed: UInt64 = 0
    /// Whether a consumer is attached (read without the lock by the writer,
    /// to skip making events nobody takes).
    let attached = Atomic<Bool>(false)

    func attach(_ wake: @escaping @Sendable () -> Void) {
        lock.withLock { self.wake = wake }
        attached.store(true, ordering: .releasing)
    }

    func detach() {
        attached.store(false, ordering: .releasing)
        lock.withLock {
            wake = nil
            queue = []
        }
    }

    /// On the log writer's thread.
    func push(_ e: TraceEvent) {
        let w: (@Sendable () -> Void)? = lock.withLock {
            guard let wake else { return nil }
            guard queue.count < Self.capacity else {
                overflowed &+= 1
                return nil
            }
            queue.append(e)
            return queue.count == 1 ? wake : nil
        }
        w?()
    }

    /// On the consumer's thread: every waiting event, and how many were
    /// dropped in all because the queue was full.
    func take() -> (events: [TraceEvent], overflowed: UInt64) {
        lock.withLock {
            let q = queue
            queue = []
            return (q, overflowed)
        }
    }

    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }
}
