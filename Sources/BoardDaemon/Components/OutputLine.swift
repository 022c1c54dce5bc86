import Boardloop
import BoardloopGPIO

/// An output line on its loop: writes, toggles, pulses (on a loop timer).
/// Its request may hold other outputs of the loop on the same chip
/// (`Daemon.requestOutputs`): the line is `index` in it.
final class OutputLine {
    let id: Int
    let config: LineConfig
    /// The loop its pulse timer is on.
    unowned let loop: BoardRunLoop
    let events: EventSink
    let request: GPIOLineRequest
    /// The line's index in `request`.
    let index: Int
    let cell: LineCell
    @exclusivity(unchecked) private(set) var value: Bool
    @exclusivity(unchecked) private var pulseTimer: RunLoopTimer?
    /// Taken off its loop (a stop, a reload): a write of its safe value now
    /// is the stop's or the reload's (`EventSink.WriteBy.safe`).
    @exclusivity(unchecked) private var detached = false

    init(
        id: Int, config: LineConfig, loop: BoardRunLoop, events: EventSink, request: GPIOLineRequest, index: Int, cell: LineCell,
        value: Bool
    ) {
        self.id = id
        self.config = config
        self.loop = loop
        self.events = events
        self.request = request
        self.index = index
        self.cell = cell
        self.value = value
        cell.value.store(value, ordering: .relaxed)
    }

    /// A pulse timer, in every mode (a pulse ends whatever the mode).
    func makePulseTimer() throws {
        guard pulseTimer == nil else { return }
        let t = RunLoopTimer.rearmable { [unowned self] _ in
            let was = self.events.writing(.pulse)
            self.set(false)
            self.events.restore(was)
        }
        try loop.add(t, mode: .common)
        pulseTimer = t
    }

    /// Inline where it is called (the executor's write of a reaction's
    /// output): the common case is the write and its bookkeeping, the rest
    /// — a detached line's write, a failure — out of line.
    @inline(__always) func set(_ v: Bool) {
        if detached {
            setDetached(v)
        } else {
            write(v)
        }
    }

    @inline(never) private func setDetached(_ v: Bool) {
        if v == config.safeValue {
            let was = events.writing(.safe)
            write(v)
            events.restore(was)
        } else {
            write(v)
        }
    }

    @inline(__always) private func write(_ v: Bool) {
        do {
            try request.setValue(v, at: index)
            wrote(v)
        } catch {
            writeFailed(error)
        }
    }

    @inline(never) private func writeFailed(_ error: GPIOError) {
        events.writeFailed(config.name, error)
    }

    @inline(__always) private func wrote(_ v: Bool) {
        value = v
        cell.value.store(v, ordering: .relaxed)
        events.output(line: id, value: v)
    }

    /// Whether a write of `v` may be staged with others (`stage`, then
    /// `request.commitStaged()` and `committed`): not while the line is
    /// detached, whose safe-value writes are reported as such.
    var stages: Bool { !detached }

    /// A write staged on the request and not yet committed.
    @exclusivity(unchecked) private(set) var pending = false

    /// Stages a write of `v` on the request (`pending`); a failure is
    /// reported.
    func stage(_ v: Bool) {
        do {
            try request.stage(v, at: index)
            pending = true
        } catch {
            writeFailed(error)
        }
    }

    /// After the request's staged writes were committed: the line is at
    /// `v` (nil error), or the write failed.
    func committed(_ v: Bool, _ error: GPIOError?) {
        pending = false
        if let error { writeFailed(error) } else { wrote(v) }
    }

    @inline(__always) func toggle() { set(!value) }

    func pulse(_ ns: Int64) {
        set(true)
        pulseTimer?.arm(at: MonotonicInstant(nanoseconds: loop.now.nanoseconds &+ UInt64(max(0, ns))))
    }

    /// When the pulse in flight ends (nil: none is).
    var pulseEnd: MonotonicInstant? {
        guard let t = pulseTimer, t.isArmed else { return nil }
        return t.fireDate
    }

    /// Continues a pulse a previous config started: the line goes off at `end`.
    func resumePulse(until end: MonotonicInstant) throws {
        try makePulseTimer()
        pulseTimer?.arm(at: end)
    }

    func detach() {
        detached = true
        pulseTimer?.invalidate()
        pulseTimer = nil
    }
}
