
/// Reads a board file (`boards/NAME.yaml`); the format is in
/// `docs/config.md` ("Board files").
public enum BoardFile {
    static let topKeys = ["name", "title", "cpus", "backend", "detect", "chips", "header", "pins"]
    static let pinKeys = ["pin", "name", "gpio", "chip", "offset", "aliases", "line_name", "power", "ground", "reserved"]

    /// Parses a board file's text. Returns the board, or nil with the errors
    /// in `log`.
    public static func parse(_ text: String, file: String, log: DiagnosticLog) -> Board? {
        let r = YAMLReader(log: log)
        guard let root = r.compose(text) else {
            if !log.hasErrors { log.error(.none, "", "the board file is empty") }
            return nil
        }
        guard let entries = r.mapping(root, "", allowed: topKeys) else { return nil }
        var name: String?
        var title = ""
        var cpus: Int?
        var backend = Board.Backend.kernel
        var detect = Board.DetectRules()
        var chips: [Board.Chip] = []
        var pinNodes: [(Node, String)] = []
        for e in entries {
            switch e.key {
            case "name": name = r.string(e.value, e.path)
            case "title": title = r.string(e.value, e.path) ?? ""
            case "cpus": cpus = r.int(e.value, e.path, in: 1...4096)
            case "backend": backend = r.choice(e.value, e.path, ["kernel", "mock"]).flatMap(Board.Backend.init) ?? .kernel
            case "detect":
                for d in r.mapping(e.value, e.path, allowed: ["compatible", "model", "chips"]) ?? [] {
                    let values = (r.names(d.value, d.path, what: "a list of strings") ?? []).map(\.0)
                    switch d.key {
                    case "compatible": detect.compatible = values
                    case "model": detect.model = values
                    default: detect.chips = values
                    }
                }
            case "chips":
                for (i, c) in (r.list(e.value, e.path) ?? []).enumerated() {
                    let p = YAMLReader.index(e.path, i)
                    var chip = Board.Chip(label: "")
                    var idleHighNodes: [(UInt32, Node, String)] = []
                    for ce in r.mapping(c, p, allowed: ["label", "lines", "names", "naming", "alt_names", "alt_naming", "idle_high"]) ?? [] {
                        switch ce.key {
                        case "label": chip.label = r.string(ce.value, ce.path) ?? ""
                        case "naming": chip.naming = r.string(ce.value, ce.path)
                        case "alt_naming": chip.altNaming = r.string(ce.value, ce.path)
                        case "lines": chip.lines = r.int(ce.value, ce.path, in: 1...1024)
                        case "idle_high":
                            for (j, o) in (r.list(ce.value, ce.path) ?? []).enumerated() {
                                let op = YAMLReader.index(ce.path, j)
                                if let n = r.int(o, op, in: 0...1023) {
                                    chip.idleHigh.append(UInt32(n))
                                    idleHighNodes.append((UInt32(n), o, op))
                                }
                            }
                        default:
                            for ne in r.mapping(ce.value, ce.path) ?? [] {
                                guard let o = UInt32(ne.key) else {
                                    r.error(ne.keyNode, ne.path, "expected a line offset, found \(Echo(ne.key))")
                                    continue
                                }
                                if let n = r.string(ne.value, ne.path) {
                                    if ce.key == "alt_names" { chip.altNames[o] = n } else { chip.names[o] = n }
                                }
                            }
                        }
                    }
                    // A line that rests high must be one of the chip's lines.
                    let count = chip.lines ?? 32
                    for (o, node, op) in idleHighNodes where o >= count {
                        r.error(node, op, "line \(o) is not on this chip (it has \(count) lines: 0...\(count - 1))")
                    }
                    chip.idleHigh.removeAll { $0 >= count }
                    if chip.label.isEmpty { r.error(c, p, "a chip needs a label") } else { chips.append(chip) }
                }
            default:  // header, pins
                for (i, pn) in (r.list(e.value, e.path) ?? []).enumerated() {
                    pinNodes.append((pn, YAMLReader.index(e.path, i)))
                }
            }
        }
        var pins: [Board.Pin] = []
        for (node, path) in pinNodes {
            if let pin = parsePin(node, path, r, defaultChip: chips.first?.label) { pins.append(pin) }
        }
        addKernelNames(&pins, chips)
        checkPins(pins, pinNodes, chips, r)
        guard let name, !name.isEmpty else {
            if !entries.contains(where: { $0.key == "name" }) { r.error(root, "", "the board file needs a 'name'") }
            return nil
        }
        if log.hasErrors { return nil }
        return Board(
            name: name, title: title.isEmpty ? name : title, file: file, cpus: cpus, backend: backend, detect: detect,
            chips: chips, pins: pins)
    }

