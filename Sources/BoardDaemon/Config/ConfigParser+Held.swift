import BoardControl
import BoardSupport

// Held events by default: a line a sequence can hold keeps what comes while
// it is held. Where the config does not set `drain`, such a line gets a
// drain ring sized for its longest hold at its `max_rate`, read on the
// holding modes' task's period when one runs there; and where the config's
// own numbers say a buffer will overflow, a warning says so.

extension ConfigParser {
    /// `max_rate`: `4kHz`, `500Hz`, `1.5kHz`, `1MHz` (edges a second).
    func rate(_ x: YAMLReader.Entry) -> Int? {
        guard let text = r.string(x.value, x.path, what: "a rate such as 2kHz") else { return nil }
        let units: [(String, Double)] = [("MHz", 1e6), ("kHz", 1e3), ("Hz", 1)]
        func trim(_ s: Substring) -> String { String(s.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed()) }
        let t = trim(Substring(text))
        guard let (unit, scale) = units.first(where: { t.hasSuffix($0.0) }),
            let v = Double(trim(t.dropLast(unit.count))), v.isFinite
        else {
            let bare = Double(t) != nil
            r.error(
                x.value, x.path,
                bare ? "a rate needs a unit: write \(t)Hz (or kHz)" : "expected a rate such as 2kHz or 500Hz, found \(Echo(t))")
            return nil
        }
        let n = v * scale
        guard n == n.rounded(), n >= Double(HeldEvents.maxRates.lowerBound), n <= Double(HeldEvents.maxRates.upperBound) else {
            r.error(x.value, x.path, "out of range: a rate is a whole number of Hz from 1Hz to 10MHz")
            return nil
        }
        return Int(n)
    }

    /// The time a sequence's steps wait (an `if` counts its longer branch).
    static func waits(_ actions: [Action]) -> Duration {
        var total = Duration.zero
        for a in actions {
            switch a {
            case let .wait(d): total += d
            case let .ifThen(_, t, e): total += max(waits(t), waits(e))
            default: break
            }
        }
        return total
    }

    /// The modes `mode:` actions enter.
    static func modeActions(_ actions: [Action]) -> [ModeID] {
        actions.flatMap { a -> [ModeID] in
            switch a {
            case let .mode(m): return [m]
            case let .ifThen(_, t, e): return modeActions(t) + modeActions(e)
            default: return []
            }
        }
    }

    /// Plans each held line's events (see `HeldPlan`), then warns where a
    /// buffer will overflow.
    func planHeldEvents() {
        struct Hold {
            var mode: ModeID
            var loop: LoopID
            var length: Duration?
            var by: String
        }
        var holds: [Hold] = []
        for s in sequences {
            guard let m = s.mode, m != .default else { continue }
            var runs = 1
            if case let .queued(max) = s.policy { runs += max }  // the queued runs follow without leaving the mode
            holds.append(Hold(mode: m, loop: s.loop, length: Self.waits(s.steps) * runs, by: "sequence '\(s.name)'"))
        }
        func entered(_ actions: [Action], _ loop: LoopID, _ by: String) {
            for m in Self.modeActions(actions) where m != .default {
                holds.append(Hold(mode: m, loop: loop, length: nil, by: "a mode action of \(by)"))
            }
        }
        for x in reactions { entered(x.actions, x.loop, "reaction '\(x.name)'") }
        for t in tasks { entered(t.actions, t.loop, "task '\(t.name)'") }
        for s in sequences {
            entered(s.steps, s.loop, "sequence '\(s.name)'")
            entered(s.onStop ?? [], s.loop, "the on_stop of sequence '\(s.name)'")
        }

        // What a line's plan reads of the holds: per loop and mode, the
        // first open hold and the longest (the first of equals), with their
        // order; so each line looks at one entry per mode, not every hold.
        struct Summary {
            var firstOpen: (Int, Hold)?
            var longest: (Int, Hold)?
        }
        var byLoopMode: [LoopID: [ModeID: Summary]] = [:]
        for (n, h) in holds.enumerated() {
            var sum = byLoopMode[h.loop, default: [:]][h.mode, default: Summary()]
            if h.length == nil {
                if sum.firstOpen == nil { sum.firstOpen = (n, h) }
            } else if sum.longest.map({ $0.1.length! < h.length! }) ?? true {
                sum.longest = (n, h)
            }
            byLoopMode[h.loop, default: [:]][h.mode] = sum
        }
        var taskFor: [[Int]: TaskConfig?] = [:]
        for i in lines.indices where lines[i].isInput {
            let line = lines[i]
            var holdingModes: [ModeID] = []
            var open: (Int, Hold)?
            var longestClosed: (Int, Hold)?
            for (mode, sum) in byLoopMode[line.loop] ?? [:] {
                lookupSteps += 1
                guard !modes[mode.index].admits.contains(line.priority) else { continue }
                holdingModes.append(mode)
                if let o = sum.firstOpen, open.map({ o.0 < $0.0 }) ?? true { open = o }
                if let l = sum.longest,
                    longestClosed.map({ $0.1.length! < l.1.length! || ($0.1.length! == l.1.length! && l.0 < $0.0) }) ?? true
                {
                    longestClosed = l
                }
            }
            guard !holdingModes.isEmpty else { continue }
            holdingModes.sort()
            var held = line.held
            let longest: Hold = (open ?? longestClosed)!.1
            var plan = HeldPlan(
                modes: holdingModes.sorted(), longestHold: longest.length, holdBy: longest.by, drainDefaulted: false,
                drainEveryTask: nil, bufferRaised: false)
            let rate = held.rate
            if !held.drainSet {
                // A ring for the longest hold, with a margin.
                let planned = HeldPlan.events(rate: rate, over: longest.length ?? HeldEvents.unboundedHold)
                let ring = planned > HeldEvents.maximumDrain / HeldEvents.defaultRingMargin
                    ? HeldEvents.maximumDrain : planned * HeldEvents.defaultRingMargin
                held.drain = min(max(ring, held.kernelEvents), HeldEvents.maximumDrain)
                plan.drainDefaulted = true
                // Read on the period of a task that runs in every holding
                // mode: the drain shares its wake-ups.
                // (Found once per loop and set of holding modes.)
                let key = [line.loop.index] + holdingModes.map(\.index)
                if taskFor[key] == nil {
                    taskFor[key] = .some(
                        tasks.filter { t in
                            lookupSteps += 1
                            return t.loop == line.loop && holdingModes.allSatisfy(t.modes.contains)
                        }.min { $0.every < $1.every })
                }
                let task = taskFor[key]!
                if let task {
                    let period = min(max(task.every, HeldEvents.drainPeriods.lowerBound), HeldEvents.drainPeriods.upperBound)
                    // The kernel keeps what comes between two reads (up to 1.5 periods).
                    let between = HeldPlan.events(rate: rate, over: period * 3 / 2)
                    var buffer = held.kernelEvents
                    if between > buffer && !held.bufferSet && between <= HeldEvents.kernelBufferCap {
                        buffer = HeldEvents(kernelBuffer: between).kernelEvents
                        held.kernelBuffer = buffer
                        plan.bufferRaised = true
                    }
                    if between <= buffer {
                        held.drainEvery = period
                        plan.drainEveryTask = task.name
                    }
                }
            }
            lines[i].held = held
            lines[i].heldPlan = plan
            warnHeld(lines[i], plan)
        }
    }

