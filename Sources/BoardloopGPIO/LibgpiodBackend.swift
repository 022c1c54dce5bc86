import Boardloop
import CGPIOD
import Glibc

/// The real backend: libgpiod through the CGPIOD shim (1.6 or 2.x, chosen
/// when the package is built), on the kernel's GPIO character devices.
public final class LibgpiodBackend: GPIOChipOpening {
    /// The backend over `/dev`.
    public static let shared = LibgpiodBackend()

    /// Where the `gpiochipN` devices are (`/dev`).
    public let deviceDirectory: String
    /// 1 or 2: the libgpiod API the shim was compiled against.
    public let apiVersion: Int
    /// libgpiod's version string, e.g. "1.6.3".
    public let libraryVersion: String
    public let capabilities: GPIOCapabilities

    public init(deviceDirectory: String = "/dev") {
        self.deviceDirectory = deviceDirectory
        apiVersion = Int(bl_gpiod_api_version())
        libraryVersion = String(cString: bl_gpiod_library_version())
        var caps = GPIOCapabilities(rawValue: 0)
        let c = bl_gpiod_capabilities()
        if c & UInt32(BL_GPIOD_CAP_SEQNO) != 0 { caps.insert(.sequenceNumbers) }
        if c & UInt32(BL_GPIOD_CAP_DEBOUNCE) != 0 { caps.insert(.kernelDebounce) }
        if c & UInt32(BL_GPIOD_CAP_INFO_EDGE) != 0 { caps.insert(.lineInfoEdges) }
        if c & UInt32(BL_GPIOD_CAP_ATOMIC_RECONFIGURE) != 0 { caps.insert(.atomicReconfigure) }
        if c & UInt32(BL_GPIOD_CAP_EVENT_BUFFER_SIZE) != 0 { caps.insert(.eventBufferSize) }
        // Linux 6.6 wakes line-request pollers when their chip is removed
        // (gpiolib-cdev's device notifier); 6.1 reports EPOLLERR only when
        // something else makes the kernel poll the fd again.
        let (major, minor) = kernelVersion()
        if major > 6 || (major == 6 && minor >= 6) { caps.insert(.vanishWakesPoller) }
        capabilities = caps
    }

    public var backendName: String { "libgpiod \(libraryVersion)" }

    /// What libgpiod is asked for when `lines` are requested with these
    /// settings: the GPIO layer's adjustments (software debounce under 1.6),
    /// then the shim's translation into libgpiod's own objects (2.x: a
    /// `gpiod_line_config`; 1.6: each group's request type and flags), read
    /// back from those objects. Needs no chip: for tests and diagnostics.
    package func libraryConfig(for lines: [(offset: UInt32, settings: GPIOLineSettings)]) throws(GPIOError)
        -> [GPIODriverLineConfig]
    {
        var configs: [bl_gpiod_line_config] = []
        for line in lines {
            if let reason = line.settings.invalidReason {
                throw .invalidConfiguration(GPIOLineRef(chip: "libgpiod", offset: line.offset), reason: reason)
            }
            let adjusted = GPIOLineRequest.driverSettings(line.settings, capabilities: capabilities)
            configs.append(LibgpiodChip.cConfig(GPIODriverLineConfig(offset: line.offset, settings: adjusted)))
        }
        var out = [bl_gpiod_line_config](repeating: bl_gpiod_line_config(), count: configs.count)
        var err = bl_gpiod_error()
        guard bl_gpiod_library_config(&configs, UInt32(configs.count), &out, &err) == 0 else {
            let info = GPIOChipInfo(name: "libgpiod", label: "", path: "", lineCount: 0)
            throw gpioError(err, chip: info, lineName: { _ in nil })
        }
        return out.map(LibgpiodChip.fromC)
    }

    /// How many events the kernel buffers for a request of `lines` lines
    /// made with `eventBufferCapacity`: 2.x: the capacity rounded up to a
    /// power of two (at least 2, at most 1024); 1.6: 16 per line.
    public func kernelEventBuffer(lines: Int, eventBufferCapacity: Int) -> Int {
        Int(bl_gpiod_kernel_event_buffer(UInt32(clamping: lines), UInt32(clamping: eventBufferCapacity)))
    }

