import BoardControl
import BoardSupport
import BoardloopGPIO

extension ConfigParser {
    static let actionKeys = ["set", "toggle", "pulse", "wait", "run", "log", "mode", "sequence", "stop", "if"]

    /// Where actions run: the loop, and whether `wait` is allowed (in
    /// sequence steps only).
    struct ActionContext {
        var loop: LoopID
        var inSequence: Bool
        /// In a sequence's `on_stop:`, that sequence's name (its actions run
        /// at once: no `wait`, and no start of the sequence being stopped).
        var onStop: String? = nil
    }

    // MARK: Line references

    /// A line by name; nil when unknown (reported) or when its own entry
    /// failed (already reported there).
    func lineRef(_ node: Node, _ path: String, named given: String? = nil) -> LineID? {
        guard let name = given ?? r.string(node, path, what: "a line name") else { return nil }
        lookupSteps += 1
        if let i = lineIndex[name] { return LineID(i) }
        if declaredLines.contains(name) || unreadable("lines", name) { return nil }
        let names = declaredLines.sorted()
        r.error(
            node, path,
            "no line named '\(name)'" + DidYouMean.hint(name, in: names)
                + (names.isEmpty ? " (the config declares no lines)" : " (lines: \(names.joined(separator: ", ")))"))
        return nil
    }

    /// Adds a command, keeping the name indexes.
    func appendCommand(_ c: CommandConfig) {
        if commandIndex[c.name] == nil { commandIndex[c.name] = commands.count }
        if c.declared && declaredCommandIndex[c.name] == nil { declaredCommandIndex[c.name] = commands.count }
        commands.append(c)
    }

    /// An output line for `set`, `toggle`, `pulse`.
    func outputRef(_ node: Node, _ path: String, name: String, action: String, _ ctx: ActionContext) -> LineID? {
        guard let id = lineRef(node, path, named: name) else { return nil }
        guard lines[id.index].isOutput else {
            r.error(node, path, "line '\(name)' is an input; \(action) needs an output line")
            return nil
        }
        return id
    }

    // MARK: Actions

    func parseActions(_ node: Node, _ path: String, _ ctx: ActionContext) -> [Action]? {
        guard let items = r.list(node, path, what: "a list of actions") else { return nil }
        let before = log.errorCount
        var out: [Action] = []
        for (i, item) in items.enumerated() {
            out += parseAction(item, YAMLReader.index(path, i), ctx)
        }
        // `on_stop: []` is a choice: a stopped run leaves its outputs as they are.
        if items.isEmpty && ctx.onStop == nil { r.error(node, path, "the list of actions is empty") }
        return log.errorCount == before ? out : nil
    }

