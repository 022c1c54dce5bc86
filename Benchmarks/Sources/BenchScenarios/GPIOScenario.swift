import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import BoardloopTestSupport
import CBenchRaw
import Glibc
import Synchronization

/// Scenario 5, GPIO through the mock chip (real eventfd + epoll path; the
/// mock stands in for the kernel's line-event queue).
public enum GPIOScenario {
    /// Drives `line` of `chip` from its own thread: `edges` edges, one every
    /// 1/rate s (spinning to each), or back to back when `rateHz` is 0; or
    /// until `stop` is set.
    final class Flag: Sendable {
        let raised = Atomic<Int>(0)
    }

    final class Driver: @unchecked Sendable {
        let stopFlag = Flag()
        let thread: JoinableThread
        init(chip: MockChip, line: UInt32, rateHz: Int, edges limit: Int, cpu: Int32) {
            let flag = stopFlag
            let box = Box(0)
            thread = spawn(cpu: cpu) {
                let period = rateHz > 0 ? UInt64(1_000_000_000 / rateHz) : 0
                var t = now() + period
                var level = false
                var n = 0
                while n < limit && flag.raised.load(ordering: .relaxed) == 0 {
                    if period > 0 {
                        bb_spin_until(t)
                        t += period
                    }
                    level.toggle()
                    try? chip.setLevel(.offset(line), level) // a line of the chip: cannot fail
                    n += 1
                }
                box.value = n
            }
            edgesBox = box
        }
        private var edgesBox: Box<Int>!
        func stop() -> Int {
            stopFlag.raised.store(1, ordering: .relaxed)
            thread.join()
            return edgesBox.value
        }
    }

    /// Edge events into a handler: latency (edge timestamp → handler entry)
    /// at a fixed rate, or delivered events per second at saturation.
    public static func boardloop(rateHz: Int, edges: Int, pin: Pinning) throws -> Measurement {
        let chip = try MockChip(label: "bench", lineCount: 8, eventBufferSize: 1024)
        let result = Box<Measurement?>(nil)
        let failure = Box<String?>(nil)
        let t = spawn(cpu: pin.b) {
            do {
                let loop = BoardRunLoop.current
                let req = try chip.open().request(.offset(1), .input(edges: .both), eventBufferCapacity: 256)
                let samples = SampleBuffer(capacity: edges)
                let window = AllocationWindow()
                let warmup = min(2_000, edges / 10)
                var got = 0
                var first: UInt64 = 0
                var last: UInt64 = 0
                try req.schedule(on: loop) { batch in
                    let entry = now()
                    if got == 0 { first = entry }
                    last = entry
                    for i in 0..<batch.count {
                        samples.record(UInt64(batch.latency(at: i).nanosecondsClamped))
                    }
                    let before = got
                    got += batch.count
                    if before < warmup && got >= warmup { window.begin() }
                }
                // At a rate: `edges` edges, run until each was delivered or
                // reported lost. Saturated: the driver goes on until `edges`
                // were delivered, so a consumer that was descheduled for a
                // while (a loaded machine) loses more but still counts them.
                let driver = Driver(chip: chip, line: 1, rateHz: rateHz, edges: rateHz > 0 ? edges : Int.max, cpu: pin.a)
                while rateHz > 0 ? got + Int(req.statistics.lostEvents) < edges : got < edges {
                    _ = try loop.run(mode: .default, timeout: .milliseconds(100), returnAfterSourceHandled: true)
                }
                window.end()
                _ = driver.stop()
                var m = Measurement()
                if rateHz > 0 {
                    m.latency = samples.percentiles()
                } else {
                    m.throughput = last > first ? Double(got - 1) * 1e9 / Double(last - first) : 0
                }
                m.countedEvents = got - warmup
                m.allocations = window.count
                if req.statistics.lostEvents > 0 { m.note = "\(req.statistics.lostEvents) lost (queue full)" }
                req.release()
                result.value = m
            } catch {
                failure.value = "\(error)"
            }
        }
        t.join()
        if let f = failure.value { throw BenchError("gpio: \(f)") }
        return result.value!
    }

    public enum Flood: Sendable {
        /// No flood.
        case none
        /// The flooded line is scheduled in the default mode only: its
        /// events are held while the critical mode runs.
        case otherMode
        /// The flooded line is scheduled in the critical mode too (what
        /// happens without a critical mode, for contrast).
        case sameMode
    }

