/// A board: how it is recognised, its GPIO chips (by label) and its pins.
///
/// Read from `boards/NAME.yaml` (see `BoardFile`); `docs/config.md`
/// describes the format.
public struct Board: Sendable, Equatable {
    public var name: String
    /// A human title (`Raspberry Pi 4 Model B`).
    public var title: String
    /// Where the board file was read from.
    public var file: String
    /// CPUs the board has, when the board file says (checks `workers.*.cpu`).
    public var cpus: Int?
    /// Which GPIO implementation serves the board's chips.
    public var backend: Backend
    public var detect: DetectRules
    public var chips: [Chip]
    /// The header and other named pins, in file order.
    public var pins: [Pin]

    public enum Backend: String, Sendable, Equatable {
        /// The kernel's GPIO character devices through libgpiod.
        case kernel
        /// The in-process mock chips (`BoardloopGPIOMock`): the demo board.
        case mock
    }

    /// How detection recognises the board (any one rule matching is a match;
    /// the strongest kind of match decides between boards).
    public struct DetectRules: Sendable, Equatable {
        /// Strings of `/proc/device-tree/compatible` (any one matches).
        public var compatible: [String]
        /// Prefixes of `/proc/device-tree/model` (any one matches).
        public var model: [String]
        /// GPIO chip labels that must all be present (for boards without a
        /// device tree of their own, such as gpio-sim).
        public var chips: [String]

        public init(compatible: [String] = [], model: [String] = [], chips: [String] = []) {
            self.compatible = compatible
            self.model = model
            self.chips = chips
        }

        public var isEmpty: Bool { compatible.isEmpty && model.isEmpty && chips.isEmpty }
    }

    /// A GPIO chip of the board, always by label (chip numbers change
    /// between kernels; labels do not).
    public struct Chip: Sendable, Equatable {
        public var label: String
        /// Number of lines, when known (mock and simulated chips need it).
        public var lines: Int?
        /// Line names by offset, as the kernel names them (mock chips are
        /// made with them).
        public var names: [UInt32: String]
        /// Which kernels name the lines so (`naming:`; "Raspberry Pi OS
        /// since 2024").
        public var naming: String?
        /// The names other kernels give the lines, where they differ
        /// (`alt_names:`), and which kernels those are (`alt_naming:`):
        /// accepted as well, so a config works under either kernel.
        public var altNames: [UInt32: String]
        public var altNaming: String?
        /// Mock chips: the offsets that read high until something drives
        /// them (pulled up on the board, as an active-low button is).
        public var idleHigh: [UInt32]

        public init(
            label: String, lines: Int? = nil, names: [UInt32: String] = [:], idleHigh: [UInt32] = [], naming: String? = nil,
            altNames: [UInt32: String] = [:], altNaming: String? = nil
        ) {
            self.label = label
            self.lines = lines
            self.names = names
            self.idleHigh = idleHigh
            self.naming = naming
            self.altNames = altNames
            self.altNaming = altNaming
        }

        /// Names that stand for no one line ("", "-", "NC": several lines
        /// have them).
        public static func isPlaceholder(_ name: String) -> Bool { name.isEmpty || name == "-" || name == "NC" }

        /// The offset of the line the kernel names `name` in either naming
        /// (`names` first), if the board file knows it.
        public func offset(ofLine name: String) -> UInt32? {
            guard !Self.isPlaceholder(name) else { return nil }
            if let o = names.filter({ $0.value == name }).keys.min() { return o }
            return altNames.filter { $0.value == name }.keys.min()
        }

        /// Every kernel name of a line (either naming), without placeholders.
        public func kernelNames(of offset: UInt32) -> [String] {
            [names[offset], altNames[offset]].compactMap { $0 }.filter { !Self.isPlaceholder($0) }
        }

        /// Every known line name, for "did you mean".
        public var allLineNames: [String] {
            Array(Set((Array(names.values) + Array(altNames.values)).filter { !Self.isPlaceholder($0) })).sorted()
        }
    }

    /// One pin of the header (or a named line of a board without a header).
    public struct Pin: Sendable, Equatable {
        /// The physical pin number on the header, if the pin is on one.
        public var physical: Int?
        /// The canonical name (`GPIO17`, `3V3`, `GND`, `ID_SD`, `BUTTON`).
        public var name: String
        /// Every other name the pin answers to (`BCM17`, `PIN11`, `SDA1`,
        /// the kernel's line name). Matching is case-insensitive.
        public var aliases: [String]
        public var kind: Kind
        /// The kernel's name for the line when the board file gives one
        /// (`line_name:`, also an alias); else the kernel names it as the
        /// pin (`GPIO17`). Mock chips made from the board carry it.
        public var lineName: String?

        public enum Kind: Sendable, Equatable {
            /// A usable GPIO line.
            case gpio(chip: String, offset: UInt32)
            /// A supply pin: `3V3` or `5V`.
            case power(String)
            case ground
            /// Not for general use (the HAT ID EEPROM's I2C bus), with why.
            case reserved(String)
        }

        public init(physical: Int?, name: String, aliases: [String], kind: Kind, lineName: String? = nil) {
            self.physical = physical
            self.name = name
            self.aliases = aliases
            self.kind = kind
            self.lineName = lineName
        }

        /// All names, canonical first.
        public var allNames: [String] { [name] + aliases }

        public var chipLine: (chip: String, offset: UInt32)? {
            if case let .gpio(c, o) = kind { return (c, o) }
            return nil
        }
    }

    public init(
        name: String, title: String, file: String, cpus: Int?, backend: Backend, detect: DetectRules, chips: [Chip],
        pins: [Pin]
    ) {
        self.name = name
        self.title = title
        self.file = file
        self.cpus = cpus
        self.backend = backend
        self.detect = detect
        self.chips = chips
        self.pins = pins
    }

    /// A board with no header: lines are named by chip (label, name or path)
    /// and offset, or by the kernel's line name.
    public var isGeneric: Bool { pins.isEmpty && chips.isEmpty }

    /// The pin a config names (case-insensitive; any name or alias).
    public func pin(named name: String) -> Pin? {
        let key = name.uppercased()
        return pins.first { p in p.allNames.contains { $0.uppercased() == key } }
    }

    /// The pin with this physical number.
    public func pin(physical n: Int) -> Pin? { pins.first { $0.physical == n } }

    /// The pin that is this chip line.
    public func pin(chip: String, offset: UInt32) -> Pin? {
        pins.first { $0.chipLine.map { $0.chip == chip && $0.offset == offset } ?? false }
    }

    /// The names nearest to a name the board does not have (for "did you mean").
    public func nearestPinNames(to name: String, limit: Int = 3) -> [String] {
        var near = DidYouMean.nearest(name, in: pins.flatMap(\.allNames), limit: limit * 2)
        // Report each pin once, by the name that was close.
        var seen: [String] = []
        near = near.filter { n in
            guard let p = pin(named: n) else { return false }
            if seen.contains(p.name) { return false }
            seen.append(p.name)
            return true
        }
        return Array(near.prefix(limit))
    }

    public func chip(label: String) -> Chip? { chips.first { $0.label == label } }
}
