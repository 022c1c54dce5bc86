import Boardloop
import BoardloopGPIO
import Glibc
import Synchronization

/// What a scenario found: PASS with figures, or FAIL with why.
struct Outcome {
    let name: String
    let passed: Bool
    let text: String

    static func pass(_ name: String, _ figures: String) -> Outcome { Outcome(name: name, passed: true, text: figures) }
    static func fail(_ name: String, _ why: String) -> Outcome { Outcome(name: name, passed: false, text: why) }

    var line: String { "\(passed ? "PASS" : "FAIL") \(name): \(text)" }
}

struct ScenarioFailure: Error { let why: String }

func require(_ condition: Bool, _ why: @autoclosure () -> String) throws {
    if !condition { throw ScenarioFailure(why: why()) }
}

/// Runs `loop` in `mode` until `done()` or `timeout`.
func run(_ loop: BoardRunLoop, _ mode: RunLoopMode = .default, timeout: Duration, until done: () -> Bool) throws {
    let deadline = MonotonicInstant.now + timeout
    while !done() && MonotonicInstant.now < deadline {
        _ = try loop.run(mode: mode, timeout: .milliseconds(50), returnAfterSourceHandled: true)
    }
}

/// Runs `loop` in `mode` for `duration` (whatever comes).
func run(_ loop: BoardRunLoop, _ mode: RunLoopMode = .default, for duration: Duration) throws {
    let deadline = MonotonicInstant.now + duration
    while MonotonicInstant.now < deadline {
        _ = try loop.run(mode: mode, timeout: deadline - MonotonicInstant.now)
    }
}

/// Edges as the scenarios compare them.
struct Edge: Equatable, CustomStringConvertible {
    let offset: UInt32
    let rising: Bool
    var description: String { "\(offset)\(rising ? "↑" : "↓")" }
}

/// Lets the kernel's irq thread run after a pull change, so every toggle
/// becomes its own edge event (gpio-sim drops changes while the line's
/// one-shot interrupt is still being handled).
func settleKernel() {
    sched_yield()
    sleep(.microseconds(200))
}

enum Scenarios {
    // MARK: 1. Engine + libgpiod