    /// Warnings where the config's own numbers say events will be lost.
    func warnHeld(_ line: LineConfig, _ plan: HeldPlan) {
        let held = line.held
        let keys = heldKeys[line.name] ?? [:]
        let rate = "\(RateText.format(held.rate))\(held.maxRate == nil ? " (the default max_rate)" : "")"
        if let expected = plan.expected(rate: held.rate), let hold = plan.longestHold {
            let what = "\(expected) events can come while line '\(line.name)' is held (\(DurationText.format(hold)), \(plan.holdBy), at \(rate))"
            if held.drainSet && held.drain > 0 && expected > held.capacity, let x = keys["drain"] {
                r.warning(
                    x.value, x.path,
                    "\(what); drain: \(held.drain) keeps \(held.capacity): the rest will be lost (a larger drain, or none: the default is sized for the hold)")
            } else if held.drainSet && held.drain == 0, let x = keys["drain"] {
                if expected > held.kernelEvents {
                    r.warning(
                        x.value, x.path,
                        "\(what); with drain: 0 the kernel keeps \(held.kernelEvents) (libgpiod 1.6: \(HeldEvents.v1KernelBuffer)): the rest will be lost")
                } else if expected > HeldEvents.v1KernelBuffer && board?.backend == .kernel {
                    r.warning(
                        x.value, x.path,
                        "\(what); with drain: 0 libgpiod 1.6 keeps \(HeldEvents.v1KernelBuffer) a line: the rest will be lost there")
                }
            }
        }
        if held.drainsOnTimer {
            let between = HeldPlan.events(rate: held.rate, over: held.drainEvery * 3 / 2)
            if between > held.kernelEvents, let x = keys["drain_every"] ?? keys["buffer"] {
                r.warning(
                    x.value, x.path,
                    "\(between) events can come between two drain reads of line '\(line.name)' (1.5 × \(DurationText.format(held.drainEvery)) at \(rate)); the kernel keeps \(held.kernelEvents): the rest will be lost (raise buffer, or shorten drain_every)")
            }
        }
    }
}

/// Rates as text: `4kHz`, `1500Hz`, `2MHz`.
public enum RateText {
    public static func format(_ hz: Int) -> String {
        if hz >= 1_000_000 && hz % 1_000_000 == 0 { return "\(hz / 1_000_000)MHz" }
        if hz >= 1000 && hz % 1000 == 0 { return "\(hz / 1000)kHz" }
        return "\(hz)Hz"
    }
}