    func parseAction(_ node: Node, _ path: String, _ ctx: ActionContext) -> [Action] {
        if case let .scalar(s) = node, Self.actionKeys.contains(s.string) {
            r.error(node, path, "\(s.string) needs a value, e.g. \(s.string): …")
            return []
        }
        guard case let .mapping(m) = node, m.count == 1 else {
            r.error(node, path, "each action is a mapping with one key, such as toggle: led (found \(YAMLReader.kind(node)))")
            return []
        }
        guard let e = r.mapping(node, path, allowed: Self.actionKeys, what: "an action")?.first else { return [] }
        let v = e.value
        switch e.key {
        case "set":
            var out: [Action] = []
            for x in r.mapping(v, e.path, what: "a mapping of lines to on/off, such as set: { valve: off }") ?? [] {
                let id = outputRef(x.keyNode, x.path, name: x.key, action: "set", ctx)
                if let value = onOff(x.value, x.path), let id { out.append(.set(id, value)) }
            }
            return out
        case "toggle":
            guard let name = r.string(v, e.path, what: "a line name") else { return [] }
            return outputRef(v, e.path, name: name, action: "toggle", ctx).map { [.toggle($0)] } ?? []
        case "pulse":
            var out: [Action] = []
            for x in r.mapping(v, e.path, what: "a mapping of lines to durations, such as pulse: { led: 100ms }") ?? [] {
                let id = outputRef(x.keyNode, x.path, name: x.key, action: "pulse", ctx)
                if let d = positiveDuration(x.value, x.path), let id {
                    out.append(.pulse(id, d))
                }
            }
            return out
        case "wait":
            guard ctx.inSequence, ctx.onStop == nil else {
                r.error(
                    e.keyNode, e.path,
                    ctx.onStop != nil
                        ? "wait is not allowed in on_stop: its actions run at once, when the run is stopped"
                        : "wait is only allowed in a sequence's steps; move these actions into a sequence")
                return []
            }
            return r.duration(v, e.path).map { [.wait($0)] } ?? []
        case "run": return parseRun(v, e.path, ctx).map { [$0] } ?? []
        case "log":
            if case .mapping = v {
                var level = LogLevel.info
                var message: String?
                for x in r.mapping(v, e.path, allowed: ["message", "level"]) ?? [] {
                    if x.key == "message" {
                        message = r.string(x.value, x.path)
                    } else if let l = r.choice(x.value, x.path, LogLevel.allCases.map(\.rawValue)) {
                        level = LogLevel(rawValue: l)!
                    }
                }
                guard let message else {
                    r.error(e.keyNode, e.path, "log needs a message")
                    return []
                }
                return [.log(level, message)]
            }
            return r.string(v, e.path, what: "a message").map { [.log(.info, $0)] } ?? []
        case "mode": return mode(v, e.path).map { [.mode($0)] } ?? []
        case "sequence", "stop":
            if e.key == "sequence", let own = ctx.onStop, case let .scalar(s) = v, s.string == own {
                r.error(v, e.path, "on_stop cannot start '\(own)' again: it runs while '\(own)' is being stopped")
                return []
            }
            guard let id = sequenceRef(v, e.path) else { return [] }
            return [e.key == "sequence" ? .startSequence(id) : .stopSequence(id)]
        default: return parseIf(v, e.path, ctx).map { [$0] } ?? []
        }
    }

    func sequenceRef(_ node: Node, _ path: String) -> SequenceID? {
        guard let name = r.string(node, path, what: "a sequence name") else { return nil }
        lookupSteps += 1
        guard let index = sequenceIndex[name] else {
            if unreadable("sequences", name) { return nil }
            r.error(
                node, path,
                "no sequence named '\(name)'" + DidYouMean.hint(name, in: declaredSequences)
                    + (declaredSequences.isEmpty ? " (the config declares no sequences)" : ""))
            return nil
        }
        return SequenceID(index)
    }

    func parseIf(_ node: Node, _ path: String, _ ctx: ActionContext) -> Action? {
        guard let entries = r.mapping(node, path, allowed: ["condition", "then", "else"]) else { return nil }
        var condition: Condition?
        var then: [Action]?
        var otherwise: [Action] = []
        var ok = true
        for x in entries {
            switch x.key {
            case "condition":
                condition = parseCondition(x.value, x.path, ctx)
                ok = ok && condition != nil
            case "then":
                then = parseActions(x.value, x.path, ctx)
                ok = ok && then != nil
            default:
                if let a = parseActions(x.value, x.path, ctx) { otherwise = a } else { ok = false }
            }
        }
        for k in ["condition", "then"] where !entries.contains(where: { $0.key == k }) {
            r.error(node, path, "if needs \(k) (if: { condition: { line: door, is: on }, then: [...], else: [...] })")
            ok = false
        }
        guard ok, let condition, let then else { return nil }
        return .ifThen(condition, then: then, else: otherwise)
    }

    // MARK: Conditions

