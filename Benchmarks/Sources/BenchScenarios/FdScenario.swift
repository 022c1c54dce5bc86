import Boardloop
import CBenchRaw
import Glibc

/// Scenario 3, fd: `fdCount` pipes written by a producer thread (C, the same
/// for every row) with 8-byte messages carrying their send time. Each
/// dispatch reads one message from the ready pipe: the same work per event
/// for the raw epoll loop and for boardloop's port sources.
///
/// - saturation: the producer writes 64 messages per write() as fast as the
///   pipes take them (it outpaces any consumer), so the consumer's dispatch
///   rate is what is measured.
/// - paced: one message every 1/rate s (the producer spins to each send
///   time); latency = read time − send time.
public enum FdScenario {
    public enum Load: Sendable {
        case saturation(messages: Int)
        case paced(rateHz: Int, messages: Int)

        var messages: Int {
            switch self {
            case .saturation(let n), .paced(_, let n): n
            }
        }
    }

    static let chunk: Int32 = 64

    /// Makes the pipes and their producer, runs `body` with the read ends,
    /// closes everything.
    private static func withProducer<T>(_ fdCount: Int, _ body: (OpaquePointer, [Int32]) throws -> T) throws -> T {
        var fds = [Int32](repeating: -1, count: fdCount)
        guard let producer = bb_producer_create(Int32(fdCount), &fds) else { throw BenchError("pipe2 failed") }
        defer {
            bb_producer_destroy(producer)
            for fd in fds where fd >= 0 { close(fd) }
        }
        return try body(producer, fds)
    }

    public static func raw(fds fdCount: Int, load: Load, pin: Pinning) throws -> Measurement {
        try withProducer(fdCount) { producer, fds in try raw(producer, fds, load: load, pin: pin) }
    }

    private static func raw(_ producer: OpaquePointer, _ fds: [Int32], load: Load, pin: Pinning) throws -> Measurement {
        let fdCount = fds.count
        let lat = SampleBuffer(capacity: load.messages)
        let result = Box<Double>(0)
        nonisolated(unsafe) let p = producer
        let readFds = fds
        let consumer = spawn(cpu: pin.b) {
            start(p, load, pin)
            readFds.withUnsafeBufferPointer { b in
                result.value = bb_raw_fd_consume(b.baseAddress, Int32(fdCount), load.messages, lat.buffer.baseAddress)
            }
        }
        consumer.join()
        _ = bb_producer_join(producer)
        guard result.value >= 0 else { throw BenchError("raw fd: errno \(-Int(result.value))") }
        lat.count = load.messages
        var m = Measurement()
        if case .paced = load { m.latency = lat.percentiles() } else { m.throughput = result.value }
        m.countedEvents = load.messages
        m.allocations = 0
        return m
    }

    private static func start(_ p: OpaquePointer, _ load: Load, _ pin: Pinning) {
        switch load {
        case .saturation(let n): _ = bb_producer_start(p, n, chunk, 0, pin.a)
        case .paced(let rate, let n): _ = bb_producer_start(p, n, 1, Int32(rate), pin.a)
        }
    }

    final class Consumer: @unchecked Sendable {
        let total: Int
        let warmup: Int
        var got = 0
        var first: UInt64 = 0
        var last: UInt64 = 0
        let latency: SampleBuffer
        let window = AllocationWindow()
        var loop: BoardRunLoop!
        var waitsAtWarmup: UInt64 = 0
        var waitsAtEnd: UInt64 = 0
        init(total: Int) {
            self.total = total
            warmup = min(2_000, total / 10)
            latency = SampleBuffer(capacity: total)
        }
        @inline(__always) func received(sent: UInt64) {
            let t = now()
            if got == 0 { first = t }
            last = t
            latency.record(t - sent)
            got += 1
            if got == warmup {
                waitsAtWarmup = loop.waitCount
                window.begin()
            }
            if got == total {
                waitsAtEnd = loop.waitCount
                window.end()
                loop.stop()
            }
        }
    }

    /// boardloop: one `PortSource` per pipe on the consumer thread's loop.
    public static func boardloop(fds fdCount: Int, load: Load, pin: Pinning) throws -> Measurement {
        try withProducer(fdCount) { producer, fds in try boardloop(producer, fds, load: load, pin: pin) }
    }

    private static func boardloop(_ producer: OpaquePointer, _ fds: [Int32], load: Load, pin: Pinning) throws -> Measurement {
        let c = Consumer(total: load.messages)
        let failure = Box<String?>(nil)
        nonisolated(unsafe) let p = producer
        let readFds = fds
        let consumer = spawn(cpu: pin.b) {
            do {
                let loop = BoardRunLoop.current
                c.loop = loop
                var sources: [PortSource] = []
                for fd in readFds {
                    let s = PortSource(fd: fd, interest: .readable) { [c] source, _ in
                        let sent = bb_read_message(source.fd)
                        if sent != 0 { c.received(sent: sent) }
                    }
                    try loop.add(s, mode: .default)
                    sources.append(s)
                }
                start(p, load, pin)
                try loop.run()
                for s in sources { s.invalidate() }
            } catch {
                failure.value = "\(error)"
            }
        }
        consumer.join()
        _ = bb_producer_join(producer)
        if let f = failure.value { throw BenchError("boardloop fd: \(f)") }
        var m = Measurement()
        if case .paced = load {
            m.latency = c.latency.percentiles()
        } else {
            m.throughput = c.last > c.first ? Double(c.got - 1) * 1e9 / Double(c.last - c.first) : 0
        }
        m.countedEvents = c.total - c.warmup
        m.allocations = c.window.count
        m.note = "\((Double(c.waitsAtEnd - c.waitsAtWarmup) / Double(m.countedEvents) * 1000).rounded() / 1000) epoll_wait per event"
        return m
    }
}
