import Boardloop
import BoardloopGPIO
import CLinux
import Glibc

/// A request on a mock chip. Its events wait in a fixed ring (the "kernel
/// buffer") and an eventfd is readable while the ring is not empty, so a
/// run loop sees them exactly as it sees a kernel line request's fd.
/// All state is guarded by the chip's lock (so its stored properties skip
/// the run-time exclusivity check).
final class MockRequest: GPIORequestDriver {
    let chip: MockChip
    let consumer: String
    @exclusivity(unchecked) var lines: [GPIODriverLineConfig]
    /// Logical output values, per line (outputs only).
    @exclusivity(unchecked) var outputs: [Bool]
    /// Readable while the ring is not empty.
    private let wake: EventFD
    @exclusivity(unchecked) private var detectsEdges: Bool

    // The event ring.
    private let ring: UnsafeMutablePointer<GPIOEdgeEvent>
    /// Each ring slot's line index (as the kernel keeps the line with its
    /// event): no search per event, however many lines the request has.
    private let ringLine: UnsafeMutablePointer<Int>
    private let ringCapacity: Int
    @exclusivity(unchecked) private var head = 0
    @exclusivity(unchecked) private var count = 0
    /// v1 model: events queued per line (each line's FIFO holds 16).
    private let perLine: UnsafeMutablePointer<Int>
    private let lineSequence: UnsafeMutablePointer<UInt64>
    @exclusivity(unchecked) private var globalSequence: UInt64 = 0
    @exclusivity(unchecked) private var signalled = false

    @exclusivity(unchecked) private(set) var released = false
    @exclusivity(unchecked) private(set) var vanished = false

    static let v1FifoEvents = 16

    /// - Parameter eventBufferCapacity: the buffer the request asks for
    ///   (`GPIOChip.request`'s `eventBufferCapacity`): a v2 chip keeps what
    ///   the kernel would (`MockChip.kernelEventBuffer`) unless the chip
    ///   fixes its own size; a v1 chip keeps 16 per line whatever is asked.
    init(chip: MockChip, consumer: String, lines: [GPIODriverLineConfig], eventBufferCapacity: Int = 0) throws(GPIOError) {
        self.chip = chip
        self.consumer = consumer
        self.lines = lines
        outputs = lines.map { $0.settings.outputValue }
        detectsEdges = lines.contains { $0.settings.direction == .input && $0.settings.edgeDetection != .none }
        do { wake = try EventFD() } catch {
            throw .system(chip: chip.info.description, call: "\(error.call)", errno: error.errno)
        }
        switch chip.eventModel {
        case .v2:
            ringCapacity = chip.eventBufferSize ?? MockChip.kernelEventBuffer(lines: lines.count, eventBufferCapacity: eventBufferCapacity)
        case .v1: ringCapacity = Self.v1FifoEvents * lines.count
        }
        ring = .allocate(capacity: ringCapacity)
        ring.initialize(
            repeating: GPIOEdgeEvent(offset: 0, edge: .rising, timestamp: MonotonicInstant(nanoseconds: 0)), count: ringCapacity)
        ringLine = .allocate(capacity: ringCapacity)
        ringLine.initialize(repeating: 0, count: ringCapacity)
        perLine = .allocate(capacity: lines.count)
        perLine.initialize(repeating: 0, count: lines.count)
        lineSequence = .allocate(capacity: lines.count)
        lineSequence.initialize(repeating: 0, count: lines.count)
    }

    deinit {
        release()
        wake.close()
        ring.deallocate()
        ringLine.deallocate()
        perLine.deallocate()
        lineSequence.deallocate()
    }

    private func deadError(_ operation: String) -> GPIOError {
        if vanished {
            return .chipVanished(chip: chip.info.description, detail: "mock chip vanished")
        }
        return .requestReleased(chip: chip.info.description, operation: operation)
    }

    // MARK: Kernel side (chip lock held)

    func enqueue(lineIndex i: Int, offset: UInt32, edge: GPIOEdge, at timestamp: MonotonicInstant) {
        guard !released && !vanished else { return }
        globalSequence &+= 1
        lineSequence[i] &+= 1
        switch chip.eventModel {
        case .v2:
            if count == ringCapacity {
                // The kernel's v2 linereq drops the oldest event when full.
                perLine[ringLine[head]] &-= 1
                head = (head + 1) % ringCapacity
                count &-= 1
            }
            let slot = (head + count) % ringCapacity
            ring[slot] = GPIOEdgeEvent(
                offset: offset, edge: edge, timestamp: timestamp, globalSequence: globalSequence,
                lineSequence: lineSequence[i])
            ringLine[slot] = i
        case .v1:
            // The v1 lineevent FIFO keeps 16 per line and drops newer edges.
            guard perLine[i] < Self.v1FifoEvents else { return }
            let slot = (head + count) % ringCapacity
            ring[slot] = GPIOEdgeEvent(offset: offset, edge: edge, timestamp: timestamp)
            ringLine[slot] = i
        }
        perLine[i] &+= 1
        count &+= 1
        signal()
    }

    func skipSequence(lineIndex i: Int, count n: Int) {
        guard chip.eventModel == .v2, n > 0 else { return }
        globalSequence &+= UInt64(n)
        lineSequence[i] &+= UInt64(n)
    }

    @inline(__always)
    private func signal() {
        guard !signalled else { return }
        signalled = true
        wake.signal()
    }

