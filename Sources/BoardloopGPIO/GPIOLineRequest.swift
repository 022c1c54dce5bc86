import Boardloop

/// Requested lines of one chip: read and write their values, reconfigure
/// them, and — when some detect edges — receive their edge events as a port
/// source on a run loop (`schedule(on:mode:handler:)`). Released by
/// `release()` or when the last reference goes.
///
/// Owner thread: use a request from one thread (the thread of the loop it
/// is scheduled on). While it is scheduled on a loop, the loop keeps it
/// alive, as CF's run loop retains its sources.
///
/// Stored properties skip the run-time exclusivity check
/// (`@exclusivity(unchecked)`), as the engine's do: the event path reads and
/// counts through them on every batch, and the check costs about 76
/// instructions per access.
public final class GPIOLineRequest {
    /// Where the request is in its life.
    public enum State: Sendable, Equatable {
        case active
        /// The chip went away; the lines are gone with it.
        case vanished(GPIOError)
        case released
    }

    public let chip: GPIOChipInfo
    /// What `gpioinfo` shows as the lines' user.
    public let consumer: String
    /// The requested lines, in request order.
    public let offsets: [UInt32]
    /// The lines' names ("" when unnamed), in request order.
    public let lineNames: [String]
    /// The settings each line was requested (or last reconfigured) with.
    @exclusivity(unchecked) public internal(set) var settings: [GPIOLineSettings]
    /// What the backend can do (sequence numbers, kernel debounce, ...).
    public let capabilities: GPIOCapabilities
    @exclusivity(unchecked) public internal(set) var state: State = .active
    /// Event totals since the request was made.
    @exclusivity(unchecked) public internal(set) var statistics = GPIOEventStatistics()
    /// Counts every change of a line's own loss figures (`lostEvents(at:)`,
    /// `fullFIFOReads(at:)`): a handler that hands each line its losses
    /// looks at them only when this moved (`lineLossChangeCount()`). A line's gap in its own sequence
    /// numbers shows with its next event, which may come in a batch with
    /// no request-wide gap.
    @exclusivity(unchecked) var lineLossChanges: UInt64 = 0

    /// `lineLossChanges` (see there), read by a call: the property's
    /// unchecked access holds only inside this module, and a dynamic
    /// exclusivity check from another would cost more than the call.
    @inline(never)
    public func lineLossChangeCount() -> UInt64 { lineLossChanges }

    let driver: any GPIORequestDriver
    let lineCount: Int
    /// Scratch for value reads and writes (request order), reserved once.
    let values: UnsafeMutableBufferPointer<Int32>
    let setOffsets: UnsafeMutableBufferPointer<UInt32>
    let setValues: UnsafeMutableBufferPointer<Int32>
    /// Writes staged for one kernel call (`stage`, `commitStaged`).
    let stagedOffsets: UnsafeMutableBufferPointer<UInt32>
    let stagedValues: UnsafeMutableBufferPointer<Int32>
    /// How many writes are staged.
    @exclusivity(unchecked) public private(set) var stagedCount = 0
    /// Event path storage, reserved once (see `Events`).
    let events: EventStorage
    /// Per-line event state (loss detection, software debounce).
    let lines: UnsafeMutablePointer<LineEventState>
    /// Each line's index by its offset (-1: not in the request): an event's
    /// line found without a search, however many lines share the request.
    @usableFromInline let indexByOffset: UnsafeMutableBufferPointer<Int32>
    /// Some line is debounced in software (its events are read aside first).
    @exclusivity(unchecked) var hasSoftwareDebounce = false

    // Scheduling (see GPIOLineRequest+Events.swift).
    @exclusivity(unchecked) var loop: BoardRunLoop? {
        didSet { loopRef = loop.map(Unmanaged.passUnretained) }
    }
    /// `loop` unretained, for the dispatch's clock read: a dispatch borrows
    /// the loop that runs it (`_withUnsafeGuaranteedRef`), where reading
    /// `loop` would retain and release it — on a loop with a side table
    /// (a worker thread's), the runtime's slow path each time.
    @exclusivity(unchecked) var loopRef: Unmanaged<BoardRunLoop>?
    @exclusivity(unchecked) var modes: [RunLoopMode] = []
    @exclusivity(unchecked) var portSource: PortSource?
    @exclusivity(unchecked) var debounceTimers: [RunLoopTimer?] = []
    @exclusivity(unchecked) var vanishTimer: RunLoopTimer?
    @exclusivity(unchecked) var handler: ((GPIOEdgeEventBatch) -> Void)?
    @exclusivity(unchecked) var lastGlobalSequence: UInt64 = 0
    @exclusivity(unchecked) var depth = 0