    /// A 1 kHz task (a `RunLoopTimer`) in the critical mode while a
    /// low-priority line is flooded at `floodHz` edges/s in alternating
    /// phases (`phase` of flood, `phase` of quiet, the driver asleep), so
    /// both figures come from the same run and the same conditions of the
    /// machine. Fires within 5 ms of a phase change count for neither.
    /// Lateness as in the timer scenario. Afterwards the default mode runs
    /// and the held edges are delivered (or reported lost: the queue holds 1,024).
    public static func critical(
        flood: Flood, floodHz: Int, firesPerPhaseKind: Int, phase: Duration = .milliseconds(200), pin: Pinning
    ) throws -> (quiet: Measurement, flooded: Measurement) {
        let chip = try MockChip(label: "bench", lineCount: 8, eventBufferSize: 1024)
        let result = Box<(Measurement, Measurement)?>(nil)
        let failure = Box<String?>(nil)
        let critical: RunLoopMode = "critical"
        let period: UInt64 = 1_000_000
        let phaseNs = UInt64(phase.nanosecondsClamped)
        let t = spawn(cpu: pin.b) {
            do {
                let loop = BoardRunLoop.current
                let req = try chip.open().request(.offset(5), .input(edges: .both), eventBufferCapacity: 256)
                var delivered = 0
                try req.schedule(on: loop, mode: .default) { batch in delivered += batch.count }
                if flood == .sameMode { try req.add(to: critical) }
                let flooding = Flag()  // 1 while the driver floods
                let stop = Flag()
                let edges = Box(0)
                let driver = spawn(cpu: pin.a) {
                    let periodNs = UInt64(1_000_000_000 / floodHz)
                    var level = false
                    var n = 0
                    while stop.raised.load(ordering: .relaxed) == 0 {
                        // Quiet phase: asleep.
                        let quietEnd = now() + phaseNs
                        while now() < quietEnd && stop.raised.load(ordering: .relaxed) == 0 { usleep(1000) }
                        if flood == .none { continue }
                        flooding.raised.store(1, ordering: .releasing)
                        let floodEnd = now() + phaseNs
                        var t = now()
                        while t < floodEnd && stop.raised.load(ordering: .relaxed) == 0 {
                            bb_spin_until(t)
                            level.toggle()
                            try? chip.setLevel(.offset(5), level) // a line of the chip: cannot fail
                            n += 1
                            t += periodNs
                        }
                        flooding.raised.store(0, ordering: .releasing)
                    }
                    edges.value = n
                }
                let quiet = SampleBuffer(capacity: firesPerPhaseKind)
                let flooded = SampleBuffer(capacity: firesPerPhaseKind)
                let window = AllocationWindow()
                let t0 = now() + 20 * period
                var lastState = -1
                var stateSince: UInt64 = 0
                var fires = 0
                var grid = TimerScenario.GridPosition(t0: t0, period: period)
                let task = RunLoopTimer(fireAt: MonotonicInstant(nanoseconds: t0), interval: .nanoseconds(Int64(period))) { _ in
                    let t = now()
                    let (late, k) = grid.place(t)
                    fires += 1
                    if fires == 50 { window.begin() }
                    let state = flooding.raised.load(ordering: .acquiring)
                    if state != lastState {
                        lastState = state
                        stateSince = t
                        return
                    }
                    guard fires > 50, t - stateSince > 5_000_000 else { return }
                    if state == 1 || flood == .none && (k / Int64(phaseNs / period)) % 2 == 1 {
                        flooded.record(late)
                    } else {
                        quiet.record(late)
                    }
                    let enough = flood == .none
                        ? quiet.count + flooded.count >= 2 * firesPerPhaseKind
                        : quiet.count >= firesPerPhaseKind && flooded.count >= firesPerPhaseKind
                    if enough {
                        window.end()
                        loop.stop()
                    }
                }
                try loop.add(task, mode: critical)
                _ = try loop.run(mode: critical, timeout: .seconds(3600))
                task.invalidate()
                stop.raised.store(1, ordering: .relaxed)
                driver.join()
                let heldAfter = delivered
                // The held edges are delivered once the default mode runs
                // (until a quiet 50 ms: the edges are all in the queue by now).
                while delivered + Int(req.statistics.lostEvents) < edges.value {
                    let r = try loop.run(mode: .default, timeout: .milliseconds(50), returnAfterSourceHandled: true)
                    if r != .handledSource { break }
                }
                var q = Measurement()
                q.latency = quiet.percentiles()
                q.missed = grid.missed
                q.countedEvents = fires - 50
                q.allocations = window.count
                var f = Measurement()
                f.latency = flooded.percentiles()
                if flood != .none {
                    let lost = Int(req.statistics.lostEvents)
                    let missing = edges.value - delivered - lost
                    f.note = "\(edges.value) edges; \(heldAfter) delivered during the task, \(delivered - heldAfter) after it"
                        + (lost > 0 ? ", \(lost) reported lost (queue full)" : "")
                        + (missing != 0 ? ", \(missing) unaccounted" : "")
                }
                req.release()
                result.value = (q, f)
            } catch {
                failure.value = "\(error)"
            }
        }
        t.join()
        if let f = failure.value { throw BenchError("critical mode: \(f)") }
        return (result.value!.0, result.value!.1)
    }
}