    static func parsePin(_ node: Node, _ path: String, _ r: YAMLReader, defaultChip: String?) -> Board.Pin? {
        guard let entries = r.mapping(node, path, allowed: pinKeys) else { return nil }
        var physical: Int?
        var name: String?
        var gpio: Int?
        var chip: String?
        var offset: Int?
        var aliases: [String] = []
        var lineName: String?
        var kind: Board.Pin.Kind?
        var reservedReason: String?
        for e in entries {
            switch e.key {
            case "pin": physical = r.int(e.value, e.path, in: 1...400)
            case "name": name = r.string(e.value, e.path)
            case "gpio": gpio = r.int(e.value, e.path, in: 0...1023)
            case "chip": chip = r.string(e.value, e.path)
            case "offset": offset = r.int(e.value, e.path, in: 0...1023)
            case "aliases": aliases = (r.names(e.value, e.path) ?? []).map(\.0)
            case "line_name": lineName = r.string(e.value, e.path)
            case "power":
                if let v = r.choice(e.value, e.path, ["3V3", "5V"]) { kind = .power(v) }
            case "ground":
                if r.bool(e.value, e.path) == true { kind = .ground }
            default: reservedReason = r.string(e.value, e.path)
            }
        }
        if let g = gpio {
            name = name ?? "GPIO\(g)"
            aliases = ["GPIO\(g)", "BCM\(g)"].filter { $0 != name } + aliases
            offset = offset ?? g
        }
        if let physical { aliases.append("PIN\(physical)") }
        if let lineName, lineName != name, !aliases.contains(lineName) { aliases.append(lineName) }
        if let reservedReason {
            kind = .reserved(reservedReason)
        } else if kind == nil {
            guard let o = offset else {
                r.error(node, path, "a pin needs one of gpio, offset, power, ground or reserved")
                return nil
            }
            guard let c = chip ?? defaultChip else {
                r.error(node, path, "a GPIO pin needs a chip (the board declares none)")
                return nil
            }
            kind = .gpio(chip: c, offset: UInt32(o))
        }
        switch kind! {
        case .ground: name = name ?? "GND"
        case let .power(v): name = name ?? v
        default: break
        }
        guard let name else {
            r.error(node, path, "a pin needs a name")
            return nil
        }
        return Board.Pin(physical: physical, name: name, aliases: aliases, kind: kind!, lineName: lineName)
    }

    /// Each GPIO pin also answers to the kernel's names of its line, in
    /// either naming of its chip (`names`, `alt_names`): `SDA1` and `GPIO2`.
    static func addKernelNames(_ pins: inout [Board.Pin], _ chips: [Board.Chip]) {
        for i in pins.indices {
            guard let (label, offset) = pins[i].chipLine, let c = chips.first(where: { $0.label == label }) else { continue }
            for n in c.kernelNames(of: offset) where !pins[i].allNames.contains(where: { $0.uppercased() == n.uppercased() }) {
                pins[i].aliases.append(n)
            }
        }
    }

    /// No physical pin twice, no GPIO name twice, every GPIO on a declared
    /// chip within its lines, no chip line twice, no pin name that is the
    /// kernel's name of another line of its chip (it would shadow that line).
    static func checkPins(_ pins: [Board.Pin], _ nodes: [(Node, String)], _ chips: [Board.Chip], _ r: YAMLReader) {
        var physical: [Int: String] = [:]
        var names: [String: String] = [:]
        var lines: [String: String] = [:]
        var n = 0
        for (node, path) in nodes {
            guard case .mapping = node, n < pins.count else { continue }
            let pin = pins[n]
            n += 1
            if let p = pin.physical {
                if let other = physical[p] { r.error(node, path, "physical pin \(p) is listed twice (also \(other))") }
                physical[p] = path
            }
            switch pin.kind {
            case .power, .ground: continue
            default: break
            }
            for alias in pin.allNames {
                let key = alias.uppercased()
                if let other = names[key], other != path {
                    r.error(node, path, "name '\(alias)' is used twice (also \(other))")
                    break
                }
                names[key] = path
            }
            if let (chip, offset) = pin.chipLine, let c = chips.first(where: { $0.label == chip }) {
                for alias in pin.allNames {
                    guard let other = c.offset(ofLine: alias), other != offset else { continue }
                    r.error(
                        node, path,
                        "name '\(alias)' is the kernel's name of line \(other) of \(chip), not of this pin's line \(offset); drop it")
                }
            }
            if let (chip, offset) = pin.chipLine {
                guard let c = chips.first(where: { $0.label == chip }) else {
                    r.error(node, path, "chip '\(chip)' is not in the board's chips")
                    continue
                }
                if let count = c.lines, offset >= count {
                    r.error(node, path, "offset \(offset) is beyond chip '\(chip)' (\(count) lines)")
                }
                let key = "\(chip):\(offset)"
                if let other = lines[key] { r.error(node, path, "line \(key) is listed twice (also \(other))") }
                lines[key] = path
            }
        }
    }

    /// Reads and parses a board file from disk.
    public static func load(path: String, log: DiagnosticLog) -> Board? {
        let text: String
        switch FileSystem.readConfigText(path, what: "a board file") {
        case let .success(t): text = t
        case let .failure(why):
            log.error(why.position ?? .none, "", "cannot read the board file: \(why)")
            return nil
        }
        return parse(text, file: path, log: log)
    }
}
