import BoardControl
import Boardloop
import BoardloopGPIO
import BoardSupport

public enum Trigger: Sendable, Equatable {
    /// A logical edge (after active-low and filters).
    case edge(GPIOEdgeDetection)
    /// The line became active (logical rising edge).
    case press
    /// The line became inactive (logical falling edge).
    case release
    /// Pressed for at least `min` and at most `max`; fires on release.
    case click(min: Duration, max: Duration)
    /// `count` presses, first to last within `within`; fires on the last press.
    case multiPress(count: Int, within: Duration)
    /// Held for `delay`; then every `repeat` while still held.
    case hold(delay: Duration, repeat: Duration?)
    /// One alternative of the line's gesture group; a `hold` may repeat
    /// every `repeat` while still held (as `hold(delay:repeat:)`).
    case gesture(GestureKind, repeat: Duration? = nil)
}

/// What each trigger kind is, in one place: how it reads in the summary
/// and the trace, the edges it needs, whether it keeps deadlines; its
/// behaviour is `TriggerState` below. A new kind is a case here (with its
/// facts and behaviour) and its syntax in the parser.
extension Trigger {
    /// In `boardd --check`'s summary ("click 50ms-1s").
    public var summary: String {
        switch self {
        case let .edge(e): "edge \(e)"
        case .press: "press"
        case .release: "release"
        case let .click(mn, mx): "click \(DurationText.format(mn))-\(DurationText.format(mx))"
        case let .multiPress(n, w): "\(n) presses within \(DurationText.format(w))"
        case let .hold(d, r): "hold \(DurationText.format(d))" + (r.map { ", repeat every \(DurationText.format($0))" } ?? "")
        case let .gesture(k, r): "gesture \(k.rawValue)" + (r.map { ", repeat every \(DurationText.format($0))" } ?? "")
        }
    }

    /// In a reaction's trace line ("button: double click -> fan").
    var traceName: String {
        switch self {
        case let .edge(e): "\(e) edge"
        case .press: "press"
        case .release: "release"
        case .click: "click"
        case let .multiPress(n, _): "\(n) presses"
        case .hold: "hold"
        case let .gesture(g, _): g.traceName
        }
    }

    /// The edges the trigger needs its line to detect, and its name in the
    /// config for the error when the line does not (nil: a gesture, which
    /// its group checks).
    var edgesNeeded: (edges: GPIOEdgeDetection, what: String)? {
        switch self {
        case let .edge(e): e == .both ? (.both, "edge: both") : (e, "edge: \(e)")
        case .press: (.rising, "press")
        case .release: (.falling, "release")
        case .click: (.both, "click")
        case .multiPress: (.rising, "multi_press")
        case .hold: (.both, "hold")
        case .gesture: nil
        }
    }

    /// Whether the trigger sets deadlines on its line's timer (a gesture's
    /// are its group's: `InputLine.needsTimer`).
    var hasDeadlines: Bool {
        switch self {
        case .hold: true
        case .edge, .press, .release, .click, .multiPress, .gesture: false
        }
    }
}

extension GestureKind {
    /// In a trace line ("double click").
    var traceName: String {
        switch self {
        case .doubleClick: "double click"
        case .tripleClick: "triple click"
        case .click, .hold: rawValue
        }
    }
}

/// No deadline.
let never: UInt64 = .max

/// The state of one reaction's trigger on its line. Times are the events'
/// kernel timestamps (ns, CLOCK_MONOTONIC), so events delivered late (held
/// through a sequence) are judged by when they happened.
struct TriggerState {
    enum Kind {
        /// An edge, a press or a release: whether each logical edge fires.
        case edges(rising: Bool, falling: Bool)
        case click(min: UInt64, max: UInt64)
        case multiPress(count: Int, within: UInt64)
        case hold(delay: UInt64, repeat: UInt64)
        /// Gestures are decided by the line's gesture machine.
        case gesture(GestureKind)
    }
    let reaction: Int
    let kind: Kind
    var pressedAt: UInt64 = never
    var presses = 0
    var firstPress: UInt64 = 0
    var deadline: UInt64 = never
    /// Hold: fires since the press; `repeatCount` is the count of the
    /// latest fire (0 at the hold itself, 1 at the first repeat, …).
    private var holdFires: Int32 = 0
    private(set) var repeatCount: Int32 = 0

    init(reaction: Int, trigger: Trigger) {
        self.reaction = reaction
        hasDeadlines = trigger.hasDeadlines
        switch trigger {
        case let .edge(e): kind = .edges(rising: e.includes(.rising), falling: e.includes(.falling))
        case .press: kind = .edges(rising: true, falling: false)
        case .release: kind = .edges(rising: false, falling: true)
        case let .click(lo, hi): kind = .click(min: lo.ns, max: hi.ns)
        case let .multiPress(n, w): kind = .multiPress(count: n, within: w.ns)
        case let .hold(d, r): kind = .hold(delay: d.ns, repeat: r?.ns ?? 0)
        case let .gesture(g, _): kind = .gesture(g)
        }
    }

    /// Whether the trigger sets deadlines on its line's timer.
    let hasDeadlines: Bool