    static func engineAndLibgpiod(_ sim: SimBank) throws -> String {
        let chip = try GPIOChip(sim.label)
        // Lines by name, on the chip and across chips.
        let button = try chip.offset(of: "BUTTON")
        let led = try chip.offset(of: "LED")
        try require(button == 17 && led == 27, "BUTTON/LED are at \(button)/\(led), expected 17/27")
        let found = try GPIOChip.findLine(named: "LED")
        try require(found.chip.label == sim.label && found.offset == 27, "findLine(LED) gave \(found)")

        // Edge events from pull toggles on four lines at once.
        let inputs: [UInt32] = [17, 18, 19, 20]
        for o in inputs { sim.pull(o, up: false) }
        let req = try chip.request(inputs.map { GPIOLineSelector.offset($0) }, .input(edges: .both))
        let loop = try BoardRunLoop()
        var got: [GPIOEdgeEvent] = []
        var faults: [GPIOError] = []
        try req.schedule(on: loop) { batch in
            if let f = batch.fault { faults.append(f) }
            for e in batch { got.append(e) }
        }
        let sequence: [Edge] = [
            Edge(offset: 17, rising: true), Edge(offset: 18, rising: true), Edge(offset: 17, rising: false),
            Edge(offset: 19, rising: true), Edge(offset: 20, rising: true), Edge(offset: 18, rising: false),
            Edge(offset: 20, rising: false), Edge(offset: 19, rising: false), Edge(offset: 17, rising: true),
            Edge(offset: 18, rising: true), Edge(offset: 17, rising: false), Edge(offset: 18, rising: false),
        ]
        let before = MonotonicInstant.now
        for e in sequence {
            try require(sim.pull(e.offset, up: e.rising) == 0, "cannot write \(sim.linePath(e.offset, "pull"))")
            settleKernel()
        }
        let after = MonotonicInstant.now
        try run(loop, timeout: .seconds(10)) { got.count >= sequence.count }
        try require(faults.isEmpty, "faults: \(faults)")
        let edges = got.map { Edge(offset: $0.offset, rising: $0.edge == .rising) }
        try require(edges == sequence, "edges \(edges), expected \(sequence)")
        let stamps = got.map(\.timestamp)
        try require(zip(stamps, stamps.dropFirst()).allSatisfy { $0 <= $1 }, "timestamps out of order: \(stamps)")
        try require(
            stamps.allSatisfy { $0 >= before && $0 <= after },
            "kernel timestamps outside the toggling window \(before)...\(after): \(stamps)")
        let span = stamps.last! - stamps.first!
        req.release()

        // Output writes show in sim_gpioN/value.
        let out = try chip.request(27, .output(false))
        let v0 = sim.value(27)
        try out.setValue(true)
        let v1 = sim.value(27)
        try out.setValue(false)
        let v2 = sim.value(27)
        try require(v0 == 0 && v1 == 1 && v2 == 0, "sim_gpio27/value read \(String(describing: v0)), \(String(describing: v1)), \(String(describing: v2)); expected 0, 1, 0")
        out.release()

        // A line held by gpioset: the typed busy error names the consumer.
        let busyLine: UInt32 = 22
        guard let holder = holdLine(sim, chip, busyLine) else {
            throw ScenarioFailure(why: "could not start gpioset holding line \(busyLine)")
        }
        defer { holder.stop() }
        var consumer = ""
        do {
            _ = try chip.request(.offset(busyLine), .input())
            throw ScenarioFailure(why: "requesting a line gpioset holds succeeded")
        } catch let error as GPIOError {
            guard case let .lineBusy(line, c) = error, line.offset == busyLine, let c, !c.isEmpty else {
                throw ScenarioFailure(why: "expected lineBusy with a consumer, got: \(error)")
            }
            consumer = c
            try require(error.description.contains(sim.chipName), "busy message does not name the chip: \(error)")
        }
        try require(consumer.hasPrefix("gpioset"), "busy consumer is '\(consumer)', expected gpioset")
        return "\(got.count) edges on \(inputs.count) lines in order, kernel timestamps monotonic within the "
            + "toggling window (span \(span.ms)); LED 27 wrote 0/1/0 and sim_gpio27/value read 0/1/0; "
            + "BUTTON=17 LED=27 found by name; busy line \(busyLine) -> lineBusy naming consumer '\(consumer)'"
    }

    /// Starts gpioset holding `offset` (1.6 syntax, then 2.x) and waits until
    /// the line shows as used.
    static func holdLine(_ sim: SimBank, _ chip: GPIOChip, _ offset: UInt32) -> Child? {
        let attempts = [
            ["gpioset", "--mode=signal", sim.chipName, "\(offset)=1"],
            ["gpioset", "-c", sim.chipName, "\(offset)=1"],
        ]
        for argv in attempts {
            guard let child = Child(argv) else { continue }
            let deadline = MonotonicInstant.now + .seconds(5)
            while MonotonicInstant.now < deadline && child.isRunning {
                if (try? chip.lineInfo(.offset(offset)).used) == true { return child }
                sleep(.milliseconds(20))
            }
            child.stop()
        }
        return nil
    }

    // MARK: 2. A burst larger than the kernel buffer while the mode is held

    /// Toggles each of `lines` `perLine` times, interleaved, settling the
    /// kernel after each; every line ends high when `perLine` is odd.
    static func toggle(_ sim: SimBank, _ lines: [UInt32], perLine: Int) {
        for k in 0..<perLine {
            for o in lines {
                sim.pull(o, up: k % 2 == 0)
                settleKernel()
            }
        }
    }

