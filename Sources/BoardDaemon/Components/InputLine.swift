import Boardloop
import BoardloopGPIO
import Glibc

/// An input line on its loop: the GPIO request as a port source, the
/// filters (`delayed_on`/`delayed_off`, `settle`), the triggers of the
/// reactions on it and its gesture group, all on one loop timer. Nothing
/// here allocates per event.
///
/// Time is the events' kernel timestamps: before an event is processed,
/// every deadline up to its timestamp fires first, so events delivered late
/// (held through a sequence, rate limited) are judged by when they happened.
///
/// Used only on its loop's thread (`@unchecked Sendable` for the drain's
/// work item, which runs there too).
///
/// Its stored properties skip the run-time exclusivity check
/// (`@exclusivity(unchecked)`, as the engine's do): each check costs about
/// 76 instructions on the event path, and no access to them overlaps
/// another (a trigger's state is updated before the reaction it fires runs).
final class InputLine: @unchecked Sendable {
    let id: Int
    let config: LineConfig
    /// The runtime, unowned without the run-time check (as the engine's
    /// message port holds its own handler): it owns the line (`inputs`)
    /// and outlives it. A checked unowned reference costs a check, a retain
    /// and a release at each use; the event path borrows it for the batch
    /// (`_withUnsafeGuaranteedRef`), with neither.
    private let runtime: Unmanaged<LoopRuntime>
    var rt: LoopRuntime { runtime.takeUnretainedValue() }
    let events: EventSink
    let request: GPIOLineRequest
    /// The line's index in `request`.
    let index: Int
    /// The lines that share `request` with this one (nil: the request is
    /// the line's own, and its handler is the line's).
    let group: InputGroup?
    let cell: LineCell
    /// The filtered logical level.
    @exclusivity(unchecked) private(set) var level: Bool
    /// The triggers of the reactions on the line (not its gestures'), in
    /// the config's order: fixed storage, so updating one on an edge makes
    /// no uniqueness check (an array's element write does).
    let triggers: UnsafeMutableBufferPointer<TriggerState>
    @exclusivity(unchecked) var gesture: GestureMachine?
    /// Whether the line has a gesture group (`gesture` is then never nil):
    /// a flag where testing the optional copies the machine out.
    let hasGesture: Bool
    /// Reactions on gestures (a repeating hold with its deadline).
    @exclusivity(unchecked) var gestureReactions: [GestureReaction] = []
    /// Whether some gesture reaction is a hold that repeats.
    var gestureRepeats = false
    @exclusivity(unchecked) var timer: RunLoopTimer?
    @exclusivity(unchecked) var armedAt: UInt64 = never
    /// Reads the kernel's events into the ring while the line is held
    /// (`drain` with `drain_every`); only in the modes that hold the line.
    @exclusivity(unchecked) var drainTimer: RunLoopTimer?
    /// The drain's read, run after the pass's timers (see `drainTimerFired`).
    @exclusivity(unchecked) var drainItem: PerformWorkItem?
    /// The posted drain, while it waits for its pass.
    @exclusivity(unchecked) var drainToken: PerformToken?

    /// The filters (`delayed_on`/`delayed_off`, then `settle`).
    @exclusivity(unchecked) var filters: FilterChain
    private let bothEdges: Bool

    // Held events: a fixed ring (the rest of a batch read when the loop
    // left the line's modes, or everything read while held with `drain`).
    private let ring: UnsafeMutablePointer<UInt64>
    let ringCapacity: Int
    @exclusivity(unchecked) private var ringHead = 0
    @exclusivity(unchecked) private(set) var ringCount = 0
    /// Held events lost since the ring was last empty: the first of each
    /// hold's losses is logged, not only the first since the start.
    @exclusivity(unchecked) private var lostThisHold: UInt64 = 0

