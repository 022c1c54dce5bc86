import BoardControl
import BoardSupport
import BoardloopGPIO

extension ConfigParser {
    func parseLines(_ e: YAMLReader.Entry) {
        var used: [String: (line: String, at: Position)] = [:]
        for le in r.mapping(e.value, e.path) ?? [] {
            guard checkName(le.key, le.keyNode, le.path, what: "line") else { continue }
            let before = log.errorCount
            guard let entries = r.mapping(le.value, le.path, allowed: Self.lineKeys) else { continue }
            // After a misspelt key, "needs a pin" would only repeat it.
            quietMissing = log.errorCount > before
            if let line = parseLine(le, entries, used: &used) {
                if lineIndex[line.name] == nil { lineIndex[line.name] = lines.count }
                lines.append(line)
                lineNodes.append(le.keyNode)
            }
        }
    }

    func parseLine(_ le: YAMLReader.Entry, _ entries: [YAMLReader.Entry], used: inout [String: (line: String, at: Position)])
        -> LineConfig?
    {
        func entry(_ k: String) -> YAMLReader.Entry? { entries.first { $0.key == k } }
        let name = le.key
        var failed = false

        // Where: pin, or chip + offset/line_name, or line_name.
        var address: LineAddress?
        var pinText: String?
        var boardPin: Board.Pin?
        let pinE = entry("pin")
        let chipE = entry("chip")
        let offsetE = entry("offset")
        let lineNameE = entry("line_name")
        if let pinE {
            if let other = chipE ?? offsetE ?? lineNameE {
                r.error(other.keyNode, other.path, "give either pin or chip/offset/line_name, not both")
                failed = true
            }
            (address, boardPin) = resolvePin(pinE)
            pinText = pinE.value.string
        } else if let chipE {
            address = resolveChipLine(chipE, offsetE, lineNameE, lineNode: le.keyNode, linePath: le.path)
        } else if let lineNameE {
            if let offsetE { r.error(offsetE.keyNode, offsetE.path, "offset needs chip") }
            address = resolveLineName(lineNameE)
            if let a = address, let (c, o) = a.labelAndOffset { boardPin = board?.pin(chip: c, offset: o) }
        } else if let offsetE {
            r.error(offsetE.keyNode, offsetE.path, "offset needs chip (the chip's label, name or path)")
            failed = true
        } else {
            if !quietMissing { r.error(le.keyNode, le.path, "line '\(name)' needs a pin (or chip and offset, or line_name)") }
            failed = true
        }
        if let a = address {
            let key = a.description
            let at = r.position((pinE ?? chipE ?? lineNameE)!.value)
            if let other = used[key] {
                let what = boardPin.map { "\($0.name) (\(key))" } ?? key
                log.error(at, (pinE ?? chipE ?? lineNameE)!.path, "\(what) is already used by line '\(other.line)' (line \(other.at.line))")
                failed = true
            } else {
                used[key] = (name, at)
            }
        } else if board != nil {
            failed = true
        }

        // Direction and settings.
        let inE = entry("input")
        let outE = entry("output")
        var settings = GPIOLineSettings.input(edges: .both)
        var filters = InputFilters()
        var safe: Bool?
        var held = HeldEvents()
        if inE != nil, let outE {
            r.error(outE.keyNode, outE.path, "a line is an input or an output, not both")
            failed = true
        } else if let inE {
            if !parseInput(inE, name, &settings, &filters, &held) { failed = true }
        } else if let outE {
            settings = .output(false)
            if !parseOutput(outE, name, &settings, &safe) { failed = true }
        } else {
            if !quietMissing { r.error(le.keyNode, le.path, "line '\(name)' needs input or output") }
            failed = true
        }
        let isInput = outE == nil

        var prio = defaultPriority
        if let p = entry("priority") {
            if let id = priority(p.value, p.path) { prio = id } else { failed = true }
        }
        var rate: RateLimit?
        if let e = entry("rate_limit") {
            if !isInput {
                r.error(e.keyNode, e.path, "rate_limit applies to inputs only; line '\(name)' is an output")
                failed = true
            } else {
                rate = parseRateLimit(e)
                if rate == nil { failed = true }
            }
        }
        var gestures: GestureGroup?
        if let e = entry("gestures") {
            if !isInput {
                r.error(e.keyNode, e.path, "gestures apply to inputs only; line '\(name)' is an output")
                failed = true
            } else if let g = parseGestures(e) {
                if settings.edgeDetection != .both {
                    r.error(
                        e.keyNode, e.path,
                        "gestures need both edges, but line '\(name)' detects \(settings.edgeDetection) (set input.edge: both)")
                    failed = true
                }
                gestures = g
            } else {
                failed = true
            }
        }
        guard !failed, let address else { return nil }
        return LineConfig(
            name: name, pin: pinText, boardPin: boardPin?.name, physical: boardPin?.physical, address: address,
            settings: settings, filters: filters, safeValue: safe, priority: prio, rateLimit: rate, gestures: gestures,
            held: held, loop: .main)
    }

