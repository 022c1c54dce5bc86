import Boardloop
import BoardloopGPIO
import CLinux
import Glibc

/// A GPIO chip in memory that behaves like a kernel chip, for the demo
/// board, for tests, and for running a daemon on a machine without GPIO.
///
/// - Inputs are driven from outside (`setLevel`, `injectEdge`, `pulse`,
///   `burst`), from any thread. A requested input with edge detection gets
///   edge events through a real eventfd, so they reach a run loop by the
///   same port-source path as the kernel's (epoll, level-triggered).
/// - Outputs record every value change with its timestamp
///   (`outputHistory`), and can be wired to inputs (`wire`), so a program's
///   own output drives its input.
/// - Faults on demand: a line held by someone else (`hold`), permission
///   denied (`denyAccess`), the chip vanishing (`vanish`), lost events
///   (`dropEvents`), and overflow of the event buffer (a burst larger than
///   it, as on a kernel).
///
/// Levels are physical (what the wire carries); requests see logical
/// values, with active-low applied as the kernel does.
public final class MockChip: @unchecked Sendable {
    /// Which kernel interface the chip imitates.
    public enum EventModel: Sendable, Equatable {
        /// libgpiod 2.x on the v2 uAPI: events carry sequence numbers; the
        /// request's buffer (the size the request asks for, as the kernel
        /// sizes it: `kernelEventBuffer`) drops the oldest event when full —
        /// the gap in the sequence numbers shows it.
        case v2
        /// libgpiod 1.6 on the v1 uAPI: no sequence numbers; each line's
        /// FIFO holds 16 events and drops newer ones when full.
        case v1
    }

    /// One recorded output change.
    public struct OutputChange: Sendable, Equatable, CustomStringConvertible {
        public var offset: UInt32
        /// The logical value the program wrote.
        public var value: Bool
        /// The physical level on the wire (differs from `value` when active-low).
        public var level: Bool
        public var timestamp: MonotonicInstant

        public var description: String { "\(offset)=\(value ? 1 : 0) (level \(level ? 1 : 0)) at \(timestamp)" }
    }

    public let name: String
    public let label: String
    public let lineCount: Int
    public let eventModel: EventModel
    /// Events every request's buffer keeps (v2), whatever the request asks;
    /// nil: what the request asks for, as the kernel sizes it
    /// (`kernelEventBuffer`).
    public let eventBufferSize: Int?

    /// The buffer a v2 kernel gives a request of `lines` lines asking for
    /// `eventBufferCapacity` events: `linereq_create()` in gpiolib-cdev.c
    /// takes 0 as 16 per line and caps the size at GPIO_V2_LINES_MAX * 16
    /// (1024), and `kfifo_alloc()` rounds it up to a power of two (at least 2).
    public static func kernelEventBuffer(lines: Int, eventBufferCapacity: Int) -> Int {
        let asked = eventBufferCapacity > 0 ? eventBufferCapacity : 16 * max(lines, 1)
        let size = min(asked, 1024)
        var p = 2
        while p < size { p <<= 1 }
        return p
    }
    let clock: RunLoopClock
    let lock = Lock(recursive: true)

    // Line state, fixed size (no allocation while driving). Everything
    // below is guarded by `lock`, so the stored properties skip the
    // run-time exclusivity check (as the engine's and the GPIO request's
    // do): with it, each access was a call into the runtime and a
    // thread-local lookup, some 1,000 instructions per injected edge in all.
    @exclusivity(unchecked) var names: [String]
    @exclusivity(unchecked) var levels: [Bool]
    @exclusivity(unchecked) var driven: [Bool]
    @exclusivity(unchecked) var holders: [String?]
    /// The request holding each line, and the line's index in it.
    @exclusivity(unchecked) var owner: [MockRequest?]
    @exclusivity(unchecked) var ownerIndex: [Int]

    // Output history ring.
    let history: UnsafeMutablePointer<OutputChange>
    let historyCapacity: Int
    @exclusivity(unchecked) var historyStart = 0
    @exclusivity(unchecked) var historyCount = 0
    /// Output changes dropped because the history ring was full.
    @exclusivity(unchecked) public private(set) var historyDropped: UInt64 = 0
    /// Changes recorded since the chip was made, the dropped and the
    /// forgotten included: the number the next change gets.
    @exclusivity(unchecked) var changesRecorded: UInt64 = 0
    /// Per line: 1 + the number of its last change, 0 for none.
    @exclusivity(unchecked) var lastChange: [UInt64]
    /// Entries copied out of the ring so far (`historyEntriesCopied`).
    @exclusivity(unchecked) var entriesCopied: UInt64 = 0

