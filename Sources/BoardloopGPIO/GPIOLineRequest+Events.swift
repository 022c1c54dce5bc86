import Boardloop

/// Calls the user's edge event handler. A distinct name so backtraces show
/// where boardloop hands over to user code.
@inline(never)
func __BOARDLOOP_GPIO_IS_CALLING_OUT_TO_AN_EDGE_EVENT_HANDLER__(
    _ handler: (GPIOEdgeEventBatch) -> Void, _ batch: GPIOEdgeEventBatch
) {
    handler(batch)
}

extension GPIOLineRequest {
    // MARK: Scheduling

    /// Makes the request a port source of `loop` in `mode`: its fd joins the
    /// mode's epoll set, and `handler` is called on the loop's thread with
    /// each batch of edge events (read into storage reserved when the request
    /// was made: no allocation per event). Software-debounced lines get a
    /// timer each, in the same modes. While the mode is not running the
    /// kernel holds the events (up to its buffer), and they are delivered,
    /// in order, when it runs. While scheduled, the loop keeps the request
    /// alive; `unschedule()` or `release()` ends that. Call on the loop's
    /// thread.
    public func schedule(
        on loop: BoardRunLoop, mode: RunLoopMode = .default, order: Int = 0,
        handler: @escaping (GPIOEdgeEventBatch) -> Void
    ) throws(GPIOError) {
        try checkUsable("schedule")
        guard self.loop == nil else {
            throw .invalidConfiguration(nil, reason: "the request is already scheduled on a run loop; unschedule it first")
        }
        let fd = driver.eventFD
        guard fd >= 0 else { throw .invalidConfiguration(nil, reason: "no line of this request detects edges") }
        do { try driver.getValues(into: values) } catch { throw noteFailure(error) }
        for i in 0..<lineCount {
            lines[i].stable = values[i] != 0
            lines[i].pending = false
        }
        // The closures hold the request strongly: while scheduled, the loop
        // keeps it alive (as CF's run loop retains its sources). The cycle
        // is broken when it is unscheduled, released or its chip vanishes.
        let source = PortSource(fd: fd, interest: .readable, order: order) { source, events in
            self.portReady(events, limit: self.eventsPerDispatch)
            // The loop ends a source whose dispatch reported hangup or error
            // unless it is re-armed. Events were read and the request is still
            // active: keep it; the next dispatch reads again or fails the
            // request with a reason (portReady), and the loop never spins.
            if self.state == .active && !events.isDisjoint(with: hangupOrError) { source.rearm() }
        }
        // Invalidated by someone else — the loop ended (its thread exited),
        // say: unschedule, so the request stops holding itself and, once
        // nobody else holds it, releases its lines.
        source.invalidationHandler = { [weak self, unowned source] in
            guard let self, self.portSource === source else { return }
            self.unscheduleItems()
        }
        var timers: [RunLoopTimer?] = Array(repeating: nil, count: lineCount)
        for i in 0..<lineCount where lines[i].softwareDebounceNs > 0 {
            timers[i] = RunLoopTimer.rearmable(order: order) { _ in
                self.debounceTimerFired(i)
            }
        }
        if let interval = vanishCheckInterval, interval > .zero {
            vanishTimer = RunLoopTimer(fireAt: loop.now + interval, interval: interval, tolerance: interval / 10) { _ in
                self.checkChipPresent()
            }
        }
        self.loop = loop
        self.handler = handler
        portSource = source
        debounceTimers = timers
        do { try add(to: mode) } catch {
            unscheduleItems()
            throw error
        }
    }

    /// Adds the scheduled request to another mode of its loop.
    public func add(to mode: RunLoopMode) throws(GPIOError) {
        guard let loop, let portSource else {
            throw .invalidConfiguration(nil, reason: "schedule the request on a run loop before adding modes")
        }
        do {
            try loop.add(portSource, mode: mode)
            for case let t? in debounceTimers { try loop.add(t, mode: mode) }
            if let v = vanishTimer { try loop.add(v, mode: mode) }
        } catch { throw .runLoop(error) }
        if !modes.contains(mode) { modes.append(mode) }
    }

    /// Removes the request from one mode of its loop.
    public func remove(from mode: RunLoopMode) throws(GPIOError) {
        guard let loop, let portSource else { return }
        do {
            try loop.remove(portSource, mode: mode)
            for case let t? in debounceTimers { try loop.remove(t, mode: mode) }
            if let v = vanishTimer { try loop.remove(v, mode: mode) }
        } catch { throw .runLoop(error) }
        modes.removeAll { $0 == mode }
    }

    /// Takes the request off its run loop (it stays requested).
    public func unschedule() { unscheduleItems() }

