// alloc-gate: fails (exit 1) when the engine allocates in steady state.
//
// Runs the benchmark scenarios briefly with the CAllocationCounter malloc
// interposer counting on every thread of the loops involved, after warm-up.
// Every engine scenario must count 0. Two controls must count at least one
// allocation per event — posting closure literals (each carries a heap
// context) and Foundation's RunLoop — so a counter that stopped counting
// cannot pass the gate.
import BenchScenarios
import BoardloopTestSupport
import Glibc

typealias Measurement = BenchScenarios.Measurement

setvbuf(stdout, nil, _IOLBF, 0)
let pin = Pinning.automatic(enabled: true)
var failures: [String] = []

guard AllocationCounter.isActive else {
    print("alloc-gate: the malloc interposer is not active in this build (sanitizer?); nothing can be proven")
    exit(1)
}

func check(_ name: String, expectZero: Bool, minimumPer1000: Double = 1000, _ body: () throws -> Measurement) {
    do {
        let m = try body()
        guard let a = m.allocations, m.countedEvents > 0 else {
            failures.append("\(name): nothing was counted")
            return
        }
        let per1000 = Double(a) * 1000 / Double(m.countedEvents)
        let line = "\(name): \(a) allocations over \(m.countedEvents) events (\(per1000.rounded()) per 1,000)"
        if expectZero {
            print((a == 0 ? "ok    " : "FAIL  ") + line)
            if a != 0 { failures.append("\(name): the engine allocated \(a) times in steady state (expected 0)") }
        } else {
            let ok = per1000 >= minimumPer1000
            print((ok ? "ok    " : "FAIL  ") + line + " [control: at least \(Int(minimumPer1000)) per 1,000 expected]")
            if !ok {
                failures.append("\(name): control counted \(a), fewer than expected; the allocation counter is not counting")
            }
        }
    } catch {
        failures.append("\(name): \(error)")
        print("FAIL  \(name): \(error)")
    }
}

print("alloc-gate: engine scenarios must allocate nothing after warm-up (\(pin))")
check("wake: PerformWorkItem round trips", expectZero: true) { try WakeScenario.boardloop(warmup: 500, iterations: 5_000, pin: pin) }
check("timer: 1 ms repeating", expectZero: true) { try TimerScenario.boardloop(period: .milliseconds(1), warmup: 20, fires: 300, pin: pin) }
check("fd: 8 pipes, saturated", expectZero: true) { try FdScenario.boardloop(fds: 8, load: .saturation(messages: 50_000), pin: pin) }
check("fd: 8 pipes, 20k/s", expectZero: true) { try FdScenario.boardloop(fds: 8, load: .paced(rateHz: 20_000, messages: 5_000), pin: pin) }
check("message port: ping-pong", expectZero: true) { try MessageScenario.boardloop(window: 1, warmup: 500, iterations: 5_000, pin: pin) }
check("message port: 16 in flight", expectZero: true) { try MessageScenario.boardloop(window: 16, warmup: 2_000, iterations: 20_000, pin: pin) }
check("gpio mock: 20k edges/s", expectZero: true) { try GPIOScenario.boardloop(rateHz: 20_000, edges: 5_000, pin: pin) }
check("gpio mock: saturated", expectZero: true) { try GPIOScenario.boardloop(rateHz: 0, edges: 20_000, pin: pin) }
for flood in [GPIOScenario.Flood.otherMode, .sameMode] {
    check("critical mode: 1 kHz task, flood \(flood == .otherMode ? "held" : "in the same mode")", expectZero: true) {
        let (q, f) = try GPIOScenario.critical(flood: flood, floodHz: 20_000, firesPerPhaseKind: 200, pin: pin)
        var m = q
        if !f.note.isEmpty { print("      \(f.note)") }
        m.countedEvents = q.countedEvents
        return m
    }
}
print("controls: these must allocate, or the counter is broken")
check("control: closure-literal perform round trips", expectZero: false, minimumPer1000: 900) {
    try WakeScenario.boardloop(warmup: 500, iterations: 5_000, pin: pin, closures: true)
}
check("control: Foundation RunLoop.perform round trips", expectZero: false, minimumPer1000: 900) {
    try WakeScenario.foundation(warmup: 500, iterations: 5_000, pin: pin)
}

if failures.isEmpty {
    print("alloc-gate: passed")
} else {
    print("alloc-gate: FAILED")
    for f in failures { print("  - \(f)") }
    exit(1)
}