    /// A logical edge at `t`; returns whether the trigger fires now.
    mutating func edge(_ rising: Bool, at t: UInt64) -> Bool {
        switch kind {
        case let .edges(onRising, onFalling): return rising ? onRising : onFalling
        case let .click(lo, hi):
            if rising {
                pressedAt = t
                return false
            }
            defer { pressedAt = never }
            guard pressedAt != never, t >= pressedAt else { return false }
            let d = t - pressedAt
            return d >= lo && d <= hi
        case let .multiPress(count, within):
            guard rising else { return false }
            if presses == 0 || t &- firstPress > within {
                presses = 1
                firstPress = t
            } else {
                presses += 1
            }
            if presses >= count {
                presses = 0
                return true
            }
            return false
        case let .hold(delay, _):
            deadline = rising ? t &+ delay : never
            holdFires = 0
            return false
        case .gesture: return false
        }
    }

    /// The deadline `deadline` passed: returns whether the trigger fires,
    /// and moves the deadline on (hold repeat) or clears it.
    mutating func deadlinePassed() -> Bool {
        guard case let .hold(_, rep) = kind else {
            deadline = never
            return false
        }
        deadline = rep > 0 ? deadline &+ rep : never
        repeatCount = holdFires
        if holdFires < .max { holdFires += 1 }
        return true
    }
}

/// A reaction on one alternative of the line's gesture group. A hold that
/// repeats keeps its own deadline and count: it fires again every
/// `repeatEvery` after the hold while the line stays pressed.
struct GestureReaction {
    let kind: GestureKind
    let reaction: Int
    /// ns; 0 when the reaction does not repeat.
    let repeatEvery: UInt64
    var deadline: UInt64 = never
    /// The count the next repeat carries (1 for the first repeat).
    var count: Int32 = 0

    init(kind: GestureKind, reaction: Int, repeatEvery: Duration?) {
        self.kind = kind
        self.reaction = reaction
        self.repeatEvery = repeatEvery?.ns ?? 0
    }

    /// The hold fired at `t`: the repeats start.
    mutating func held(at t: UInt64) {
        guard repeatEvery > 0 else { return }
        deadline = t &+ repeatEvery
        count = 1
    }

    /// The deadline passed: returns the count of this repeat and moves on.
    mutating func repeatDue() -> Int32 {
        let c = count
        deadline &+= repeatEvery
        if count < .max { count += 1 }
        return c
    }

    /// The line was released (or pressed again): no more repeats.
    mutating func cancel() { deadline = never }
}

/// A line's gesture group: per interaction exactly one alternative fires.
///
/// All plain values (the group's alternatives as a bit set): the line's
/// deadline checks read it in place, and a copy is a few words, with no
/// retain.
struct GestureMachine {
    /// The alternatives the group has: a bit per click count (1 to 3).
    let clickKinds: UInt8
    let clickMin: UInt64, clickMax: UInt64, gap: UInt64, hold: UInt64
    let hasHold: Bool
    let maxClicks: Int
    enum State { case idle, pressed, released, holding }
    var state = State.idle
    var pressedAt: UInt64 = 0
    var releasedAt: UInt64 = 0
    var clicks = 0
    var deadline: UInt64 = never

    init(_ g: GestureGroup) {
        clickKinds = g.kinds.reduce(0) { $1.clicks > 0 ? $0 | UInt8(1 << $1.clicks) : $0 }
        clickMin = g.clickMin.ns
        clickMax = g.clickMax.ns
        gap = g.gap.ns
        hold = g.hold.ns
        hasHold = g.kinds.contains(.hold)
        maxClicks = g.kinds.map(\.clicks).max() ?? 0
    }

    /// A logical edge at `t`; returns the gesture it decides, if any.
    mutating func edge(_ rising: Bool, at t: UInt64) -> GestureKind? {
        if rising {
            switch state {
            case .idle, .released:
                if state == .idle { clicks = 0 }
                state = .pressed
                pressedAt = t
                deadline = hasHold ? t &+ hold : never
            case .pressed, .holding: break
            }
            return nil
        }
        switch state {
        case .holding:
            state = .idle
            deadline = never
            return nil
        case .pressed:
            let d = t &- pressedAt
            if d < clickMin {
                // A bounce or a brush: as if the press had not happened.
                state = clicks == 0 ? .idle : .released
                deadline = clicks == 0 ? never : releasedAt &+ gap
                return nil
            }
            if d > clickMax {
                // Too long for a click, and no hold alternative took it.
                state = .idle
                deadline = never
                return nil
            }
            clicks += 1
            if clicks >= maxClicks {
                state = .idle
                deadline = never
                return Self.kind(clicks)
            }
            state = .released
            releasedAt = t
            deadline = t &+ gap
            return nil
        case .idle, .released:
            return nil
        }
    }

    /// The deadline passed (a hold, or the gap after the last click).
    mutating func deadlinePassed() -> GestureKind? {
        deadline = never
        switch state {
        case .pressed:
            state = .holding
            return .hold
        case .released:
            state = .idle
            let k = Self.kind(clicks)
            if let k, clickKinds & UInt8(1 << k.clicks) != 0 { return k }
            return nil  // a count of clicks no alternative asks for
        case .idle, .holding:
            return nil
        }
    }

    static func kind(_ clicks: Int) -> GestureKind? {
        switch clicks {
        case 1: .click
        case 2: .doubleClick
        case 3: .tripleClick
        default: nil
        }
    }
}

extension Duration {
    var ns: UInt64 { UInt64(Swift.max(0, nanosecondsClamped)) }
}