    /// The port source that carries the request's events, while scheduled.
    public var eventSource: PortSource? { portSource }
    /// The modes the request is scheduled in.
    public var scheduledModes: [RunLoopMode] { modes }

    func unscheduleItems() {
        portSource?.invalidate()
        for case let t? in debounceTimers { t.invalidate() }
        vanishTimer?.invalidate()
        portSource = nil
        debounceTimers = []
        vanishTimer = nil
        loop = nil
        handler = nil
        modes = []
    }

    func resyncAfterReconfigure() throws(GPIOError) {
        guard let loop, let handler, let first = modes.first else { return }
        let allModes = modes
        let order = portSource?.order ?? 0
        unscheduleItems()
        try schedule(on: loop, mode: first, order: order, handler: handler)
        for m in allModes.dropFirst() { try add(to: m) }
    }

    /// Reads the events waiting in the kernel now and hands them to the
    /// handler, exactly as a dispatch of the request's port source does,
    /// whether or not that source is in the mode the loop runs. Returns how
    /// many reads found events (0: nothing was waiting).
    ///
    /// For collecting a line's events on the caller's own schedule — a timer
    /// that shares its wake-ups with other work — instead of at every
    /// readiness of the fd: the kernel keeps what arrives in between, up to
    /// its buffer (libgpiod 2.x: the request's `eventBufferCapacity`; 1.6: 16
    /// events per line), and what overflows it is reported in the batches as
    /// ever. Call on the loop's thread while scheduled; does nothing
    /// otherwise. Does not allocate.
    @discardableResult
    public func readPendingEvents() -> Int {
        guard state == .active, let loop, loop.isOwnedByCurrentThread else { return 0 }
        var reads = 0
        // Bounded: a chip that keeps producing cannot hold the caller here.
        while reads < EventStorage.maxPendingReads {
            let status = portReady(Self.noEvents, limit: events.capacity)
            guard status.count > 0 || status.fullCount > 0 else { break }
            reads += 1
            guard status.more, state == .active else { break }
        }
        return reads
    }

    // MARK: The event path (no allocation from here on)

    // Option sets made once: an array literal allocates in debug builds
    // (a drain that finds nothing came through both).
    static let noEvents = PortSource.Events(rawValue: 0)
    static let errorOrHangup: PortSource.Events = [.error, .hangup]

    @discardableResult
    func portReady(_ events: PortSource.Events, limit: Int) -> GPIOReadStatus {
        // (The loop runs this dispatch, so it is alive through it, even if
        // the handler takes the request off it.)
        guard state == .active, let loopRef, depth < EventStorage.maxDepth else { return GPIOReadStatus() }
        let entry = loopRef._withUnsafeGuaranteedRef { $0.now }
        let d = depth
        depth += 1
        defer { depth -= 1 }
        var batch = BatchBuilder(out: self.events.outRegion(d), capacity: self.events.outCapacity)
        let (status, failure) = readOnce(depth: d, entry: entry, into: &batch, limit: limit)
        deliver(&batch, entry: entry)
        if let failure {
            fail(failure, entry: entry)
        } else if status.vanished {
            chipVanished(.chipVanished(chip: chip.description, detail: "the request's event fd reported it"), entry: entry)
        } else if status.count == 0 && !events.isDisjoint(with: Self.errorOrHangup) {
            // EPOLLERR/EPOLLHUP with nothing to read: check the chip; if it
            // is there, stop anyway rather than spin on the fd.
            checkChipPresent()
            if state == .active {
                fail(.chipVanished(chip: chip.description, detail: "EPOLLERR/EPOLLHUP on the request's event fd"), entry: entry)
            }
        }
        return status
    }

    /// One read of the driver, processed into `batch`. Returns the read's
    /// status, or a failure to report.
    ///
    /// Without software debounce the events are read straight into the
    /// batch and stay where they landed (an event filtered out is squeezed
    /// out by moving the rest): one copy out of the driver's buffer. With it,
    /// they are read aside and the debouncer decides what reaches the batch.
    func readOnce(depth d: Int, entry: MonotonicInstant, into batch: inout BatchBuilder, limit: Int) -> (GPIOReadStatus, GPIOError?) {
        let inPlace = !hasSoftwareDebounce
        let most = max(1, min(events.capacity, limit))
        let target = inPlace
            ? UnsafeMutableBufferPointer(start: batch.out + batch.count, count: min(most, batch.capacity - batch.count))
            : UnsafeMutableBufferPointer(start: events.rawRegion(d).baseAddress, count: most)
        let status: GPIOReadStatus
        do {
            status = try driver.readEvents(into: target, fullOffsets: events.fullRegion(d))
        } catch {
            if case .chipVanished = error {
                var s = GPIOReadStatus()
                s.vanished = true
                return (s, nil)
            }
            return (GPIOReadStatus(), error)
        }
        let read = target.baseAddress!
        var k = 0
        while k < status.count {
            if process(read[k], entry: entry, into: &batch) {
                if inPlace { batch.keep(read + k) } else { batch.append(read[k]) }
            }
            k += 1
        }
        if status.fullCount > 0 { fifoWasFull(depth: d, count: status.fullCount, entry: entry, into: &batch) }
        return (status, nil)
    }