    // Counters.
    @exclusivity(unchecked) private(set) var eventsSeen: UInt64 = 0
    @exclusivity(unchecked) private(set) var heldInRing: UInt64 = 0
    /// Drain timer fires that found events in the kernel.
    @exclusivity(unchecked) var drainReads: UInt64 = 0
    /// Events lost: exact where the kernel numbers them (v2) and for ring overflow.
    @exclusivity(unchecked) private(set) var lost: UInt64 = 0
    /// Kernel buffers found full on libgpiod 1.6 (loss possible, not countable).
    @exclusivity(unchecked) private(set) var suspectedOverflows: UInt64 = 0
    /// Whether the kernel numbers events (v2): `lost` is then exact, else
    /// (libgpiod 1.6) a lower bound.
    let lossIsExact: Bool
    /// The level the last edge read from the kernel left the line at (before
    /// the filters): what a re-read after a full FIFO is compared with.
    @exclusivity(unchecked) private(set) var rawLevel: Bool
    /// The timestamp of the last edge read from the kernel.
    @exclusivity(unchecked) private(set) var rawTime: UInt64 = 0
    /// When the handler that delivers events now began (a batch's entry,
    /// a timer's or a catch-up's start, the line's start): a reaction's
    /// handler time runs from it.
    @exclusivity(unchecked) var handlerStart: UInt64 = 0

    init(
        id: Int, config: LineConfig, runtime: LoopRuntime, request: GPIOLineRequest, index: Int = 0, group: InputGroup? = nil,
        cell: LineCell, reactions: [Int]
    ) throws {
        self.id = id
        self.config = config
        self.runtime = Unmanaged.passUnretained(runtime)
        events = runtime.events
        self.request = request
        self.index = index
        self.group = group
        self.cell = cell
        let initial = (try? request.value(at: index)) ?? false
        level = initial
        rawLevel = initial
        lossIsExact = request.lossCounting == .exact
        filters = FilterChain(config.filters, level: initial)
        bothEdges = config.settings.edgeDetection == .both
        cell.value.store(initial, ordering: .relaxed)
        ringCapacity = max(config.held.drain, config.held.kernelBuffer, 1)
        ring = .allocate(capacity: ringCapacity)
        ring.initialize(repeating: 0, count: ringCapacity)
        let program = runtime.program
        var triggers: [TriggerState] = []
        for r in reactions {
            let trig = program.config.reactions[r].trigger
            if case let .gesture(k, rep) = trig {
                gestureReactions.append(GestureReaction(kind: k, reaction: r, repeatEvery: rep))
                if rep != nil { gestureRepeats = true }
            } else {
                triggers.append(TriggerState(reaction: r, trigger: trig))
            }
        }
        self.triggers = .allocate(capacity: triggers.count)
        _ = self.triggers.initialize(from: triggers)
        if let g = config.gestures { gesture = GestureMachine(g) }
        hasGesture = gesture != nil
        tracksDeadlines = needsTimer
    }

    deinit {
        ring.deallocate()
        triggers.deinitialize().deallocate()
    }

    // MARK: Across a reload, and at start

    /// Where a line's filters and gesture stand: a reload of a line whose
    /// request is kept hands it to the line's new `InputLine`.
    struct FilterState {
        var filters: InputFilters
        var gestures: GestureGroup?
        var level, rawLevel: Bool
        var rawTime: UInt64
        var chain: FilterChain
        var gesture: GestureMachine?
        /// The line's request is new (its settings changed): its filters
        /// start again from the believed level, whatever their timing.
        var restart = false
        /// The line is unchanged but its request is made again (it shared
        /// one with a line that changed, or only how its held events are
        /// kept changed): its filters go on, and the level is read again
        /// at start (edges waiting in the old request's kernel buffer were
        /// read into the ring first where the line was held).
        var rerequested = false
        /// The events the line held, oldest first (`(t << 1) | rising`):
        /// delivered by the new line after its hold, or counted as lost
        /// where its settings changed.
        var held: [UInt64] = []
        /// The line's counts since the start, carried so a reload does not
        /// reset what `boardctl lines` and the metrics report.
        var counts = Counts()

        struct Counts {
            var events: UInt64 = 0, heldInRing: UInt64 = 0, lost: UInt64 = 0, suspectedOverflows: UInt64 = 0, drainReads: UInt64 = 0
        }

        /// Whether the new line goes on with these deadlines (else it
        /// starts its filters again from the believed level).
        func continues(with filters: InputFilters) -> Bool { !restart && self.filters == filters }
    }

