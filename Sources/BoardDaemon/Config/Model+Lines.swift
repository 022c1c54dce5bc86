import Boardloop
import BoardSupport
import BoardloopGPIO

// The config model of a line: where it is, its settings as an input
// (filters, held events, rate limit, gesture group) or an output.

/// Where a line is: a chip and an offset (every board pin resolves to a
/// chip label and offset), or a name the runtime looks up when it starts
/// (the generic board's `line_name`).
public enum LineAddress: Sendable, Equatable, CustomStringConvertible {
    case offset(chip: ChipRef, offset: UInt32)
    case named(chip: ChipRef?, name: String)

    public var description: String {
        switch self {
        case let .offset(c, o): "\(c):\(o)"
        case let .named(c?, n): "\(c):\"\(n)\""
        case let .named(nil, n): "\"\(n)\" (any chip)"
        }
    }

    /// The chip label and offset, when the address is one.
    public var labelAndOffset: (label: String, offset: UInt32)? {
        if case let .offset(.label(l), o) = self { return (l, o) }
        return nil
    }
}

/// A chip as a config names it: by label (boards always do), by name
/// (`gpiochip0`) or by path (`/dev/gpiochip0`).
public enum ChipRef: Sendable, Equatable, Hashable, CustomStringConvertible {
    case label(String), name(String), path(String)

    /// The text `GPIOChip.open` takes (it accepts all three).
    public var text: String {
        switch self {
        case let .label(s), let .name(s), let .path(s): s
        }
    }
    public var description: String { text }
}

/// One named line of the config.
public struct LineConfig: Sendable, Equatable {
    public var name: String
    /// The pin as the config wrote it (`GPIO17`, `PIN11`), if by pin.
    public var pin: String?
    /// The canonical board name of the pin (`GPIO17`) and its header number.
    public var boardPin: String?
    public var physical: Int?
    public var address: LineAddress
    /// How the line is requested from the GPIO layer (direction, edges,
    /// bias, drive, active-low, debounce, initial output value).
    public var settings: GPIOLineSettings
    /// Inputs: the filters after the (kernel or software) debounce.
    public var filters: InputFilters
    /// Outputs: the value set on shutdown, if any (`nil`: left as it is).
    public var safeValue: Bool?
    public var priority: PriorityID
    public var rateLimit: RateLimit?
    /// Inputs: the gesture group (exactly one alternative per interaction).
    public var gestures: GestureGroup?
    /// Inputs: how events are kept while the line is held (a mode that
    /// does not admit its priority, a rate limit).
    public var held: HeldEvents = HeldEvents()
    /// Inputs a mode can hold: how their held events are kept (nil: no mode holds the line).
    public var heldPlan: HeldPlan?
    /// The loop that owns the line (requests it, gets its events, writes it).
    public var loop: LoopID

    public init(
        name: String, pin: String?, boardPin: String?, physical: Int?, address: LineAddress, settings: GPIOLineSettings,
        filters: InputFilters, safeValue: Bool?, priority: PriorityID, rateLimit: RateLimit?, gestures: GestureGroup?,
        held: HeldEvents = HeldEvents(), loop: LoopID
    ) {
        self.name = name
        self.pin = pin
        self.boardPin = boardPin
        self.physical = physical
        self.address = address
        self.settings = settings
        self.filters = filters
        self.safeValue = safeValue
        self.priority = priority
        self.rateLimit = rateLimit
        self.gestures = gestures
        self.held = held
        self.loop = loop
    }

    public var isInput: Bool { settings.direction == .input }
    public var isOutput: Bool { settings.direction == .output }
}

