import BoardloopGPIO

/// What a machine says about itself, read from a root directory (`/` on
/// the machine; a fixture tree in tests).
public struct MachineFacts: Sendable, Equatable {
    /// `/proc/device-tree/model` without its trailing NUL, if present.
    public var model: String?
    /// `/proc/device-tree/compatible`: NUL-separated strings, most specific first.
    public var compatible: [String]
    /// Labels of the GPIO chips present, sorted, without duplicates.
    public var chipLabels: [String]
    /// The line names of each chip present (by label; names by offset, ""
    /// for an unnamed line), from the GPIO character devices: what
    /// `gpioinfo` shows.
    public var lineNames: [String: [String]]

    public init(model: String? = nil, compatible: [String] = [], chipLabels: [String] = [], lineNames: [String: [String]] = [:]) {
        self.model = model
        self.compatible = compatible
        self.chipLabels = chipLabels
        self.lineNames = lineNames
    }

    /// Reads the facts under `root`:
    /// - `proc/device-tree/model` and `proc/device-tree/compatible`;
    /// - chip labels from `sys/class/gpio/gpiochip*/label` (the sysfs GPIO
    ///   ABI, present on Raspberry Pi OS kernels) and from the GPIO
    ///   character devices `dev/gpiochip*` (the chip-info ioctl through
    ///   libgpiod: works on every kernel with GPIO, gpio-sim included).
    ///   Both are read and merged; either may be missing.
    ///   The line names of each character device's chip are read too.
    ///   `backend`: the chips to read instead of `dev/gpiochip*` (tests).
    public static func read(root: String, backend: (any GPIOBackend)? = nil) -> MachineFacts {
        func file(_ rel: String) -> [UInt8]? { try? FileSystem.readBytes(FileSystem.join(root, rel)).get() }
        var facts = MachineFacts()
        if let data = file("proc/device-tree/model") {
            let text = strings(data).first ?? ""
            facts.model = text.isEmpty ? nil : text
        }
        if let data = file("proc/device-tree/compatible") { facts.compatible = strings(data) }
        var labels = Set<String>()
        let sysfs = FileSystem.join(root, "sys/class/gpio")
        for entry in FileSystem.list(sysfs) where entry.hasPrefix("gpiochip") {
            if let data = file("sys/class/gpio/\(entry)/label"),
                let label = strings(data).first, !label.isEmpty
            {
                labels.insert(label)
            }
        }
        let gpio = backend ?? LibgpiodBackend(deviceDirectory: FileSystem.join(root, "dev"))
        if let chips = try? GPIOChip.list(backend: gpio) {
            for c in chips where !c.label.isEmpty {
                labels.insert(c.label)
                guard facts.lineNames[c.label] == nil, let chip = try? GPIOChip.open(c.path, backend: gpio) else { continue }
                defer { chip.close() }
                if let infos = try? chip.lineInfos() { facts.lineNames[c.label] = infos.map(\.name) }
            }
        }
        facts.chipLabels = labels.sorted()
        return facts
    }

    /// Splits NUL- and newline-terminated strings; drops empty ones.
    static func strings(_ data: [UInt8]) -> [String] {
        String(decoding: data, as: UTF8.self).split(whereSeparator: { $0 == "\0" || $0 == "\n" }).map {
            String($0).trimmingSpaces
        }.filter { !$0.isEmpty }
    }

    /// What was read, one fact per line.
    public var report: [String] {
        [
            "model: " + (model.map { "\"\($0)\"" } ?? "(none: no proc/device-tree/model)"),
            "compatible: " + (compatible.isEmpty ? "(none)" : compatible.joined(separator: ", ")),
            "gpio chips: " + (chipLabels.isEmpty ? "(none)" : chipLabels.joined(separator: ", ")),
        ]
    }
}

/// Recognises a board from machine facts.
///
/// A board matches when any of its rules does: one of its `compatible`
/// strings is in the machine's list (strongest), the model text starts with
/// one of its `model` prefixes, or every one of its `chips` labels is present
/// (weakest: boards with no device tree of their own, such as gpio-sim).
/// The strongest kind of match wins, then the most specific (a compatible
/// string earlier in the machine's list, a longer model prefix); two boards
/// matching equally is ambiguous, which is an error rather than a guess. A
/// Raspberry Pi Compute Module is no header board: only a board file that
/// names the module's own compatible string (its carrier's) is found for
/// it, else the verdict says it is a compute module.
public enum BoardDetection {
    public enum Strength: Int, Sendable, Comparable, CustomStringConvertible {
        case chips = 1, model = 2, compatible = 3
        public static func < (a: Strength, b: Strength) -> Bool { a.rawValue < b.rawValue }
        public var description: String {
            switch self {
            case .chips: "GPIO chip labels"
            case .model: "device-tree model"
            case .compatible: "device-tree compatible"
            }
        }
    }

    public enum Verdict: Sendable, Equatable {
        case found(Board, because: String)
        case ambiguous([String], because: String)
        /// A Raspberry Pi Compute Module: its GPIOs reach whatever carrier
        /// board it sits on, so no 40-pin header board is assumed.
        case computeModule(because: String)
        case noMatch
    }

