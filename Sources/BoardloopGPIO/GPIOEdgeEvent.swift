import Boardloop
import CGPIOD

/// One edge of one line, as the kernel (or the mock chip) reported it.
public struct GPIOEdgeEvent: Sendable, Equatable, CustomStringConvertible {
    /// The C shim's record of the event. The libgpiod backend reads events
    /// straight into storage of `GPIOEdgeEvent`s (same layout), so an event is
    /// copied once on its way out of libgpiod's buffer.
    var record: bl_gpiod_edge_event

    /// The line's offset on its chip.
    public var offset: UInt32 {
        get { record.offset }
        set { record.offset = newValue }
    }
    /// Logical edge (active-low already applied).
    public var edge: GPIOEdge {
        get { record.edge == UInt32(BL_GPIOD_EDGE_RISING) ? .rising : .falling }
        set { record.edge = UInt32(newValue == .rising ? BL_GPIOD_EDGE_RISING : BL_GPIOD_EDGE_FALLING) }
    }
    /// When the edge happened: the kernel's timestamp, CLOCK_MONOTONIC (the
    /// loop's clock). For a software-debounced edge, the time of the edge
    /// that began the level that then held for the debounce period.
    public var timestamp: MonotonicInstant {
        get { MonotonicInstant(nanoseconds: record.timestamp_ns) }
        set { record.timestamp_ns = newValue.nanoseconds }
    }
    /// Sequence number among all lines of the request, from 1; 0 when the
    /// library gives none (libgpiod 1.6).
    public var globalSequence: UInt64 {
        get { record.global_seqno }
        set { record.global_seqno = newValue }
    }
    /// Sequence number among this line's events, from 1; 0 when not given.
    public var lineSequence: UInt64 {
        get { record.line_seqno }
        set { record.line_seqno = newValue }
    }

    public init(
        offset: UInt32, edge: GPIOEdge, timestamp: MonotonicInstant, globalSequence: UInt64 = 0, lineSequence: UInt64 = 0
    ) {
        record = bl_gpiod_edge_event(
            timestamp_ns: timestamp.nanoseconds, global_seqno: globalSequence, line_seqno: lineSequence, offset: offset,
            edge: UInt32(edge == .rising ? BL_GPIOD_EDGE_RISING : BL_GPIOD_EDGE_FALLING))
    }

    public static func == (a: GPIOEdgeEvent, b: GPIOEdgeEvent) -> Bool {
        a.offset == b.offset && a.edge == b.edge && a.timestamp == b.timestamp && a.globalSequence == b.globalSequence
            && a.lineSequence == b.lineSequence
    }

    public var description: String {
        var s = "\(edge) on \(offset) at \(timestamp)"
        if globalSequence != 0 { s += " #\(globalSequence)/\(lineSequence)" }
        return s
    }
}

/// The events one dispatch delivers, borrowed from the request's buffer:
/// valid only inside the handler call (copy what you keep). No heap
/// allocation is made to build or iterate it.
public struct GPIOEdgeEventBatch: RandomAccessCollection {
    public typealias Index = Int
    public typealias Element = GPIOEdgeEvent

    let base: UnsafePointer<GPIOEdgeEvent>?
    public let count: Int
    /// When the handler was entered, on the loop's clock.
    public let handlerEntryTime: MonotonicInstant
    /// Events found lost just before this batch: a gap in the sequence
    /// numbers (libgpiod 2.x, mock), or on 1.6 an edge repeated on a
    /// both-edges line or a level that disagrees with the last event after
    /// the kernel FIFO was full. Never hidden: also summed in the request's
    /// `statistics.lostEvents`.
    public let lostEvents: UInt64
    /// 1.6 only: a line's kernel FIFO (16 events) was found full, so edges
    /// after it may have been dropped without a trace.
    public let overflowSuspected: Bool
    /// Set when the chip vanished: the request is dead, no more batches come.
    public var fault: GPIOError? { faultAt?.pointee }
    /// The fault, borrowed like the events (the batch stays a plain value:
    /// an optional error stored in it would be copied, and destroyed, by
    /// every delivery, some 100 instructions with no fault to report).
    let faultAt: UnsafePointer<GPIOError>?

    init(
        base: UnsafePointer<GPIOEdgeEvent>?, count: Int, handlerEntryTime: MonotonicInstant, lostEvents: UInt64,
        overflowSuspected: Bool, faultAt: UnsafePointer<GPIOError>?
    ) {
        self.base = base
        self.count = count
        self.handlerEntryTime = handlerEntryTime
        self.lostEvents = lostEvents
        self.overflowSuspected = overflowSuspected
        self.faultAt = faultAt
    }

    /// Iterates without allocating, also in unoptimized builds (the
    /// standard IndexingIterator is generic and is not specialized there).
    public struct Iterator: IteratorProtocol {
        let base: UnsafePointer<GPIOEdgeEvent>?
        let count: Int
        var index = 0

        public mutating func next() -> GPIOEdgeEvent? {
            guard index < count, let base else { return nil }
            defer { index += 1 }
            return base[index]
        }
    }

    public func makeIterator() -> Iterator { Iterator(base: base, count: count) }

    public var startIndex: Int { 0 }
    public var endIndex: Int { count }

    public subscript(position: Int) -> GPIOEdgeEvent {
        precondition(position >= 0 && position < count, "GPIOEdgeEventBatch index out of range")
        return base![position]
    }

    /// Edge-to-handler latency of `event`: handler entry minus the kernel
    /// timestamp (zero if the timestamp is later, which a clock step could cause).
    public func latency(of event: GPIOEdgeEvent) -> Duration {
        event.timestamp > handlerEntryTime ? .zero : handlerEntryTime - event.timestamp
    }

    /// The latency of the event at `index`.
    public func latency(at index: Int) -> Duration { latency(of: self[index]) }
}

/// Totals over a request's life.
public struct GPIOEventStatistics: Sendable, Equatable {
    /// Events handed to the handler.
    public var delivered: UInt64 = 0
    /// Handler calls.
    public var batches: UInt64 = 0
    /// Raw events read from the fd (before debouncing).
    public var read: UInt64 = 0
    /// Events detected lost (see `GPIOEdgeEventBatch.lostEvents`).
    public var lostEvents: UInt64 = 0
    /// 1.6: times a kernel FIFO was found full.
    public var suspectedOverflows: UInt64 = 0
    /// Raw edges swallowed by software debouncing (bounces and glitches).
    public var debounced: UInt64 = 0
    /// The largest edge-to-handler latency seen.
    public var maxLatency: Duration = .zero

    public init() {}
}