    @inline(__always)
    private func unsignal() {
        guard signalled else { return }
        signalled = false
        wake.drain()
    }

    func chipVanished(wakingPollers: Bool) {
        chip.lock.locked {
            guard !released && !vanished else { return }
            vanished = true
            count = 0
            if wakingPollers {
                signal() // a reader wakes up and learns it from readEvents
            } else {
                unsignal()
            }
        }
    }

    // MARK: GPIORequestDriver (the program's side)

    func getValues(into values: UnsafeMutableBufferPointer<Int32>) throws(GPIOError) {
        try chip.lock.locked { () throws(GPIOError) in
            guard !released && !vanished else { throw deadError("getValues") }
            // Index loops: array iterators allocate in unoptimized builds,
            // and the zero-allocation tests run those.
            var i = 0
            while i < lines.count {
                let s = lines[i].settings
                if s.direction == .output {
                    values[i] = outputs[i] ? 1 : 0
                } else {
                    values[i] = chip.physicalLevel(Int(lines[i].offset)) != s.activeLow ? 1 : 0
                }
                i += 1
            }
        }
    }

    func setValues(offsets: UnsafeBufferPointer<UInt32>, values: UnsafeBufferPointer<Int32>) throws(GPIOError) {
        let t = chip.now
        try chip.lock.locked { () throws(GPIOError) in
            guard !released && !vanished else { throw deadError("setValues") }
            chip.callCounts.setValues += 1
            for k in 0..<offsets.count {
                guard let i = lineIndex(offsets[k]) else { throw .lineNotInRequest(chip.ref(offsets[k])) }
                guard lines[i].settings.direction == .output else { throw .notAnOutput(chip.ref(offsets[k])) }
                let value = values[k] != 0
                guard value != outputs[i] else { continue }
                outputs[i] = value
                chip.recordOutput(Int(offsets[k]), value: value, level: value != lines[i].settings.activeLow, at: t)
            }
        }
        // Wires carry the new levels to their inputs (outside the lock: the
        // target may be another chip).
        guard chip.hasWires else { return }
        for k in 0..<offsets.count {
            guard let i = lineIndex(offsets[k]) else { continue }
            chip.propagate(offsets[k], level: (values[k] != 0) != lines[i].settings.activeLow, at: t)
        }
    }

    /// Readable while events wait; -1 when no line detects edges.
    var eventFD: Int32 { chip.lock.locked { detectsEdges ? wake.fd : -1 } }
    /// The eventfd is readable exactly while it is signalled.
    var hasPendingEvents: Bool { chip.lock.locked { detectsEdges && signalled } }

    func reconfigure(_ newLines: [GPIODriverLineConfig]) throws(GPIOError) {
        let t = chip.now
        var changed: [(UInt32, Bool)] = []
        try chip.lock.locked { () throws(GPIOError) in
            guard !released && !vanished else { throw deadError("reconfigure") }
            chip.callCounts.reconfigures += 1
            guard newLines.map(\.offset) == lines.map(\.offset) else {
                throw .invalidConfiguration(nil, reason: "reconfigure must name the same lines in the same order")
            }
            for (i, line) in newLines.enumerated() where line.settings.direction == .output {
                let was = lines[i].settings
                let level = line.settings.outputValue != line.settings.activeLow
                let wasLevel = was.direction == .output ? outputs[i] != was.activeLow : chip.physicalLevel(Int(line.offset))
                outputs[i] = line.settings.outputValue
                if was.direction != .output || level != wasLevel {
                    chip.recordOutput(Int(line.offset), value: line.settings.outputValue, level: level, at: t)
                    changed.append((line.offset, level))
                }
            }
            lines = newLines
            detectsEdges = newLines.contains { $0.settings.direction == .input && $0.settings.edgeDetection != .none }
        }
        for (o, level) in changed { chip.propagate(o, level: level, at: t) }
    }

    func readEvents(into events: UnsafeMutableBufferPointer<GPIOEdgeEvent>, fullOffsets: UnsafeMutableBufferPointer<UInt32>)
        throws(GPIOError) -> GPIOReadStatus
    {
        chip.lock.locked {
            var status = GPIOReadStatus()
            if vanished {
                status.vanished = true
                return status
            }
            guard !released else { return status }
            if chip.eventModel == .v1 {
                // A full FIFO is what a 1.6 read of 16 events from one line shows.
                for i in 0..<lines.count where perLine[i] >= Self.v1FifoEvents && status.fullCount < fullOffsets.count {
                    fullOffsets[status.fullCount] = lines[i].offset
                    status.fullCount += 1
                }
            }
            let n = min(count, events.count)
            for k in 0..<n {
                events[k] = ring[head]
                perLine[ringLine[head]] &-= 1
                head = (head + 1) % ringCapacity
                count &-= 1
            }
            status.count = n
            chip.callCounts.eventReads &+= 1
            if count == 0 {
                unsignal()
            } else {
                status.more = true
            }
            return status
        }
    }

    private func lineIndex(_ offset: UInt32) -> Int? {
        var i = 0
        while i < lines.count {
            if lines[i].offset == offset { return i }
            i += 1
        }
        return nil
    }

    func release() {
        chip.lock.locked {
            guard !released else { return }
            released = true
            chip.callCounts.releases += 1
            for line in lines where chip.owner[Int(line.offset)] === self {
                chip.owner[Int(line.offset)] = nil
                chip.ownerIndex[Int(line.offset)] = -1
            }
            count = 0
            unsignal()
        }
    }
}
