import Boardloop
import BoardloopGPIO

/// A mock board: a set of mock chips behind the `GPIOBackend` protocol, so
/// `GPIOChip("boardloop-mock0", backend: board)` works as it does with
/// libgpiod, and the same code runs against either.
public final class MockGPIO: GPIOChipOpening, @unchecked Sendable {
    public let chips: [MockChip]

    public init(_ chips: [MockChip]) throws(GPIOError) {
        guard !chips.isEmpty else { throw .invalidConfiguration(nil, reason: "a mock board needs at least one chip") }
        self.chips = chips
    }

    public var backendName: String { "mock" }

    /// Sequence numbers when every chip imitates the v2 uAPI; debouncing is
    /// left to the run loop (software), as under libgpiod 1.6.
    public var capabilities: GPIOCapabilities {
        var caps: GPIOCapabilities = [.lineInfoEdges, .atomicReconfigure, .eventBufferSize, .vanishWakesPoller]
        if chips.allSatisfy({ $0.eventModel == .v2 }) { caps.insert(.sequenceNumbers) }
        return caps
    }

    /// The chip with this name, label or mock path.
    public func chip(_ spec: String) -> MockChip? {
        chips.first { $0.name == spec || $0.label == spec || $0.path == spec }
    }

    public func listChips() throws(GPIOError) -> [GPIOChipInfo] {
        chips.filter { !$0.vanished }.map(\.info)
    }

    package func openChip(_ spec: String) throws(GPIOError) -> any GPIOChipDriver {
        guard let chip = chip(spec), !chip.vanished else {
            throw .chipNotFound(chip: spec, available: try listChips().map(\.description))
        }
        if chip.denyAccess {
            throw .permissionDenied(chip: spec, path: chip.path, group: "gpio")
        }
        return MockChipDriver(chip: chip)
    }

    /// A small board for the GPIO examples and tests: a 32-line chip
    /// labelled `boardloop-mock0` with a button on line 17 ("BUTTON") and an
    /// LED on line 27 ("LED"), as `boards/sim-chips.conf` describes the
    /// gpio-sim chip `boardloop-sim0`, and an 8-line `boardloop-mock1`. Not
    /// the daemon's demo board: that is `boards/demo.yaml`, whose mock chips
    /// the daemon makes from the file (this layer reads no board files).
    public static func exampleBoard(clock: RunLoopClock = .monotonic, eventModel: MockChip.EventModel = .v2) -> MockGPIO {
        // Fixed, valid sizes and names: these cannot throw.
        try! MockGPIO([
            MockChip(
                name: "gpiochip0", label: "boardloop-mock0", lineCount: 32, lineNames: [17: "BUTTON", 27: "LED"],
                eventModel: eventModel, clock: clock),
            MockChip(name: "gpiochip1", label: "boardloop-mock1", lineCount: 8, eventModel: eventModel, clock: clock),
        ])
    }
}

/// An open mock chip.
final class MockChipDriver: GPIOChipDriver {
    let chip: MockChip
    init(chip: MockChip) { self.chip = chip }

    var info: GPIOChipInfo { chip.info }

    func close() {}

    func lineInfo(offset: UInt32) throws(GPIOError) -> GPIOLineInfo {
        guard Int(offset) < chip.lineCount else {
            throw .offsetOutOfRange(chip: info.description, offset: offset, lineCount: chip.lineCount)
        }
        return try chip.lock.locked { () throws(GPIOError) in
            guard !chip.isVanished else { throw .chipVanished(chip: info.description, detail: "mock chip vanished") }
            let o = Int(offset)
            if let r = chip.owner[o] {
                let s = r.lines[chip.ownerIndex[o]].settings
                return GPIOLineInfo(
                    offset: offset, name: chip.names[o], consumer: r.consumer, used: true, direction: s.direction,
                    activeLow: s.activeLow, bias: s.bias, drive: s.drive, edgeDetection: s.edgeDetection,
                    debounce: s.debounce)
            }
            let holder = chip.holders[o]
            return GPIOLineInfo(
                offset: offset, name: chip.names[o], consumer: holder ?? "", used: holder != nil, direction: .input,
                activeLow: false, bias: .asIs, drive: .pushPull, edgeDetection: GPIOEdgeDetection.none, debounce: .zero)
        }
    }

    func findLine(named name: String) throws(GPIOError) -> UInt32? {
        guard !chip.vanished else { throw .chipVanished(chip: info.description, detail: "mock chip vanished") }
        return chip.names.firstIndex(of: name).map { UInt32($0) }
    }

    func requestLines(_ lines: [GPIODriverLineConfig], consumer: String, eventBufferCapacity: Int) throws(GPIOError)
        -> any GPIORequestDriver
    {
        let request = try MockRequest(chip: chip, consumer: consumer, lines: lines, eventBufferCapacity: eventBufferCapacity)
        let t = chip.now
        var outputs: [(UInt32, Bool)] = []
        try chip.lock.locked { () throws(GPIOError) in
            guard !chip.isVanished else { throw .chipVanished(chip: info.description, detail: "mock chip vanished") }
            for line in lines {
                let o = Int(line.offset)
                if let r = chip.owner[o] { throw .lineBusy(chip.ref(line.offset), consumer: r.consumer) }
                if let h = chip.holders[o] { throw .lineBusy(chip.ref(line.offset), consumer: h) }
            }
            chip.callCounts.requests += 1
            for (i, line) in lines.enumerated() {
                let o = Int(line.offset)
                chip.owner[o] = request
                chip.ownerIndex[o] = i
                if line.settings.direction == .output {
                    let level = line.settings.outputValue != line.settings.activeLow
                    chip.recordOutput(o, value: line.settings.outputValue, level: level, at: t)
                    outputs.append((line.offset, level))
                }
            }
        }
        for (o, level) in outputs { chip.propagate(o, level: level, at: t) }
        return request
    }
}