    /// The N of each `gpiochipN` device, sorted.
    func chipNumbers() throws(GPIOError) -> [Int32] {
        var numbers = [Int32](repeating: 0, count: 256)
        var err = bl_gpiod_error()
        let n = bl_gpiod_scan_chips(deviceDirectory, &numbers, Int32(numbers.count), &err)
        if n < 0 {
            if err.code == ENOENT { return [] }
            throw .system(chip: deviceDirectory, call: "opendir", errno: err.code)
        }
        return Array(numbers.prefix(Int(n)))
    }

    public func listChips() throws(GPIOError) -> [GPIOChipInfo] {
        var result: [GPIOChipInfo] = []
        for n in try chipNumbers() {
            let path = "\(deviceDirectory)/gpiochip\(n)"
            do {
                let chip = try openPath(path, requestedAs: path)
                result.append(chip.info)
                chip.close()
            } catch {
                switch error {
                case .chipVanished, .chipNotFound: continue // went away between scan and open
                default: throw error
                }
            }
        }
        return result
    }

    package func openChip(_ chip: String) throws(GPIOError) -> any GPIOChipDriver {
        if chip.contains("/") { return try openPath(chip, requestedAs: chip) }
        if chip.hasPrefix("gpiochip"), Int(chip.dropFirst(8)) != nil {
            let path = "\(deviceDirectory)/\(chip)"
            var st = stat()
            if stat(path, &st) == 0 { return try openPath(path, requestedAs: chip) }
        }
        // By label (or a name whose node is elsewhere): open each and compare.
        var available: [String] = []
        var denied: GPIOError?
        for n in try chipNumbers() {
            let path = "\(deviceDirectory)/gpiochip\(n)"
            do {
                let driver = try openPath(path, requestedAs: path)
                if driver.info.label == chip || driver.info.name == chip { return driver }
                available.append(driver.info.description)
                driver.close()
            } catch {
                if case .permissionDenied = error, denied == nil { denied = error }
                available.append("gpiochip\(n) (cannot open)")
            }
        }
        if let denied { throw denied }
        throw .chipNotFound(chip: chip, available: available)
    }

    func openPath(_ path: String, requestedAs name: String) throws(GPIOError) -> LibgpiodChip {
        var err = bl_gpiod_error()
        guard let handle = bl_gpiod_chip_open(path, &err) else {
            switch err.code {
            case ENOENT:
                let available = ((try? listChips()) ?? []).map(\.description)
                throw .chipNotFound(chip: name, available: available)
            case EACCES, EPERM:
                throw .permissionDenied(chip: name, path: path, group: Self.groupOwning(path))
            case ENOTTY, EINVAL:
                throw .notAGPIOChip(path: path)
            case ENODEV, ENXIO:
                throw .chipVanished(chip: name, detail: "\(path) exists but its device is gone")
            default:
                throw .system(chip: name, call: stringFromCArray(err.detail), errno: err.code)
            }
        }
        var info = bl_gpiod_chip_info()
        if bl_gpiod_chip_get_info(handle, &info, &err) != 0 {
            bl_gpiod_chip_close(handle)
            throw .system(chip: name, call: stringFromCArray(err.detail), errno: err.code)
        }
        let chipInfo = GPIOChipInfo(
            name: stringFromCArray(info.name), label: stringFromCArray(info.label), path: path,
            lineCount: Int(info.num_lines))
        return LibgpiodChip(handle: handle, info: chipInfo, capabilities: capabilities)
    }

    /// The name of the group owning `path` (a `/dev/gpiochip*`), for
    /// permission messages; nil when it cannot be read.
    public static func groupOwning(_ path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        var group = group()
        var result: UnsafeMutablePointer<group>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getgrgid_r(st.st_gid, &group, &buffer, buffer.count, &result) == 0, result != nil else {
            return "\(st.st_gid)"
        }
        return String(cString: group.gr_name)
    }
}

/// Maps a shim error to a GPIOError with chip and line context.
func gpioError(_ err: bl_gpiod_error, chip: GPIOChipInfo, lineName: (UInt32) -> String?) -> GPIOError {
    let detail = stringFromCArray(err.detail)
    let ref: GPIOLineRef? =
        err.offset >= 0 ? GPIOLineRef(chip: chip.description, offset: UInt32(err.offset), name: lineName(UInt32(err.offset))) : nil
    switch err.code {
    case EBUSY:
        let line = ref ?? GPIOLineRef(chip: chip.description, offset: 0)
        let consumer = stringFromCArray(err.consumer)
        return .lineBusy(line, consumer: consumer.isEmpty ? nil : consumer)
    case ENODEV, ENXIO:
        return .chipVanished(chip: chip.description, detail: "\(detail): \(String(cString: strerror(err.code)))")
    case EINVAL where err.op == BL_GPIOD_OP_REQUEST || err.op == BL_GPIOD_OP_RECONFIGURE:
        let reason = detail.hasPrefix("gpiod_") ? "the kernel or libgpiod rejected the settings (\(detail): EINVAL)" : detail
        return .invalidConfiguration(ref, reason: reason)
    case EACCES where err.op == BL_GPIOD_OP_OPEN, EPERM where err.op == BL_GPIOD_OP_OPEN:
        return .permissionDenied(chip: chip.description, path: chip.path, group: LibgpiodBackend.groupOwning(chip.path))
    default:
        return .system(chip: chip.description, call: detail, errno: err.code)
    }
}

