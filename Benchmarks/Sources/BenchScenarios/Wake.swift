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

    final class State: @unchecked Sendable {
        var loopA: Boardloop.RunLoop!
        var loopB: Boardloop.RunLoop!
        var itemA: PerformWorkItem!
        var itemB: PerformWorkItem!
        var sent: UInt64 = 0
        var done = 0
        let total: Int
        let warmup: Int
        let samples: SampleBuffer
        let window = AllocationWindow()
        let phase = Atomic<Int>(0)  // 1: counting
        var bCounting = false
        init(warmup: Int, iterations: Int) {
            self.warmup = warmup
            total = warmup + iterations
            samples = SampleBuffer(capacity: iterations)
        }
    }

    /// boardloop: two loops, `PerformWorkItem`s posted back and forth (the
    /// allocation-free way to post; a closure literal allocates its context).
    public static func boardloop(warmup: Int, iterations: Int, pin: Pinning, closures: Bool = false) throws -> Measurement {
        let st = State(warmup: warmup, iterations: iterations)
        let worker = Worker(name: "bench-wake-b", settings: .init(cpuAffinity: pin.b >= 0 ? [Int(pin.b)] : nil))
        try worker.start()
        st.loopB = worker.loop
        // B: count once the measured phase began; post back.
        st.itemB = PerformWorkItem { [st] in
            if !st.bCounting && st.phase.load(ordering: .acquiring) == 1 {
                st.bCounting = true
                st.window.begin()
            }
            if closures {
                try! st.loopA.perform { [st] in step(st, closures: true) }
            } else {
                try! st.loopA.perform(st.itemA)
            }
        }
        st.itemA = PerformWorkItem { [st] in step(st, closures: false) }
        let failure = Box<String?>(nil)
        let a = spawn(cpu: pin.a) { [st] in
            do {
                let loop = Boardloop.RunLoop.current
                st.loopA = loop
                try keepAlive(loop)
                st.sent = now()
                try st.loopB.perform(st.itemB)
                try loop.run()
            } catch {
                failure.value = "\(error)"
            }
        }
        a.join()
        // B stops counting before anything is torn down.
        try st.loopB.performAndWait { [st] in if st.bCounting { st.window.end() } }
        worker.stopAndJoin()
        if let f = failure.value { throw BenchError("boardloop wake: \(f)") }
        var m = Measurement()
        m.latency = st.samples.percentiles()
        m.countedEvents = iterations * 2
        m.allocations = st.window.count
        return m
    }

    /// A's side of a round trip: record, then post the next.
    private static func step(_ st: State, closures: Bool) {
        let t = now()
        if st.done >= st.warmup { st.samples.record(t - st.sent) }
        st.done += 1
        if st.done == st.warmup {
            st.phase.store(1, ordering: .releasing)
            st.window.begin()
        }
        if st.done == st.total {
            st.window.end()
            st.loopA.stop()
            return
        }
        st.sent = now()
        if closures {
            try! st.loopB.perform { [st] in
                if !st.bCounting && st.phase.load(ordering: .acquiring) == 1 {
                    st.bCounting = true
                    st.window.begin()
                }
                try! st.loopA.perform { [st] in step(st, closures: true) }
            }
        } else {
            try! st.loopB.perform(st.itemB)
        }
    }

    final class FState: @unchecked Sendable {
        var rlA: Foundation.RunLoop!
        var rlB: Foundation.RunLoop!
        var cfA: CFRunLoop!
        var cfB: CFRunLoop!
        var sent: UInt64 = 0
        var done = 0
        var finished = false
        var bFinished = false
        let total: Int
        let warmup: Int
        let samples: SampleBuffer
        let window = AllocationWindow()
        let phase = Atomic<Int>(0)
        var bCounting = false
        let bReady = Atomic<Int>(0)
        init(warmup: Int, iterations: Int) {
            self.warmup = warmup
            total = warmup + iterations
            samples = SampleBuffer(capacity: iterations)
        }
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
            if st.bCounting { st.window.end() }
        }
        while st.bReady.load(ordering: .acquiring) == 0 { usleep(100) }
        let a = spawn(cpu: pin.a) { [st] in
            st.rlA = Foundation.RunLoop.current
            st.cfA = CFRunLoopGetCurrent()
            st.rlA.add(Timer(timeInterval: 1e9, repeats: false) { _ in }, forMode: .default)
            st.sent = now()
            postToB(st)
            while !st.finished { _ = st.rlA.run(mode: .default, before: .distantFuture) }
        }
        a.join()
        b.join()
        var m = Measurement()
        m.latency = st.samples.percentiles()
        m.countedEvents = iterations * 2
        m.allocations = st.window.count
        return m
    }

    private static func postToB(_ st: FState) {
        st.rlB.perform { [st] in
            if !st.bCounting && st.phase.load(ordering: .acquiring) == 1 {
                st.bCounting = true
                st.window.begin()
            }
            st.rlA.perform { [st] in fstep(st) }
            CFRunLoopWakeUp(st.cfA)
        }
        CFRunLoopWakeUp(st.cfB)
    }

    private static func fstep(_ st: FState) {
        let t = now()
        if st.done >= st.warmup { st.samples.record(t - st.sent) }
        st.done += 1
        if st.done == st.warmup {
            st.phase.store(1, ordering: .releasing)
            st.window.begin()
        }
        if st.done == st.total {
            st.window.end()
            st.finished = true
            CFRunLoopStop(st.cfA)
            st.rlB.perform { [st] in
                st.bFinished = true
                CFRunLoopStop(st.cfB)
            }
            CFRunLoopWakeUp(st.cfB)
            return
        }
        st.sent = now()
        postToB(st)
    }
}
