import Boardloop

/// The event path's storage, reserved when a request is made: raw events
/// as read, events to deliver, and FIFO-full offsets, one region per nesting
/// level (a handler may run the loop again, which may dispatch the same
/// request while the outer batch is still borrowed).
final class EventStorage {
    static let maxDepth = 4
    /// Reads one `GPIOLineRequest.readPendingEvents()` makes at most: enough
    /// to empty the largest v2 kernel buffer (1024 events) at 16 a read.
    static let maxPendingReads = 64
    /// Raw events per read.
    let capacity: Int
    /// Deliverable events per region: a read's events plus one confirmed
    /// debounce candidate per line.
    let outCapacity: Int
    let raw: UnsafeMutablePointer<GPIOEdgeEvent>
    let out: UnsafeMutablePointer<GPIOEdgeEvent>
    let full: UnsafeMutablePointer<UInt32>
    static let fullCapacity = 64

    init(capacity: Int, lines: Int) {
        self.capacity = capacity
        outCapacity = capacity + lines
        let zero = GPIOEdgeEvent(offset: 0, edge: .rising, timestamp: MonotonicInstant(nanoseconds: 0))
        raw = .allocate(capacity: capacity * Self.maxDepth)
        raw.initialize(repeating: zero, count: capacity * Self.maxDepth)
        out = .allocate(capacity: outCapacity * Self.maxDepth)
        out.initialize(repeating: zero, count: outCapacity * Self.maxDepth)
        full = .allocate(capacity: Self.fullCapacity * Self.maxDepth)
        full.initialize(repeating: 0, count: Self.fullCapacity * Self.maxDepth)
    }

    deinit {
        raw.deallocate()
        out.deallocate()
        full.deallocate()
    }

    func rawRegion(_ depth: Int) -> UnsafeMutableBufferPointer<GPIOEdgeEvent> {
        UnsafeMutableBufferPointer(start: raw + depth * capacity, count: capacity)
    }

    func fullRegion(_ depth: Int) -> UnsafeMutableBufferPointer<UInt32> {
        UnsafeMutableBufferPointer(start: full + depth * Self.fullCapacity, count: Self.fullCapacity)
    }

    func outRegion(_ depth: Int) -> UnsafeMutablePointer<GPIOEdgeEvent> { out + depth * outCapacity }
}

/// What one delivery collects before the handler is called.
struct BatchBuilder {
    let out: UnsafeMutablePointer<GPIOEdgeEvent>
    let capacity: Int
    var count = 0
    var lost: UInt64 = 0
    var overflow = false

    init(out: UnsafeMutablePointer<GPIOEdgeEvent>, capacity: Int) {
        self.out = out
        self.capacity = capacity
    }

    @inline(__always)
    mutating func append(_ event: GPIOEdgeEvent) {
        // Cannot overflow: one deliverable per raw event, plus one
        // confirmation per line (EventStorage.outCapacity).
        precondition(count < capacity, "boardloop GPIO: batch storage overflow")
        out[count] = event
        count += 1
    }

    /// Keeps an event that was read into the batch's own storage at
    /// `event` (at or after the next slot): it stays where it is unless
    /// events before it were dropped.
    @inline(__always)
    mutating func keep(_ event: UnsafeMutablePointer<GPIOEdgeEvent>) {
        precondition(count < capacity, "boardloop GPIO: batch storage overflow")
        if event != out + count { out[count] = event.pointee }
        count += 1
    }

    var isEmpty: Bool { count == 0 && lost == 0 && !overflow }
}

/// Per-line state of the event path.
struct LineEventState {
    let offset: UInt32
    /// Which edges the user asked for (`.none` for outputs).
    let report: GPIOEdgeDetection
    /// Which edges the driver reports (`.both` under software debounce).
    let kernelEdges: GPIOEdgeDetection
    /// Software debounce period, 0 when none.
    let softwareDebounceNs: UInt64
    /// Level after the last raw edge: -1 unknown, 0 low, 1 high.
    var lastLevel: Int8 = -1
    /// The last per-line sequence number seen (0: none yet).
    var lastLineSequence: UInt64 = 0
    /// Events of this line found lost (per-line sequence gaps, or inferred).
    var lost: UInt64 = 0
    /// Reads that found this line's kernel FIFO full (1.6).
    var fifoFull: UInt64 = 0
    /// Debounce: the level last reported (or found at schedule time).
    var stable = false
    /// Debounce: a level change is waiting out its period.
    var pending = false
    /// Debounce: the edge that began the pending level.
    var candidate = GPIOEdgeEvent(offset: 0, edge: .rising, timestamp: MonotonicInstant(nanoseconds: 0))

    init(offset: UInt32, settings: GPIOLineSettings, capabilities: GPIOCapabilities) {
        self.offset = offset
        let isInput = settings.direction == .input
        report = isInput ? settings.edgeDetection : .none
        kernelEdges = isInput ? GPIOLineRequest.driverSettings(settings, capabilities: capabilities).edgeDetection : .none
        if isInput && settings.edgeDetection != .none && settings.debounce > .zero
            && !capabilities.contains(.kernelDebounce)
        {
            softwareDebounceNs = UInt64(settings.debounce.nanosecondsClamped)
        } else {
            softwareDebounceNs = 0
        }
    }
}