    /// At most this many events are read (and handed to the handler) per
    /// dispatch of the request's port source; the rest stay in the kernel
    /// for the next pass, which dispatches ready sources of a lower `order`
    /// first. A low-priority line that floods then holds its loop for one
    /// small batch, not a whole buffer. Default: the request's event buffer
    /// (everything one read can take). `readPendingEvents()` is not bounded
    /// by it. Set on the loop's thread.
    @exclusivity(unchecked) public var eventsPerDispatch: Int

    /// How often a scheduled request checks that its chip is still there,
    /// when the kernel does not wake pollers on removal (before Linux 6.6).
    /// nil: never poll. Set before `schedule`. Default: 1 s where needed.
    @exclusivity(unchecked) public var vanishCheckInterval: Duration?

    init(
        chip: GPIOChipInfo, capabilities: GPIOCapabilities, driver: any GPIORequestDriver, offsets: [UInt32],
        names: [String], settings: [GPIOLineSettings], consumer: String, eventCapacity: Int
    ) {
        self.chip = chip
        self.capabilities = capabilities
        self.driver = driver
        self.offsets = offsets
        lineNames = names
        self.settings = settings
        self.consumer = consumer
        lineCount = offsets.count
        values = .allocate(capacity: offsets.count)
        values.initialize(repeating: 0)
        setOffsets = .allocate(capacity: offsets.count)
        setOffsets.initialize(repeating: 0)
        setValues = .allocate(capacity: offsets.count)
        setValues.initialize(repeating: 0)
        stagedOffsets = .allocate(capacity: offsets.count)
        stagedOffsets.initialize(repeating: 0)
        stagedValues = .allocate(capacity: offsets.count)
        stagedValues.initialize(repeating: 0)
        events = EventStorage(capacity: eventCapacity, lines: offsets.count)
        eventsPerDispatch = eventCapacity
        lines = .allocate(capacity: offsets.count)
        indexByOffset = .allocate(capacity: Int(offsets.max() ?? 0) + 1)
        indexByOffset.initialize(repeating: -1)
        for i in 0..<offsets.count {
            indexByOffset[Int(offsets[i])] = Int32(i)
            (lines + i).initialize(to: LineEventState(offset: offsets[i], settings: settings[i], capabilities: capabilities))
            if lines[i].softwareDebounceNs > 0 { hasSoftwareDebounce = true }
        }
        vanishCheckInterval = capabilities.contains(.vanishWakesPoller) ? nil : .seconds(1)
    }

    deinit {
        release()
        values.deallocate()
        setOffsets.deallocate()
        setValues.deallocate()
        stagedOffsets.deallocate()
        stagedValues.deallocate()
        lines.deinitialize(count: lineCount)
        lines.deallocate()
        indexByOffset.deallocate()
    }

    /// The settings a driver gets for `settings`: debounce goes to the
    /// kernel only where it can do it; otherwise the layer debounces in
    /// software and needs both edges to follow the level.
    static func driverSettings(_ settings: GPIOLineSettings, capabilities: GPIOCapabilities) -> GPIOLineSettings {
        var s = settings
        if s.direction == .input && s.debounce > .zero && !capabilities.contains(.kernelDebounce) {
            s.debounce = .zero
            if s.edgeDetection != .none { s.edgeDetection = .both }
        }
        return s
    }

    // MARK: Lines

    func ref(_ index: Int) -> GPIOLineRef {
        GPIOLineRef(chip: chip.description, offset: offsets[index], name: lineNames[index])
    }