    /// The kernel calls requests on this chip have made, by kind: what a
    /// test of a grouped request counts (one set-values call for k lines).
    public struct Calls: Sendable, Equatable {
        /// Line requests made (each a request ioctl).
        public var requests = 0
        /// Set-values calls (each one ioctl, whatever the number of lines).
        public var setValues = 0
        /// Reconfigure calls (each one ioctl).
        public var reconfigures = 0
        /// Requests released.
        public var releases = 0
        /// Reads of edge events (each one read call).
        public var eventReads = 0
    }
    @exclusivity(unchecked) var callCounts = Calls()
    /// The kernel calls made so far.
    public var calls: Calls { lock.locked { callCounts } }

    @exclusivity(unchecked) var wires: [Wire] = []
    struct Wire {
        let output: UInt32
        unowned let target: MockChip
        let input: UInt32
        let inverted: Bool
    }

    @exclusivity(unchecked) var isVanished = false
    /// When true, opening the chip fails with `permissionDenied` (as a
    /// `/dev/gpiochip*` the user may not open).
    public var denyAccess: Bool {
        get { lock.locked { accessDenied } }
        set { lock.locked { accessDenied = newValue } }
    }
    @exclusivity(unchecked) var accessDenied = false

    /// - Parameters:
    ///   - name: the device name (`gpiochip0`).
    ///   - label: the label programs look chips up by.
    ///   - lineCount: number of lines.
    ///   - lineNames: names of lines, by offset.
    ///   - eventModel: which kernel interface to imitate (`.v2` default).
    ///   - eventBufferSize: v2 only: events buffered per request whatever it
    ///     asks (default: what it asks, sized as the kernel does).
    ///   - clock: where event and output timestamps come from; use the same
    ///     `ManualClock` as the loop for deterministic tests.
    ///   - historyCapacity: output changes kept.
    public init(
        name: String = "gpiochip0", label: String, lineCount: Int, lineNames: [UInt32: String] = [:],
        eventModel: EventModel = .v2, eventBufferSize: Int? = nil, clock: RunLoopClock = .monotonic,
        historyCapacity: Int = 4096
    ) throws(GPIOError) {
        guard lineCount > 0 && lineCount <= 1024 else {
            throw .invalidConfiguration(nil, reason: "mock chip '\(label)': lineCount \(lineCount) must be within 1...1024")
        }
        if let size = eventBufferSize, size < 1 || size > 1024 {
            throw .invalidConfiguration(nil, reason: "mock chip '\(label)': eventBufferSize \(size) must be within 1...1024")
        }
        for o in lineNames.keys where Int(o) >= lineCount {
            throw .offsetOutOfRange(chip: "\(name) [\(label)]", offset: o, lineCount: lineCount)
        }
        self.name = name
        self.label = label
        self.lineCount = lineCount
        self.eventModel = eventModel
        self.eventBufferSize = eventBufferSize
        self.clock = clock
        names = (0..<lineCount).map { lineNames[UInt32($0)] ?? "" }
        levels = Array(repeating: false, count: lineCount)
        driven = Array(repeating: false, count: lineCount)
        holders = Array(repeating: nil, count: lineCount)
        owner = Array(repeating: nil, count: lineCount)
        ownerIndex = Array(repeating: -1, count: lineCount)
        lastChange = Array(repeating: 0, count: lineCount)
        self.historyCapacity = max(historyCapacity, 1)
        history = .allocate(capacity: self.historyCapacity)
        history.initialize(
            repeating: OutputChange(offset: 0, value: false, level: false, timestamp: MonotonicInstant(nanoseconds: 0)),
            count: self.historyCapacity)
    }

    deinit {
        history.deallocate()
    }

    /// The chip's info, as `GPIOChip.info` reports it.
    public var info: GPIOChipInfo { GPIOChipInfo(name: name, label: label, path: path, lineCount: lineCount) }
    /// A path for messages (mock chips have no device file).
    public var path: String { "mock:\(name)" }

    /// The chip's clock now.
    public var now: MonotonicInstant {
        switch clock {
        case .monotonic: MonotonicInstant.now
        case let .manual(c): c.now
        }
    }