    static func overflow(_ sim: SimBank) throws -> String {
        let chip = try GPIOChip(sim.label)
        let backend = LibgpiodBackend.shared
        let lines: [UInt32] = [23, 28]
        for o in lines { sim.pull(o, up: false) }
        let held: RunLoopMode = "gpio-sim.held"
        // A 16-event buffer: with 2.x the request's kernel buffer (for both
        // lines together); 1.6 keeps 16 per line whatever is asked.
        let capacity = 16
        let req = try chip.request(lines.map { GPIOLineSelector.offset($0) }, .input(edges: .both), eventBufferCapacity: capacity)
        let loop = try BoardRunLoop()
        var got: [GPIOEdgeEvent] = []
        var lostInBatches: UInt64 = 0
        var overflowBatches = 0
        try req.schedule(on: loop, mode: held) { batch in
            for e in batch { got.append(e) }
            lostInBatches += batch.lostEvents
            if batch.overflowSuspected { overflowBatches += 1 }
        }
        var ticks = 0
        try loop.add(RunLoopTimer(fireAt: loop.now, interval: .milliseconds(10)) { _ in ticks += 1 }, mode: .default)

        let perLine = 41 // odd: each line ends high
        let total = perLine * lines.count
        toggle(sim, lines, perLine: perLine)
        try run(loop, .default, for: .milliseconds(100))
        try require(got.isEmpty, "\(got.count) events dispatched while only the default mode ran")
        try require(ticks > 0, "the default mode did not run")
        try run(loop, held, for: .milliseconds(300))
        let levels = try req.readValues()
        let stats = req.statistics
        try require(levels == [true, true], "both lines should end high after \(perLine) toggles each, read \(levels)")
        let kernelBuffer = backend.kernelEventBuffer(lines: lines.count, eventBufferCapacity: capacity)
        let perLineGot = lines.map { o in got.filter { $0.offset == o }.count }
        if req.lossCounting == .exact {
            // libgpiod 2.x: the request's kernel buffer kept the newest
            // `kernelBuffer` events; the gaps in the sequence numbers count
            // every other one, in total and per line.
            try require(got.count == kernelBuffer, "\(got.count) delivered, expected the kernel buffer's \(kernelBuffer)")
            try require(
                UInt64(got.count) + stats.lostEvents == UInt64(total) && lostInBatches == stats.lostEvents,
                "delivered \(got.count) + lost \(stats.lostEvents) (batches \(lostInBatches)) != \(total) edges")
            var perLineLost: [UInt64] = []
            for (k, o) in lines.enumerated() {
                let lost = try req.lostEvents(.offset(o))
                perLineLost.append(lost)
                try require(
                    UInt64(perLineGot[k]) + lost == UInt64(perLine),
                    "line \(o): delivered \(perLineGot[k]) + lost \(lost) != \(perLine)")
                let last = got.last { $0.offset == o }
                try require(last?.lineSequence == UInt64(perLine), "line \(o): last line sequence \(String(describing: last?.lineSequence)), expected \(perLine)")
            }
            try require(got.last?.globalSequence == UInt64(total), "last global sequence \(String(describing: got.last?.globalSequence)), expected \(total)")
            return "\(total) edges on \(lines.count) lines (\(perLine) each) while the mode was held, kernel buffer \(kernelBuffer): "
                + "\(got.count) delivered, \(stats.lostEvents) lost = \(total - got.count) exactly (global sequence "
                + "1...\(total)); per line \(lines.map(String.init)) delivered \(perLineGot) + lost \(perLineLost) = \(perLine) each "
                + "(line sequence numbers); default mode ran \(ticks) ticks meanwhile"
        }
        // libgpiod 1.6: the v1 FIFO keeps 16 per line and drops newer edges
        // without a trace; what shows is the full FIFO and a level that
        // disagrees with the last kept edge.
        try require(perLineGot == [16, 16], "delivered per line \(perLineGot), expected the kernel FIFO's 16 each")
        try require(stats.suspectedOverflows >= 2 && overflowBatches >= 1, "the full FIFOs were not reported (\(stats.suspectedOverflows))")
        try require(stats.lostEvents >= 2 && lostInBatches >= 2, "no loss proven on each line though the levels disagree")
        for o in lines { try require(try req.lostEvents(.offset(o)) >= 1, "no loss proven on line \(o)") }
        return "\(total) edges on \(lines.count) lines (\(perLine) each) while the mode was held: \(got.count) delivered "
            + "(the v1 kernel FIFO's 16 per line), full FIFOs reported (suspectedOverflows \(stats.suspectedOverflows)), "
            + "\(stats.lostEvents) lost proven by the lines' levels (a lower bound); libgpiod 1.6 cannot count the other "
            + "\(total - got.count - Int(stats.lostEvents)) (documented limit, docs/gpio.md); default mode ran \(ticks) ticks meanwhile"
    }