    /// How strongly `board` matches, and why: the kind of rule, then how
    /// specific the match is (a compatible string earlier in the machine's
    /// list, most specific first; a longer model prefix).
    public static func match(_ board: Board, _ facts: MachineFacts) -> (Strength, Int, String)? {
        let hits = board.detect.compatible.compactMap { c in facts.compatible.firstIndex(of: c).map { (c, $0) } }
        if let (c, i) = hits.min(by: { $0.1 < $1.1 }) {
            return (.compatible, -i, "compatible \"\(c)\"")
        }
        if let model = facts.model, let p = board.detect.model.filter({ model.hasPrefix($0) }).max(by: { $0.count < $1.count }) {
            return (.model, p.count, "model starts with \"\(p)\"")
        }
        if !board.detect.chips.isEmpty, board.detect.chips.allSatisfy({ facts.chipLabels.contains($0) }) {
            return (.chips, 0, "GPIO chip\(board.detect.chips.count == 1 ? "" : "s") \(board.detect.chips.joined(separator: ", ")) present")
        }
        return nil
    }

    /// Why the machine is a Raspberry Pi Compute Module (nil: it is not):
    /// its own compatible string (`raspberrypi,compute-module`,
    /// `raspberrypi,3-compute-module`, `…,4-compute-module`, `…,5-compute-module`,
    /// the CM4S's and the CM3+'s too) or its model.
    public static func computeModule(_ facts: MachineFacts) -> String? {
        if let c = facts.compatible.first(where: { $0.hasPrefix("raspberrypi,") && $0.contains("compute-module") }) {
            return "compatible \"\(c)\""
        }
        if let m = facts.model, m.hasPrefix("Raspberry Pi Compute Module") { return "model \"\(m)\"" }
        return nil
    }

    public static func detect(_ facts: MachineFacts, boards: [Board]) -> Verdict {
        var matches = boards.compactMap { b in match(b, facts).map { (board: b, strength: $0.0, rank: $0.1, because: $0.2) } }
        if let why = computeModule(facts) {
            // Only a board file that names this module itself (a carrier's
            // file with its compatible string) is its board; a SoC's
            // compatible string or chip label says nothing of the carrier.
            matches = matches.filter { m in
                m.strength == .compatible && m.board.detect.compatible.contains { $0.contains("compute-module") && facts.compatible.contains($0) }
            }
            if matches.isEmpty { return .computeModule(because: why) }
        }
        guard let best = matches.map({ ($0.strength, $0.rank) }).max(by: { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 < $1.1 }) else {
            return .noMatch
        }
        let top = matches.filter { $0.strength == best.0 && $0.rank == best.1 }
        if top.count == 1 { return .found(top[0].board, because: top[0].because) }
        return .ambiguous(top.map(\.board.name).sorted(), because: "each matches by \(best.0)")
    }

    /// The message for `board: auto` when detection finds no single board.
    public static func failureMessage(_ verdict: Verdict, facts: MachineFacts, known: [String]) -> String {
        let read = facts.report.joined(separator: "; ")
        switch verdict {
        case let .ambiguous(names, because):
            return "auto-detection is ambiguous: \(names.joined(separator: " and ")) \(because) (read \(read)); name the board"
        case let .computeModule(because):
            return "auto-detection found a compute module (\(because); read \(read)): name the carrier's board file (board: NAME)"
        default:
            return
                "auto-detection found no matching board (read \(read); known boards: \(known.joined(separator: ", "))); name the board, e.g. board: generic"
        }
    }

    /// Which naming the running kernel gives `board`'s chip lines: the
    /// chip's `naming` or `altNaming`, by the header lines whose names
    /// differ between the two. One line per chip of the board that has two
    /// namings; "not present" when the chip is not on this machine.
    public static func naming(_ board: Board, _ facts: MachineFacts) -> [String] {
        var out: [String] = []
        for c in board.chips where !c.altNames.isEmpty {
            let differing = c.altNames.keys.filter { c.names[$0] != nil && c.names[$0] != c.altNames[$0] }.sorted()
            guard let live = facts.lineNames[c.label] else {
                out.append("\(c.label): not present (line names as the board file gives them, both namings accepted)")
                continue
            }
            func name(_ o: UInt32) -> String? { Int(o) < live.count ? live[Int(o)] : nil }
            let current = differing.filter { name($0) == c.names[$0] }.count
            let alt = differing.filter { name($0) == c.altNames[$0] }.count
            let sample = differing.prefix(3).map { o in "line \(o) \"\(name(o) ?? "")\"" }.joined(separator: ", ")
            if current == differing.count {
                out.append("\(c.label): line names \(c.naming ?? "as the board file's names") (\(sample))")
            } else if alt == differing.count {
                out.append("\(c.label): line names \(c.altNaming ?? "as the board file's other names") (\(sample))")
            } else {
                out.append("\(c.label): line names of neither naming the board file knows (\(sample)); a line_name is looked up on the chip first")
            }
        }
        return out
    }
}