    /// Opens this chip through the GPIO API (a one-chip mock board).
    public func open() throws(GPIOError) -> GPIOChip {
        try GPIOChip(name, backend: MockGPIO([self]))
    }

    // MARK: Lines

    /// The offset of a line by offset or name. A line the chip does not have
    /// is a typed error (`offsetOutOfRange`, `lineNotFound`), as on a real
    /// chip: the daemon takes line names from users' config files.
    public func offset(_ line: GPIOLineSelector) throws(GPIOError) -> UInt32 {
        switch line {
        case let .offset(o):
            guard Int(o) < lineCount else {
                throw .offsetOutOfRange(chip: info.description, offset: o, lineCount: lineCount)
            }
            return o
        case let .name(n):
            guard let i = names.firstIndex(of: n) else { throw .lineNotFound(name: n, chip: info.description) }
            return UInt32(i)
        }
    }

    func ref(_ offset: UInt32) -> GPIOLineRef {
        GPIOLineRef(chip: info.description, offset: offset, name: names[Int(offset)])
    }

    /// The physical level of a line: what the wire carries now (an output's
    /// driven level, or an input's external level or pull).
    public func level(_ line: GPIOLineSelector) throws(GPIOError) -> Bool {
        let o = Int(try offset(line))
        return lock.locked { physicalLevel(o) }
    }

    func physicalLevel(_ o: Int) -> Bool {
        if let r = owner[o] {
            let s = r.lines[ownerIndex[o]].settings
            if s.direction == .output { return r.outputs[ownerIndex[o]] != s.activeLow }
            if !driven[o] {
                if s.bias == .pullUp { return true }
                if s.bias == .pullDown { return false }
            }
        }
        return levels[o]
    }

    // MARK: Driving inputs

    /// Drives a line's physical level from outside. A change is an edge for
    /// a request watching the line (logical edge: active-low inverts it),
    /// stamped `at` (default: the chip clock's now). Safe from any thread.
    public func setLevel(_ line: GPIOLineSelector, _ high: Bool, at timestamp: MonotonicInstant? = nil) throws(GPIOError) {
        let o = Int(try offset(line))
        setLevel(offset: o, high, at: timestamp)
    }

    func setLevel(offset o: Int, _ high: Bool, at timestamp: MonotonicInstant?) {
        lock.locked {
            let before = physicalLevel(o)
            levels[o] = high
            driven[o] = true
            let after = physicalLevel(o)
            if before != after { edge(o, level: after, at: timestamp ?? now) }
        }
    }

    /// An edge the kernel saw, even if the level already was there (a glitch
    /// too short to sample, say): sets the level and queues the event.
    public func injectEdge(_ line: GPIOLineSelector, _ edge: GPIOEdge, at timestamp: MonotonicInstant? = nil)
        throws(GPIOError)
    {
        let o = Int(try offset(line))
        lock.locked {
            levels[o] = edge.level
            driven[o] = true
            self.edge(o, level: edge.level, at: timestamp ?? now)
        }
    }

    /// Two edges `width` apart: to the opposite level and back.
    public func pulse(_ line: GPIOLineSelector, width: Duration, at start: MonotonicInstant? = nil) throws(GPIOError) {
        let o = Int(try offset(line))
        let t0 = start ?? now
        let original = lock.locked { physicalLevel(o) }
        setLevel(offset: o, !original, at: t0)
        setLevel(offset: o, original, at: t0 + width)
    }

    /// `count` alternating edges `spacing` apart from `start`, beginning with
    /// the edge away from the current level (a bouncing contact, or a
    /// burst larger than the event buffer).
    public func burst(_ line: GPIOLineSelector, edges count: Int, spacing: Duration, from start: MonotonicInstant? = nil)
        throws(GPIOError)
    {
        let o = Int(try offset(line))
        let t0 = start ?? now
        var level = lock.locked { physicalLevel(o) }
        for k in 0..<max(count, 0) {
            level.toggle()
            setLevel(offset: o, level, at: t0 + spacing * k)
        }
    }

    /// Called with the lock held: queue an edge for the request watching `o`.
    func edge(_ o: Int, level physical: Bool, at timestamp: MonotonicInstant) {
        guard !isVanished, let r = owner[o] else { return }
        let i = ownerIndex[o]
        let s = r.lines[i].settings
        guard s.direction == .input, s.edgeDetection != .none else { return }
        let logical = physical != s.activeLow
        let e = GPIOEdge(to: logical)
        guard s.edgeDetection.includes(e) else { return }
        r.enqueue(lineIndex: i, offset: UInt32(o), edge: e, at: timestamp)
    }

