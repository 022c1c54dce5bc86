import BoardControl
import BoardSupport
import BoardloopGPIO

/// Reactions: `on:` (a trigger on an input line), `when:`, `do:`. A trigger
/// kind's syntax is here; what it is and does is in `Automation/Triggers.swift`.
extension ConfigParser {
    static let triggerKinds = ["edge", "press", "release", "click", "multi_press", "hold", "gesture"]

    func parseReactions(_ e: YAMLReader.Entry) {
        guard let items = r.list(e.value, e.path, what: "a list of reactions (- on: …  do: […])") else { return }
        var named: [String: Position] = [:]
        for (i, item) in items.enumerated() {
            let path = YAMLReader.index(e.path, i)
            guard let entries = r.mapping(item, path, allowed: ["on", "when", "do", "name", "description"]) else { continue }
            func entry(_ k: String) -> YAMLReader.Entry? { entries.first { $0.key == k } }
            let before = log.errorCount
            var name = path
            if let x = entry("name"), let n = r.string(x.value, x.path) {
                name = n
                // Counters, traces, records and MQTT name reactions by it.
                if let first = named[n] {
                    r.error(
                        x.value, x.path,
                        "reaction name '\(n)' is given twice (first at \(log.place(first).file):\(first)); each reaction's name must be its own (a package listed twice under packages: adds its reactions twice)")
                } else {
                    named[n] = r.position(x.value)
                }
            }
            var trigger: (LineID, Trigger)?
            if let x = entry("on") { trigger = parseTrigger(x.value, x.path) } else {
                r.error(item, path, "a reaction needs on (its trigger, e.g. on: { line: button, press: true })")
            }
            let loop = trigger.map { lines[$0.0.index].loop } ?? .main
            let ctx = ActionContext(loop: loop, inSequence: false)
            var condition: Condition?
            if let x = entry("when") { condition = parseCondition(x.value, x.path, ctx) }
            var actions: [Action]?
            if let x = entry("do") { actions = parseActions(x.value, x.path, ctx) } else {
                r.error(item, path, "a reaction needs do (its actions)")
            }
            guard log.errorCount == before, let trigger, let actions else { continue }
            if let x = entry("on") { noteClickOrMultiPress(trigger, x.value) }
            reactions.append(
                ReactionConfig(name: name, line: trigger.0, trigger: trigger.1, condition: condition, actions: actions, loop: loop))
        }
    }

    /// A line with both a click and a multi-press reaction and no gesture
    /// group: a double click fires the click twice and the multi-press once.
    /// Warned once per line, at the second kind to come.
    func noteClickOrMultiPress(_ trigger: (LineID, Trigger), _ on: Node) {
        let kind: String
        switch trigger.1 {
        case .click: kind = "click"
        case .multiPress: kind = "multi_press"
        default: return
        }
        let line = lines[trigger.0.index]
        guard line.gestures == nil else { return }
        var seen = clickKinds[trigger.0.index, default: [:]]
        if seen[kind] == nil { seen[kind] = r.position(on) }
        clickKinds[trigger.0.index] = seen
        guard seen.count == 2, !clickWarned.contains(trigger.0.index) else { return }
        clickWarned.insert(trigger.0.index)
        let other = kind == "click" ? "multi_press" : "click"
        r.warning(
            on, YAMLReader.key(YAMLReader.index("reactions", reactions.count), "on"),
            "line '\(line.name)' has a \(kind) reaction and a \(other) one (at line \(seen[other]!.line)): a double click fires the click twice and the multi_press once; to tell them apart, give the line a gesture group (lines.\(line.name).gestures: { one_of: [click, double_click] }) and use gesture: click and gesture: double_click")
    }