    func parseCondition(_ node: Node, _ path: String, _ ctx: ActionContext) -> Condition? {
        guard let entries = r.mapping(node, path, allowed: ["line", "is", "mode", "not", "all", "any"], what: "a condition")
        else { return nil }
        let keys = Set(entries.map(\.key))
        func one(_ k: String) -> YAMLReader.Entry { entries.first { $0.key == k }! }
        if keys == ["line", "is"] {
            let id = lineRef(one("line").value, one("line").path)
            let v = onOff(one("is").value, one("is").path)
            guard let id, let v else { return nil }
            return .line(id, v)
        }
        if keys == ["mode"] { return mode(one("mode").value, one("mode").path).map { .mode($0) } }
        if keys == ["not"] { return parseCondition(one("not").value, one("not").path, ctx).map { .not($0) } }
        if keys == ["all"] || keys == ["any"] {
            let e = entries[0]
            guard let items = r.list(e.value, e.path, what: "a list of conditions") else { return nil }
            let parsed = items.enumerated().map { parseCondition($1, YAMLReader.index(e.path, $0), ctx) }
            guard parsed.allSatisfy({ $0 != nil }), !parsed.isEmpty else {
                if items.isEmpty { r.error(e.value, e.path, "\(e.key) needs at least one condition") }
                return nil
            }
            return e.key == "all" ? .all(parsed.map { $0! }) : .any(parsed.map { $0! })
        }
        r.error(
            node, path,
            "a condition is one of { line: NAME, is: on|off }, { mode: NAME }, { not: … }, { all: [...] } or { any: [...] }")
        return nil
    }

    // MARK: Run