    /// The request-order index of a line, by offset or name.
    func index(of line: GPIOLineSelector) throws(GPIOError) -> Int {
        switch line {
        case let .offset(o):
            guard let i = index(ofOffset: o) else { throw .lineNotInRequest(GPIOLineRef(chip: chip.description, offset: o)) }
            return i
        case let .name(n):
            var i = 0
            while i < lineCount {
                if lineNames[i] == n { return i }
                i += 1
            }
            throw .lineNotFound(name: n, chip: "\(chip.description) (in this request)")
        }
    }

    func badIndex(_ index: Int) -> GPIOError {
        .invalidConfiguration(nil, reason: "line index \(index) is outside the request's \(lineCount) line(s)")
    }

    func checkUsable(_ operation: StaticString) throws(GPIOError) {
        switch state {
        case .active: return
        case let .vanished(error): throw error
        case .released: throw .requestReleased(chip: chip.description, operation: "\(operation)")
        }
    }

    /// Maps a driver failure; a vanished chip also marks the request.
    func noteFailure(_ error: GPIOError) -> GPIOError {
        if case .chipVanished = error, state == .active { chipVanished(error) }
        return error
    }

    /// Events of one line found lost so far. With sequence numbers
    /// (`capabilities.lossCounting == .exact`: libgpiod 2.x) these are the
    /// gaps in the line's own numbers, exact up to the line's last event
    /// read (a loss after it shows with its next event); the request's total,
    /// `statistics.lostEvents`, comes from the request-wide numbers and is
    /// exact up to the last event read of any line. Without them (1.6) the
    /// count is a lower bound (see `GPIOLossCounting.lowerBound`).
    public func lostEvents(_ line: GPIOLineSelector) throws(GPIOError) -> UInt64 {
        lines[try index(of: line)].lost
    }

    /// `lostEvents(_:)` of the line at `index` (request order); 0 for an
    /// index outside the request. Does not allocate.
    public func lostEvents(at index: Int) -> UInt64 {
        index >= 0 && index < lineCount ? lines[index].lost : 0
    }

    /// How many reads found the kernel FIFO of the line at `index` full
    /// (libgpiod 1.6: edges after it may be gone; see
    /// `GPIOEdgeEventBatch.overflowSuspected`). Always 0 with 2.x.
    public func fullFIFOReads(at index: Int) -> UInt64 {
        index >= 0 && index < lineCount ? lines[index].fifoFull : 0
    }

    /// How this request's lost events are counted (exact with libgpiod 2.x,
    /// a lower bound with 1.6).
    public var lossCounting: GPIOLossCounting { capabilities.lossCounting }

    /// Whether edge events wait in the kernel (the request's fd is readable),
    /// checked without reading them or blocking: a handler that must not act
    /// on a state the next events would change asks it first. False for a
    /// request that is not active or whose lines detect no edges.
    public var hasPendingEvents: Bool { state == .active && driver.hasPendingEvents }

    // MARK: Values

    /// The logical value of one line (active-low applied).
    public func value(_ line: GPIOLineSelector) throws(GPIOError) -> Bool {
        // (Usable first: a released request says so, whatever the selector.)
        try checkUsable("value")
        return try value(at: index(of: line))
    }

    /// The logical value of the request's only (or first) line.
    public func value() throws(GPIOError) -> Bool { try value(at: 0) }

    /// The logical value of the line at `index` (request order).
    public func value(at index: Int) throws(GPIOError) -> Bool {
        try checkUsable("value")
        guard index >= 0 && index < lineCount else { throw badIndex(index) }
        do { try driver.getValues(into: values) } catch { throw noteFailure(error) }
        return values[index] != 0
    }

    /// Logical values of all lines, in request order.
    public func readValues() throws(GPIOError) -> [Bool] {
        try checkUsable("readValues")
        do { try driver.getValues(into: values) } catch { throw noteFailure(error) }
        return values.map { $0 != 0 }
    }

    /// Logical values of all lines into `buffer` (request order), without
    /// allocating.
    public func readValues(into buffer: UnsafeMutableBufferPointer<Bool>) throws(GPIOError) {
        try checkUsable("readValues")
        precondition(buffer.count >= lineCount, "readValues(into:) needs room for \(lineCount) values")
        do { try driver.getValues(into: values) } catch { throw noteFailure(error) }
        for i in 0..<lineCount { buffer[i] = values[i] != 0 }
    }