    /// Loss detection and debouncing for one raw event; whether it is to be
    /// delivered as it is (the caller puts it in the batch).
    func process(_ e: GPIOEdgeEvent, entry: MonotonicInstant, into batch: inout BatchBuilder) -> Bool {
        statistics.read &+= 1
        guard let i = index(ofOffset: e.offset) else { return false }
        let level: Int8 = e.edge == .rising ? 1 : 0
        if capabilities.contains(.sequenceNumbers) && e.globalSequence != 0 {
            // Sequence numbers start at 1: a first event numbered higher means
            // the queue overflowed before anything was read.
            if e.globalSequence > lastGlobalSequence &+ 1 {
                batch.lost &+= e.globalSequence - lastGlobalSequence - 1
            }
            if e.globalSequence > lastGlobalSequence { lastGlobalSequence = e.globalSequence }
            // The line's own numbers attribute the loss to lines.
            if e.lineSequence > lines[i].lastLineSequence &+ 1 {
                lines[i].lost &+= e.lineSequence - lines[i].lastLineSequence - 1
                lineLossChanges &+= 1
            }
            if e.lineSequence > lines[i].lastLineSequence { lines[i].lastLineSequence = e.lineSequence }
        } else if lines[i].kernelEdges == .both && lines[i].lastLevel == level {
            // Both edges requested, and two in a row go the same way: the
            // edge between them is missing.
            batch.lost &+= 1
            lines[i].lost &+= 1
            lineLossChanges &+= 1
        }
        lines[i].lastLevel = level
        if lines[i].softwareDebounceNs > 0 {
            debounceFeed(i, e, into: &batch)
            return false
        }
        return lines[i].report.includes(e.edge)
    }

    /// 1.6: lines whose kernel FIFO was full. Later edges may be gone: the
    /// batch says so, and a level that disagrees with the last event proves
    /// at least one was lost (and a debounced line follows the real level).
    func fifoWasFull(depth d: Int, count: Int, entry: MonotonicInstant, into batch: inout BatchBuilder) {
        batch.overflow = true
        statistics.suspectedOverflows &+= UInt64(count)
        do { try driver.getValues(into: values) } catch { return }
        let full = events.full + d * EventStorage.fullCapacity
        for k in 0..<count {
            guard let i = index(ofOffset: full[k]) else { continue }
            lines[i].fifoFull &+= 1
            lineLossChanges &+= 1
            guard lines[i].kernelEdges == .both else { continue }
            let current: Int8 = values[i] != 0 ? 1 : 0
            if lines[i].lastLevel >= 0 && lines[i].lastLevel != current {
                batch.lost &+= 1
                lines[i].lost &+= 1
                lineLossChanges &+= 1
                lines[i].lastLevel = current
                if lines[i].softwareDebounceNs > 0 {
                    debounceFeed(
                        i, GPIOEdgeEvent(offset: lines[i].offset, edge: GPIOEdge(to: current == 1), timestamp: entry),
                        into: &batch)
                }
            }
        }
    }

    func deliver(_ batch: inout BatchBuilder, entry: MonotonicInstant, faultAt: UnsafePointer<GPIOError>? = nil) {
        guard !batch.isEmpty || faultAt != nil else { return }
        statistics.lostEvents &+= batch.lost
        statistics.delivered &+= UInt64(batch.count)
        statistics.batches &+= 1
        var k = 0
        while k < batch.count {
            let ts = batch.out[k].timestamp
            if ts < entry {
                let latency = entry - ts
                if latency > statistics.maxLatency { statistics.maxLatency = latency }
            }
            k += 1
        }
        let view = GPIOEdgeEventBatch(
            base: UnsafePointer(batch.out), count: batch.count, handlerEntryTime: entry, lostEvents: batch.lost,
            overflowSuspected: batch.overflow, faultAt: faultAt)
        batch.count = 0
        batch.lost = 0
        batch.overflow = false
        if let handler { __BOARDLOOP_GPIO_IS_CALLING_OUT_TO_AN_EDGE_EVENT_HANDLER__(handler, view) }
    }

    // MARK: Software debounce