    // MARK: 2b. The event buffer size setting

    static func eventBuffer(_ sim: SimBank) throws -> String {
        let chip = try GPIOChip(sim.label)
        let backend = LibgpiodBackend.shared
        let line: UInt32 = 29
        sim.pull(line, up: false)
        let held: RunLoopMode = "gpio-sim.held"
        var figures: [String] = []
        for capacity in [48, 2] {
            let req = try chip.request(.offset(line), .input(edges: .both), eventBufferCapacity: capacity)
            let loop = try BoardRunLoop()
            var delivered = 0
            try req.schedule(on: loop, mode: held) { delivered += $0.count }
            let edges = 80
            toggle(sim, [line], perLine: edges)
            try run(loop, held, for: .milliseconds(300))
            let kernelBuffer = backend.kernelEventBuffer(lines: 1, eventBufferCapacity: capacity)
            let lost = req.statistics.lostEvents
            if backend.capabilities.contains(.eventBufferSize) {
                try require(delivered == kernelBuffer, "capacity \(capacity): \(delivered) delivered, expected the kernel's \(kernelBuffer)")
                try require(UInt64(delivered) + lost == UInt64(edges), "capacity \(capacity): \(delivered) + \(lost) lost != \(edges)")
            } else {
                try require(delivered == 16 && kernelBuffer == 16, "capacity \(capacity): \(delivered) delivered, expected 1.6's fixed 16")
            }
            figures.append(
                "eventBufferCapacity \(capacity) -> \(delivered) of \(edges) kept, \(lost) counted lost"
                    + (req.statistics.suspectedOverflows > 0 ? " (full FIFO reported)" : ""))
            req.release()
            sim.pull(line, up: false)
            settleKernel()
        }
        let rule = backend.capabilities.contains(.eventBufferSize)
            ? "the kernel rounds the size up to a power of two, at least 2"
            : "libgpiod 1.6: 16 per line, the setting only sizes the read"
        return figures.joined(separator: "; ") + " (\(rule))"
    }

    // MARK: 3. Hot-unplug

