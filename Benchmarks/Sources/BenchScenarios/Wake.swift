import Boardloop
import CBenchRaw
import CoreFoundation
import Foundation
import Glibc
import Synchronization

/// Scenario 1, wake: thread A posts to B's loop, B posts back; the round
/// trip is timed on A.
public enum WakeScenario {
    /// The limit: eventfd + epoll on both sides, in C.
    public static func raw(warmup: Int, iterations: Int, pin: Pinning) throws -> Measurement {
        let s = SampleBuffer(capacity: iterations)
        let result = Box<Int32>(0)
        // (On a thread of its own: the C side pins the thread it runs on.)
        spawn(cpu: pin.a) { result.value = bb_raw_wake(s.buffer.baseAddress, Int32(warmup), Int32(iterations), pin.a, pin.b) }.join()
        let rc = result.value
        guard rc == 0 else { throw BenchError("raw wake: errno \(-rc)") }
        s.count = iterations
        var m = Measurement()
        m.latency = s.percentiles()
        m.countedEvents = iterations
        m.allocations = 0
        return m
    }

    /// The bookkeeping both implementations share: A times each round trip
    /// and starts counting allocations after the warm-up; B joins the count
    /// on its first arrival after that.
    final class RoundTrips: @unchecked Sendable {
        var sent: UInt64 = 0
        var done = 0
        let total: Int
        let warmup: Int
        let iterations: Int
        let samples: SampleBuffer
        let window = AllocationWindow()
        let phase = Atomic<Int>(0)  // 1: counting
        var bCounting = false

        init(warmup: Int, iterations: Int) {
            self.warmup = warmup
            self.iterations = iterations
            total = warmup + iterations
            samples = SampleBuffer(capacity: iterations)
        }

        /// On A, as a trip ends: records it; true when it was the last one
        /// (counting has ended then). Otherwise the next trip starts now.
        func arrivedAtA() -> Bool {
            let t = now()
            if done >= warmup { samples.record(t - sent) }
            done += 1
            if done == warmup {
                phase.store(1, ordering: .releasing)
                window.begin()
            }
            if done == total {
                window.end()
                return true
            }
            sent = now()
            return false
        }

        /// On B, as a request arrives.
        func arrivedAtB() {
            if !bCounting && phase.load(ordering: .acquiring) == 1 {
                bCounting = true
                window.begin()
            }
        }

        /// On B, before its loop is torn down.
        func endOnB() {
            if bCounting { window.end() }
        }

        func measurement() -> Measurement {
            var m = Measurement()
            m.latency = samples.percentiles()
            m.countedEvents = iterations * 2
            m.allocations = window.count
            return m
        }
    }

    final class State: @unchecked Sendable {
        var loopA: BoardRunLoop!
        var loopB: BoardRunLoop!
        var itemA: PerformWorkItem!
        var itemB: PerformWorkItem!
        let trips: RoundTrips
        init(warmup: Int, iterations: Int) { trips = RoundTrips(warmup: warmup, iterations: iterations) }
    }

    /// boardloop: two loops, `PerformWorkItem`s posted back and forth (the
    /// allocation-free way to post; a closure literal allocates its context).
    public static func boardloop(warmup: Int, iterations: Int, pin: Pinning, closures: Bool = false) throws -> Measurement {
        let st = State(warmup: warmup, iterations: iterations)
        let worker = LoopThread(name: "bench-wake-b", settings: .init(cpuAffinity: pin.b >= 0 ? [Int(pin.b)] : nil))
        try worker.start()
        st.loopB = worker.loop!
        st.itemB = PerformWorkItem { [st] in atB(st, closures: closures) }
        st.itemA = PerformWorkItem { [st] in atA(st, closures: false) }
        let failure = Box<String?>(nil)
        let a = spawn(cpu: pin.a) { [st] in
            do {
                let loop = BoardRunLoop.current
                st.loopA = loop
                try keepAlive(loop)
                st.trips.sent = now()
                try st.loopB.perform(st.itemB)
                try loop.run()
            } catch {
                failure.value = "\(error)"
            }
        }
        a.join()
        // B stops counting before anything is torn down.
        try st.loopB.performAndWait { [st] in st.trips.endOnB() }
        worker.stopAndJoin()
        if let f = failure.value { throw BenchError("boardloop wake: \(f)") }
        return st.trips.measurement()
    }

    /// B's side: post back.
    private static func atB(_ st: State, closures: Bool) {
        st.trips.arrivedAtB()
        if closures {
            try! st.loopA.perform { [st] in atA(st, closures: true) }
        } else {
            try! st.loopA.perform(st.itemA)
        }
    }

    /// A's side of a round trip: record, then post the next.
    private static func atA(_ st: State, closures: Bool) {
        if st.trips.arrivedAtA() {
            st.loopA.stop()
            return
        }
        if closures {
            try! st.loopB.perform { [st] in atB(st, closures: true) }
        } else {
            try! st.loopB.perform(st.itemB)
        }
    }

    final class FState: @unchecked Sendable {
        var rlA: Foundation.RunLoop!
        var rlB: Foundation.RunLoop!
        var cfA: CFRunLoop!
        var cfB: CFRunLoop!
        var finished = false
        var bFinished = false
        let bReady = Atomic<Int>(0)
        let trips: RoundTrips
        init(warmup: Int, iterations: Int) { trips = RoundTrips(warmup: warmup, iterations: iterations) }
    }

    /// Foundation: `RunLoop.perform` (which does not wake the loop by itself)
    /// followed by `CFRunLoopWakeUp`, both ways.
    public static func foundation(warmup: Int, iterations: Int, pin: Pinning) throws -> Measurement {
        let st = FState(warmup: warmup, iterations: iterations)
        let b = spawn(cpu: pin.b) { [st] in
            st.rlB = Foundation.RunLoop.current
            st.cfB = CFRunLoopGetCurrent()
            st.rlB.add(Timer(timeInterval: 1e9, repeats: false) { _ in }, forMode: .default)
            st.bReady.store(1, ordering: .releasing)
            while !st.bFinished { _ = st.rlB.run(mode: .default, before: .distantFuture) }
            st.trips.endOnB()
        }
        while st.bReady.load(ordering: .acquiring) == 0 { usleep(100) }
        let a = spawn(cpu: pin.a) { [st] in
            st.rlA = Foundation.RunLoop.current
            st.cfA = CFRunLoopGetCurrent()
            st.rlA.add(Timer(timeInterval: 1e9, repeats: false) { _ in }, forMode: .default)
            st.trips.sent = now()
            postToB(st)
            while !st.finished { _ = st.rlA.run(mode: .default, before: .distantFuture) }
        }
        a.join()
        b.join()
        return st.trips.measurement()
    }

    private static func postToB(_ st: FState) {
        st.rlB.perform { [st] in
            st.trips.arrivedAtB()
            st.rlA.perform { [st] in fstep(st) }
            CFRunLoopWakeUp(st.cfA)
        }
        CFRunLoopWakeUp(st.cfB)
    }

    private static func fstep(_ st: FState) {
        guard st.trips.arrivedAtA() else {
            postToB(st)
            return
        }
        st.finished = true
        CFRunLoopStop(st.cfA)
        st.rlB.perform { [st] in
            st.bFinished = true
            CFRunLoopStop(st.cfB)
        }
        CFRunLoopWakeUp(st.cfB)
    }
}
