import Boardloop
import BoardloopGPIO

/// An output line on its loop: writes, toggles, pulses (on a loop timer).
final class OutputLine {
    let id: Int
    let config: LineConfig
    unowned let rt: LoopRuntime
    let request: GPIOLineRequest
    let cell: LineCell
    @exclusivity(unchecked) private(set) var value: Bool
    @exclusivity(unchecked) private var pulseTimer: RunLoopTimer?
    @exclusivity(unchecked) private(set) var writes: UInt64 = 0
    @exclusivity(unchecked) private(set) var failures: UInt64 = 0

    init(id: Int, config: LineConfig, runtime: LoopRuntime, request: GPIOLineRequest, cell: LineCell, value: Bool) {
        self.id = id
        self.config = config
        rt = runtime
        self.request = request
        self.cell = cell
        self.value = value
        cell.value.store(value, ordering: .relaxed)
    }

    /// A pulse timer, in every mode (a pulse ends whatever the mode).
    func makePulseTimer() throws {
        guard pulseTimer == nil else { return }
        let t = RunLoopTimer.rearmable { [unowned self] _ in
            self.set(false)
        }
        try rt.loop.add(t, mode: .common)
        pulseTimer = t
    }

    func set(_ v: Bool) {
        do {
            try request.setValue(v)
            value = v
            writes &+= 1
            cell.value.store(v, ordering: .relaxed)
            rt.traceOutput(self, v)
        } catch {
            failures &+= 1
            rt.writeFailed(self, error)
        }
    }

    func toggle() { set(!value) }

    func pulse(_ ns: Int64) {
        set(true)
        pulseTimer?.fireDate = MonotonicInstant(nanoseconds: rt.nowNanoseconds &+ UInt64(max(0, ns)))
    }

    /// When the pulse in flight ends (nil: none is).
    var pulseEnd: MonotonicInstant? {
        guard let d = pulseTimer?.fireDate, d != .distantFuture else { return nil }
        return d
    }

    /// Continues a pulse a previous config started: the line goes off at `end`.
    func resumePulse(until end: MonotonicInstant) throws {
        try makePulseTimer()
        pulseTimer?.fireDate = end
    }

    func detach() {
        pulseTimer?.invalidate()
        pulseTimer = nil
    }
}
