import BoardControl
import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import BoardSupport
import Glibc
import Logging

/// Driving inputs as a person (or a noisy wire) would: `press`, `release`,
/// `click`, `input` and `flood`, on mock chips (the mock pin's level) and
/// on gpio-sim chips (the line's `pull` attribute). Any other chip is
/// refused with `not-mock`.
extension ControlServer {
    /// Where an input's level is driven.
    enum DriveTarget {
        case mock(MockChip, GPIOLineSelector)
        case sim(GPIOSimPin)
    }

    /// A flood in progress: `edges` edges, the k-th (from 0) due at
    /// `start + k * 1e9 / rate` ns, alternating levels from `first`.
    struct FloodRun {
        let line: String
        let target: DriveTarget
        let edges: Int
        let rate: Int
        let start: UInt64
        /// The physical level of the first edge (the opposite of the line's level at the request).
        let first: Bool
        /// The most edges driven in one tick of the drive timer.
        let batch: Int
        var driven = 0
        /// After a full batch with more edges overdue: no edge before this.
        var resumeAt: UInt64 = 0

        func due(_ k: Int) -> UInt64 { start &+ UInt64(k) &* 1_000_000_000 / UInt64(rate) }
        func level(_ k: Int) -> Bool { k % 2 == 0 ? first : !first }
        var nextDue: UInt64? { driven < edges ? max(due(driven), resumeAt) : nil }
    }

    /// The most edges a flood drives in one tick (fewer when the line's
    /// kernel buffer is smaller: a quarter of it, 16 for the default 64, 4
    /// for libgpiod 1.6's FIFO of 16), so a long flood never holds the main
    /// loop and the line's buffer has room for a tick the loop is late to read.
    static let floodBatch = 64
    /// How long a flood that fell behind waits after a tick (a full batch,
    /// or drives slower than its rate) before the next, counted from the
    /// tick's end: the loop that reads the line empties its buffer between.
    static let floodGap: UInt64 = 100_000

    // MARK: press, release, click, input

    func drive(_ cmd: String, _ r: JSON, from c: Client) throws -> [(String, JSON)] {
        let (_, l) = try line(r)
        _ = try target(l, cmd)
        guard l.isInput else { throw Failure("not-input", "line '\(l.name)' is an output; \(cmd) drives inputs as a person would") }
        let active = !l.settings.activeLow
        let now = loop.now.nanoseconds
        // A hold or a click in flight owns the line until it ends: another
        // drive would cut it short unseen (a release ends it on purpose).
        if cmd != "release", let end = driveEnd(of: l.name) {
            throw Failure(
                "busy",
                "line '\(l.name)' is being driven by an earlier press or click, for \(DurationText.format(.nanoseconds(Int64(clamping: end &- min(end, now))))) more; wait for it, or release it first")
        }
        var endsIn: UInt64?
        switch cmd {
        case "press":
            let hold = try duration(r, "hold", required: false)
            if hold != nil { try roomToSchedule(1) }
            mutation(c, "press \(l.name)\(hold.map { " for \(DurationText.format($0))" } ?? "")")
            try level(l.name, active)
            if let hold {
                endsIn = UInt64(hold.nanosecondsClamped)
                schedule(.level(line: l.name, high: !active), at: now &+ endsIn!)
            }
        case "release":
            mutation(c, "release \(l.name)")
            // Ends a hold or a click in flight: its later drives are dropped.
            scheduled.removeAll { if case let .level(line, _) = $0.action { line == l.name } else { false } }
            armDrive()
            try level(l.name, !active)
        case "click":
            var count = 1
            if let v = r["count"] {
                guard case let .int(n) = v, (1...100).contains(n) else { throw Failure("bad-argument", "count: expected a whole number from 1 to 100") }
                count = Int(n)
            }
            let hold = try duration(r, "hold", required: false) ?? .milliseconds(100)
            let h = UInt64(hold.nanosecondsClamped)
            try roomToSchedule(2 * count - 1)
            mutation(c, "click \(l.name) \(count) time(s), held \(DurationText.format(hold)) each")
            // Pressed for `hold`, released for as long between clicks.
            try level(l.name, active)
            for k in 0..<UInt64(count) {
                if k > 0 { schedule(.level(line: l.name, high: active), at: now &+ 2 * k * h) }
                schedule(.level(line: l.name, high: !active), at: now &+ (2 * k + 1) * h)
            }
            endsIn = (2 * UInt64(count) - 1) * h
        default:  // input
            let v = try bool(r, "value")
            mutation(c, "input \(l.name) \(v ? "active" : "inactive")")
            try level(l.name, v ? active : !active)
        }
        // How long until the drive's last change (boardctl waits for it).
        return [("line", .string(l.name))] + (endsIn.map { [("ends_in_ns", .int(Int64(clamping: $0)))] } ?? [])
    }

