import Boardloop
import BoardloopTestSupport
import CBenchRaw
import Glibc
import Synchronization

/// Where the two sides of a scenario run. With two or more CPUs the sides
/// are pinned to different CPUs (0 and 1), so the measurement does not
/// depend on where the scheduler happens to put them; with one CPU nothing
/// is pinned.
public struct Pinning: Sendable, CustomStringConvertible {
    public var a: Int32
    public var b: Int32

    public static func automatic(enabled: Bool) -> Pinning {
        enabled && bb_cpu_count() >= 2 ? Pinning(a: 0, b: 1) : Pinning(a: -1, b: -1)
    }

    public var description: String { a < 0 ? "not pinned" : "side A on CPU \(a), side B on CPU \(b)" }
}

/// Latency percentiles in nanoseconds.
public struct Percentiles: Sendable {
    public var p50: Double
    public var p99: Double
    public var p999: Double
    public var max: Double
    public var count: Int

    /// Sorts `samples` in place and reads the percentiles (nearest rank).
    public init(sorting samples: UnsafeMutableBufferPointer<UInt64>) {
        var samples = samples
        samples.sort()
        let n = samples.count
        precondition(n > 0, "no samples")
        func at(_ q: Double) -> Double {
            let rank = Int((q * Double(n)).rounded(.up)) - 1
            return Double(samples[Swift.max(0, Swift.min(n - 1, rank))])
        }
        p50 = at(0.50)
        p99 = at(0.99)
        p999 = at(0.999)
        max = Double(samples[n - 1])
        count = n
    }

    public init(sortingSigned samples: UnsafeMutableBufferPointer<Int64>) {
        let u = UnsafeMutableBufferPointer<UInt64>.allocate(capacity: samples.count)
        defer { u.deallocate() }
        for i in 0..<samples.count { u[i] = UInt64(Swift.max(samples[i], 0)) }
        self.init(sorting: u)
    }
}

/// What one run of a scenario measured.
public struct Measurement: Sendable {
    public var latency: Percentiles?
    /// Events (or round trips) per second.
    public var throughput: Double?
    /// Timer periods that passed without a fire.
    public var missed: UInt64?
    /// Events dispatched while allocations were counted, and the allocations.
    public var countedEvents: Int = 0
    public var allocations: Int?
    /// Anything else worth saying (lost events, held events…).
    public var note: String = ""

    public init() {}

    public var allocationsPer1000: Double? {
        guard let allocations, countedEvents > 0 else { return nil }
        return Double(allocations) * 1000 / Double(countedEvents)
    }
}

/// Shared mutable state of a scenario, touched by the threads in a fixed
/// hand-over order (each side writes only what it owns).
final class Box<T>: @unchecked Sendable {
    var value: T
    init(_ value: T) { self.value = value }
}

/// A sample buffer reserved before the measurement, so recording allocates nothing.
final class SampleBuffer: @unchecked Sendable {
    let buffer: UnsafeMutableBufferPointer<UInt64>
    var count = 0
    init(capacity: Int) { buffer = .allocate(capacity: Swift.max(capacity, 1)) }
    deinit { buffer.deallocate() }
    @inline(__always) func record(_ v: UInt64) {
        if count < buffer.count {
            buffer[count] = v
            count += 1
        }
    }
    func percentiles() -> Percentiles { Percentiles(sorting: UnsafeMutableBufferPointer(rebasing: buffer[0..<Swift.max(count, 1)])) }
}

/// Counts the allocations of the threads that take part in a scenario's
/// steady state: each calls `begin()` on itself once warm, and `end()`
/// before it tears anything down.
final class AllocationWindow: @unchecked Sendable {
    init() { AllocationCounter.reset() }
    func begin() { AllocationCounter.beginCountingOnThisThread() }
    func end() { AllocationCounter.endCountingOnThisThread() }
    var count: Int { AllocationCounter.count }
}

/// Starts a thread pinned to `cpu` (-1: unpinned) with 1 ns timer slack.
func spawn(cpu: Int32, _ body: @escaping @Sendable () -> Void) -> JoinableThread {
    JoinableThread {
        _ = bb_pin_self(cpu)
        _ = bb_set_timer_slack(1)
        body()
    }
}

/// A source that is never signalled: keeps a loop's mode from being empty.
func keepAlive(_ loop: BoardRunLoop, mode: RunLoopMode = .default) throws {
    try loop.add(CustomSource(perform: {}), mode: mode)
}

@inline(__always) func now() -> UInt64 { bb_now_ns() }

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// 64 bytes of nothing: a stored property of this type keeps the fields
/// before it and those after it on different cache lines.
struct CacheLinePad {
    private let bytes: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
}