    /// Sets one output line's logical value.
    public func setValue(_ value: Bool, _ line: GPIOLineSelector) throws(GPIOError) {
        try checkUsable("setValue")
        try setValue(value, at: index(of: line))
    }

    /// Sets the logical value of the request's only (or first) line.
    public func setValue(_ value: Bool) throws(GPIOError) { try setValue(value, at: 0) }

    /// The number of lines requested.
    public var count: Int { lineCount }

    /// The request-order index of the line at `offset`, if it is in the request.
    @inlinable
    public func index(ofOffset offset: UInt32) -> Int? {
        let o = Int(offset)
        guard o < indexByOffset.count else { return nil }
        let i = Int(indexByOffset[o])
        return i >= 0 ? i : nil
    }

    /// Sets the logical value of the output line at `index` (request
    /// order), without looking the line up: what a program that keeps a
    /// line's index writes with.
    public func setValue(_ value: Bool, at index: Int) throws(GPIOError) {
        try checkUsable("setValue")
        guard index >= 0 && index < lineCount else { throw badIndex(index) }
        guard settings[index].direction == .output else { throw .notAnOutput(ref(index)) }
        setOffsets[0] = offsets[index]
        setValues[0] = value ? 1 : 0
        do {
            try driver.setValues(
                offsets: UnsafeBufferPointer(rebasing: setOffsets[0..<1]),
                values: UnsafeBufferPointer(rebasing: setValues[0..<1]))
        } catch { throw noteFailure(error) }
    }

    /// Stages a write of the output line at `index` (request order) for
    /// `commitStaged()`, which makes every staged write one kernel call; a
    /// second write of the same line replaces the first. Nothing reaches
    /// the line until the commit.
    public func stage(_ value: Bool, at index: Int) throws(GPIOError) {
        guard index >= 0 && index < lineCount else { throw badIndex(index) }
        guard settings[index].direction == .output else { throw .notAnOutput(ref(index)) }
        let offset = offsets[index]
        var k = 0
        while k < stagedCount && stagedOffsets[k] != offset { k += 1 }
        stagedOffsets[k] = offset
        stagedValues[k] = value ? 1 : 0
        if k == stagedCount { stagedCount += 1 }
    }

    /// Writes every staged value in one kernel call (libgpiod 1.6: one per
    /// group of lines with the same settings), then clears the stage,
    /// whether the write succeeded or not. Nothing staged: no call.
    public func commitStaged() throws(GPIOError) {
        let k = stagedCount
        stagedCount = 0
        guard k > 0 else { return }
        try checkUsable("setValues")
        do {
            try driver.setValues(
                offsets: UnsafeBufferPointer(rebasing: stagedOffsets[0..<k]),
                values: UnsafeBufferPointer(rebasing: stagedValues[0..<k]))
        } catch { throw noteFailure(error) }
    }

    /// Sets the logical value of the request's only (or first) line from a
    /// thread that does not own the request, without touching the request's
    /// scratch buffers: for a stop that finds the owning loop stuck in a
    /// handler and must still make the line safe (a write is one kernel
    /// call). Not for ordinary use: a write the owner makes at the same time
    /// may land before or after this one; neither undoes the other's line
    /// (libgpiod 1.6 writes a kernel handle's lines together, and serializes
    /// the writes of one request).
    public func setValueFromAnotherThread(_ value: Bool) throws(GPIOError) {
        try setValueFromAnotherThread(value, at: 0)
    }

    /// `setValueFromAnotherThread(_:)` for the output line at `index`
    /// (request order).
    public func setValueFromAnotherThread(_ value: Bool, at index: Int) throws(GPIOError) {
        try checkUsable("setValue")
        guard index >= 0 && index < lineCount else { throw badIndex(index) }
        guard settings[index].direction == .output else { throw .notAnOutput(ref(index)) }
        let offset = offsets[index]
        let v: Int32 = value ? 1 : 0
        let result: GPIOError? = withUnsafePointer(to: offset) { o -> GPIOError? in
            withUnsafePointer(to: v) { p -> GPIOError? in
                do throws(GPIOError) {
                    try driver.setValues(offsets: UnsafeBufferPointer(start: o, count: 1), values: UnsafeBufferPointer(start: p, count: 1))
                    return nil
                } catch { return error }
            }
        }
        if let result { throw result }
    }

