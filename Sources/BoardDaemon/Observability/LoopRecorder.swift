import Boardloop
import Synchronization

/// One loop's recording (`boardctl record`, the control protocol's
/// `record`): what the loop's event sink reports while it runs — every
/// edge as read from the kernel (`TraceRecord.Kind.rawEdge`), held events
/// delivered, losses, writes with who made them, reactions, gestures, mode
/// switches, sequence steps — each with its time on the loop's clock.
///
/// A fixed ring, allocated when the recording starts: one producer (the
/// loop's thread: a store and an atomic add, no allocation, no system
/// call) and one consumer (the control server on the main loop, which
/// drains it a few times a second and streams the records to the client).
/// When it is full a record is dropped and counted (`dropped`).
final class LoopRecorder: @unchecked Sendable {
    struct Entry: BitwiseCopyable {
        var record: TraceRecord
        /// When it happened on the loop's clock (an edge: its kernel timestamp).
        var t: UInt64
    }

    /// Records a loop keeps between two drains (a power of two): 16 Ki
    /// records, about 900 KiB while a recording runs.
    static let defaultCapacity = 1 << 14

    let capacity: Int
    private let mask: Int
    private let slots: UnsafeMutablePointer<Entry>
    private let tail = Atomic<Int>(0)
    private let head = Atomic<Int>(0)
    /// Records dropped because the ring was full.
    let dropped = Atomic<UInt64>(0)
    /// Which recording it is for (a recorder a stuck worker kept is not
    /// taken for a later recording's).
    let serial: UInt64

    init(capacity: Int = LoopRecorder.defaultCapacity, serial: UInt64) {
        precondition(capacity > 0 && capacity & (capacity - 1) == 0, "a recorder's capacity is a power of two")
        self.capacity = capacity
        mask = capacity - 1
        self.serial = serial
        slots = .allocate(capacity: capacity)
        slots.initialize(repeating: Entry(record: TraceRecord(kind: .edge, line: -1, generation: 0), t: 0), count: capacity)
    }

    deinit { slots.deallocate() }

    /// On the loop's thread.
    @inline(__always) func push(_ r: TraceRecord, at t: UInt64) {
        let i = tail.load(ordering: .relaxed)
        if i &- head.load(ordering: .acquiring) >= capacity {
            dropped.add(1, ordering: .relaxed)
            return
        }
        slots[i & mask] = Entry(record: r, t: t)
        tail.store(i &+ 1, ordering: .releasing)
    }

    /// The consumer: hands every waiting record to `body`, in order.
    @discardableResult
    func consume(_ body: (Entry) -> Void) -> Int { consumeRing(slots, mask: mask, head: head, tail: tail, body) }
}

extension TraceRecord {
    /// An edge read from the kernel: `flag` rising (the physical level's
    /// change), `at` its kernel timestamp, `step` bit 0 held (the line's
    /// mode did not admit it: delivered later), `nanoseconds` the line's
    /// sequence number, `number` and `other` the request's (low and high
    /// halves); 0: not known.
    static func rawEdge(line: Int, rising: Bool, at t: UInt64, held: Bool, sequence: UInt64, lineSequence: UInt64, generation: Int32)
        -> TraceRecord
    {
        TraceRecord(
            kind: .rawEdge, flag: rising, step: held ? 1 : 0, line: Int32(line), generation: generation,
            number: Int32(bitPattern: UInt32(truncatingIfNeeded: sequence)), other: Int32(bitPattern: UInt32(truncatingIfNeeded: sequence >> 32)),
            nanoseconds: lineSequence, at: t)
    }

    /// A raw edge's request-wide sequence number (0: not known).
    var sequence: UInt64 { UInt64(UInt32(bitPattern: number)) | UInt64(UInt32(bitPattern: other)) << 32 }
}

extension EventSink {
    /// Who wrote an output (a write record's `step`; its `index` the
    /// reaction, sequence or task). The one answer to "who acted" a
    /// recording keeps: a reaction, a task, a sequence's step, a line's
    /// `safe:` value, a front end (the control socket, MQTT) or a `pulse:`
    /// action's end.
    enum WriteBy: UInt8 {
        case unknown = 0, reaction, sequence, task, safe, control, pulse, mqtt
    }
}

extension LoopRuntime {
    /// Starts recording this loop into `recorder` (on the loop's thread);
    /// returns each input line's physical level now, by line index.
    func startRecording(_ recorder: LoopRecorder) -> [(line: Int, high: Bool)] {
        events.record(recorder)
        var levels: [(line: Int, high: Bool)] = []
        for case let i? in inputs {
            i.recorded()
            levels.append((i.id, i.physicalLevel))
        }
        return levels
    }

    /// Ends the recording (on the loop's thread); the recorder holds what
    /// was not drained yet.
    @discardableResult
    func stopRecording() -> LoopRecorder? {
        guard let r = events.recorder else { return nil }
        events.record(nil)
        for case let i? in inputs { i.recorded() }
        return r
    }
}
