import BoardloopGPIO
import Glibc

/// An input line of a gpio-sim chip (the kernel's GPIO simulator), driven
/// as a person would through its `pull` attribute: the control server's
/// `press`, `release`, `click`, `input` and `flood` on a board whose chips
/// are simulated. The line is found from the chip its address resolves to
/// (by path, name or label, as the daemon requests it) and its offset:
/// gpio-sim gives each line of its chips `sim_gpioN/{pull,value}` in the
/// chip's device directory, which `/sys/bus/gpio/devices/CHIP` links to. A
/// chip without them is not a simulator. No path is ever taken from a
/// request.
struct GPIOSimPin: Equatable {
    /// The line's `sim_gpioN` directory.
    let directory: String

    var pullPath: String { directory + "/pull" }
    var valuePath: String { directory + "/value" }

    /// The `sim_gpioN` directory of `line`, when its chip is a gpio-sim
    /// chip; nil for any other chip (or a line that does not resolve).
    /// `sysfs`: where sysfs is mounted (a test gives a directory of its own).
    static func find(_ line: LineConfig, backend: any GPIOBackend, sysfs: String = "/sys") -> GPIOSimPin? {
        let chipName: String
        let offset: UInt32
        do {
            switch line.address {
            case let .offset(ref, o):
                let chip = try GPIOChip.open(ref.text, backend: backend)
                defer { chip.close() }
                (chipName, offset) = (chip.name, try chip.offset(of: .offset(o)))
            case let .named(ref?, n):
                let chip = try GPIOChip.open(ref.text, backend: backend)
                defer { chip.close() }
                (chipName, offset) = (chip.name, try chip.offset(of: .name(n)))
            case let .named(nil, n):
                let found = try GPIOChip.findLine(named: n, backend: backend)
                (chipName, offset) = (found.chip.name, found.offset)
            }
        } catch {
            return nil
        }
        // A chip name is one path component (gpiochipN): nothing else is looked up.
        guard !chipName.isEmpty, !chipName.contains("/"), chipName != ".", chipName != ".." else { return nil }
        let pin = GPIOSimPin(directory: "\(sysfs)/bus/gpio/devices/\(chipName)/sim_gpio\(offset)")
        return access(pin.pullPath, W_OK) == 0 ? pin : nil
    }

    /// Pulls the line up (high) or down (low): the simulator makes the edge.
    /// Returns 0 or the errno.
    func pull(_ high: Bool) -> Int32 {
        let text = high ? "pull-up" : "pull-down"
        let fd = open(pullPath, O_WRONLY | O_TRUNC | O_CLOEXEC)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        let n = text.withCString { write(fd, $0, strlen($0)) }
        if n < 0 { return errno }
        return n == text.utf8.count ? 0 : EIO
    }

    /// The line's physical level as the simulator has it (nil: unreadable).
    func level() -> Bool? {
        let fd = open(valuePath, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var b: UInt8 = 0
        guard read(fd, &b, 1) == 1 else { return nil }
        switch b {
        case UInt8(ascii: "1"): return true
        case UInt8(ascii: "0"): return false
        default: return nil
        }
    }
}
