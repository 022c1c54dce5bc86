/// What a chip is: its device name, label, path and size.
public struct GPIOChipInfo: Sendable, Equatable, CustomStringConvertible {
    /// The device name, e.g. `gpiochip0`.
    public var name: String
    /// The label the driver gives, e.g. `pinctrl-bcm2711`, `pinctrl-rp1`,
    /// or a gpio-sim label.
    public var label: String
    /// The character device, e.g. `/dev/gpiochip0` (a mock path for mock chips).
    public var path: String
    public var lineCount: Int

    public init(name: String, label: String, path: String, lineCount: Int) {
        self.name = name
        self.label = label
        self.path = path
        self.lineCount = lineCount
    }

    /// `name [label]`, the form messages use.
    public var description: String { label.isEmpty ? name : "\(name) [\(label)]" }
}

/// What the kernel says about one line.
public struct GPIOLineInfo: Sendable, Equatable, CustomStringConvertible {
    public var offset: UInt32
    /// The line's name from the device tree / gpio-sim, or "" when unnamed.
    public var name: String
    /// Who holds the line ("" when free or when the holder gave no name).
    public var consumer: String
    public var used: Bool
    public var direction: GPIODirection
    public var activeLow: Bool
    public var bias: GPIOBias
    public var drive: GPIODrive
    /// nil when the library cannot tell (libgpiod 1.6).
    public var edgeDetection: GPIOEdgeDetection?
    /// The kernel's debounce period (zero under 1.6, which has none).
    public var debounce: Duration
    /// The clock of the line's edge event timestamps; nil when the library
    /// cannot tell (libgpiod 1.6, whose v1 uAPI stamps with CLOCK_MONOTONIC).
    /// boardloop requests CLOCK_MONOTONIC, the run loop's clock.
    public var eventClock: GPIOEventClock?

    public init(
        offset: UInt32, name: String, consumer: String, used: Bool, direction: GPIODirection, activeLow: Bool,
        bias: GPIOBias, drive: GPIODrive, edgeDetection: GPIOEdgeDetection?, debounce: Duration,
        eventClock: GPIOEventClock? = nil
    ) {
        self.eventClock = eventClock
        self.offset = offset
        self.name = name
        self.consumer = consumer
        self.used = used
        self.direction = direction
        self.activeLow = activeLow
        self.bias = bias
        self.drive = drive
        self.edgeDetection = edgeDetection
        self.debounce = debounce
    }

    public var description: String {
        var s = "line \(offset)"
        s += name.isEmpty ? " unnamed" : " \"\(name)\""
        s += used ? (consumer.isEmpty ? " used" : " used by \"\(consumer)\"") : " unused"
        s += " \(direction)"
        if activeLow { s += " active-low" }
        if bias != .asIs { s += " bias=\(bias)" }
        if drive != .pushPull { s += " \(drive)" }
        if let e = edgeDetection, e != .none { s += " edges=\(e)" }
        if debounce != .zero { s += " debounce=\(debounce)" }
        if let c = eventClock, c != .monotonic { s += " clock=\(c)" }
        return s
    }
}

/// The clock a line's edge event timestamps come from (line info, 2.x).
public enum GPIOEventClock: Sendable, Equatable, CustomStringConvertible {
    /// CLOCK_MONOTONIC: the run loop's clock, what boardloop requests.
    case monotonic
    /// CLOCK_REALTIME.
    case realtime
    /// A hardware timestamp engine (HTE).
    case hardware

    public var description: String {
        switch self {
        case .monotonic: "monotonic"
        case .realtime: "realtime"
        case .hardware: "hte"
        }
    }
}
