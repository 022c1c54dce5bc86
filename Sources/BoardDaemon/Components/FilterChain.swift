/// `delayed_on` / `delayed_off` (ESPHome's binary-sensor filters of the
/// same names): a change passes on once the line has stayed at its new
/// level for the delay of its direction; a change back before then cancels
/// it. A direction whose delay is zero passes at once.
///
/// Times are kernel timestamps in nanoseconds; the owner fires `deadline`
/// when its time comes (`deadlinePassed`), before any later edge.
struct DelayFilter: Equatable {
    let on: UInt64
    let off: UInt64
    /// The level waiting for its delay to pass.
    var pending: Bool
    var deadline: UInt64 = never

    init(on: UInt64, off: UInt64, level: Bool) {
        self.on = on
        self.off = off
        pending = level
    }

    var isActive: Bool { on > 0 || off > 0 }

    /// An edge at `t`, with `current` the level the next stage has: the
    /// level to pass on now, or nil (it waits for its delay, or it is the
    /// level the next stage already has and cancels a pending change).
    mutating func edge(_ rising: Bool, at t: UInt64, current: Bool) -> Bool? {
        if rising == current {
            deadline = never  // back to the level it has: the pending change is off
            return nil
        }
        let delay = rising ? on : off
        if delay == 0 {
            deadline = never
            return rising
        }
        pending = rising
        deadline = t &+ delay
        return nil
    }

    /// The delay passed: the level that now passes on.
    mutating func deadlinePassed() -> Bool {
        deadline = never
        return pending
    }
}

/// `settle`: the first change passes at once, then the line must settle for
/// the window; at its end the level it settled at passes if it differs
/// from the one reported (ESPHome's `settle`). A bouncing contact reports
/// one change per window at most, and never a level it did not end at.
struct SettleFilter: Equatable {
    let window: UInt64
    /// The end of the current window (changes inside it are looked at then).
    var end: UInt64 = 0
    var deadline: UInt64 = never

    init(window: UInt64) { self.window = window }

    /// A level `l` at `t` from the stage before, with `reported` the level
    /// reported last: the level to report now, or nil.
    mutating func edge(_ l: Bool, at t: UInt64, reported: Bool) -> Bool? {
        guard window > 0 else { return l }
        if t < end { return nil }  // inside the window: looked at when it ends
        guard l != reported else { return nil }
        end = t &+ window
        deadline = end
        return l
    }

    /// The window ended at `d` with the stage before at `level`: the level
    /// to report (a new window starts with it), or nil.
    mutating func deadlinePassed(at d: UInt64, level: Bool, reported: Bool) -> Bool? {
        deadline = never
        guard level != reported else { return nil }
        end = d &+ window
        deadline = end
        return level
    }
}

/// An input's filters in their order: the delays, then settle. One value,
/// so a reload that keeps the line's filters hands it on as it stands.
struct FilterChain: Equatable {
    var delay: DelayFilter
    var settle: SettleFilter
    /// The level after the delays: what settle sees.
    var stage: Bool

    init(_ f: InputFilters, level: Bool) {
        delay = DelayFilter(on: f.delayedOn.ns, off: f.delayedOff.ns, level: level)
        settle = SettleFilter(window: f.settle.ns)
        stage = level
    }

    /// The chain's next deadline (`never`: none).
    var deadline: UInt64 { min(delay.deadline, settle.deadline) }

    /// Every stage at `level` with nothing pending (the line's level was
    /// set from outside: at start, after a reload with new filters).
    mutating func reset(to level: Bool) {
        delay.pending = level
        delay.deadline = never
        settle.deadline = never
        stage = level
    }

    /// An edge at `t`; `reported` is the line's reported level. Returns
    /// the level to report now, or nil.
    mutating func edge(_ rising: Bool, at t: UInt64, reported: Bool) -> Bool? {
        if delay.isActive {
            guard let l = delay.edge(rising, at: t, current: stage) else { return nil }
            return stageChanged(l, at: t, reported: reported)
        }
        return stageChanged(rising, at: t, reported: reported)
    }

    /// The chain's deadline `d` passed (call it when `deadline == d`):
    /// the level to report at `d`, or nil.
    mutating func deadlinePassed(at d: UInt64, reported: Bool) -> Bool? {
        if delay.deadline == d {
            return stageChanged(delay.deadlinePassed(), at: d, reported: reported)
        }
        return settle.deadlinePassed(at: d, level: stage, reported: reported)
    }

    private mutating func stageChanged(_ l: Bool, at t: UInt64, reported: Bool) -> Bool? {
        stage = l
        return settle.edge(l, at: t, reported: reported)
    }
}
