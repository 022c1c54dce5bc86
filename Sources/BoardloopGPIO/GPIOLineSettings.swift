import Boardloop

/// The edge of one event: the line's logical value went low→high or high→low.
public enum GPIOEdge: Sendable, Equatable, CustomStringConvertible {
    case rising, falling

    /// The logical level the line has after this edge.
    public var level: Bool { self == .rising }

    public init(to level: Bool) { self = level ? .rising : .falling }

    public var description: String { self == .rising ? "rising" : "falling" }
}

/// Which edges of an input are reported.
public enum GPIOEdgeDetection: Sendable, Equatable, CustomStringConvertible {
    case none, rising, falling, both

    /// Whether an edge of this kind is reported.
    public func includes(_ edge: GPIOEdge) -> Bool {
        switch self {
        case .none: false
        case .both: true
        case .rising: edge == .rising
        case .falling: edge == .falling
        }
    }

    public var description: String {
        switch self {
        case .none: "none"
        case .rising: "rising"
        case .falling: "falling"
        case .both: "both"
        }
    }
}

public enum GPIODirection: Sendable, Equatable, CustomStringConvertible {
    case input, output
    public var description: String { self == .input ? "input" : "output" }
}

/// Pull resistor setting.
public enum GPIOBias: Sendable, Equatable, CustomStringConvertible {
    /// Leave the line's bias as it is.
    case asIs
    case disabled, pullUp, pullDown

    public var description: String {
        switch self {
        case .asIs: "as-is"
        case .disabled: "disabled"
        case .pullUp: "pull-up"
        case .pullDown: "pull-down"
        }
    }
}

/// Output driver setting.
public enum GPIODrive: Sendable, Equatable, CustomStringConvertible {
    case pushPull, openDrain, openSource

    public var description: String {
        switch self {
        case .pushPull: "push-pull"
        case .openDrain: "open-drain"
        case .openSource: "open-source"
        }
    }
}

/// How one line is requested. Values and edges are logical: with
/// `activeLow`, a low wire reads `true` and a high→low wire change is a
/// rising edge.
public struct GPIOLineSettings: Sendable, Equatable, CustomStringConvertible {
    public var direction: GPIODirection
    /// Inputs only.
    public var edgeDetection: GPIOEdgeDetection
    public var bias: GPIOBias
    /// Outputs only.
    public var drive: GPIODrive
    public var activeLow: Bool
    /// Inputs only: an edge is reported once the line has held its new
    /// level this long (by the kernel with libgpiod 2.x, in whole
    /// microseconds, rounded up; in software on the run loop with 1.6 and
    /// the mock). Zero: no debouncing. At most `maximumDebounce`.
    /// The two differ in the timestamp: the kernel stamps the edge when it
    /// confirms the level (the end of the period); software debounce keeps
    /// the timestamp of the edge that began the level (so `latency(of:)`
    /// includes the period). See `GPIOCapabilities.debouncing`.
    public var debounce: Duration
    /// Outputs only: the logical value the line takes when requested.
    public var outputValue: Bool

    public init(
        direction: GPIODirection, edgeDetection: GPIOEdgeDetection = .none, bias: GPIOBias = .asIs,
        drive: GPIODrive = .pushPull, activeLow: Bool = false, debounce: Duration = .zero, outputValue: Bool = false
    ) {
        self.direction = direction
        self.edgeDetection = edgeDetection
        self.bias = bias
        self.drive = drive
        self.activeLow = activeLow
        self.debounce = debounce
        self.outputValue = outputValue
    }

    /// An input, with edge detection, bias, active-low and debounce.
    public static func input(
        edges: GPIOEdgeDetection = .none, bias: GPIOBias = .asIs, activeLow: Bool = false, debounce: Duration = .zero
    ) -> GPIOLineSettings {
        GPIOLineSettings(direction: .input, edgeDetection: edges, bias: bias, activeLow: activeLow, debounce: debounce)
    }

    /// An output with its initial logical value.
    public static func output(
        _ initialValue: Bool = false, drive: GPIODrive = .pushPull, bias: GPIOBias = .asIs, activeLow: Bool = false
    ) -> GPIOLineSettings {
        GPIOLineSettings(direction: .output, bias: bias, drive: drive, activeLow: activeLow, outputValue: initialValue)
    }

    /// The longest debounce period accepted: 4000 s (the v2 uAPI's
    /// `debounce_period_us` is 32 bits of microseconds, at most about 4295 s;
    /// the same limit applies to software debounce, so code runs on either).
    public static let maximumDebounce: Duration = .seconds(4000)

    /// Why these settings cannot be requested, or nil when they can.
    public var invalidReason: String? {
        if direction == .output {
            if edgeDetection != .none { return "edge detection (\(edgeDetection)) on an output" }
            if debounce != .zero { return "debounce on an output" }
        } else {
            if drive != .pushPull { return "\(drive) drive on an input (drive applies to outputs)" }
        }
        if debounce < .zero { return "negative debounce period \(debounce)" }
        if debounce > Self.maximumDebounce {
            return "debounce period \(debounce) is above the limit of \(Self.maximumDebounce) "
                + "(GPIOLineSettings.maximumDebounce; the kernel takes the period as a 32-bit count of microseconds)"
        }
        return nil
    }

    public var description: String {
        var parts = [direction.description]
        if direction == .input {
            if edgeDetection != .none { parts.append("edges: \(edgeDetection)") }
            if debounce != .zero { parts.append("debounce: \(debounce)") }
        } else {
            parts.append("initial: \(outputValue ? 1 : 0)")
            if drive != .pushPull { parts.append(drive.description) }
        }
        if bias != .asIs { parts.append("bias: \(bias)") }
        if activeLow { parts.append("active-low") }
        return parts.joined(separator: ", ")
    }
}

/// A line given by offset (`17`) or by name (`"BUTTON"`).
public enum GPIOLineSelector: Hashable, Sendable, ExpressibleByIntegerLiteral, ExpressibleByStringLiteral,
    CustomStringConvertible
{
    case offset(UInt32)
    case name(String)

    public init(integerLiteral value: UInt32) { self = .offset(value) }
    public init(stringLiteral value: String) { self = .name(value) }

    public var description: String {
        switch self {
        case let .offset(o): "\(o)"
        case let .name(n): "\"\(n)\""
        }
    }
}
