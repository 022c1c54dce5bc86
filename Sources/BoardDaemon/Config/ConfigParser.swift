import BoardSupport
import BoardloopGPIO

/// Walks a config's node tree, resolves names and reports every problem
/// with its position and key path. One parser per load.
final class ConfigParser {
    static let topKeys = ["board", "priorities", "lines", "modes", "tasks", "reactions", "sequences", "commands", "workers", "control", "mqtt", "log"]
    static let lineKeys = ["pin", "chip", "offset", "line_name", "input", "output", "priority", "rate_limit", "gestures", "description"]
    static let inputKeys = [
        "edge", "bias", "active_low", "debounce", "delayed_on", "delayed_off", "settle", "buffer", "drain", "drain_every", "max_rate",
        "initial_edge",
    ]
    static let outputKeys = ["initial", "safe", "active_low", "drive", "bias"]
    static let gestureKeys = ["one_of", "click_min", "click_max", "gap", "hold"]
    /// The shortest task period.
    static let minimumTaskPeriod = Duration.microseconds(100)
    /// Lines one request (one chip, one loop) can hold: the kernel's
    /// GPIO_V2_LINES_MAX and libgpiod 1.6's GPIOD_LINE_BULK_MAX_LINES.
    static let maxLinesPerRequest = 64
    /// Modes one run loop can have (the engine's limit).
    static let maxModes = 64

    let file: String
    let options: LoadOptions
    let log: DiagnosticLog
    let r: YAMLReader

    var board: Board?
    var boardDetected = false
    var priorities: [String] = ["low", "normal", "high"]
    var lines: [LineConfig] = []
    var lineNodes: [Node] = []
    /// Every line name declared (parsed or not), so a reference to a line
    /// whose own entry had errors is not reported a second time.
    var declaredLines: Set<String> = []
    var modes: [ModeConfig] = [ModeConfig(name: "default", admits: [])]
    var modesNode: Node?
    var declaredSequences: [String] = []
    /// Names of entries a YAML syntax error made unreadable, by top-level
    /// key (`lines: [button]`); "" stands for a whole section or an item of
    /// a top-level list. A reference to such a name is not reported as
    /// unknown (the syntax error is the problem to fix), and in a section
    /// with "" none is.
    var unreadableNames: [String: Set<String>] = [:]
    /// Set while reading a line whose mapping had a misspelt key.
    var quietMissing = false
    var sequences: [SequenceConfig] = []
    var commands: [CommandConfig] = []
    var commandsDeclared: Set<String> = []
    var workers: [(name: String, node: Node, path: String)] = []
    var loops: [LoopPlan] = []
    var loopLineNodes: [Node?] = []
    var tasks: [TaskConfig] = []
    var reactions: [ReactionConfig] = []
    /// Per input line (by name): where the config gives `buffer`, `drain`,
    /// `drain_every` and `max_rate` (for the held-events warnings).
    var heldKeys: [String: [String: YAMLReader.Entry]] = [:]
    /// Where a parallel sequence's `max` is given, by sequence name.
    var sequenceMaxNodes: [String: (node: Node, path: String)] = [:]
    /// Where a command's `max_running` (or, without one, its name) is, by command name.
    var commandNodes: [String: (node: Node, path: String)] = [:]
    /// Steps taken looking names up (a test keeps this proportional to the
    /// config's size: a lookup that scans a list per reference makes
    /// checking quadratic).
    var lookupSteps = 0
    /// The `control:` block.
    var control = ControlConfig()
    /// The `log:` block.
    var logging = LogConfig()
    var mqtt: MQTTConfig?
    /// Names to indexes: lines (parsed), declared sequences, commands (the
    /// first of a name) and declared commands.
    var lineIndex: [String: Int] = [:]
    var sequenceIndex: [String: Int] = [:]
    var commandIndex: [String: Int] = [:]
    var declaredCommandIndex: [String: Int] = [:]
    /// Per line (by index): where its click and multi_press reactions are,
    /// and the lines already warned about.
    var clickKinds: [Int: [String: Position]] = [:]
    var clickWarned: Set<Int> = []
    /// Programs already looked for (each is warned about once).
    var programsLookedFor: Set<String> = []
    /// The files the config includes, as messages name them, in the order
    /// read (a file included twice is listed twice).
    var includedFiles: [String] = []
    /// `!include`s resolved and bytes included so far, and how much the
    /// substitutions grew the text (each capped: `maximumIncludes`, …).
    var includes = 0
    var includedBytes = 0
    var substitutedBytes = 0
    /// The values of the secrets the config refers to, by name: only
    /// `secret(_:_:)` reads them.
    var secretValues: [String: String] = [:]
    /// The secrets file, once read; or why it could not be.
    var secretsRead: [String: String?]?
    var secretsProblem: String?
    /// The sections are read even when a secret could not be (the lenient
    /// read of `boardd --safe-outputs`, which needs only `board:` and `lines:`).
    var secretsOptional = false
    /// Whether the config is checked on the machine it is for (computed once).
    lazy var checkedHere: Bool = forThisMachine