    static func hotUnplug(_ sim: SimBank) throws -> String {
        let chip = try GPIOChip(sim.label)
        let req = try chip.request([0, 1], .input(edges: .both))
        req.vanishCheckInterval = .milliseconds(100)
        let out = try chip.request(2, .output(true))
        let loop = try BoardRunLoop()
        var events = 0
        var fault: GPIOError?
        var faultAt = MonotonicInstant.now
        try req.schedule(on: loop) { batch in
            events += batch.count
            if let f = batch.fault {
                fault = f
                faultAt = MonotonicInstant.now
            }
        }
        var ticks = 0
        try loop.add(RunLoopTimer(fireAt: loop.now, interval: .milliseconds(20)) { _ in ticks += 1 }, mode: .default)
        sim.pull(0, up: true)
        try run(loop, timeout: .seconds(5)) { events >= 1 }
        try require(events == 1, "no edge before the unplug")

        let t0 = MonotonicInstant.now
        try require(sim.setLive(false) == 0, "cannot write \(sim.deviceDir)/live")
        try run(loop, timeout: .seconds(5)) { fault != nil }
        guard case .chipVanished(_, let detail)? = fault else {
            throw ScenarioFailure(why: "no chipVanished on the source within 5 s (got \(String(describing: fault)))")
        }
        let detectedAfter = faultAt - t0
        guard case .vanished = req.state else { throw ScenarioFailure(why: "request state \(req.state)") }
        let ticksAtFault = ticks
        try run(loop, for: .milliseconds(200))
        try require(ticks > ticksAtFault, "the loop stopped running timers after the fault")
        var outputError = "none"
        do { try out.setValue(false) } catch { outputError = "\(error)" }
        try require(outputError != "none", "writing an output of the vanished chip succeeded")
        req.release()
        out.release()
        chip.close()

        // live=1: the chip comes back, maybe under another number.
        try require(sim.setLive(true) == 0, "cannot set live=1 again")
        var back: SimBank?
        let deadline = MonotonicInstant.now + .seconds(5)
        while back == nil && MonotonicInstant.now < deadline {
            back = SimBank.find(label: sim.label)
            if back == nil { sleep(.milliseconds(20)) }
        }
        guard let back else { throw ScenarioFailure(why: "the chip did not come back after live=1") }
        let again = try GPIOChip(back.label)
        let req2 = try again.request(0, .input(edges: .both))
        var events2 = 0
        try req2.schedule(on: loop) { events2 += $0.count }
        back.pull(0, up: true)
        try run(loop, timeout: .seconds(5)) { events2 >= 1 }
        try require(events2 == 1, "no edge from the re-created chip")
        req2.release()
        let how = detail.contains("event fd") ? "by the fd's wake-up" : "by the request's periodic check"
        return "live=0 reported on the source after \(detectedAfter.ms) (\(how)); loop kept running "
            + "(\(ticks - ticksAtFault) timer ticks after); output write failed cleanly; live=1: \(back.chipName) "
            + "reopened by label and a new request got its edge"
    }

    // MARK: 4. A custom mode on a real chip

    static func customMode(_ sim: SimBank) throws -> String {
        let chip = try GPIOChip(sim.label)
        let lines: [UInt32] = [24, 25]
        for o in lines { sim.pull(o, up: false) }
        let critical: RunLoopMode = "gpio-sim.critical"
        let req = try chip.request(lines.map { GPIOLineSelector.offset($0) }, .input(edges: .both))
        let loop = try BoardRunLoop()
        var got: [GPIOEdgeEvent] = []
        try req.schedule(on: loop, mode: critical) { batch in
            for e in batch { got.append(e) }
        }
        var ticks = 0
        try loop.add(RunLoopTimer(fireAt: loop.now, interval: .milliseconds(10)) { _ in ticks += 1 }, mode: .default)
        var expected: [Edge] = []
        for k in 0..<10 {
            let o = lines[k % 2]
            let up = (k / 2) % 2 == 0
            sim.pull(o, up: up)
            expected.append(Edge(offset: o, rising: up))
            settleKernel()
        }
        try run(loop, .default, for: .milliseconds(200))
        let dispatchedInDefault = req.eventSource?.dispatchCount ?? 0
        try require(got.isEmpty && dispatchedInDefault == 0, "\(got.count) events dispatched while the default mode ran")
        try require(ticks > 5, "the default mode did not run its timer")
        try run(loop, critical, timeout: .seconds(5)) { got.count >= expected.count }
        let edges = got.map { Edge(offset: $0.offset, rising: $0.edge == .rising) }
        try require(edges == expected, "held edges \(edges), expected \(expected)")
        let stamps = got.map(\.timestamp)
        try require(zip(stamps, stamps.dropFirst()).allSatisfy { $0 <= $1 }, "timestamps out of order")
        try require(req.statistics.lostEvents == 0, "lost \(req.statistics.lostEvents)")
        return "no dispatch while the default mode ran (\(ticks) timer ticks, 200 ms); all \(got.count) held edges "
            + "on \(lines.count) lines delivered in order when the custom mode ran"
    }

    // MARK: 6. Debounce on a real kernel: the kernel's (2.x) or the loop's (1.6)