/// Input filters, applied in this order after debounce: `delayedOn` and
/// `delayedOff` (a new level counts once it has held that long), then
/// `settle` (a change passes at once; changes in the following window are
/// ignored and the level at its end is reported if it differs).
public struct InputFilters: Sendable, Equatable {
    public var delayedOn: Duration = .zero
    public var delayedOff: Duration = .zero
    public var settle: Duration = .zero
    /// At start (and when a reload requests the line anew), a line already
    /// active delivers a rising edge through the filters, as if it had just
    /// become active (a thermostat's `press`); false: the level at start is
    /// taken as it is and fires nothing (a button held at boot).
    public var initialEdge = false
    public init(delayedOn: Duration = .zero, delayedOff: Duration = .zero, settle: Duration = .zero, initialEdge: Bool = false) {
        self.delayedOn = delayedOn
        self.delayedOff = delayedOff
        self.settle = settle
        self.initialEdge = initialEdge
    }
    public var isEmpty: Bool { delayedOn == .zero && delayedOff == .zero && settle == .zero }
}

/// Where a held input's events wait. The kernel keeps them first: libgpiod
/// 2.x (uAPI v2) keeps `kernelBuffer` events for the line's request (the
/// kernel caps a request's buffer at `GPIO_V2_LINES_MAX * 16` = 1024 events,
/// `linereq_create()` in gpiolib-cdev.c); libgpiod 1.6 (uAPI v1) keeps a
/// fixed 16 per line whatever is asked. With `drain` > 0, while the line is
/// held, its events are read into a user-space ring of that many events
/// (nothing is dispatched) and delivered, in order, when the line is
/// admitted again. They are read as they come (the fd stays in every mode),
/// or, with `drainEvery`, by a timer of that period in the modes that hold
/// the line, which shares its wake-ups with the loop's other timers.
///
/// A line a sequence can hold gets a drain ring by default (when the config
/// does not set `drain`): sized for the longest hold at the line's
/// `maxRate`, and read with the holding modes' task's period when a task
/// runs in them (see `HeldPlan`). `drain: 0` opts out.
public struct HeldEvents: Sendable, Equatable {
    /// The largest kernel buffer a v2 request can have.
    public static let kernelBufferCap = 1024
    /// The largest drain ring.
    public static let maximumDrain = 1 << 20
    /// The periods a drain timer may have.
    public static let drainPeriods: ClosedRange<Duration> = .milliseconds(1) ... .seconds(10)
    /// The edge rate a held line is planned for when `max_rate` is not set
    /// (edges a second, both edges counted).
    public static let defaultMaxRate = 1000
    /// The rates `max_rate` may give.
    public static let maxRates: ClosedRange<Int> = 1...10_000_000
    /// A defaulted drain ring holds this many times the events of the
    /// longest hold at `maxRate`.
    public static let defaultRingMargin = 2
    /// A hold no sequence bounds (a mode a `mode:` action enters) is
    /// planned as this long.
    public static let unboundedHold = Duration.seconds(1)
    /// The kernel buffer libgpiod 1.6 (uAPI v1) keeps per line.
    public static let v1KernelBuffer = 16
    /// Events the kernel keeps for the line's request (v2; rounded up to a power of two).
    public var kernelBuffer: Int = 64
    /// The user-space drain ring, in events (0: off).
    public var drain: Int = 0
    /// The drain timer's period; zero: read at every readiness of the fd.
    public var drainEvery: Duration = .zero
    /// The fastest the line's edges come (`max_rate`, edges a second); nil:
    /// `defaultMaxRate`.
    public var maxRate: Int?
    /// Which of `buffer`, `drain` and `drain_every` the config sets (the
    /// rest may be chosen for a line a mode holds).
    public var bufferSet = false, drainSet = false, drainEverySet = false
    public init(
        kernelBuffer: Int = 64, drain: Int = 0, drainEvery: Duration = .zero, maxRate: Int? = nil, bufferSet: Bool = false,
        drainSet: Bool = false, drainEverySet: Bool = false
    ) {
        self.kernelBuffer = kernelBuffer
        self.drain = drain
        self.drainEvery = drainEvery
        self.maxRate = maxRate
        self.bufferSet = bufferSet
        self.drainSet = drainSet
        self.drainEverySet = drainEverySet
    }
    /// The rate the line is planned for.
    public var rate: Int { maxRate ?? Self.defaultMaxRate }
    /// The events a v2 kernel keeps for the line's request: `kernelBuffer`
    /// rounded up to a power of two, at most 1024.
    public var kernelEvents: Int {
        var p = 2
        while p < min(kernelBuffer, Self.kernelBufferCap) { p <<= 1 }
        return p
    }
    /// The events the line can keep while held (libgpiod 2.x): the drain
    /// ring (which is at least the kernel buffer), or the kernel buffer.
    public var capacity: Int { drain > 0 ? max(drain, kernelBuffer) : kernelEvents }
    /// Held events are read at every readiness of the line's fd (`drain`
    /// alone): the fd stays in every mode.
    public var drainsOnReadiness: Bool { drain > 0 && drainEvery == .zero }
    /// Held events are read by a timer (`drain` with `drain_every`).
    public var drainsOnTimer: Bool { drain > 0 && drainEvery > .zero }
    /// The drain timer's tolerance: half its period. The timer may fire that
    /// much late, which lets it fire in a pass another timer (a task's) wakes
    /// the loop for instead of waking the loop itself.
    public var drainTolerance: Duration { drainEvery / 2 }
}