    init(file: String, options: LoadOptions) {
        self.file = file
        self.options = options
        log = DiagnosticLog(file: file)
        var reader = YAMLReader(log: log)
        reader.scalarTags = Self.definedTags
        r = reader
    }

    func parse(_ text: String) -> DaemonConfig? {
        var skipped: [YAMLSkippedBlock] = []
        let composed = r.compose(recovering: text, skipped: &skipped)
        for block in skipped where !block.section.isEmpty {
            unreadableNames[block.section, default: []].insert(block.key ?? "")
        }
        guard let composed else {
            if !log.hasErrors { log.error(Position(line: 1, column: 1), "", "the config is empty") }
            return nil
        }
        guard let root = assemble(composed) else { return nil }
        guard let entries = r.mapping(root, "", allowed: Self.topKeys, what: "a mapping of board, lines, modes, …") else {
            return nil
        }
        func entry(_ key: String) -> YAMLReader.Entry? {
            guard let e = entries.first(where: { $0.key == key }) else { return nil }
            // A section whose every entry a syntax error blanked out is
            // left null: it is empty, not a section of the wrong kind.
            if unreadableNames[key] != nil, case let .scalar(s) = e.value, s.style == .plain, s.string.isEmpty { return nil }
            return e
        }
        // Line names in entries that could not be read are declared: a
        // reference to one is neither resolved nor reported.
        for name in unreadableNames["lines"] ?? [] where !name.isEmpty { declaredLines.insert(name) }

        if unreadableNames["board"] == nil { parseBoard(entry("board"), root: root) }
        if let e = entry("priorities") { parsePriorities(e) }
        // Names first, so references resolve whatever the order of sections.
        if let e = entry("lines") {
            if case let .mapping(m) = e.value { declaredLines.formUnion(m.keys.compactMap(\.string)) }
        }
        if let e = entry("sequences"), case let .mapping(m) = e.value {
            declaredSequences = m.keys.compactMap(\.string)
            for (i, name) in declaredSequences.enumerated() where sequenceIndex[name] == nil { sequenceIndex[name] = i }
        }
        if let e = entry("modes") { parseModes(e) }
        if let e = entry("lines") { parseLines(e) }
        parseWorkers(entry("workers"), linesNode: entry("lines")?.value ?? root)
        if let e = entry("commands") { parseCommands(e) }
        if let e = entry("sequences") { parseSequences(e) }
        if let e = entry("tasks") { parseTasks(e) }
        if let e = entry("reactions") { parseReactions(e) }
        if let e = entry("control") { control = parseControl(e) }
        if let e = entry("log") { logging = parseLog(e) }
        if let e = entry("mqtt") { mqtt = parseMQTT(e) }
        planHeldEvents()  // before the capacities: a chosen drain_every is a timer
        computeCapacities(root: root)
        guard board != nil else { return nil }
        return resolved
    }

    // MARK: Board

    func parseBoard(_ e: YAMLReader.Entry?, root: Node) {
        var requested = "auto"
        var node = root
        var path = "board"
        if let e {
            // A board that is not a name is reported once, not guessed.
            guard let name = r.string(e.value, e.path, what: "a board name or auto") else { return }
            requested = name
            node = e.value
            path = e.path
        }
        if let override = options.board {
            requested = override
            path = ""
            node = root
        }
        let at = node == root ? Position.none : r.position(node)
        if e == nil && options.board == nil { path = "" }
        if requested == "auto" && options.mock {
            log.error(
                at == .none ? Position(line: 1, column: 1) : at, path,
                (options.board != nil ? "--board auto" : e == nil ? "no board given, so board: auto" : "auto")
                    + " with --mock: detection reads this machine, not the board the config is for; name the board (board: raspberry-pi-4) or give --board NAME"
            )
        } else if requested == "auto" {
            let (boards, _) = options.catalog.loadAll()
            let verdict = BoardDetection.detect(options.machine.facts, boards: boards)
            if case let .found(b, _) = verdict {
                board = b
                boardDetected = true
            } else {
                log.error(
                    at == .none ? Position(line: 1, column: 1) : at, path,
                    (e == nil && options.board == nil ? "no board given (board: NAME or auto): " : "")
                        + BoardDetection.failureMessage(verdict, facts: options.machine.facts, known: boards.map(\.name)))
            }
        } else {
            let where_ = options.board != nil ? Position.none : at
            board = options.catalog.board(named: requested, log: log, at: where_, path: options.board != nil ? "--board" : path)
        }
    }