    /// The line's state for its successor in a reload (made then: the
    /// held events are copied out of the ring).
    var filterState: FilterState {
        var s = FilterState(
            filters: config.filters, gestures: config.gestures, level: level, rawLevel: rawLevel, rawTime: rawTime, chain: filters,
            gesture: gesture)
        s.held = (0..<ringCount).map { ring[(ringHead + $0) % ringCapacity] }
        s.counts = FilterState.Counts(
            events: eventsSeen, heldInRing: heldInRing, lost: lost, suspectedOverflows: suspectedOverflows, drainReads: drainReads)
        return s
    }

    /// What `start` does: take the previous config's state over (same
    /// filters), start the filters from the level the daemon believed (the
    /// filters changed), or start from the level read now.
    @exclusivity(unchecked) private var startFrom: FilterState?

    /// Takes a kept line's state from the previous config (before `start`).
    func carry(_ state: FilterState) {
        startFrom = state
        if state.continues(with: config.filters) {
            level = state.level
            rawLevel = state.rawLevel
            rawTime = state.rawTime
            filters = state.chain
        } else {
            // New timing: the filters start again from the level the
            // daemon believed; `start` feeds them the level read now.
            level = state.level
            filters.reset(to: state.level)
            rawLevel = state.level
        }
        if !state.restart && state.gestures == config.gestures, let g = state.gesture { gesture = g }
        cell.value.store(level, ordering: .relaxed)
        carryHeld(state)
    }

    /// The counts go on; the held events go into this line's ring, oldest
    /// first, unless the line's settings changed (they were read through
    /// another request and filters). What is not kept is counted as lost
    /// and logged.
    private func carryHeld(_ state: FilterState) {
        eventsSeen = state.counts.events
        heldInRing = state.counts.heldInRing
        lost = state.counts.lost
        suspectedOverflows = state.counts.suspectedOverflows
        drainReads = state.counts.drainReads
        let keep = state.restart ? 0 : min(state.held.count, ringCapacity)
        for v in state.held.prefix(keep) {
            ring[(ringHead + ringCount) % ringCapacity] = v
            ringCount += 1
        }
        let dropped = state.held.count - keep
        guard dropped > 0 else { return }
        lost &+= UInt64(dropped)
        let why = state.restart ? "its settings changed" : "its new ring holds \(ringCapacity)"
        rt.logger.warning("\(config.name): \(dropped) held events dropped by the reload (\(why)); counted as lost")
    }

    /// Once every line of the loop is attached and the automation is set
    /// up: a change in flight is not lost and an active line at start
    /// fires as the config says. A kept line with the same filters goes on
    /// with their pending deadlines; one whose filters changed gets the level
    /// read now through its new filters when it differs from the level the
    /// daemon believed (a `delayed_on` starts again with its new timing); a
    /// line requested now that is already active delivers a rising edge
    /// through its filters only with `initial_edge: true`.
    func start() {
        let now = rt.nowNanoseconds
        handlerStart = now
        if let from = startFrom {
            startFrom = nil
            // A line requested again reads its level again only where it
            // detects both edges (a one-edge line's last edge is not the
            // wire's level).
            if !from.continues(with: config.filters) || (from.rerequested && bothEdges), let raw = try? request.value(at: index),
                raw != rawLevel
            {
                rawLevel = raw
                rawTime = now
                deliver(raw, at: now, rt)
            }
        } else if config.filters.initialEdge && level {
            level = false
            filters.reset(to: false)
            cell.value.store(false, ordering: .relaxed)
            deliver(true, at: now, rt)
        }
        // Events carried from before a reload, now admitted: delivered
        // before anything read from the kernel later.
        if ringCount > 0 && rt.admits(config.priority) {
            events.heldDelivered(line: id, count: ringCount)
            drainRing()
        }
        arm()
    }

    /// The modes the line's source (and timer) are in: every mode when held
    /// events are drained as they come, else the modes that admit the line.
    var modes: [RunLoopMode] {
        config.held.drainsOnReadiness ? [.common] : rt.modes(admitting: config.priority)
    }

    /// Whether the line has anything with a deadline (filters, a gesture
    /// group, a trigger with a time): fixed once the line is made (a reload
    /// that keeps the line keeps its config), so a line without any skips
    /// the deadline checks of every edge.
    @exclusivity(unchecked) private(set) var tracksDeadlines = true