/// How a line a mode can hold keeps its events: what `boardd --check`
/// shows for it, and what was chosen where the config says nothing.
public struct HeldPlan: Sendable, Equatable {
    /// The modes entered on the line's loop that hold it (do not admit its priority).
    public var modes: [ModeID]
    /// The longest hold: one run of the longest sequence in such a mode
    /// (the sum of its waits; a queued sequence's queue too); nil: no
    /// sequence bounds it (a `mode:` action enters such a mode).
    public var longestHold: Duration?
    /// What makes it: `sequence 'pour'`, `a mode action of reaction 'x'`.
    public var holdBy: String
    /// The drain ring was chosen (the config does not set `drain`).
    public var drainDefaulted: Bool
    /// The drain period was chosen: the period of this task, which runs in
    /// the holding modes.
    public var drainEveryTask: String?
    /// The kernel buffer was raised to hold 1.5 drain periods at the rate.
    public var bufferRaised: Bool

    /// The events that can come during the longest hold at `rate` edges a
    /// second (nil when no sequence bounds the hold).
    public func expected(rate: Int) -> Int? { longestHold.map { HeldPlan.events(rate: rate, over: $0) } }

    /// `rate` edges a second over `d`, rounded up.
    public static func events(rate: Int, over d: Duration) -> Int {
        let ns = Double(d.nanosecondsClamped)
        let n = (Double(rate) * ns / 1e9).rounded(.up)
        return n >= Double(Int.max / 4) ? Int.max / 4 : Int(n)
    }
}

/// At most `events` events per `period`; more are held and delivered later.
public struct RateLimit: Sendable, Equatable {
    public var events: Int
    public var period: Duration
}

/// A line's gesture group: per interaction (press … release … pause)
/// exactly one of `kinds` fires, decided as early as the timing allows.
public struct GestureGroup: Sendable, Equatable {
    public var kinds: [GestureKind]
    /// A press shorter than this is ignored (bounce, a brush).
    public var clickMin: Duration
    /// A press longer than this (and shorter than `hold`) is no click.
    public var clickMax: Duration
    /// The longest pause between the clicks of a double or triple click.
    public var gap: Duration
    /// Held this long: a hold.
    public var hold: Duration

    /// How long after the deciding moment (release, or press for hold) the
    /// gesture is known: a click must wait `gap` when a longer multi-click
    /// is in the group; the longest multi-click in the group and a hold are
    /// decided at once.
    public func decisionLatency(_ kind: GestureKind) -> Duration {
        switch kind {
        case .hold: return .zero
        case .click, .doubleClick, .tripleClick:
            let longer = kinds.contains { $0.clicks > kind.clicks }
            return longer ? gap : .zero
        }
    }
}

public enum GestureKind: String, Sendable, Equatable, CaseIterable {
    case click, doubleClick = "double_click", tripleClick = "triple_click", hold
    public var clicks: Int {
        switch self {
        case .click: 1
        case .doubleClick: 2
        case .tripleClick: 3
        case .hold: 0
        }
    }
}
