import Boardloop
import BoardloopGPIO

/// An output line on its loop: writes, toggles, pulses (on a loop timer).
final class OutputLine {
    let id: Int
    let config: LineConfig
    /// The loop its pulse timer is on.
    unowned let loop: BoardRunLoop
    let events: EventSink
    let request: GPIOLineRequest
    let cell: LineCell
    @exclusivity(unchecked) private(set) var value: Bool
    @exclusivity(unchecked) private var pulseTimer: RunLoopTimer?
    /// Taken off its loop (a stop, a reload): a write of its safe value now
    /// is the stop's or the reload's (`EventSink.WriteBy.safe`).
    @exclusivity(unchecked) private var detached = false

    init(id: Int, config: LineConfig, loop: BoardRunLoop, events: EventSink, request: GPIOLineRequest, cell: LineCell, value: Bool) {
        self.id = id
        self.config = config
        self.loop = loop
        self.events = events
        self.request = request
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

    func set(_ v: Bool) {
        if detached && v == config.safeValue {
            let was = events.writing(.safe)
            write(v)
            events.restore(was)
        } else {
            write(v)
        }
    }

    @inline(__always) private func write(_ v: Bool) {
        do {
            try request.setValue(v)
            value = v
            cell.value.store(v, ordering: .relaxed)
            events.output(line: id, value: v)
        } catch {
            events.writeFailed(config.name, error)
        }
    }

    func toggle() { set(!value) }

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