/// An open chip of the libgpiod backend.
final class LibgpiodChip: GPIOChipDriver {
    let handle: OpaquePointer
    let info: GPIOChipInfo
    let capabilities: GPIOCapabilities
    var closed = false

    init(handle: OpaquePointer, info: GPIOChipInfo, capabilities: GPIOCapabilities) {
        self.handle = handle
        self.info = info
        self.capabilities = capabilities
    }

    deinit { close() }

    func close() {
        guard !closed else { return }
        closed = true
        bl_gpiod_chip_close(handle)
    }

    func lineInfo(offset: UInt32) throws(GPIOError) -> GPIOLineInfo {
        guard offset < UInt32(info.lineCount) else {
            throw .offsetOutOfRange(chip: info.description, offset: offset, lineCount: info.lineCount)
        }
        var li = bl_gpiod_line_info()
        var err = bl_gpiod_error()
        guard bl_gpiod_chip_get_line_info(handle, offset, &li, &err) == 0 else {
            throw gpioError(err, chip: info, lineName: { _ in nil })
        }
        let edge: GPIOEdgeDetection? =
            switch li.edge {
            case Int32(BL_GPIOD_EDGE_RISING): .rising
            case Int32(BL_GPIOD_EDGE_FALLING): .falling
            case Int32(BL_GPIOD_EDGE_BOTH): .both
            case Int32(BL_GPIOD_EDGE_NONE): GPIOEdgeDetection.none
            default: nil
            }
        let bias: GPIOBias =
            switch li.bias {
            case Int32(BL_GPIOD_BIAS_DISABLED): .disabled
            case Int32(BL_GPIOD_BIAS_PULL_UP): .pullUp
            case Int32(BL_GPIOD_BIAS_PULL_DOWN): .pullDown
            default: .asIs
            }
        let drive: GPIODrive =
            switch li.drive {
            case Int32(BL_GPIOD_DRIVE_OPEN_DRAIN): .openDrain
            case Int32(BL_GPIOD_DRIVE_OPEN_SOURCE): .openSource
            default: .pushPull
            }
        return GPIOLineInfo(
            offset: offset, name: stringFromCArray(li.name), consumer: stringFromCArray(li.consumer), used: li.used != 0,
            direction: li.direction == Int32(BL_GPIOD_DIRECTION_OUTPUT) ? .output : .input, activeLow: li.active_low != 0,
            bias: bias, drive: drive, edgeDetection: edge, debounce: .microseconds(Int64(li.debounce_us)),
            eventClock: li.event_clock == Int32(BL_GPIOD_CLOCK_REALTIME)
                ? .realtime
                : li.event_clock == Int32(BL_GPIOD_CLOCK_HTE)
                    ? .hardware : li.event_clock == Int32(BL_GPIOD_CLOCK_MONOTONIC) ? .monotonic : nil)
    }

    func findLine(named name: String) throws(GPIOError) -> UInt32? {
        var err = bl_gpiod_error()
        let off = bl_gpiod_chip_find_line(handle, name, &err)
        if off >= 0 { return UInt32(off) }
        if err.code == ENOENT { return nil }
        throw gpioError(err, chip: info, lineName: { _ in nil })
    }

    func requestLines(_ lines: [GPIODriverLineConfig], consumer: String, eventBufferCapacity: Int) throws(GPIOError)
        -> any GPIORequestDriver
    {
        var configs = lines.map(Self.cConfig)
        var err = bl_gpiod_error()
        let names = lineNames(lines.map(\.offset))
        guard
            let req = bl_gpiod_request_lines(
                handle, consumer, &configs, UInt32(configs.count), UInt32(clamping: eventBufferCapacity), &err)
        else {
            throw gpioError(err, chip: info, lineName: { names[$0] })
        }
        return LibgpiodRequest(
            handle: req, chip: info, offsets: lines.map(\.offset), names: names, eventCapacity: eventBufferCapacity)
    }