    /// When the last timed drive of input `name` (a hold's release, a
    /// click's last change) happens, if one is in flight.
    func driveEnd(of name: String) -> UInt64? {
        scheduled.last { if case let .level(line, _) = $0.action { line == name } else { false } }?.at
    }

    /// Where line `l`'s level is driven: its mock pin, or its gpio-sim
    /// `pull`; `not-mock` for a line of any other chip.
    func target(_ l: LineConfig, _ cmd: String) throws -> DriveTarget {
        if let mock = daemon.mock {
            guard let (chip, selector) = MockBoard.pin(l, in: mock) else { throw Failure("internal", "line '\(l.name)': no mock chip serves it") }
            return .mock(chip, selector)
        }
        if let pin = GPIOSimPin.find(l, backend: daemon.gpio, sysfs: options.sysfs) { return .sim(pin) }
        throw Failure(
            "not-mock",
            "line '\(l.name)' is on a real chip (\(daemon.gpio.backendName)): \(cmd) drives the inputs of mock and gpio-sim chips only")
    }

    /// Drives `t` to a physical level; `at`: the event's time on a mock
    /// chip (gpio-sim's events carry the kernel's time).
    func set(_ t: DriveTarget, _ name: String, _ high: Bool, at: UInt64? = nil) throws {
        switch t {
        case let .mock(chip, selector):
            do { try chip.setLevel(selector, high, at: at.map { MonotonicInstant(nanoseconds: $0) }) } catch {
                throw Failure("internal", "line '\(name)': \(error)")
            }
        case let .sim(pin):
            let e = pin.pull(high)
            guard e == 0 else {
                throw Failure("internal", "line '\(name)': cannot write \(pin.pullPath): \(String(cString: strerror(e)))")
            }
        }
    }

    /// The physical level `t` has now (nil: it cannot be read).
    func physicalLevel(_ t: DriveTarget) -> Bool? {
        switch t {
        case let .mock(chip, selector): try? chip.level(selector)
        case let .sim(pin): pin.level()
        }
    }

    /// Sets an input's physical level (the line by name, in the config running then).
    func level(_ name: String, _ high: Bool) throws {
        guard let id = daemon.config.line(named: name) else { throw Failure("unknown-line", "no line named \(Echo(name))") }
        try set(target(daemon.config[id], "a timed press or release"), name, high)
    }

    func perform(_ a: ScheduledAction) {
        switch a {
        case let .endTrace(serial):
            endTrace(send: true, serial: serial)
        case let .level(name, high):
            do { try level(name, high) } catch let f as Failure {
                logger.warning("control: \(f.message)")
            } catch {}
        }
    }

    // MARK: flood