    // MARK: Where a line is

    func resolvePin(_ e: YAMLReader.Entry) -> (LineAddress?, Board.Pin?) {
        if r.refuseSecret(e.value, e.path) { return (nil, nil) }
        guard case let .scalar(s) = e.value else {
            r.error(e.value, e.path, "expected a pin name such as GPIO17, found \(YAMLReader.kind(e.value))")
            return (nil, nil)
        }
        let text = s.string
        guard let board else { return (nil, nil) }
        if board.isGeneric {
            r.error(
                e.value, e.path,
                "the \(board.name) board has no pin names; give chip and offset (chip: gpiochip0, offset: 17) or line_name")
            return (nil, nil)
        }
        if s.style == .plain, let n = Int(text) {
            let header = board.pins.contains { $0.physical != nil }
            r.error(
                e.value, e.path,
                header
                    ? "a bare number is ambiguous; write GPIO\(n) (the GPIO number) or PIN\(n) (the header pin)"
                    : "expected a pin name, found the number \(n)" + DidYouMean.hint("\(n)", in: board.pins.map(\.name)))
            return (nil, nil)
        }
        guard let pin = board.pin(named: text) else {
            if let (label, offset) = kernelLine(named: text, on: board.chips) {
                r.error(
                    e.value, e.path,
                    "the \(board.name) board has no pin '\(text)': the kernel names line \(offset) of \(label) so, which is not on the header; write line_name: \(text) for that line")
                return (nil, nil)
            }
            let near = board.nearestPinNames(to: text)
            r.error(
                e.value, e.path,
                "the \(board.name) board has no pin '\(text)'" + (near.isEmpty ? "" : " (nearest: \(near.joined(separator: ", ")))"))
            return (nil, nil)
        }
        let shown = pin.physical.map { text.uppercased() == "PIN\($0)" ? text : "\(text) (pin \($0))" } ?? text
        switch pin.kind {
        case let .gpio(chip, offset): return (.offset(chip: .label(chip), offset: offset), pin)
        case let .power(v):
            r.error(e.value, e.path, "\(shown) is a \(v) power pin, not a GPIO")
        case .ground:
            r.error(e.value, e.path, "\(shown) is a ground pin, not a GPIO")
        case let .reserved(why):
            let what = text.uppercased() == pin.name.uppercased() ? shown : "\(shown) is \(pin.name) and"
            r.error(e.value, e.path, "\(what) is reserved: \(why)")
        }
        return (nil, nil)
    }

    static func chipRef(_ text: String) -> ChipRef {
        if text.hasPrefix("/") { return .path(text) }
        if text.hasPrefix("gpiochip"), Int(text.dropFirst(8)) != nil { return .name(text) }
        return .label(text)
    }

