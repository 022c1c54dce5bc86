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

/// From the log writer's thread to the main loop's consumers (the control
/// server's followers, the MQTT bridge): per consumer a bounded queue
/// behind one lock, and a wake-up when it stops being empty (one per
/// batch, not per event). Nothing is queued while no consumer is attached;
/// past `capacity` waiting events, a consumer's new ones are dropped and
/// counted.
///
/// The most recent events (`kept`) are kept here too, while `keep(true)`
/// asks for them (the control server's `events` without follow): on the
/// writer's thread, so keeping them wakes no loop. A reaction then costs
/// the main loop nothing while nobody follows.
final class EventFeed: @unchecked Sendable {
    static let capacity = 4096
    /// Events kept for `recentEvents`.
    static let kept = 256

    /// One consumer's end: its queue and how to wake it.
    final class Consumer: @unchecked Sendable {
        // With the feed's lock held:
        fileprivate var queue: [TraceEvent] = []
        fileprivate var overflowed: UInt64 = 0
        fileprivate let wake: @Sendable () -> Void
        fileprivate init(_ wake: @escaping @Sendable () -> Void) { self.wake = wake }
    }

    private let lock = Lock()
    // With `lock` held:
    private var consumers: [Consumer] = []
    private var keeps = false
    /// The most recent events, `recentNext` the oldest once full.
    private var recent: [TraceEvent] = []
    private var recentNext = 0
    /// Whether a consumer is attached or recent events are kept (read
    /// without the lock by the writer, to skip making events nobody takes).
    let attached = Atomic<Bool>(false)

    func attach(_ wake: @escaping @Sendable () -> Void) -> Consumer {
        let c = Consumer(wake)
        lock.withLock {
            consumers.append(c)
            attached.store(true, ordering: .releasing)
        }
        return c
    }

    func detach(_ c: Consumer) {
        lock.withLock {
            consumers.removeAll { $0 === c }
            c.queue = []
            attached.store(keeps || !consumers.isEmpty, ordering: .releasing)
        }
    }

    /// Whether the most recent events are kept (`recentEvents`); turned
    /// off, they are forgotten.
    func keep(_ on: Bool) {
        lock.withLock {
            keeps = on
            if !on {
                recent = []
                recentNext = 0
            }
            attached.store(keeps || !consumers.isEmpty, ordering: .releasing)
        }
    }

    /// How many consumers are attached (what wakes a loop with each batch).
    var consumerCount: Int { lock.withLock { consumers.count } }

    /// The most recent events (at most `kept`), oldest first.
    func recentEvents() -> [TraceEvent] {
        lock.withLock { Array(recent[recentNext...] + recent[..<recentNext]) }
    }

    /// On the log writer's thread.
    func push(_ e: TraceEvent) {
        var wakes: [@Sendable () -> Void] = []
        lock.withLock {
            if keeps {
                if recent.count < Self.kept {
                    recent.append(e)
                } else {
                    recent[recentNext] = e
                    recentNext = (recentNext + 1) % Self.kept
                }
            }
            for c in consumers {
                guard c.queue.count < Self.capacity else {
                    c.overflowed &+= 1
                    continue
                }
                c.queue.append(e)
                if c.queue.count == 1 { wakes.append(c.wake) }
            }
        }
        for w in wakes { w() }
    }

    /// Wakes every consumer, with events or without: something was lost
    /// before the feed (`TraceLog.missedRecords`). On the writer's thread.
    func poke() {
        let wakes = lock.withLock { consumers.map(\.wake) }
        for w in wakes { w() }
    }

    /// On the consumer's thread: every event waiting for `c`, and how many
    /// were dropped in all because its queue was full.
    func take(_ c: Consumer) -> (events: [TraceEvent], overflowed: UInt64) {
        lock.withLock {
            let q = c.queue
            c.queue = []
            return (q, c.overflowed)
        }
    }

    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }
}