    func flood(_ r: JSON, from c: Client) throws -> [(String, JSON)] {
        let (i, l) = try line(r)
        if let v = r["stop"], v != .null, try bool(r, "stop") {
            guard let k = floods.firstIndex(where: { $0.line == l.name }) else {
                throw Failure("not-flooding", "line '\(l.name)' has no flood to stop")
            }
            let f = floods.remove(at: k)
            mutation(c, "flood \(l.name) stop (after \(f.driven) of \(f.edges) edges)")
            armDrive()
            return [("line", .string(l.name)), ("stopped", .bool(true)), ("driven", .int(Int64(f.driven))), ("edges", .int(Int64(f.edges)))]
        }
        let t = try target(l, "flood")
        guard l.isInput else { throw Failure("not-input", "line '\(l.name)' is an output; flood drives inputs") }
        let edgesValue = try field(r, "edges")
        guard case let .int(n) = edgesValue, n >= 1, n <= Int64(BoardControl.Flood.maxEdges) else {
            let found: String = if case .int = edgesValue { edgesValue.serialized } else { edgesValue.kind }
            throw Failure("bad-argument", "edges: expected a whole number from 1 to \(BoardControl.Flood.maxEdges), found \(found)")
        }
        let rateValue = try field(r, "rate")
        let rate: Int
        switch rateValue {
        case let .string(text):
            switch BoardControl.Flood.parseRate(text) {
            case let .success(hz): rate = hz
            case let .failure(why): throw Failure("bad-argument", "rate: \(why.message)")
            }
        case let .int(hz) where hz >= 1 && hz <= Int64(BoardControl.Flood.maxRate): rate = Int(hz)
        default:
            let rateFound: String = if case .int = rateValue { rateValue.serialized } else { rateValue.kind }
            throw Failure(
                "bad-argument", "rate: expected 2kHz, 500Hz, 100/s or a whole number of edges per second from 1 to \(BoardControl.Flood.maxRate), found \(rateFound)")
        }
        guard !floods.contains(where: { $0.line == l.name }) else {
            throw Failure("busy", "line '\(l.name)' is being flooded already; stop that flood first (\"stop\":true)")
        }
        let now = loop.now.nanoseconds
        let current = physicalLevel(t) ?? (value(i) != l.settings.activeLow)
        let f = FloodRun(
            line: l.name, target: t, edges: Int(n), rate: rate, start: now, first: !current,
            batch: max(1, min(Self.floodBatch, kernelBuffer(l) / 4)))
        let took = f.due(f.edges - 1) &- now
        mutation(c, "flood \(l.name) \(n) edges at \(BoardControl.Flood.rateText(rate)) (\(DurationText.rounded(nanoseconds: Int(took), decimals: 2)))")
        floods.append(f)
        floodTick(now)
        armDrive()
        let stamped: String
        if case .mock = t { stamped = "scheduled" } else { stamped = "kernel" }
        return [
            ("line", .string(l.name)), ("edges", .int(n)), ("rate_hz", .int(Int64(rate))), ("duration_ns", .int(Int64(took))),
            ("first", .string(f.first ? "high" : "low")), ("timestamps", .string(stamped)),
        ]
    }

    /// The events the kernel keeps for line `l`: what its config asks
    /// (uAPI v2), or the v1 FIFO's 16 (a backend without sequence numbers
    /// or a chosen buffer size: libgpiod 1.6, a v1 mock chip).
    func kernelBuffer(_ l: LineConfig) -> Int {
        let caps = daemon.gpio.capabilities
        return caps.contains(.eventBufferSize) && caps.contains(.sequenceNumbers) ? l.held.kernelBuffer : 16
    }

    /// Drives every flood's edges due by `now`, at most a batch per flood.
    func floodTick(_ now: UInt64) {
        var k = 0
        while k < floods.count {
            var n = 0
            var failed = false
            guard floods[k].resumeAt <= now else {
                k += 1
                continue
            }
            while floods[k].driven < floods[k].edges, floods[k].due(floods[k].driven) <= now, n < floods[k].batch {
                let f = floods[k]
                do { try set(f.target, f.line, f.level(f.driven), at: f.due(f.driven)) } catch let e as Failure {
                    logger.warning("control: flood \(f.line) ended after \(f.driven) of \(f.edges) edges: \(e.message)")
                    failed = true
                    break
                } catch {
                    failed = true
                    break
                }
                floods[k].driven += 1
                n += 1
            }
            // Behind (a full batch, or drives slower than the rate): the
            // next tick no sooner than the gap after this one ended, so the
            // loop waits for, and reads, the line in between.
            let after = loop.now.nanoseconds
            if let next = floods[k].nextDue, next <= after { floods[k].resumeAt = after &+ Self.floodGap }
            if failed || floods[k].driven == floods[k].edges {
                if !failed { logger.info("control: flood \(floods[k].line) done (\(floods[k].edges) edges)") }
                floods.remove(at: k)
            } else {
                k += 1
            }
        }
    }
}