    // MARK: Outputs

    /// Called with the lock held when a request changes an output.
    func recordOutput(_ o: Int, value: Bool, level: Bool, at timestamp: MonotonicInstant) {
        if historyCount == historyCapacity {
            historyStart = (historyStart + 1) % historyCapacity
            historyCount -= 1
            historyDropped &+= 1
        }
        history[(historyStart + historyCount) % historyCapacity] = OutputChange(
            offset: UInt32(o), value: value, level: level, timestamp: timestamp)
        historyCount += 1
        changesRecorded &+= 1
        lastChange[o] = changesRecorded
    }

    /// Wires an output of this chip to an input (of this chip or `target`):
    /// each level the output drives is driven onto the input, at the same
    /// timestamp. Set up wiring before the lines are used.
    public func wire(_ output: GPIOLineSelector, to input: GPIOLineSelector, on target: MockChip? = nil, inverted: Bool = false)
        throws(GPIOError)
    {
        let chip = target ?? self
        let w = Wire(output: try offset(output), target: chip, input: try chip.offset(input), inverted: inverted)
        lock.locked { wires.append(w) }
    }

    /// Propagates an output level over its wires (called without the lock).
    func propagate(_ o: UInt32, level: Bool, at timestamp: MonotonicInstant) {
        var k = 0
        while k < wires.count {
            if wires[k].output == o {
                wires[k].target.setLevel(offset: Int(wires[k].input), level != wires[k].inverted, at: timestamp)
            }
            k += 1
        }
    }

    /// Whether any output is wired (read without the lock: wiring is set up
    /// before use).
    var hasWires: Bool { !wires.isEmpty }

    // MARK: Faults

    /// Marks a line as held by another consumer: requesting it fails with
    /// `lineBusy` naming `consumer`, as when another program holds it.
    public func hold(_ line: GPIOLineSelector, consumer: String) throws(GPIOError) {
        let o = Int(try offset(line))
        lock.locked { holders[o] = consumer }
    }

    /// Ends a `hold`.
    public func unhold(_ line: GPIOLineSelector) throws(GPIOError) {
        let o = Int(try offset(line))
        lock.locked { holders[o] = nil }
    }

    /// The chip goes away (hot-unplug; gpio-sim's `live=0`): requests on it
    /// report it on their sources and fail from then on; opening it fails.
    public func vanish() { vanish(wakingPollers: true) }

    /// The chip goes away without waking the requests' pollers, as on Linux
    /// before 6.6, where only a later call on the request (or its periodic
    /// check, `GPIOLineRequest.vanishCheckInterval`) finds out.
    public func vanishSilently() { vanish(wakingPollers: false) }

    func vanish(wakingPollers: Bool) {
        let requests: [MockRequest] = lock.locked {
            isVanished = true
            var rs: [MockRequest] = []
            for case let r? in owner where !rs.contains(where: { $0 === r }) { rs.append(r) }
            return rs
        }
        for r in requests { r.chipVanished(wakingPollers: wakingPollers) }
    }

    /// The chip is back (`live=1`): it can be opened and requested anew; the
    /// requests made before it vanished stay dead.
    public func reappear() {
        lock.locked {
            isVanished = false
            for o in 0..<lineCount {
                owner[o] = nil
                ownerIndex[o] = -1
            }
        }
    }

    public var vanished: Bool { lock.locked { isVanished } }

    /// Drops the next `count` events of a line as a kernel buffer overflow
    /// would: with the v2 model their sequence numbers are used up (the gap
    /// shows), with v1 they leave no trace at all.
    public func dropEvents(_ line: GPIOLineSelector, count: Int) throws(GPIOError) {
        let o = Int(try offset(line))
        lock.locked {
            guard let r = owner[o] else { return }
            r.skipSequence(lineIndex: ownerIndex[o], count: count)
        }
    }

    /// Who holds a line: the request's consumer, a `hold`'s consumer, or nil.
    public func consumer(_ line: GPIOLineSelector) throws(GPIOError) -> String? {
        let o = Int(try offset(line))
        return lock.locked { owner[o]?.consumer ?? holders[o] }
    }
}