    private func lineNames(_ offsets: [UInt32]) -> [UInt32: String] {
        var names: [UInt32: String] = [:]
        for o in offsets {
            if let li = try? lineInfo(offset: o), !li.name.isEmpty { names[o] = li.name }
        }
        return names
    }

    /// The shim's config of one line: what requests and reconfigures pass
    /// down (and what `LibgpiodBackend.libraryConfig(for:)` reads back).
    static func cConfig(_ line: GPIODriverLineConfig) -> bl_gpiod_line_config {
        let s = line.settings
        // The kernel takes whole microseconds: round up, so a sub-microsecond
        // period still debounces.
        let ns = s.debounce.nanosecondsClamped
        let us = ns <= 0 ? 0 : (ns + 999) / 1000
        return bl_gpiod_line_config(
            offset: line.offset,
            direction: Int32(s.direction == .output ? BL_GPIOD_DIRECTION_OUTPUT : BL_GPIOD_DIRECTION_INPUT),
            edge: cEdge(s.edgeDetection), bias: cBias(s.bias), drive: cDrive(s.drive), active_low: s.activeLow ? 1 : 0,
            output_value: s.outputValue ? 1 : 0, debounce_us: UInt32(clamping: us))
    }

    static func fromC(_ c: bl_gpiod_line_config) -> GPIODriverLineConfig {
        let edge: GPIOEdgeDetection =
            switch c.edge {
            case Int32(BL_GPIOD_EDGE_RISING): .rising
            case Int32(BL_GPIOD_EDGE_FALLING): .falling
            case Int32(BL_GPIOD_EDGE_BOTH): .both
            default: GPIOEdgeDetection.none
            }
        let bias: GPIOBias =
            switch c.bias {
            case Int32(BL_GPIOD_BIAS_DISABLED): .disabled
            case Int32(BL_GPIOD_BIAS_PULL_UP): .pullUp
            case Int32(BL_GPIOD_BIAS_PULL_DOWN): .pullDown
            default: .asIs
            }
        let drive: GPIODrive =
            switch c.drive {
            case Int32(BL_GPIOD_DRIVE_OPEN_DRAIN): .openDrain
            case Int32(BL_GPIOD_DRIVE_OPEN_SOURCE): .openSource
            default: .pushPull
            }
        return GPIODriverLineConfig(
            offset: c.offset,
            settings: GPIOLineSettings(
                direction: c.direction == Int32(BL_GPIOD_DIRECTION_OUTPUT) ? .output : .input, edgeDetection: edge,
                bias: bias, drive: drive, activeLow: c.active_low != 0, debounce: .microseconds(Int64(c.debounce_us)),
                outputValue: c.output_value != 0))
    }

    static func cEdge(_ e: GPIOEdgeDetection) -> Int32 {
        switch e {
        case .none: Int32(BL_GPIOD_EDGE_NONE)
        case .rising: Int32(BL_GPIOD_EDGE_RISING)
        case .falling: Int32(BL_GPIOD_EDGE_FALLING)
        case .both: Int32(BL_GPIOD_EDGE_BOTH)
        }
    }

    static func cBias(_ b: GPIOBias) -> Int32 {
        switch b {
        case .asIs: Int32(BL_GPIOD_BIAS_AS_IS)
        case .disabled: Int32(BL_GPIOD_BIAS_DISABLED)
        case .pullUp: Int32(BL_GPIOD_BIAS_PULL_UP)
        case .pullDown: Int32(BL_GPIOD_BIAS_PULL_DOWN)
        }
    }

    static func cDrive(_ d: GPIODrive) -> Int32 {
        switch d {
        case .pushPull: Int32(BL_GPIOD_DRIVE_PUSH_PULL)
        case .openDrain: Int32(BL_GPIOD_DRIVE_OPEN_DRAIN)
        case .openSource: Int32(BL_GPIOD_DRIVE_OPEN_SOURCE)
        }
    }
}

/// A live request of the libgpiod backend. Its read buffers are reserved
/// here, so reading events does not allocate.
final class LibgpiodRequest: GPIORequestDriver {
    private var handle: OpaquePointer?
    let chip: GPIOChipInfo
    let offsets: [UInt32]
    let names: [UInt32: String]
    let rawCapacity: Int
    let status: UnsafeMutablePointer<bl_gpiod_read_status>
    let error: UnsafeMutablePointer<bl_gpiod_error>
    let eventFD: Int32