    var needsTimer: Bool {
        !config.filters.isEmpty || gesture != nil
            || triggers.contains(where: \.hasDeadlines)
    }

    /// Events one dispatch of a line below the loop's highest input
    /// priority handles; the rest wait for the next pass, which dispatches
    /// the higher-priority lines first if they are ready.
    static let lowPriorityBatch = 16

    /// The line's source order: a higher priority is a lower order, so
    /// whenever lines of two priorities are ready in a pass, the higher one
    /// is dispatched first (CF dispatches ready version-1 sources by order).
    var sourceOrder: Int { -config.priority.index }

    /// Puts the line on its loop; if any step fails, the line is taken off
    /// again (its handler must not outlive it on the request).
    func schedule() throws {
        do {
            try scheduleOnLoop()
        } catch {
            unschedule()
            throw error
        }
    }

    private func scheduleOnLoop() throws {
        let modes = self.modes
        let low = config.priority.index < rt.topInputPriority
        if let group {
            try group.join(self, loop: rt.loop, modes: modes, order: sourceOrder, eventsPerDispatch: low ? Self.lowPriorityBatch : nil)
        } else {
            try request.schedule(on: rt.loop, mode: modes[0], order: sourceOrder, handler: edgeHandler(traced: rt.tracer != nil))
            if low { request.eventsPerDispatch = min(request.eventsPerDispatch, Self.lowPriorityBatch) }
            for m in modes.dropFirst() { try request.add(to: m) }
        }
        if let limit = config.rateLimit {
            do {
                request.eventSource?.rateLimit = try Boardloop.RateLimit(count: limit.events, per: limit.period)
            } catch {
                throw DaemonError.setup("line '\(config.name)': rate_limit: \(error)")
            }
        }
        if needsTimer {
            let t = RunLoopTimer.rearmable { [unowned self] _ in self.timerFired() }
            for m in modes { try rt.loop.add(t, mode: m) }
            timer = t
        }
        let holding = rt.modes(holding: config.priority)
        if config.held.drainsOnTimer && !holding.isEmpty {
            let period = config.held.drainEvery
            let t = RunLoopTimer(fireAt: rt.loop.now + period, interval: period, tolerance: config.held.drainTolerance) {
                [unowned self] _ in self.drainTimerFired()
            }
            for m in holding { try rt.loop.add(t, mode: m) }
            drainTimer = t
            drainItem = PerformWorkItem(modes: holding) { [weak self] in self?.drain() }
        }
    }

    /// The request's handler: `handle`, or while a trace runs `handleTraced`,
    /// or while a recording runs `handleRecorded` (swapped by `traced(_:)`
    /// and `recorded()`, so the path without them checks nothing).
    ///
    /// The handler holds the line unowned without the run-time check: the
    /// line takes it off its request (`unschedule`) before it goes, on a
    /// reload, a stop and a schedule that fails; the checked form costs a
    /// check, a retain and a release per batch.
    func edgeHandler(traced: Bool) -> (GPIOEdgeEventBatch) -> Void {
        let line = Unmanaged.passUnretained(self)
        if traced { return { batch in line._withUnsafeGuaranteedRef { $0.handleTraced(batch) } } }
        if events.recorder != nil { return { batch in line._withUnsafeGuaranteedRef { $0.handleRecorded(batch) } } }
        return { batch in line._withUnsafeGuaranteedRef { $0.handle(batch) } }
    }

    /// A recording starts or ends: the request's handler is swapped.
    func recorded() {
        replaceHandler(edgeHandler(traced: rt.tracer != nil))
    }

    /// A line of a group needs no swap: the group calls `handleRun`, which
    /// looks for a trace and a recording itself.
    private func replaceHandler(_ handler: @escaping (GPIOEdgeEventBatch) -> Void) {
        if group == nil { request.replaceHandler(handler) }
    }

    /// The wire's level as the line last read it (before active-low), for
    /// a recording's start.
    var physicalLevel: Bool { ((try? request.value(at: index)) ?? rawLevel) != config.settings.activeLow }

    /// A trace starts or ends: the request's handler is swapped.
    func traced(_ on: Bool) {
        replaceHandler(edgeHandler(traced: on))
    }

