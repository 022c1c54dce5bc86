import Boardloop
import CBenchRaw
import Foundation
import Glibc

/// Scenario 2, timer: a repeating timer; lateness = actual − the grid point
/// at or before it (t0 + k·period), and grid points with no fire are missed.
/// The same measure for every row. The timer thread has 1 ns timer slack
/// (the default 50 µs would dominate every row alike).
public enum TimerScenario {
    /// `oneShot`: the timerfd re-armed for each fire, as the engine does,
    /// instead of a periodic one the kernel re-arms.
    public static func raw(period: Duration, warmup: Int, fires: Int, pin: Pinning, oneShot: Bool = false) throws -> Measurement {
        let lateness = UnsafeMutableBufferPointer<Int64>.allocate(capacity: fires)
        defer { lateness.deallocate() }
        let missed = Box<UInt64>(0)
        let rc = Box<Int32>(0)
        let periodNs = UInt64(period.nanosecondsClamped)
        nonisolated(unsafe) let buf = lateness
        let pinB = pin.b
        let t = spawn(cpu: pin.b) {
            rc.value =
                oneShot
                ? bb_raw_timer_oneshot(periodNs, Int32(warmup), Int32(fires), buf.baseAddress, &missed.value, pinB)
                : bb_raw_timer(periodNs, Int32(warmup), Int32(fires), buf.baseAddress, &missed.value, pinB)
        }
        t.join()
        guard rc.value == 0 else { throw BenchError("raw timer: errno \(-rc.value)") }
        var m = Measurement()
        m.latency = Percentiles(sortingSigned: lateness)
        m.missed = missed.value
        m.countedEvents = fires
        m.allocations = 0
        return m
    }

    /// The grid t0 + k·period a repeating timer fires on: a fire at t is
    /// for the grid point at or before t, and grid points between two fires
    /// were missed.
    struct GridPosition {
        let t0: UInt64
        let period: UInt64
        private(set) var lastK: Int64 = -1
        private(set) var missed: UInt64 = 0

        init(t0: UInt64, period: UInt64) {
            self.t0 = t0
            self.period = period
        }

        /// Places a fire at `t`: its lateness and grid index. Missed grid
        /// points are added up when `countMissed`.
        @inline(__always) mutating func place(_ t: UInt64, countMissed: Bool = true) -> (lateness: UInt64, k: Int64) {
            let k = t >= t0 ? Int64((t - t0) / period) : 0
            if countMissed && lastK >= 0 && k > lastK + 1 { missed += UInt64(k - lastK - 1) }
            lastK = k
            return (t >= t0 ? t - (t0 + UInt64(k) * period) : 0, k)
        }
    }

    final class Grid: @unchecked Sendable {
        let warmup: Int
        let total: Int
        var fires = 0
        var position: GridPosition
        var missed: UInt64 { position.missed }
        let samples: SampleBuffer
        let window = AllocationWindow()
        init(t0: UInt64, period: UInt64, warmup: Int, fires: Int) {
            position = GridPosition(t0: t0, period: period)
            self.warmup = warmup
            total = warmup + fires
            samples = SampleBuffer(capacity: fires)
        }
        /// Records a fire at `t`; true when the last one was recorded.
        @inline(__always) func fire(at t: UInt64) -> Bool {
            let measured = fires >= warmup
            let (late, _) = position.place(t, countMissed: measured)
            if measured { samples.record(late) }
            fires += 1
            if fires == warmup { window.begin() }
            if fires == total {
                window.end()
                return true
            }
            return false
        }
        func measurement(fires: Int) -> Measurement {
            var m = Measurement()
            m.latency = samples.percentiles()
            m.missed = missed
            m.countedEvents = fires
            m.allocations = window.count
            return m
        }
    }

    /// boardloop: a `RunLoopTimer` with zero tolerance on the thread's loop.
    public static func boardloop(period: Duration, warmup: Int, fires: Int, pin: Pinning) throws -> Measurement {
        let periodNs = UInt64(period.nanosecondsClamped)
        let failure = Box<String?>(nil)
        let grid = Box<Grid?>(nil)
        let t = spawn(cpu: pin.b) {
            do {
                let loop = BoardRunLoop.current
                let t0 = now() + periodNs
                let g = Grid(t0: t0, period: periodNs, warmup: warmup, fires: fires)
                grid.value = g
                let timer = RunLoopTimer(fireAt: MonotonicInstant(nanoseconds: t0), interval: period, tolerance: .zero) { timer in
                    if g.fire(at: now()) { timer.invalidate() }
                }
                try loop.add(timer, mode: .default)
                try loop.run()  // returns when the timer is invalidated: the mode is empty
            } catch {
                failure.value = "\(error)"
            }
        }
        t.join()
        if let f = failure.value { throw BenchError("boardloop timer: \(f)") }
        return grid.value!.measurement(fires: fires)
    }

    /// Foundation: a repeating `Timer` (tolerance 0) on the thread's RunLoop.
    public static func foundation(period: Duration, warmup: Int, fires: Int, pin: Pinning) throws -> Measurement {
        let periodNs = UInt64(period.nanosecondsClamped)
        let interval = Double(periodNs) / 1e9
        let grid = Box<Grid?>(nil)
        let t = spawn(cpu: pin.b) {
            let rl = Foundation.RunLoop.current
            // CF schedules timers on the monotonic clock: the first fire is
            // converted from the Date, read beside CLOCK_MONOTONIC here.
            let mono = now()
            let date = Date()
            let g = Grid(t0: mono + periodNs, period: periodNs, warmup: warmup, fires: fires)
            grid.value = g
            let timer = Timer(fire: date.addingTimeInterval(interval), interval: interval, repeats: true) { timer in
                if g.fire(at: now()) { timer.invalidate() }
            }
            timer.tolerance = 0
            rl.add(timer, forMode: .default)
            while timer.isValid { _ = rl.run(mode: .default, before: .distantFuture) }
        }
        t.join()
        return grid.value!.measurement(fires: fires)
    }
}