    func parseRun(_ node: Node, _ path: String, _ ctx: ActionContext) -> Action? {
        if case .sequence = node {
            guard let items = r.list(node, path) else { return nil }
            var argv: [String] = []
            for (i, item) in items.enumerated() {
                if let s = r.string(item, YAMLReader.index(path, i), what: "an argument") { argv.append(s) }
            }
            guard argv.count == items.count else { return nil }
            guard let program = argv.first else {
                r.error(node, path, "run needs a program: run: [\"/usr/bin/program\", \"argument\"]")
                return nil
            }
            warnIfMissing(program, items[0], YAMLReader.index(path, 0))
            let base = String(program.split(separator: "/").last ?? Substring(program))
            lookupSteps += 1
            if let i = declaredCommandIndex[base] {
                if commands[i].shell {
                    r.error(node, path, "command '\(base)' runs through the shell; run it by name (run: \(base))")
                    return nil
                }
                return .run(command: CommandID(i), argv: argv)
            }
            if let i = commandIndex[base] { return .run(command: CommandID(i), argv: argv) }
            appendCommand(
                CommandConfig(
                    name: base, argv: nil, shell: false, timeout: Self.defaultCommandTimeout, killAfter: Self.defaultKillAfter,
                    maxRunning: 1, declared: false))
            return .run(command: CommandID(commands.count - 1), argv: argv)
        }
        guard let name = r.string(node, path, what: "a command name or an argv list") else { return nil }
        lookupSteps += 1
        guard let i = declaredCommandIndex[name] else {
            if unreadable("commands", name) { return nil }
            let declared = commands.filter(\.declared).map(\.name)
            r.error(
                node, path,
                "no command named '\(name)'" + DidYouMean.hint(name, in: declared)
                    + "; to run a program, give its argv as a list: run: "
                    + "[\(name.split(whereSeparator: { $0 == " " || $0 == "\t" }).map { "\"\($0)\"" }.joined(separator: ", "))]")
            return nil
        }
        guard let argv = commands[i].argv else {
            r.error(node, path, "command '\(name)' has no argv; give one in commands.\(name).argv or run an argv list")
            return nil
        }
        return .run(command: CommandID(i), argv: argv)
    }

    // MARK: Tasks

    func parseTasks(_ e: YAMLReader.Entry) {
        for te in r.mapping(e.value, e.path) ?? [] {
            guard checkName(te.key, te.keyNode, te.path, what: "task") else { continue }
            guard let entries = r.mapping(te.value, te.path, allowed: ["every", "in_modes", "do", "worker", "description"])
            else { continue }
            func entry(_ k: String) -> YAMLReader.Entry? { entries.first { $0.key == k } }
            let before = log.errorCount
            var every: Duration?
            if let x = entry("every"), let d = r.duration(x.value, x.path) {
                if d <= .zero {
                    r.error(x.value, x.path, "a task period must be more than zero (at least 100us)")
                } else if d < Self.minimumTaskPeriod {
                    r.error(x.value, x.path, "\(DurationText.format(d)) is too short; a task runs at most every 100us")
                } else {
                    every = d
                }
            } else if entry("every") == nil {
                r.error(te.keyNode, te.path, "task '\(te.key)' needs every (its period, e.g. every: 500ms)")
            }
            var loop = LoopID.main
            if let x = entry("worker"), let l = workerRef(x.value, x.path) { loop = l }
            var modeIDs: [ModeID] = [.default]
            if let x = entry("in_modes") {
                modeIDs = (r.names(x.value, x.path, what: "a list of modes") ?? []).compactMap { mode($0.1, $0.2) }
            }
            var actions: [Action]?
            if let x = entry("do") {
                actions = parseActions(x.value, x.path, ActionContext(loop: loop, inSequence: false))
            } else {
                r.error(te.keyNode, te.path, "task '\(te.key)' needs do (its actions)")
            }
            guard log.errorCount == before, let every, let actions else { continue }
            tasks.append(TaskConfig(name: te.key, every: every, modes: modeIDs, actions: actions, loop: loop))
        }
    }

    // MARK: Sequences

    func parseSequences(_ e: YAMLReader.Entry) {
        // Placeholders so IDs are the declaration order even when a step
        // starts a sequence declared later.
        let entries = r.mapping(e.value, e.path) ?? []
        var parsed: [SequenceConfig?] = []
        for se in entries {
            parsed.append(parseSequence(se))
        }
        if parsed.allSatisfy({ $0 != nil }) { sequences = parsed.map { $0! } }
    }

    func parseSequence(_ se: YAMLReader.Entry) -> SequenceConfig? {
        guard checkName(se.key, se.keyNode, se.path, what: "sequence") else { return nil }
        guard let entries = r.mapping(se.value, se.path, allowed: ["mode", "policy", "max", "steps", "on_stop", "worker", "description"])
        else { return nil }
        func entry(_ k: String) -> YAMLReader.Entry? { entries.first { $0.key == k } }
        let before = log.errorCount
        var modeID: ModeID?
        if let x = entry("mode") { modeID = mode(x.value, x.path) }
        var policyName = "single"
        if let x = entry("policy"), let p = r.choice(x.value, x.path, ["single", "restart", "queued", "parallel"]) {
            policyName = p
        }
        var max = 4
        if let x = entry("max") {
            if policyName == "single" || policyName == "restart" {
                r.error(x.keyNode, x.path, "max applies to the queued and parallel policies; this sequence is \(policyName)")
            } else if let m = r.int(x.value, x.path, in: 1...1000) {
                max = m
                sequenceMaxNodes[se.key] = (x.value, x.path)
            }
        }
        let policy: SequencePolicy =
            switch policyName {
            case "restart": .restart
            case "queued": .queued(max: max)
            case "parallel": .parallel(max: max)
            default: .single
            }
        var loop = LoopID.main
        if let x = entry("worker"), let l = workerRef(x.value, x.path) { loop = l }
        var steps: [Action]?
        if let x = entry("steps") {
            steps = parseActions(x.value, x.path, ActionContext(loop: loop, inSequence: true))
        } else {
            r.error(se.keyNode, se.path, "sequence '\(se.key)' needs steps")
        }
        var onStop: [Action]?
        if let x = entry("on_stop") {
            onStop = parseActions(x.value, x.path, ActionContext(loop: loop, inSequence: true, onStop: se.key))
        }
        guard log.errorCount == before, let steps else { return nil }
        return SequenceConfig(name: se.key, mode: modeID, policy: policy, steps: steps, loop: loop, onStop: onStop)
    }
}

extension String {
    /// "a, b or c" → "a, b and c" (for listing what was found).
    func replacingLastOr() -> String {
        guard let last = ranges(of: " or ").last else { return self }
        var s = self
        s.replaceSubrange(last, with: " and ")
        return s
    }
}