    /// `handle`, recorded as a span of the loop's trace.
    private func handleTraced(_ batch: GPIOEdgeEventBatch) {
        if events.recorder != nil { handleRecorded(batch) } else { handle(batch) }
        if let tr = rt.tracer { tr.slice(.line, id, Int64(batch.count), from: batch.handlerEntryTime.nanoseconds, to: rt.nowNanoseconds) }
    }

    /// Takes the line off the loop (the request stays, for a reload to keep;
    /// a shared one is taken off for every line of its group).
    func unschedule() {
        if let group { group.unschedule() } else { request.unschedule() }
        timer?.invalidate()
        timer = nil
        drainTimer?.invalidate()
        drainTimer = nil
        if let t = drainToken { rt.loop.cancel(t) }
        drainToken = nil
        drainItem = nil
    }

    /// Events held by the engine's rate limit so far.
    var rateLimitHolds: UInt64 { request.eventSource?.rateLimitHolds ?? 0 }

    // MARK: Events

    func handle(_ batch: GPIOEdgeEventBatch) { handle(batch, recording: false) }

    /// `handle`, each edge also recorded as read (`EventSink.rawEdge`).
    private func handleRecorded(_ batch: GPIOEdgeEventBatch) { handle(batch, recording: true) }

    @inline(__always) private func handle(_ batch: GPIOEdgeEventBatch, recording: Bool) {
        runtime._withUnsafeGuaranteedRef { handle(batch, recording: recording, $0) }
    }

    @inline(__always) private func handle(_ batch: GPIOEdgeEventBatch, recording: Bool, _ rt: LoopRuntime) {
        handle(batch, from: 0, to: batch.count, lost: batch.lostEvents, overflow: batch.overflowSuspected, recording: recording, rt)
    }

    /// A run of this line's events in a batch of the request it shares
    /// with its group (`InputGroup`): events `from..<to`, with the losses
    /// found for this line. Traced and recorded as `handle` is (checked
    /// here: the group calls its lines directly).
    @inline(__always)
    func handleRun(_ batch: GPIOEdgeEventBatch, from s: Int, to e: Int, lost: UInt64, overflow: Bool) {
        runtime._withUnsafeGuaranteedRef { rt in
            handle(batch, from: s, to: e, lost: lost, overflow: overflow, recording: events.recorder != nil, rt)
            if let tr = rt.tracer { tr.slice(.line, id, Int64(e - s), from: batch.handlerEntryTime.nanoseconds, to: rt.nowNanoseconds) }
        }
    }

    @inline(__always) private func handle(
        _ batch: GPIOEdgeEventBatch, from start: Int, to end: Int, lost found: UInt64, overflow: Bool, recording: Bool,
        _ rt: LoopRuntime
    ) {
        handlerStart = batch.handlerEntryTime.nanoseconds
        if found > 0 || overflow {
            lost &+= found
            if overflow { suspectedOverflows &+= 1 }
            events.lost(line: id, found, exact: lossIsExact, fifoFull: overflow)
        }
        if ringCount > 0 && rt.admits(config.priority) { drainRing() }
        var i = start
        while i < end {
            let e = batch[i]
            i += 1
            eventsSeen &+= 1
            let rising = e.edge == .rising
            let t = e.timestamp.nanoseconds
            rawLevel = rising
            rawTime = t
            if recording {
                events.rawEdge(
                    line: id, physical: rising != config.settings.activeLow, at: t, held: ringCount > 0 || !rt.admits(config.priority),
                    sequence: e.globalSequence, lineSequence: e.lineSequence)
            }
            deliver(rising, at: t, rt)
        }
        if overflow && bothEdges { readLevelAgain(entry: batch.handlerEntryTime.nanoseconds) }
        arm()
    }

    /// Processes an edge read from the kernel, or holds it in the ring
    /// (`rt`: the batch's borrowed runtime).
    @inline(__always)
    private func deliver(_ rising: Bool, at t: UInt64, _ rt: LoopRuntime) {
        if ringCount > 0 || !rt.admits(config.priority) {
            stash(rising, t)
        } else {
            process(rising, at: t, rt)
        }
    }

