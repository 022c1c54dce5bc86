import Boardloop
import CBenchRaw
import Glibc
import Synchronization

/// Scenario 4, message port: 16-byte messages (send time, sequence) between
/// two threads' loops. Window 1: ping-pong, round-trip time per message.
/// Window > 1: that many in flight; messages per second.
public enum MessageScenario {
    /// The reference: the same mechanism without the engine — a mutex-guarded
    /// slot ring per direction, an eventfd written on empty→non-empty, epoll.
    public static func raw(window: Int, warmup: Int, iterations: Int, pin: Pinning) throws -> Measurement {
        let s = SampleBuffer(capacity: iterations)
        let result = Box<Double>(0)
        // (On a thread of its own: the C side pins the thread it runs on.)
        spawn(cpu: pin.a) {
            result.value = bb_raw_message(Int32(window), Int32(warmup), Int32(iterations), window == 1 ? s.buffer.baseAddress : nil, pin.a, pin.b)
        }.join()
        let r = result.value
        guard r >= 0 else { throw BenchError("raw message: errno \(-Int(r))") }
        var m = Measurement()
        if window == 1 {
            s.count = iterations
            m.latency = s.percentiles()
        }
        m.throughput = r
        m.countedEvents = iterations * 2
        m.allocations = 0
        return m
    }

    final class State: @unchecked Sendable {
        // Side A's fields, then side B's, a cache line of padding between
        // and after them: A writes `sent` and `received` every message and B
        // reads its fields every message, so sharing a line would add a
        // transfer between the CPUs per message that is the harness's, not
        // the port's (the raw reference keeps its two sides apart the same way).
        let window: Int
        let warmup: Int
        let total: Int
        var sent = 0
        var received = 0
        var firstMeasured: UInt64 = 0
        var end: UInt64 = 0
        let samples: SampleBuffer
        let allocations = AllocationWindow()
        var portB: BoardMessagePort!
        var loopA: BoardRunLoop!
        var failure: String?
        private let padA = CacheLinePad()
        let phase = Atomic<Int>(0)
        var bCounting = false
        var portA: BoardMessagePort!
        private let padB = CacheLinePad()
        init(window: Int, warmup: Int, iterations: Int) {
            self.window = window
            self.warmup = warmup
            total = warmup + iterations
            samples = SampleBuffer(capacity: iterations)
        }

        struct Payload: BitwiseCopyable {
            var sentAt: UInt64
            var sequence: UInt64
        }

        /// Sends the next message stamped `at` (the raw reference stamps it
        /// with the clock read it took on receiving the previous one: one
        /// clock read per message).
        func sendNext(at t: UInt64 = now()) {
            do {
                try portB.send(id: 1, value: Payload(sentAt: t, sequence: UInt64(sent)))
                sent += 1
            } catch {
                failure = "\(error)"
                loopA.stop()
            }
        }
    }

    public static func boardloop(window: Int, warmup: Int, iterations: Int, pin: Pinning) throws -> Measurement {
        let st = State(window: window, warmup: warmup, iterations: iterations)
        let worker = LoopThread(name: "bench-msg-b", settings: .init(cpuAffinity: pin.b >= 0 ? [Int(pin.b)] : nil))
        try worker.start()
        // B's port is made and scheduled on B's thread; it echoes every message.
        try worker.loop!.performAndWait { [st] in
            do {
                let port = try BoardMessagePort(label: "bench-b", slots: 64, slotSize: 16) { [st] msg in
                    if !st.bCounting && st.phase.load(ordering: .acquiring) == 1 {
                        st.bCounting = true
                        st.allocations.begin()
                    }
                    do { try st.portA.send(id: 2, payload: msg.payload) } catch { st.failure = "echo: \(error)" }
                }
                try port.schedule(on: BoardRunLoop.current)
                st.portB = port
            } catch {
                st.failure = "\(error)"
            }
        }
        if let f = st.failure { throw BenchError("boardloop message port: \(f)") }
        let a = spawn(cpu: pin.a) { [st] in
            do {
                let loop = BoardRunLoop.current
                st.loopA = loop
                let port = try BoardMessagePort(label: "bench-a", slots: 64, slotSize: 16) { [st] msg in
                    let t = now()
                    let p = try! msg.load(as: State.Payload.self)
                    if st.received >= st.warmup && st.window == 1 { st.samples.record(t - p.sentAt) }
                    st.received += 1
                    if st.received == st.warmup {
                        st.firstMeasured = t
                        st.phase.store(1, ordering: .releasing)
                        st.allocations.begin()
                    }
                    if st.received == st.total {
                        st.end = t
                        st.allocations.end()
                        st.loopA.stop()
                        return
                    }
                    if st.sent < st.total { st.sendNext(at: t) }
                }
                try port.schedule(on: loop)
                st.portA = port
                for _ in 0..<st.window { st.sendNext() }
                try loop.run()
                port.invalidate()
            } catch {
                st.failure = "\(error)"
            }
        }
        a.join()
        try worker.loop!.performAndWait { [st] in
            if st.bCounting { st.allocations.end() }
            st.portB.invalidate()
        }
        worker.stopAndJoin()
        if let f = st.failure { throw BenchError("boardloop message port: \(f)") }
        var m = Measurement()
        if window == 1 { m.latency = st.samples.percentiles() }
        m.throughput = st.end > st.firstMeasured ? Double(iterations) * 1e9 / Double(st.end - st.firstMeasured) : 0
        m.countedEvents = iterations * 2
        m.allocations = st.allocations.count
        return m
    }
}