    static func debounce(_ sim: SimBank) throws -> String {
        let chip = try GPIOChip(sim.label)
        let line: UInt32 = 21
        let period = Duration.milliseconds(20)
        sim.pull(line, up: false)
        let req = try chip.request(.offset(line), .input(edges: .both, bias: .pullDown, debounce: period))
        let kernel = req.capabilities.debouncing == .kernel
        let info = try chip.lineInfo(.offset(line))
        if kernel {
            try require(info.debounce == period, "line info says debounce \(info.debounce), expected \(period) in the kernel")
        } else {
            try require(info.debounce == .zero, "line info says kernel debounce \(info.debounce) under 1.6")
        }
        let loop = try BoardRunLoop()
        var got: [GPIOEdgeEvent] = []
        var entries: [MonotonicInstant] = []
        try req.schedule(on: loop) { batch in
            for e in batch {
                got.append(e)
                entries.append(batch.handlerEntryTime)
            }
        }
        let presses = 3
        var lastWrites: [MonotonicInstant] = [] // just before the last bounce of each group
        var trace: [String] = []
        func bounce(_ levels: [Bool]) {
            for (k, up) in levels.enumerated() {
                if k == levels.count - 1 { lastWrites.append(MonotonicInstant.now) }
                sim.pull(line, up: up)
                settleKernel()
            }
        }
        for _ in 0..<presses {
            bounce([true, false, true, false, true]) // a bouncy press
            try run(loop, for: .milliseconds(80))
            trace.append("after press: read \(req.statistics.read) got \(got.count)")
            bounce([false, true, false]) // a bouncy release
            try run(loop, for: .milliseconds(80))
            trace.append("after release: read \(req.statistics.read) got \(got.count)")
        }
        let edges = got.map(\.edge)
        let expected = (0..<presses).flatMap { _ in [GPIOEdge.rising, .falling] }
        try require(edges == expected, "debounced edges \(edges), expected \(expected); \(trace)")
        // From the last bounce to the handler, and where the timestamp lies.
        let delays = zip(lastWrites, entries).map { $1 - $0 }
        let stampOffsets = zip(lastWrites, got).map { $1.timestamp > $0 ? $1.timestamp - $0 : .zero - ($0 - $1.timestamp) }
        // The kernel counts the period in jiffies: its delayed work runs when
        // jiffies reach the target, up to one tick (10 ms at HZ=100) early in
        // real time. The loop's timers are exact.
        let tick = kernel ? Duration.milliseconds(10) : .zero
        try require(delays.allSatisfy { $0 >= period - tick }, "an edge was reported before the period ended: \(delays.map(\.ms))")
        let figures = "last bounce -> handler \(delays.min()!.ms)...\(delays.max()!.ms)"
        if kernel {
            // The kernel debounced: the loop swallowed nothing, and each event
            // is stamped when the kernel confirmed the level.
            try require(req.statistics.read == UInt64(got.count) && req.statistics.debounced == 0,
                "the loop saw \(req.statistics.read) raw edges, expected the kernel's \(got.count)")
            try require(stampOffsets.allSatisfy { $0 >= period - tick }, "kernel timestamps not after the period: \(stampOffsets.map(\.ms))")
            return "\(presses) bouncy presses and releases (24 raw edges at the pin) -> \(got.count) edges from the kernel "
                + "(debounce_period_us \(period.ms); line info reports it), none seen by the loop; \(figures); timestamp = "
                + "when the kernel confirmed the level: last bounce + \(stampOffsets.min()!.ms)...\(stampOffsets.max()!.ms)"
        }
        try require(req.statistics.read == 24, "the loop read \(req.statistics.read) raw edges, expected 24")
        try require(
            stampOffsets.allSatisfy { $0 >= .zero && $0 < period },
            "software-debounced timestamps are not those of the last bounce: \(stampOffsets.map(\.ms))")
        return "\(presses) bouncy presses and releases (\(req.statistics.read) raw edges) -> \(got.count) debounced edges, "
            + "\(req.statistics.debounced) swallowed, software debounce on the loop (\(period.ms)); \(figures); timestamp = "
            + "the edge that began the level (latency includes the period)"
    }