    /// After a full FIFO (libgpiod 1.6) the edges after it may be gone, so
    /// the line can be at another level than its last edge says (on while
    /// the pin reads 0: the next press would be swallowed). The level is
    /// read from the request; when it differs, the missing edge is
    /// delivered through the filters as a read one would be.
    private func readLevelAgain(entry: UInt64) {
        guard let now = try? request.value(at: index), now != rawLevel else { return }
        rawLevel = now
        rawTime = max(rawTime, entry)
        deliver(now, at: rawTime, rt)
    }

    private func stash(_ rising: Bool, _ t: UInt64) {
        guard ringCount < ringCapacity else {
            lost &+= 1
            lostThisHold &+= 1
            events.ringFull(line: id, capacity: ringCapacity, lost: lost, firstOfHold: lostThisHold == 1)
            return
        }
        ring[(ringHead + ringCount) % ringCapacity] = (t << 1) | (rising ? 1 : 0)
        ringCount += 1
        heldInRing &+= 1
    }

    /// Delivers the ring's events, in order, while the line stays admitted.
    private func drainRing() {
        while ringCount > 0 && rt.admits(config.priority) {
            let v = ring[ringHead]
            ringHead = (ringHead + 1) % ringCapacity
            ringCount -= 1
            process(v & 1 == 1, at: v >> 1)
        }
        if ringCount == 0 { lostThisHold = 0 }
    }

    /// Called when the loop's mode changed to one that admits the line:
    /// delivers what the ring holds and fires deadlines that passed.
    func catchUp() {
        guard rt.admits(config.priority) else { return }
        if ringCount > 0 { events.heldDelivered(line: id, count: ringCount) }
        deliverHeldThenAdvance()
    }

    /// Delivers what the ring holds, then — unless older events still wait
    /// in the kernel (they come first, in this pass's sources step) — fires
    /// the deadlines that passed and arms the next.
    func deliverHeldThenAdvance() {
        handlerStart = rt.nowNanoseconds
        drainRing()
        if kernelHasEvents() {
            guard group != nil else {
                rearmSoon()
                return
            }
            // A shared request: what waits may be the other lines' (a flood
            // on one of them would put this line's deadlines off at every
            // fire). Read it now — each line gets its own, this one's
            // before its deadlines — and fire the deadlines up to when the
            // read began: an edge read later happened after it.
            let now = rt.nowNanoseconds
            request.readPendingEvents()
            if rt.admits(config.priority) { advance(to: now) }
            arm()
            return
        }
        advance(to: rt.nowNanoseconds)
        arm()
    }

    func process(_ rising: Bool, at t: UInt64) {
        runtime._withUnsafeGuaranteedRef { process(rising, at: t, $0) }
    }

    @inline(__always) private func process(_ rising: Bool, at t: UInt64, _ rt: LoopRuntime) {
        advance(to: t)
        if !bothEdges {
            // One edge detected: the opposite change happened unseen before it.
            level = !rising
            filters.stage = !rising
        }
        if let l = filters.edge(rising, at: t, reported: level) { report(l, at: t, rt) }
    }

    func report(_ l: Bool, at t: UInt64) {
        runtime._withUnsafeGuaranteedRef { report(l, at: t, $0) }
    }

    /// `report` with the batch's borrowed runtime.
    @inline(__always)
    private func report(_ l: Bool, at t: UInt64, _ rt: LoopRuntime) {
        guard l != level else { return }
        level = l
        cell.value.store(l, ordering: .relaxed)
        events.edge(line: id, rising: l, at: t)
        var k = 0
        while k < triggers.count {
            if triggers[k].edge(l, at: t) { rt.fire(reaction: triggers[k].reaction, line: self, rising: l, at: t) }
            k += 1
        }
        if gestureRepeats {
            // A release (or a new press) ends a held gesture's repeats.
            k = 0
            while k < gestureReactions.count {
                gestureReactions[k].cancel()
                k += 1
            }
        }
        if hasGesture, let g = gesture!.edge(l, at: t) { fireGesture(g, at: t) }
    }

    func fireGesture(_ g: GestureKind, at t: UInt64) {
        events.gesture(line: id, g)
        var k = 0
        while k < gestureReactions.count {
            if gestureReactions[k].kind == g {
                if g == .hold { gestureReactions[k].held(at: t) }
                rt.fire(reaction: gestureReactions[k].reaction, line: self, rising: level, at: t, repeat: g == .hold ? 0 : -1)
            }
            k += 1
        }
    }
}