    /// True when the config is checked on the machine it is for: detected,
    /// the same board detection finds here, or the in-process mock board.
    var forThisMachine: Bool {
        guard let board else { return true }
        if boardDetected || board.backend == .mock { return true }
        // A board that does not match this machine is not the one
        // detection finds here: the other boards' files are not read.
        guard BoardDetection.match(board, options.machine.facts) != nil else { return false }
        let (boards, _) = options.catalog.loadAll()
        if case let .found(b, _) = BoardDetection.detect(options.machine.facts, boards: boards) { return b.name == board.name }
        return false
    }

    // MARK: Priorities and modes

    /// Priorities a config may name.
    static let maxPriorities = 64

    func parsePriorities(_ e: YAMLReader.Entry) {
        guard let items = r.names(e.value, e.path, what: "a list of priority names, lowest first") else { return }
        var seen: [String] = []
        for (name, node, p) in items {
            if seen.contains(name) { r.error(node, p, "priority '\(name)' is listed twice") } else { seen.append(name) }
        }
        if seen.isEmpty {
            r.error(e.value, e.path, "at least one priority is needed")
        } else {
            // Too many is an error, but the names stand: what names them is
            // checked against them, not reported a second time.
            if seen.count > Self.maxPriorities {
                r.error(e.value, e.path, "\(seen.count) priorities; a config has at most \(Self.maxPriorities) (a mode admits priorities as the bits of one 64-bit word)")
            }
            priorities = seen
        }
    }

    var defaultPriority: PriorityID { PriorityID(priorities.firstIndex(of: "normal") ?? 0) }

    func priority(_ node: Node, _ path: String) -> PriorityID? {
        guard let name = r.string(node, path, what: "a priority name") else { return nil }
        guard let i = priorities.firstIndex(of: name) else {
            if unreadable("priorities", name) { return nil }
            r.error(
                node, path,
                "no priority named '\(name)'" + DidYouMean.hint(name, in: priorities)
                    + " (priorities: \(priorities.joined(separator: ", ")))")
            return nil
        }
        return PriorityID(i)
    }

    func parseModes(_ e: YAMLReader.Entry) {
        modesNode = e.keyNode
        for me in r.mapping(e.value, e.path) ?? [] {
            guard checkName(me.key, me.keyNode, me.path, what: "mode") else { continue }
            if me.key == "default" {
                r.error(me.keyNode, me.path, "the default mode admits every priority and cannot be configured")
                continue
            }
            var admits: [PriorityID] = []
            var sawAdmits = false
            if case .scalar = me.value, r.string(me.value, me.path) == nil { continue }
            for ae in r.mapping(me.value, me.path, allowed: ["admits", "description"]) ?? [] where ae.key == "admits" {
                sawAdmits = true
                for (_, node, p) in r.names(ae.value, ae.path, what: "a list of priorities") ?? [] {
                    if let id = priority(node, p) { admits.append(id) }
                }
            }
            if !sawAdmits, case .mapping = me.value {
                r.error(me.keyNode, me.path, "a mode needs admits: the priorities whose lines still react in it (may be [])")
            }
            modes.append(ModeConfig(name: me.key, admits: admits))
        }
    }

    func mode(_ node: Node, _ path: String) -> ModeID? {
        guard let name = r.string(node, path, what: "a mode name") else { return nil }
        guard let i = modes.firstIndex(where: { $0.name == name }) else {
            if unreadable("modes", name) { return nil }
            let names = modes.map(\.name)
            r.error(node, path, "no mode named '\(name)'" + DidYouMean.hint(name, in: names) + " (modes: \(names.joined(separator: ", ")))")
            return nil
        }
        return ModeID(i)
    }

    /// True when `name` may be defined in an entry of `section` that a
    /// YAML syntax error made unreadable.
    func unreadable(_ section: String, _ name: String) -> Bool {
        guard let names = unreadableNames[section] else { return false }
        return names.contains(name) || names.contains("")
    }

    /// Names: letters, digits, `_` and `-`, starting with a letter.
    func checkName(_ name: String, _ node: Node, _ path: String, what: String) -> Bool {
        let ok =
            name.first.map { $0.isASCII && $0.isLetter } == true
            && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }
        if !ok { r.error(node, path, "\(what) name '\(name)' must start with a letter and use only letters, digits, _ and -") }
        return ok
    }

    // MARK: Values

    /// `on`/`off` (also true/false, high/low, 1/0).
    func onOff(_ node: Node, _ path: String) -> Bool? {
        if case let .scalar(s) = node {
            switch s.string.lowercased() {
            case "on", "true", "yes", "high", "1": return true
            case "off", "false", "no", "low", "0": return false
            default: break
            }
        }
        r.error(node, path, "expected on or off, found \(YAMLReader.kind(node))")
        return nil
    }

    /// A duration that must be more than zero.
    func positiveDuration(_ node: Node, _ path: String, suggest: String = "ms") -> Duration? {
        guard let d = r.duration(node, path, suggest: suggest) else { return nil }
        guard d > .zero else {
            r.error(node, path, "must be more than zero")
            return nil
        }
        return d
    }
}
