import Boardloop

/// An open GPIO chip: find lines, read their info, request them. Made by
/// path (`/dev/gpiochip0`), name (`gpiochip0`) or label (`pinctrl-bcm2711`,
/// `pinctrl-rp1`, a gpio-sim label), on a backend: libgpiod by default, or a
/// mock board (BoardloopGPIOMock) with the same API.
public final class GPIOChip {
    public let backend: any GPIOBackend
    let driver: any GPIOChipDriver

    /// Opens a chip by path, name or label.
    public init(_ chip: String, backend: any GPIOBackend = LibgpiodBackend.shared) throws(GPIOError) {
        self.backend = backend
        driver = try Self.openDriver(chip, backend: backend)
    }

    /// Opens a chip by path, name or label.
    public static func open(_ chip: String, backend: any GPIOBackend = LibgpiodBackend.shared) throws(GPIOError)
        -> GPIOChip
    {
        try GPIOChip(chip, backend: backend)
    }

    /// Opens a chip through one of the package's backends (the driver
    /// protocols stay inside the package).
    static func openDriver(_ chip: String, backend: any GPIOBackend) throws(GPIOError) -> any GPIOChipDriver {
        guard let opening = backend as? any GPIOChipOpening else {
            throw .invalidConfiguration(
                nil, reason: "the backend '\(backend.backendName)' cannot open chips: chips open through the package's backends (LibgpiodBackend, MockGPIO)")
        }
        return try opening.openChip(chip)
    }

    /// Every chip of the backend: name, label, path, line count.
    public static func list(backend: any GPIOBackend = LibgpiodBackend.shared) throws(GPIOError) -> [GPIOChipInfo] {
        try backend.listChips()
    }

    /// Finds a line by name across all chips (the first chip that has it).
    public static func findLine(named name: String, backend: any GPIOBackend = LibgpiodBackend.shared)
        throws(GPIOError) -> (chip: GPIOChipInfo, offset: UInt32)
    {
        for info in try backend.listChips() {
            let chip = try openDriver(info.path, backend: backend)
            defer { chip.close() }
            if let offset = try chip.findLine(named: name) { return (chip.info, offset) }
        }
        throw .lineNotFound(name: name, chip: nil)
    }

    public var info: GPIOChipInfo { driver.info }
    public var name: String { driver.info.name }
    public var label: String { driver.info.label }
    public var path: String { driver.info.path }
    public var lineCount: Int { driver.info.lineCount }

    /// The offset of a line given by offset or name.
    public func offset(of line: GPIOLineSelector) throws(GPIOError) -> UInt32 {
        switch line {
        case let .offset(o):
            guard o < UInt32(lineCount) else {
                throw .offsetOutOfRange(chip: info.description, offset: o, lineCount: lineCount)
            }
            return o
        case let .name(n):
            guard let o = try driver.findLine(named: n) else { throw .lineNotFound(name: n, chip: info.description) }
            return o
        }
    }

    /// What the kernel says about a line (name, consumer, direction, ...).
    public func lineInfo(_ line: GPIOLineSelector) throws(GPIOError) -> GPIOLineInfo {
        try driver.lineInfo(offset: offset(of: line))
    }

    /// Info for every line of the chip.
    public func lineInfos() throws(GPIOError) -> [GPIOLineInfo] {
        var result: [GPIOLineInfo] = []
        result.reserveCapacity(lineCount)
        for o in 0..<UInt32(lineCount) { result.append(try driver.lineInfo(offset: o)) }
        return result
    }

    /// Requests `lines`, all with the same settings.
    public func request(
        _ lines: [GPIOLineSelector], _ settings: GPIOLineSettings, consumer: String? = nil, eventBufferCapacity: Int = 64
    ) throws(GPIOError) -> GPIOLineRequest {
        try request(lines.map { ($0, settings) }, consumer: consumer, eventBufferCapacity: eventBufferCapacity)
    }

    /// Requests one line.
    public func request(
        _ line: GPIOLineSelector, _ settings: GPIOLineSettings, consumer: String? = nil, eventBufferCapacity: Int = 64
    ) throws(GPIOError) -> GPIOLineRequest {
        try request([(line, settings)], consumer: consumer, eventBufferCapacity: eventBufferCapacity)
    }

    /// Requests lines, each with its own settings, as one request (one fd
    /// for all edge events). `consumer` is what `gpioinfo` shows as the
    /// lines' user (default: the program's name). `eventBufferCapacity` is
    /// how many events one dispatch can read; it is reserved now, so
    /// dispatching events allocates nothing.
    public func request(
        _ lines: [(GPIOLineSelector, GPIOLineSettings)], consumer: String? = nil, eventBufferCapacity: Int = 64
    ) throws(GPIOError) -> GPIOLineRequest {
        guard !lines.isEmpty else { throw .invalidConfiguration(nil, reason: "no lines to request") }
        guard lines.count <= 64 else { throw .capacityExceeded(what: "lines in one request", limit: 64) }
        guard eventBufferCapacity >= 1 && eventBufferCapacity <= 1024 else {
            throw .invalidConfiguration(nil, reason: "eventBufferCapacity \(eventBufferCapacity) must be within 1...1024")
        }
        var offsets: [UInt32] = []
        var names: [String] = []
        for (selector, settings) in lines {
            let o = try offset(of: selector)
            let name = (try? driver.lineInfo(offset: o).name) ?? ""
            let ref = GPIOLineRef(chip: info.description, offset: o, name: name)
            if offsets.contains(o) { throw .invalidConfiguration(ref, reason: "the line is named twice in one request") }
            if let reason = settings.invalidReason { throw .invalidConfiguration(ref, reason: reason) }
            offsets.append(o)
            names.append(name)
        }
        let caps = backend.capabilities
        let driverLines = zip(offsets, lines).map { offset, line in
            GPIODriverLineConfig(offset: offset, settings: GPIOLineRequest.driverSettings(line.1, capabilities: caps))
        }
        let consumerName = ProgramName.truncatedConsumer(consumer ?? ProgramName.current)
        let requestDriver = try driver.requestLines(
            driverLines, consumer: consumerName, eventBufferCapacity: eventBufferCapacity)
        return GPIOLineRequest(
            chip: info, capabilities: caps, driver: requestDriver, offsets: offsets, names: names,
            settings: lines.map(\.1), consumer: consumerName, eventCapacity: eventBufferCapacity)
    }

    /// Closes the chip. Requests made on it stay valid until released.
    public func close() { driver.close() }
}