    func resolveChipLine(
        _ chipE: YAMLReader.Entry, _ offsetE: YAMLReader.Entry?, _ nameE: YAMLReader.Entry?, lineNode: Node, linePath: String
    ) -> LineAddress? {
        guard let text = r.string(chipE.value, chipE.path, what: "a chip label, name or path") else { return nil }
        let chip = Self.chipRef(text)
        var boardChip: Board.Chip?
        if let board, !board.chips.isEmpty {
            guard case let .label(l) = chip, let c = board.chip(label: l) else {
                let labels = board.chips.map(\.label)
                r.error(
                    chipE.value, chipE.path,
                    "the \(board.name) board has no chip '\(text)'" + DidYouMean.hint(text, in: labels)
                        + " (its chips, by label: \(labels.joined(separator: ", ")))")
                return nil
            }
            boardChip = c
        }
        switch (offsetE, nameE) {
        case let (o?, n?):
            r.error(n.keyNode, n.path, "give offset or line_name, not both")
            _ = o
            return nil
        case let (o?, nil):
            let limit = (boardChip?.lines).map { $0 - 1 } ?? 1023
            guard let v = r.int(o.value, o.path, in: 0...limit, what: "a line offset") else { return nil }
            return .offset(chip: chip, offset: UInt32(v))
        case let (nil, n?):
            guard let name = r.string(n.value, n.path, what: "a line name") else { return nil }
            if let bc = boardChip, !bc.names.isEmpty || liveLineNames(bc.label) != nil {
                guard let (_, off) = kernelLine(named: name, on: [bc]) else {
                    let known = liveLineNames(bc.label).map { Array(Set($0.filter { !Board.Chip.isPlaceholder($0) })) } ?? bc.allLineNames
                    r.error(n.value, n.path, "chip '\(bc.label)' has no line named '\(name)'" + DidYouMean.hint(name, in: known))
                    return nil
                }
                return .offset(chip: chip, offset: off)
            }
            return .named(chip: chip, name: name)
        case (nil, nil):
            r.error(chipE.keyNode, linePath, "chip needs offset or line_name")
            return nil
        }
    }

    func resolveLineName(_ e: YAMLReader.Entry) -> LineAddress? {
        guard let name = r.string(e.value, e.path, what: "a line name") else { return nil }
        guard let board, !board.isGeneric else { return .named(chip: nil, name: name) }
        if let (label, off) = kernelLine(named: name, on: board.chips) { return .offset(chip: .label(label), offset: off) }
        if let pin = board.pin(named: name), case let .gpio(c, o) = pin.kind { return .offset(chip: .label(c), offset: o) }
        r.error(
            e.value, e.path,
            "the \(board.name) board has no line named '\(name)'"
                + (board.nearestPinNames(to: name).isEmpty ? "" : " (nearest: \(board.nearestPinNames(to: name).joined(separator: ", ")))"))
        return nil
    }

    /// The line names of the chip with this label on this machine (what
    /// `gpioinfo` shows), when it is here and the config is not run on mock
    /// chips.
    func liveLineNames(_ label: String) -> [String]? {
        options.mock ? nil : options.machine.facts.lineNames[label]
    }

    /// The line the kernel names `name` on one of `chips`: on the chip
    /// itself first when it is on this machine (`line_name` means what
    /// `gpioinfo` says), else (and for a name the chip does not have) as
    /// the board file names its lines, in either naming.
    func kernelLine(named name: String, on chips: [Board.Chip]) -> (label: String, offset: UInt32)? {
        guard !Board.Chip.isPlaceholder(name) else { return nil }
        for c in chips {
            if let live = liveLineNames(c.label), let i = live.firstIndex(of: name) { return (c.label, UInt32(i)) }
        }
        for c in chips {
            if let o = c.offset(ofLine: name) { return (c.label, o) }
        }
        return nil
    }

    // MARK: Settings

    /// Keys of the other direction get a message that says so.
    func wrongDirection(_ e: YAMLReader.Entry, line: String, isInput: Bool) {
        r.error(
            e.keyNode, e.path,
            isInput
                ? "\(e.key) applies to outputs only; line '\(line)' is an input"
                : "\(e.key) applies to inputs only; line '\(line)' is an output")
    }