    // MARK: 7. Line info by name, the event clock, active-low on a real kernel

    static func lineInfo(_ sim: SimBank) throws -> String {
        let chip = try GPIOChip(sim.label)
        let v2 = LibgpiodBackend.shared.apiVersion == 2
        sim.pull(17, up: true)
        let req = try chip.request(
            "BUTTON", .input(edges: .falling, bias: .pullUp, activeLow: true, debounce: .milliseconds(5)), consumer: "guest-info")
        defer { req.release() }
        let info = try chip.lineInfo("BUTTON")
        try require(info.offset == 17 && info.name == "BUTTON", "lineInfo(BUTTON) is \(info)")
        try require(info.used && info.consumer == "guest-info", "consumer '\(info.consumer)', used \(info.used)")
        try require(info.direction == .input && info.activeLow && info.bias == .pullUp, "info \(info)")
        if v2 {
            try require(info.edgeDetection == .falling, "edge detection \(String(describing: info.edgeDetection))")
            try require(info.debounce == .milliseconds(5), "debounce \(info.debounce)")
            try require(info.eventClock == .monotonic, "event clock \(String(describing: info.eventClock))")
        } else {
            // v1 line info has no edge, debounce or clock; the request does the debouncing.
            try require(info.edgeDetection == nil && info.debounce == .zero && info.eventClock == nil, "1.6 info \(info)")
        }
        // The event clock: timestamps are CLOCK_MONOTONIC, between readings taken around the edge.
        let loop = try BoardRunLoop()
        var got: [GPIOEdgeEvent] = []
        try req.schedule(on: loop) { for e in $0 { got.append(e) } }
        sim.pull(17, up: false) // active-low: a falling wire is a rising logical edge, not reported
        try run(loop, for: .milliseconds(30)) // longer than the debounce period
        let before = MonotonicInstant.now
        sim.pull(17, up: true) // the logical falling edge
        let after = MonotonicInstant.now
        try run(loop, timeout: .seconds(5)) { !got.isEmpty }
        try run(loop, for: .milliseconds(50))
        try require(got.count == 1 && got[0].edge == .falling, "events \(got), expected one logical falling edge")
        try require(got[0].timestamp >= before, "timestamp \(got[0].timestamp) before the edge (\(before)): not CLOCK_MONOTONIC")
        try require(got[0].timestamp <= after + .milliseconds(50), "timestamp \(got[0].timestamp) long after \(after)")
        let out = try chip.lineInfo("LED")
        try require(out.offset == 27, "LED at \(out.offset)")
        return "lineInfo(\"BUTTON\") via the chip: offset 17, consumer 'guest-info', input, active-low, pull-up"
            + (v2 ? ", edges falling, debounce 5 ms, event clock monotonic" : " (1.6 info: no edge/debounce/clock)")
            + "; the logical falling edge stamped on CLOCK_MONOTONIC within the toggling window"
    }

    static func activeLow(_ sim: SimBank) throws -> String {
        let chip = try GPIOChip(sim.label)
        let input: UInt32 = 30
        let output: UInt32 = 31
        sim.pull(input, up: false)
        let req = try chip.request(
            [(.offset(input), .input(edges: .both, activeLow: true)), (.offset(output), .output(true, activeLow: true))])
        defer { req.release() }
        for o in [input, output] {
            try require(try chip.lineInfo(.offset(o)).activeLow, "line \(o) is not active-low in the kernel's line info")
        }
        // Output: logical 1 drives the wire low, logical 0 high.
        let w1 = sim.value(output)
        try req.setValue(false, .offset(output))
        let w0 = sim.value(output)
        try req.setValue(true, .offset(output))
        let w1b = sim.value(output)
        try require(w1 == 0 && w0 == 1 && w1b == 0, "active-low output: logical 1/0/1 gave wire \(String(describing: w1))/\(String(describing: w0))/\(String(describing: w1b)), expected 0/1/0")
        // Input: a low wire reads 1; pulling it up is a logical falling edge.
        let low = try req.value(.offset(input))
        let loop = try BoardRunLoop()
        var got: [GPIOEdgeEvent] = []
        try req.schedule(on: loop) { for e in $0 { got.append(e) } }
        sim.pull(input, up: true)
        settleKernel()
        sim.pull(input, up: false)
        try run(loop, timeout: .seconds(5)) { got.count >= 2 }
        let high = try { () throws -> Bool in
            sim.pull(input, up: true)
            settleKernel()
            return try req.value(.offset(input))
        }()
        try run(loop, for: .milliseconds(50))
        try require(low == true && high == false, "active-low input read \(low) with the wire low, \(high) with it high")
        let edges = got.prefix(2).map(\.edge)
        try require(edges == [.falling, .rising], "active-low input edges \(edges), expected falling (wire up) then rising (wire down)")
        return "output \(output) active-low: logical 1/0/1 -> sim_gpio\(output)/value 0/1/0; input \(input) active-low: "
            + "wire low reads 1, high reads 0, wire up/down -> logical falling/rising; line info says active-low for both"
    }