    /// Sets several output lines at once (in one kernel call where the lines
    /// share a handle).
    public func setValues(_ changes: [(GPIOLineSelector, Bool)]) throws(GPIOError) {
        try checkUsable("setValues")
        guard changes.count <= lineCount else {
            throw .capacityExceeded(what: "values set at once on this request", limit: lineCount)
        }
        var k = 0
        for (line, value) in changes {
            let i = try index(of: line)
            guard settings[i].direction == .output else { throw .notAnOutput(ref(i)) }
            setOffsets[k] = offsets[i]
            setValues[k] = value ? 1 : 0
            k += 1
        }
        do {
            try driver.setValues(
                offsets: UnsafeBufferPointer(rebasing: setOffsets[0..<k]),
                values: UnsafeBufferPointer(rebasing: setValues[0..<k]))
        } catch { throw noteFailure(error) }
    }

    // MARK: Reconfigure and release

    /// Applies new settings to one line (the others keep theirs); e.g. turn
    /// an input into an output. With libgpiod 2.x the lines stay requested;
    /// with 1.6 a request that detects edges, or whose lines' flags no
    /// longer group the same way, is released and requested again.
    /// The request's other output lines keep the values they have now (not
    /// the `outputValue` they were requested with).
    public func reconfigure(_ line: GPIOLineSelector, _ newSettings: GPIOLineSettings) throws(GPIOError) {
        try checkUsable("reconfigure")
        let i = try index(of: line)
        var all = settings
        if all.indices.contains(where: { $0 != i && all[$0].direction == .output }) {
            do { try driver.getValues(into: values) } catch { throw noteFailure(error) }
            for j in all.indices where j != i && all[j].direction == .output { all[j].outputValue = values[j] != 0 }
        }
        all[i] = newSettings
        try reconfigure(all)
    }

    /// Applies new settings to all lines (request order).
    public func reconfigure(_ newSettings: [GPIOLineSettings]) throws(GPIOError) {
        try checkUsable("reconfigure")
        guard newSettings.count == lineCount else {
            throw .invalidConfiguration(nil, reason: "reconfigure needs settings for all \(lineCount) lines")
        }
        for i in 0..<lineCount {
            if let reason = newSettings[i].invalidReason { throw .invalidConfiguration(ref(i), reason: reason) }
        }
        let hadEvents = settings.contains { $0.direction == .input && $0.edgeDetection != .none }
        let willHaveEvents = newSettings.contains { $0.direction == .input && $0.edgeDetection != .none }
        if loop != nil && hadEvents && !willHaveEvents {
            throw .invalidConfiguration(nil, reason: "the request is scheduled on a run loop; unschedule it before turning off every line's edge detection")
        }
        let caps = capabilities
        let driverLines = (0..<lineCount).map {
            GPIODriverLineConfig(offset: offsets[$0], settings: Self.driverSettings(newSettings[$0], capabilities: caps))
        }
        do { try driver.reconfigure(driverLines) } catch { throw noteFailure(error) }
        settings = newSettings
        hasSoftwareDebounce = false
        for i in 0..<lineCount {
            // The kernel's sequence numbers go on (2.x reconfigures in place).
            var state = LineEventState(offset: offsets[i], settings: newSettings[i], capabilities: caps)
            state.lastLineSequence = lines[i].lastLineSequence
            state.lost = lines[i].lost
            lines[i] = state
            if state.softwareDebounceNs > 0 { hasSoftwareDebounce = true }
        }
        try resyncAfterReconfigure()
    }

    /// Releases the lines: they are free for others, and the request stops
    /// receiving events. Idempotent.
    public func release() {
        if state == .released { return }
        unscheduleItems()
        driver.release()
        state = .released
    }
}