    func debounceFeed(_ i: Int, _ e: GPIOEdgeEvent, into batch: inout BatchBuilder) {
        let period = lines[i].softwareDebounceNs
        if lines[i].pending && e.timestamp.nanoseconds >= lines[i].candidate.timestamp.nanoseconds &+ period {
            // The pending level held for the period before this edge came.
            confirm(i, into: &batch)
        }
        statistics.debounced &+= 1
        if e.edge.level == lines[i].stable {
            lines[i].pending = false // a glitch (or a bounce back): nothing to report
        } else {
            lines[i].pending = true
            lines[i].candidate = e
        }
        armDebounceTimer(i, force: false)
    }

    func confirm(_ i: Int, into batch: inout BatchBuilder) {
        lines[i].pending = false
        let c = lines[i].candidate
        guard c.edge.level != lines[i].stable else { return }
        lines[i].stable = c.edge.level
        statistics.debounced &-= 1
        if lines[i].report.includes(c.edge) { batch.append(c) }
    }

    func armDebounceTimer(_ i: Int, force: Bool) {
        guard i < debounceTimers.count, let t = debounceTimers[i] else { return }
        let want =
            lines[i].pending
            ? MonotonicInstant(nanoseconds: lines[i].candidate.timestamp.nanoseconds &+ lines[i].softwareDebounceNs)
            : MonotonicInstant.distantFuture
        if force || t.fireDate != want { t.fireDate = want }
    }

    func debounceTimerFired(_ i: Int) {
        guard state == .active, let loopRef, depth < EventStorage.maxDepth else { return }
        let entry = loopRef._withUnsafeGuaranteedRef { $0.now }
        let d = depth
        depth += 1
        defer { depth -= 1 }
        var batch = BatchBuilder(out: events.outRegion(d), capacity: events.outCapacity)
        // First take in every edge already waiting: one may end the period.
        var rounds = 0
        while rounds < 64 {
            let (status, failure) = readOnce(depth: d, entry: entry, into: &batch, limit: events.capacity)
            deliver(&batch, entry: entry)
            if let failure {
                fail(failure, entry: entry)
                return
            }
            if status.vanished {
                chipVanished(.chipVanished(chip: chip.description, detail: "the request's event fd reported it"), entry: entry)
                return
            }
            if !status.more { break }
            rounds += 1
        }
        if lines[i].pending && entry.nanoseconds >= lines[i].candidate.timestamp.nanoseconds &+ lines[i].softwareDebounceNs {
            // Check the line really is at the candidate level (an edge may be
            // on its way, or lost); if not, follow the real level.
            var actual: Bool?
            do {
                try driver.getValues(into: values)
                actual = values[i] != 0
            } catch {
                actual = nil
            }
            if let actual, actual != lines[i].candidate.edge.level {
                if actual == lines[i].stable {
                    lines[i].pending = false
                } else {
                    lines[i].candidate = GPIOEdgeEvent(offset: lines[i].offset, edge: GPIOEdge(to: actual), timestamp: entry)
                }
            } else {
                confirm(i, into: &batch)
            }
            deliver(&batch, entry: entry)
        }
        armDebounceTimer(i, force: true)
    }

    // MARK: Faults

    /// Polls the chip (for kernels that do not wake pollers when it goes).
    func checkChipPresent() {
        guard state == .active else { return }
        do { try driver.getValues(into: values) } catch {
            if case .chipVanished = error { chipVanished(error) }
        }
    }

    /// The chip went away: report it on the source (a batch with `fault`),
    /// take the request off its loop, free the lines. The loop goes on.
    func chipVanished(_ error: GPIOError, entry: MonotonicInstant? = nil) {
        guard state == .active else { return }
        state = .vanished(error)
        fail(error, entry: entry)
        driver.release()
    }

    /// Replaces the edge handler of a scheduled request (on its loop's
    /// thread): the next batch goes to `handler`. A tracer swaps in a
    /// handler that times the old one, so the untraced path checks nothing.
    package func replaceHandler(_ handler: @escaping (GPIOEdgeEventBatch) -> Void) {
        guard self.handler != nil else { return }
        self.handler = handler
    }

    /// Reports `error` to the handler and unschedules the request.
    func fail(_ error: GPIOError, entry: MonotonicInstant?) {
        if let loop, handler != nil {
            var batch = BatchBuilder(out: events.outRegion(0), capacity: 0)
            withUnsafePointer(to: error) { deliver(&batch, entry: entry ?? loop.now, faultAt: $0) }
        }
        unscheduleItems()
    }
}

/// `.error` and `.hangup`, as a constant: an option-set array literal
/// allocates its array on every evaluation in unoptimised builds.
private let hangupOrError: PortSource.Events = PortSource.Events.error.union(.hangup)