    func settingsEntries(_ e: YAMLReader.Entry, allowed: [String], other: [String], line: String, isInput: Bool)
        -> [YAMLReader.Entry]?
    {
        if case let .scalar(s) = e.value, s.string.isEmpty || s.string == "~" || s.string == "null" || s.string == "true" {
            return []
        }
        guard let entries = r.mapping(e.value, e.path, allowed: allowed + other) else { return nil }
        var ok: [YAMLReader.Entry] = []
        for x in entries {
            if other.contains(x.key) && !allowed.contains(x.key) {
                wrongDirection(x, line: line, isInput: isInput)
            } else {
                ok.append(x)
            }
        }
        return ok.count == entries.count ? ok : nil
    }

    func parseInput(
        _ e: YAMLReader.Entry, _ line: String, _ s: inout GPIOLineSettings, _ f: inout InputFilters, _ held: inout HeldEvents
    ) -> Bool {
        guard
            let entries = settingsEntries(
                e, allowed: Self.inputKeys, other: ["initial", "safe", "drive"], line: line, isInput: true)
        else { return false }
        let before = log.errorCount
        for x in entries {
            switch x.key {
            case "edge":
                if let v = r.choice(x.value, x.path, ["none", "rising", "falling", "both"]) {
                    s.edgeDetection = ["none": .none, "rising": .rising, "falling": .falling, "both": .both][v]!
                }
            case "bias": if let b = bias(x) { s.bias = b }
            case "active_low": if let b = r.bool(x.value, x.path) { s.activeLow = b }
            case "debounce":
                if let d = r.duration(x.value, x.path) {
                    if d > GPIOLineSettings.maximumDebounce {
                        r.error(
                            x.value, x.path,
                            "\(DurationText.format(d)) is above the limit of \(DurationText.format(GPIOLineSettings.maximumDebounce)) (the kernel takes a debounce period as a 32-bit count of microseconds)"
                        )
                    } else {
                        s.debounce = d
                    }
                }
            case "delayed_on": if let d = r.duration(x.value, x.path) { f.delayedOn = d }
            case "delayed_off": if let d = r.duration(x.value, x.path) { f.delayedOff = d }
            case "initial_edge": if let b = r.bool(x.value, x.path) { f.initialEdge = b }
            case "buffer":
                if let n = r.int(x.value, x.path, in: 2...HeldEvents.kernelBufferCap) {
                    held.kernelBuffer = n
                    held.bufferSet = true
                }
            case "drain":
                if let n = r.int(x.value, x.path, in: 0...HeldEvents.maximumDrain) {
                    held.drain = n
                    held.drainSet = true
                }
            case "max_rate": if let n = rate(x) { held.maxRate = n }
            case "drain_every":
                if let d = r.duration(x.value, x.path) {
                    let range = HeldEvents.drainPeriods
                    if range.contains(d) {
                        held.drainEvery = d
                        held.drainEverySet = true
                    } else {
                        r.error(x.value, x.path, "out of range: a drain period is between 1ms and 10s")
                    }
                }
            default: if let d = r.duration(x.value, x.path) { f.settle = d }
            }
        }
        for x in entries where ["buffer", "drain", "drain_every", "max_rate"].contains(x.key) { heldKeys[line, default: [:]][x.key] = x }
        if held.drainEvery > .zero && held.drain == 0, let x = entries.first(where: { $0.key == "drain_every" }) {
            r.error(
                x.keyNode, x.path,
                "drain_every needs drain: the size of the ring the held events are read into (for example drain: 4096)")
        }
        return log.errorCount == before
    }

    func bias(_ x: YAMLReader.Entry) -> GPIOBias? {
        guard let v = r.choice(x.value, x.path, ["as-is", "disabled", "pull-up", "pull-down"]) else { return nil }
        return ["as-is": .asIs, "disabled": .disabled, "pull-up": .pullUp, "pull-down": .pullDown][v]
    }

