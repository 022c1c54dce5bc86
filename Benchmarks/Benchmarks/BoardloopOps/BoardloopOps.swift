// Per-operation figures with malloc counts (package-benchmark, ordo-one/benchmark).
// Run: cd Benchmarks && swift package --disable-sandbox benchmark
// Each benchmark does the operation `scaledIterations` times on one thread
// (no cross-thread wake: that is boardloop-bench's job); the malloc
// interposer counts allocations, which must be 0 for the engine's operations.
import Benchmark
import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import Foundation
import Glibc

nonisolated(unsafe) let engineThresholds: [BenchmarkMetric: BenchmarkThresholds] = [
    .mallocCountTotal: .init(absolute: [.p0: 0, .p25: 0, .p50: 0, .p75: 0, .p90: 0, .p99: 0, .p100: 0])
]

nonisolated(unsafe) let benchmarks: @Sendable () -> Void = {
    let smoke = ProcessInfo.processInfo.environment["BOARDLOOP_BENCH_SMOKE"] != nil
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .cpuTotal, .mallocCountTotal, .throughput],
        scalingFactor: .kilo,
        maxDuration: smoke ? .milliseconds(200) : .seconds(2),
        maxIterations: smoke ? 3 : 1_000)

    Benchmark("perform work item: post + one pass", configuration: .init(thresholds: engineThresholds)) { benchmark in
        let loop = try BoardRunLoop()
        try loop.add(CustomSource(perform: {}), mode: .default)
        var n = 0
        let counter = Counter()
        let item = PerformWorkItem { counter.value += 1 }
        for _ in 0..<100 { try loop.perform(item); _ = try loop.run(mode: .default, timeout: .zero) }
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            try loop.perform(item)
            _ = try loop.run(mode: .default, timeout: .zero)
            n += 1
        }
        benchmark.stopMeasurement()
        precondition(counter.value == n + 100)
    }

    Benchmark("port dispatch: pipe write + one pass", configuration: .init(thresholds: engineThresholds)) { benchmark in
        let loop = try BoardRunLoop()
        var fds: [Int32] = [0, 0]
        precondition(pipe(&fds) == 0)
        _ = fcntl(fds[0], F_SETFL, O_NONBLOCK)
        defer { close(fds[0]); close(fds[1]) }
        var dispatched = 0
        try loop.add(PortSource(fd: fds[0]) { s, _ in
            var v: UInt64 = 0
            _ = read(s.fd, &v, 8)
            dispatched += 1
        }, mode: .default)
        var one: UInt64 = 1
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            _ = write(fds[1], &one, 8)
            _ = try loop.run(mode: .default, timeout: .zero)
        }
        benchmark.stopMeasurement()
        precondition(dispatched > 0)
    }

    Benchmark("timer: move fire date to now + one pass", configuration: .init(thresholds: engineThresholds)) { benchmark in
        let loop = try BoardRunLoop()
        var fired = 0
        let timer = RunLoopTimer(fireAt: .distantFuture, interval: .seconds(3600)) { _ in fired += 1 }
        try loop.add(timer, mode: .default)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            timer.fireDate = loop.now
            _ = try loop.run(mode: .default, timeout: .zero)
        }
        benchmark.stopMeasurement()
        precondition(fired > 0)
    }

    Benchmark("message port: send 16 bytes + one pass", configuration: .init(thresholds: engineThresholds)) { benchmark in
        let loop = try BoardRunLoop()
        var received = 0
        let port = try BoardMessagePort(slots: 64, slotSize: 16) { _ in received += 1 }
        try port.schedule(on: loop)
        struct Payload: BitwiseCopyable { var a: UInt64; var b: UInt64 }
        benchmark.startMeasurement()
        for i in benchmark.scaledIterations {
            try port.send(id: 1, value: Payload(a: UInt64(i), b: 0))
            _ = try loop.run(mode: .default, timeout: .zero)
        }
        benchmark.stopMeasurement()
        precondition(received > 0)
    }

    Benchmark("gpio mock: edge + one pass", configuration: .init(thresholds: engineThresholds)) { benchmark in
        let loop = try BoardRunLoop()
        let chip = try MockChip(label: "ops", lineCount: 4)
        let req = try chip.open().request(.offset(1), .input(edges: .both))
        var events = 0
        try req.schedule(on: loop) { batch in events += batch.count }
        var level = false
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            level.toggle()
            try chip.setLevel(.offset(1), level)
            _ = try loop.run(mode: .default, timeout: .zero)
        }
        benchmark.stopMeasurement()
        precondition(events > 0)
    }

    Benchmark("Foundation RunLoop.perform + run(mode:before:) (contrast)") { benchmark in
        let rl = Foundation.RunLoop.current
        rl.add(Timer(timeInterval: 1e9, repeats: false) { _ in }, forMode: .default)
        let counter = Counter()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            rl.perform { counter.value += 1 }
            _ = rl.run(mode: .default, before: Date.distantPast)
        }
        benchmark.stopMeasurement()
    }
}

final class Counter: @unchecked Sendable {
    var value = 0
}