    // MARK: 5. Edge-to-handler latency

    static func latency(_ sim: SimBank, edges count: Int) throws -> String {
        let chip = try GPIOChip(sim.label)
        let line: UInt32 = 26
        sim.pull(line, up: false)
        let req = try chip.request(.offset(line), .input(edges: .both))
        let loop = try BoardRunLoop()
        let samples = UnsafeMutablePointer<Int64>.allocate(capacity: count)
        defer { samples.deallocate() }
        let handled = HandledCounter()
        try req.schedule(on: loop) { batch in
            for e in batch {
                let n = handled.value
                if n < count { samples[n] = batch.latency(of: e).nanosecondsClamped }
                handled.increment()
            }
        }
        // A second thread toggles the pull while the loop sleeps in epoll,
        // waiting for each edge to be handled before the next.
        let toggler = Thread {
            for k in 0..<count {
                sim.pull(line, up: k % 2 == 0)
                let deadline = MonotonicInstant.now + .seconds(2)
                while handled.value <= k && MonotonicInstant.now < deadline { sleep(.microseconds(100)) }
                sleep(.microseconds(500))
            }
        }
        try run(loop, timeout: .seconds(120)) { handled.value >= count }
        toggler.join()
        let n = min(handled.value, count)
        try require(n == count, "only \(n) of \(count) edges arrived")
        var sorted = Array(UnsafeBufferPointer(start: samples, count: n))
        sorted.sort()
        func pct(_ p: Double) -> Duration { .nanoseconds(sorted[min(n - 1, Int(Double(n - 1) * p))]) }
        let mean = Duration.nanoseconds(sorted.reduce(0, +) / Int64(n))
        var res = timespec()
        clock_getres(CLOCK_MONOTONIC, &res)
        let resolution = Duration.seconds(res.tv_sec) + .nanoseconds(res.tv_nsec)
        return "\(n) edges: p50 \(pct(0.50).us), p99 \(pct(0.99).us), max \(Duration.nanoseconds(sorted[n - 1]).us), "
            + "mean \(mean.us) (handler entry minus kernel timestamp; CLOCK_MONOTONIC resolution \(resolution.nanosecondsClamped) ns; "
            + "under TCG emulation indicative only)"
    }
}

/// A counter shared with the toggler thread.
final class HandledCounter: Sendable {
    private let count = Atomic<Int>(0)
    var value: Int { count.load(ordering: .acquiring) }
    func increment() { count.add(1, ordering: .releasing) }
}

/// A joinable pthread.
final class Thread: @unchecked Sendable {
    private var handle = pthread_t()
    private let body: () -> Void

    init(_ body: @escaping () -> Void) {
        self.body = body
        let box = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(&handle, nil, { p in
            let t = Unmanaged<Thread>.fromOpaque(p!).takeRetainedValue()
            t.body()
            return nil
        }, box)
        precondition(rc == 0, "pthread_create: \(rc)")
    }

    func join() { pthread_join(handle, nil) }
}
