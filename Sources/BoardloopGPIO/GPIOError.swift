import Boardloop
import Glibc

/// Names a line in messages: its chip, its offset and, when known, its name.
public struct GPIOLineRef: Equatable, Hashable, Sendable, CustomStringConvertible {
    /// The chip's description, e.g. `gpiochip0 [pinctrl-bcm2711]`.
    public var chip: String
    public var offset: UInt32
    public var name: String?

    public init(chip: String, offset: UInt32, name: String? = nil) {
        self.chip = chip
        self.offset = offset
        self.name = name
    }

    public var description: String {
        if let name, !name.isEmpty { return "line \(offset) (\"\(name)\") of \(chip)" }
        return "line \(offset) of \(chip)"
    }
}

/// Every way a GPIO call can fail. Each case carries the chip, the line and
/// the cause; the message (`description`) says what to do about it.
public enum GPIOError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No chip matches `chip` (a path, a name such as `gpiochip0`, or a
    /// label). `available` lists the chips that exist, as `name [label]`.
    case chipNotFound(chip: String, available: [String])
    /// The file exists but is not a GPIO character device.
    case notAGPIOChip(path: String)
    /// The chip's device file cannot be opened for lack of permission.
    /// `group` is the group owning the file, which the user should join.
    case permissionDenied(chip: String, path: String, group: String?)
    /// No line has this name (on `chip`, or on any chip when `chip` is nil).
    case lineNotFound(name: String, chip: String?)
    /// The offset is not a line of the chip.
    case offsetOutOfRange(chip: String, offset: UInt32, lineCount: Int)
    /// The line is already requested; `consumer` is who holds it.
    case lineBusy(GPIOLineRef, consumer: String?)
    /// Settings that cannot go together (edge detection on an output, a
    /// drive mode on an input, a line named twice, ...).
    case invalidConfiguration(GPIOLineRef?, reason: String)
    /// The chip went away while in use (hot-unplug, gpio-sim taken down).
    case chipVanished(chip: String, detail: String)
    /// The request was released; `operation` cannot run on it.
    case requestReleased(chip: String, operation: String)
    /// The line is not part of this request.
    case lineNotInRequest(GPIOLineRef)
    /// A value was written to a line requested as an input.
    case notAnOutput(GPIOLineRef)
    /// A fixed size would be exceeded (64 lines per request, say).
    case capacityExceeded(what: String, limit: Int)
    /// Any other failure of a library or system call.
    case system(chip: String, call: String, errno: Int32)
    /// The run loop refused (not its thread, a capacity, ...).
    case runLoop(RunLoopError)

    /// The line the error is about, where it names one.
    public var line: GPIOLineRef? {
        switch self {
        case let .lineBusy(l, _), let .lineNotInRequest(l), let .notAnOutput(l): l
        case let .invalidConfiguration(l, _): l
        default: nil
        }
    }

    public var description: String {
        switch self {
        case let .chipNotFound(chip, available):
            if available.isEmpty {
                return "GPIO chip '\(chip)' not found: there are no GPIO chips (no /dev/gpiochip* devices). "
                    + "On a board, check that the kernel has GPIO_CDEV; on a laptop or CI machine, load gpio-sim "
                    + "(sudo modprobe gpio-sim; scripts/gpio-sim-up.sh) or use the mock board."
            }
            return "GPIO chip '\(chip)' not found; the chips are: \(available.joined(separator: ", ")) "
                + "(open one by path, by name such as gpiochip0, or by label)"
        case let .notAGPIOChip(path):
            return "\(path) is not a GPIO chip (not a GPIO character device)"
        case let .permissionDenied(chip, path, group):
            var s = "permission denied opening GPIO chip '\(chip)' (\(path)): "
            if let group, group != "root" {
                s += "join the group '\(group)' that owns it (sudo usermod -aG \(group) $USER, then log in again)"
            } else {
                s += "the device is root-only here; on Raspberry Pi OS the 'gpio' group owns /dev/gpiochip* "
                    + "(add a udev rule or run as root)"
            }
            return s + "; check with: ls -l /dev/gpiochip*"
        case let .lineNotFound(name, chip):
            if let chip { return "no line named '\(name)' on GPIO chip \(chip)" }
            return "no line named '\(name)' on any GPIO chip"
        case let .offsetOutOfRange(chip, offset, count):
            return "line \(offset) does not exist on GPIO chip \(chip): it has \(count) lines (0...\(max(count - 1, 0)))"
        case let .lineBusy(line, consumer):
            if let consumer, !consumer.isEmpty {
                return "\(line) is busy: it is requested by '\(consumer)' (see gpioinfo); release it there first"
            }
            return "\(line) is busy: it is requested by another user or driver (see gpioinfo)"
        case let .invalidConfiguration(line, reason):
            if let line { return "invalid settings for \(line): \(reason)" }
            return "invalid line request: \(reason)"
        case let .chipVanished(chip, detail):
            return "GPIO chip \(chip) vanished while in use (\(detail)); its requests are dead — open the chip again when it is back"
        case let .requestReleased(chip, operation):
            return "\(operation): the line request on \(chip) was released"
        case let .lineNotInRequest(line):
            return "\(line) is not part of this request"
        case let .notAnOutput(line):
            return "\(line) is requested as an input; request it as an output to set its value"
        case let .capacityExceeded(what, limit):
            return "\(what) is limited to \(limit)"
        case let .system(chip, call, code):
            return "\(call) failed on GPIO chip \(chip): \(String(cString: strerror(code))) (errno \(code))"
        case let .runLoop(error):
            return "run loop: \(error)"
        }
    }
}
