import Boardloop

/// What a backend's kernel/library can do; the GPIO layer fills the gaps
/// (software debounce, inferred loss) where a bit is missing.
public struct GPIOCapabilities: OptionSet, Sendable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// Events carry global and per-line sequence numbers: gaps show loss.
    public static let sequenceNumbers = GPIOCapabilities(rawValue: 1 << 0)
    /// The kernel debounces; otherwise the run loop does, with timers.
    public static let kernelDebounce = GPIOCapabilities(rawValue: 1 << 1)
    /// Line info reports edge detection and debounce.
    public static let lineInfoEdges = GPIOCapabilities(rawValue: 1 << 2)
    /// Reconfiguring keeps the lines requested throughout.
    public static let atomicReconfigure = GPIOCapabilities(rawValue: 1 << 3)
    /// The kernel event buffer size can be chosen per request.
    public static let eventBufferSize = GPIOCapabilities(rawValue: 1 << 4)
    /// The chip going away wakes a poller at once (EPOLLERR/EPOLLHUP or a
    /// read error); without it the request polls for it (see
    /// `GPIOLineRequest.vanishCheckInterval`).
    public static let vanishWakesPoller = GPIOCapabilities(rawValue: 1 << 5)

    /// How lost events are counted with these capabilities.
    public var lossCounting: GPIOLossCounting { contains(.sequenceNumbers) ? .exact : .lowerBound }
    /// Where debounce periods are applied with these capabilities.
    public var debouncing: GPIODebouncing { contains(.kernelDebounce) ? .kernel : .runLoop }

    public var description: String {
        var parts: [String] = []
        if contains(.sequenceNumbers) { parts.append("sequenceNumbers") }
        if contains(.kernelDebounce) { parts.append("kernelDebounce") }
        if contains(.lineInfoEdges) { parts.append("lineInfoEdges") }
        if contains(.atomicReconfigure) { parts.append("atomicReconfigure") }
        if contains(.eventBufferSize) { parts.append("eventBufferSize") }
        if contains(.vanishWakesPoller) { parts.append("vanishWakesPoller") }
        return "[" + parts.joined(separator: ", ") + "]"
    }
}

/// How a backend's lost events are counted (`GPIOCapabilities.lossCounting`).
public enum GPIOLossCounting: Sendable, Equatable {
    /// From gaps in the kernel's sequence numbers: every lost event is
    /// counted, in the batch after the gap (libgpiod 2.x; the mock's v2 model).
    case exact
    /// Inferred: a repeated edge on a both-edges line, a full kernel FIFO and
    /// a level that disagrees with the last kept edge. At least one loss is
    /// proven; how many more were dropped is unknowable (libgpiod 1.6, whose
    /// v1 uAPI has no sequence numbers; the mock's v1 model).
    case lowerBound
}

/// Where a line's debounce period is applied (`GPIOCapabilities.debouncing`).
public enum GPIODebouncing: Sendable, Equatable {
    /// By the kernel (libgpiod 2.x: `debounce_period_us`); the event is
    /// stamped when the kernel confirms the level, at the end of the period.
    case kernel
    /// By the request on its run loop, one timer per line (libgpiod 1.6 and
    /// the mock); the event keeps the timestamp of the edge that began the
    /// level, so its latency includes the period.
    case runLoop
}

/// One line of a request, resolved to an offset, as a driver receives it.
/// `settings.debounce` is zero unless the backend debounces in the kernel,
/// and `settings.edgeDetection` is `.both` where the layer debounces in
/// software.
package struct GPIODriverLineConfig: Sendable, Equatable {
    package var offset: UInt32
    package var settings: GPIOLineSettings

    package init(offset: UInt32, settings: GPIOLineSettings) {
        self.offset = offset
        self.settings = settings
    }
}

/// What one non-blocking bulk read saw besides the events.
package struct GPIOReadStatus: Sendable, Equatable {
    /// Events stored in the caller's buffer.
    package var count: Int = 0
    /// The chip went away.
    package var vanished = false
    /// The buffer filled; more events wait (the fd stays readable).
    package var more = false
    /// Lines whose kernel FIFO was found full (1.6 style); the driver wrote
    /// their offsets to the `fullOffsets` buffer given to `readEvents`.
    package var fullCount: Int = 0

    package init() {}
}

/// A source of chips: the libgpiod backend, or a mock board.
public protocol GPIOBackend: AnyObject, Sendable {
    /// e.g. "libgpiod 1.6.3" or "mock".
    var backendName: String { get }
    var capabilities: GPIOCapabilities { get }
    /// Every chip, in order (gpiochip0 first).
    func listChips() throws(GPIOError) -> [GPIOChipInfo]
}

/// What the package's backends add to `GPIOBackend`: opening a chip through
/// the driver protocols, which stay inside the package.
package protocol GPIOChipOpening: GPIOBackend {
    /// Opens a chip by path, name (`gpiochip0`) or label.
    func openChip(_ chip: String) throws(GPIOError) -> any GPIOChipDriver
}

/// An open chip of a backend.
package protocol GPIOChipDriver: AnyObject {
    var info: GPIOChipInfo { get }
    func lineInfo(offset: UInt32) throws(GPIOError) -> GPIOLineInfo
    /// The offset of the line called `name`, or nil.
    func findLine(named name: String) throws(GPIOError) -> UInt32?
    /// Requests lines; `eventBufferCapacity` events are reserved for reads.
    func requestLines(_ lines: [GPIODriverLineConfig], consumer: String, eventBufferCapacity: Int) throws(GPIOError)
        -> any GPIORequestDriver
    /// Closes the caller's handle (requests keep what they need).
    func close()
}

/// A live request of a backend. The event path (`readEvents`, `getValues`,
/// `setValues`) must not allocate.
package protocol GPIORequestDriver: AnyObject {
    /// Readable while events wait; -1 when no line detects edges.
    var eventFD: Int32 { get }
    /// Whether events wait to be read (`eventFD` is readable), without
    /// reading them or blocking.
    var hasPendingEvents: Bool { get }
    /// Logical values of all lines, in request order.
    func getValues(into values: UnsafeMutableBufferPointer<Int32>) throws(GPIOError)
    /// Sets logical values of the given lines.
    func setValues(offsets: UnsafeBufferPointer<UInt32>, values: UnsafeBufferPointer<Int32>) throws(GPIOError)
    /// New settings for the same lines, same order.
    func reconfigure(_ lines: [GPIODriverLineConfig]) throws(GPIOError)
    /// Reads waiting events without blocking.
    func readEvents(into events: UnsafeMutableBufferPointer<GPIOEdgeEvent>, fullOffsets: UnsafeMutableBufferPointer<UInt32>)
        throws(GPIOError) -> GPIOReadStatus
    /// Releases the lines. Idempotent.
    func release()
}