    init(handle: OpaquePointer, chip: GPIOChipInfo, offsets: [UInt32], names: [UInt32: String], eventCapacity: Int) {
        self.handle = handle
        self.chip = chip
        self.offsets = offsets
        self.names = names
        rawCapacity = max(eventCapacity, 1)
        // readEvents has the shim write into GPIOEdgeEvent storage.
        precondition(
            MemoryLayout<GPIOEdgeEvent>.size == MemoryLayout<bl_gpiod_edge_event>.size
                && MemoryLayout<GPIOEdgeEvent>.stride == MemoryLayout<bl_gpiod_edge_event>.stride
                && MemoryLayout<GPIOEdgeEvent>.alignment == MemoryLayout<bl_gpiod_edge_event>.alignment,
            "boardloop GPIO: GPIOEdgeEvent must have the layout of bl_gpiod_edge_event")
        status = .allocate(capacity: 1)
        status.initialize(to: bl_gpiod_read_status())
        error = .allocate(capacity: 1)
        error.initialize(to: bl_gpiod_error())
        eventFD = bl_gpiod_request_fd(handle)
    }

    deinit {
        release()
        status.deallocate()
        error.deallocate()
    }

    var hasPendingEvents: Bool { handle != nil && Kernel.isReadable(eventFD) }

    private func fail(_ operation: String) -> GPIOError {
        .requestReleased(chip: chip.description, operation: operation)
    }

    private func mapped() -> GPIOError {
        let names = self.names
        return gpioError(error.pointee, chip: chip, lineName: { names[$0] })
    }

    func getValues(into values: UnsafeMutableBufferPointer<Int32>) throws(GPIOError) {
        guard let handle else { throw fail("getValues") }
        precondition(values.count >= offsets.count, "values buffer too small")
        if bl_gpiod_request_get_values(handle, values.baseAddress, error) != 0 { throw mapped() }
    }

    func setValues(offsets: UnsafeBufferPointer<UInt32>, values: UnsafeBufferPointer<Int32>) throws(GPIOError) {
        guard let handle else { throw fail("setValues") }
        if bl_gpiod_request_set_values(handle, offsets.baseAddress, values.baseAddress, UInt32(offsets.count), error) != 0 {
            throw mapped()
        }
    }

    func reconfigure(_ lines: [GPIODriverLineConfig]) throws(GPIOError) {
        guard let handle else { throw fail("reconfigure") }
        var configs = lines.map(LibgpiodChip.cConfig)
        if bl_gpiod_request_reconfigure(handle, &configs, UInt32(configs.count), error) != 0 { throw mapped() }
    }

    func readEvents(into events: UnsafeMutableBufferPointer<GPIOEdgeEvent>, fullOffsets: UnsafeMutableBufferPointer<UInt32>)
        throws(GPIOError) -> GPIOReadStatus
    {
        guard let handle else { throw fail("readEvents") }
        let want = min(events.count, rawCapacity)
        // An GPIOEdgeEvent is the shim's record and nothing else: the shim writes
        // the events where the request reads them (one copy out of
        // libgpiod's buffer, no conversion pass).
        let n = events.baseAddress!.withMemoryRebound(to: bl_gpiod_edge_event.self, capacity: want) {
            bl_gpiod_request_read_events(handle, $0, UInt32(want), status, error)
        }
        if n < 0 { throw mapped() }
        var result = GPIOReadStatus()
        result.count = Int(n)
        let s = status.pointee
        result.vanished = s.flags & UInt32(BL_GPIOD_READ_VANISHED) != 0
        result.more = s.flags & UInt32(BL_GPIOD_READ_MORE) != 0
        if s.num_full > 0 {
            let k = min(Int(s.num_full), fullOffsets.count)
            withUnsafeBytes(of: s.full_offsets) { raw in
                let offs = raw.bindMemory(to: UInt32.self)
                for j in 0..<k { fullOffsets[j] = offs[j] }
            }
            result.fullCount = k
        }
        if s.error != 0 && n == 0 {
            throw .system(chip: chip.description, call: "read of edge events", errno: s.error)
        }
        return result
    }

    func release() {
        guard let h = handle else { return }
        handle = nil
        bl_gpiod_request_release(h)
    }
}