    func parseOutput(_ e: YAMLReader.Entry, _ line: String, _ s: inout GPIOLineSettings, _ safe: inout Bool?) -> Bool {
        guard
            let entries = settingsEntries(
                e, allowed: Self.outputKeys, other: ["edge", "debounce", "delayed_on", "delayed_off", "settle", "buffer", "drain", "drain_every", "max_rate", "initial_edge"], line: line,
                isInput: false)
        else { return false }
        let before = log.errorCount
        for x in entries {
            switch x.key {
            case "initial": if let v = onOff(x.value, x.path) { s.outputValue = v }
            case "safe": if let v = onOff(x.value, x.path) { safe = v }
            case "active_low": if let b = r.bool(x.value, x.path) { s.activeLow = b }
            case "drive":
                if let v = r.choice(x.value, x.path, ["push-pull", "open-drain", "open-source"]) {
                    s.drive = ["push-pull": .pushPull, "open-drain": .openDrain, "open-source": .openSource][v]!
                }
            default: if let b = bias(x) { s.bias = b }
            }
        }
        return log.errorCount == before
    }

    func parseRateLimit(_ e: YAMLReader.Entry) -> RateLimit? {
        guard let entries = r.mapping(e.value, e.path, allowed: ["events", "per"]) else { return nil }
        var events: Int?
        var per: Duration?
        for x in entries {
            if x.key == "events" { events = r.int(x.value, x.path, in: 1...1_000_000) } else { per = positiveDuration(x.value, x.path, suggest: "s") }
        }
        for (k, v) in [("events", events != nil), ("per", per != nil)] where !v && !entries.contains(where: { $0.key == k }) {
            r.error(e.keyNode, e.path, "rate_limit needs \(k) (rate_limit: { events: 100, per: 1s })")
        }
        guard let events, let per else { return nil }
        return RateLimit(events: events, period: per)
    }

    func parseGestures(_ e: YAMLReader.Entry) -> GestureGroup? {
        guard let entries = r.mapping(e.value, e.path, allowed: Self.gestureKeys) else { return nil }
        var g = GestureGroup(
            kinds: [], clickMin: .milliseconds(50), clickMax: .milliseconds(350), gap: .milliseconds(250),
            hold: .milliseconds(800))
        let before = log.errorCount
        var sawKinds = false
        for x in entries {
            switch x.key {
            case "one_of":
                sawKinds = true
                let names = GestureKind.allCases.map(\.rawValue)
                for (n, node, p) in r.names(x.value, x.path, what: "a list of gestures") ?? [] {
                    guard let k = GestureKind(rawValue: n) else {
                        r.error(node, p, "'\(n)' is not one of \(names.joined(separator: ", "))" + DidYouMean.hint(n, in: names))
                        continue
                    }
                    if g.kinds.contains(k) { r.error(node, p, "gesture '\(n)' is listed twice") } else { g.kinds.append(k) }
                }
                if g.kinds.count == 1 && log.errorCount == before {
                    r.error(x.value, x.path, "a gesture group needs at least two alternatives (for one, use a trigger)")
                }
            case "click_min": if let d = r.duration(x.value, x.path) { g.clickMin = d }
            case "click_max": if let d = positiveDuration(x.value, x.path) { g.clickMax = d }
            case "gap": if let d = positiveDuration(x.value, x.path) { g.gap = d }
            default: if let d = positiveDuration(x.value, x.path) { g.hold = d }
            }
        }
        if !sawKinds { r.error(e.keyNode, e.path, "gestures needs one_of: the alternatives, e.g. [click, double_click, hold]") }
        if g.clickMin >= g.clickMax, let x = entries.first(where: { $0.key == "click_min" || $0.key == "click_max" }) {
            r.error(x.value, x.path, "click_min (\(DurationText.format(g.clickMin))) must be less than click_max (\(DurationText.format(g.clickMax)))")
        }
        if g.kinds.contains(.hold), g.hold <= g.clickMax, let x = entries.first(where: { $0.key == "hold" || $0.key == "click_max" }) {
            r.error(x.value, x.path, "hold (\(DurationText.format(g.hold))) must be longer than click_max (\(DurationText.format(g.clickMax)))")
        }
        return log.errorCount == before ? g : nil
    }
}