    func parseTrigger(_ node: Node, _ path: String) -> (LineID, Trigger)? {
        guard let entries = r.mapping(node, path, allowed: ["line"] + Self.triggerKinds + ["repeat"], what: "a trigger") else {
            return nil
        }
        func entry(_ k: String) -> YAMLReader.Entry? { entries.first { $0.key == k } }
        guard let lineE = entry("line") else {
            r.error(node, path, "a trigger needs line (the input it watches)")
            return nil
        }
        let kinds = entries.filter { Self.triggerKinds.contains($0.key) }
        guard kinds.count == 1 else {
            if kinds.isEmpty {
                r.error(node, path, "no trigger; give one of edge, press, release, click, multi_press, hold or gesture")
            } else {
                r.error(
                    kinds[1].keyNode, path,
                    "give one trigger per reaction; found \(DidYouMean.orList(kinds.map(\.key)).replacingLastOr())")
            }
            return nil
        }
        let k = kinds[0]
        if let rep = entry("repeat"), k.key != "hold" {
            if k.key != "gesture" {
                r.error(rep.keyNode, rep.path, "repeat goes with hold (on: { line: button, hold: 2s, repeat: 500ms })")
                return nil
            }
            if case let .scalar(s) = k.value, s.string != GestureKind.hold.rawValue {
                r.error(
                    rep.keyNode, rep.path,
                    "repeat goes with hold or gesture: hold; a \(s.string.split(separator: "_", omittingEmptySubsequences: false).joined(separator: " ")) does not repeat (on: { line: button, gesture: hold, repeat: 500ms })"
                )
                return nil
            }
        }
        let lineID = lineRef(lineE.value, lineE.path)
        var trigger: Trigger?
        switch k.key {
        case "edge":
            if let v = r.choice(k.value, k.path, ["rising", "falling", "both"]) {
                trigger = .edge(["rising": .rising, "falling": .falling, "both": .both][v]!)
            }
        case "press", "release":
            if let b = r.bool(k.value, k.path) {
                if b { trigger = k.key == "press" ? .press : .release } else {
                    r.error(k.value, k.path, "\(k.key): false is no trigger; remove the reaction or write \(k.key): true")
                }
            }
        case "click":
            var minD = Duration.milliseconds(50)
            var maxD = Duration.milliseconds(350)
            if case .mapping = k.value {
                let before = log.errorCount
                for x in r.mapping(k.value, k.path, allowed: ["min", "max"]) ?? [] {
                    if x.key == "min" { minD = r.duration(x.value, x.path) ?? minD } else { maxD = positiveDuration(x.value, x.path) ?? maxD }
                }
                if log.errorCount == before {
                    if minD >= maxD {
                        r.error(k.value, k.path, "click min (\(DurationText.format(minD))) must be less than max (\(DurationText.format(maxD)))")
                    } else {
                        trigger = .click(min: minD, max: maxD)
                    }
                }
            } else if r.bool(k.value, k.path) == true {
                trigger = .click(min: minD, max: maxD)
            }
        case "multi_press":
            var count = 2
            var within = Duration.milliseconds(500)
            let before = log.errorCount
            for x in r.mapping(k.value, k.path, allowed: ["count", "within"], what: "a mapping such as { count: 2, within: 400ms }") ?? [] {
                if x.key == "count" { count = r.int(x.value, x.path, in: 2...10) ?? count } else {
                    within = positiveDuration(x.value, x.path) ?? within
                }
            }
            if log.errorCount == before { trigger = .multiPress(count: count, within: within) }
        case "hold":
            var delay: Duration?
            var rep: Duration?
            if case .mapping = k.value {
                for x in r.mapping(k.value, k.path, allowed: ["delay", "repeat"]) ?? [] {
                    if x.key == "delay" { delay = positiveDuration(x.value, x.path) } else { rep = positiveDuration(x.value, x.path) }
                }
                if delay == nil && !log.hasErrors { r.error(k.value, k.path, "hold needs delay") }
            } else {
                delay = positiveDuration(k.value, k.path)
            }
            if let x = entry("repeat") { rep = positiveDuration(x.value, x.path) }
            if let delay, entry("repeat").map({ _ in rep != nil }) ?? true { trigger = .hold(delay: delay, repeat: rep) }
        default:  // gesture
            guard let g = r.string(k.value, k.path, what: "a gesture name") else { break }
            guard let kind = GestureKind(rawValue: g) else {
                let names = GestureKind.allCases.map(\.rawValue)
                r.error(k.value, k.path, "'\(g)' is not one of \(names.joined(separator: ", "))" + DidYouMean.hint(g, in: names))
                break
            }
            if let x = entry("repeat") {
                // (A gesture other than hold was refused above.)
                guard let rep = positiveDuration(x.value, x.path) else { break }
                trigger = .gesture(kind, repeat: rep)
            } else {
                trigger = .gesture(kind)
            }
        }
        guard let lineID, let trigger else { return nil }
        let line = lines[lineID.index]
        guard line.isInput else {
            r.error(lineE.value, lineE.path, "line '\(line.name)' is an output; a trigger needs an input line")
            return nil
        }
        // The edges the trigger needs against what the line detects.
        let detects = line.settings.edgeDetection
        if let (need, what) = trigger.edgesNeeded {
            let ok = need == .both ? detects == .both : detects.includes(need == .rising ? .rising : .falling)
            if !ok {
                let lacks = need == .both ? "both edges" : "\(need) edges"
                r.error(
                    k.keyNode, k.path,
                    "\(what) needs \(lacks), but line '\(line.name)' detects "
                        + (detects == .none ? "none" : "\(detects) only") + " (set lines.\(line.name).input.edge: both)")
                return nil
            }
        }
        if case let .gesture(kind, _) = trigger {
            guard let group = line.gestures else {
                r.error(
                    k.value, k.path,
                    "line '\(line.name)' has no gesture group; add lines.\(line.name).gestures: { one_of: [\(kind == .click ? "click, double_click" : "click, \(kind.rawValue)")] }")
                return nil
            }
            guard group.kinds.contains(kind) else {
                r.error(
                    k.value, k.path,
                    "'\(kind.rawValue)' is not in line '\(line.name)''s gesture group (\(group.kinds.map(\.rawValue).joined(separator: ", ")))")
                return nil
            }
        }
        return (lineID, trigger)
    }
}
