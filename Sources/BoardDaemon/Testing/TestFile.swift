import BoardControl
import BoardSupport

/// A test file for a config (`boardd test FILE`): the config it tests and
/// its tests, each a list of steps on the manual clock. The format is in
/// docs/testing-configs.md.
public struct ConfigTestFile: Sendable {
    /// The test file as the user named it.
    public var file: String
    /// The config's path (relative to the test file's directory as
    /// written; resolved here), and where the file names it.
    public var config: String?
    public var configAt: Position
    /// Inputs' logical levels at every test's start (others: inactive).
    public var initial: [TestName: Bool] = [:]
    public var tests: [ConfigTest]
}

public struct ConfigTest: Sendable {
    public var name: String
    public var at: Position
    /// Inputs' logical levels at this test's start (over the file's).
    public var initial: [TestName: Bool] = [:]
    public var steps: [TestStep]
}

/// A name in a test file with where it is (checked against the config
/// once it is loaded).
public struct TestName: Sendable, Hashable {
    public var name: String
    public var at: Position
    public var path: String
}

public struct TestStep: Sendable {
    public enum When: Sendable, Equatable {
        /// As soon as the previous step is done.
        case now
        /// At this time from the test's start.
        case at(Duration)
        /// This long after the previous step (`time:`).
        case after(Duration)
    }

    public var at: Position
    public var path: String
    public var when: When = .now
    /// `between: [a, b]`: the expectations look at what happened in this
    /// window (the step runs at `b`, or now if that is later).
    public var window: (from: Duration, to: Duration)?
    public var action: TestAction?
    public var expectations: [TestExpectation] = []
    /// Where each expectation is written (for failures).
    public var expectationsAt: [Position] = []
}

public enum TestAction: Sendable {
    /// `press`, `release` and `input`: an input to its active (true) or
    /// inactive level.
    case level(TestName, active: Bool)
    /// Pressed for `hold` (default: inside the line's click timing),
    /// released, `count` times with `gap` between.
    case click(TestName, count: Int, hold: Duration?, gap: Duration?)
    /// Pressed for `for`, then released.
    case hold(TestName, for: Duration)
    /// `edges` level changes at `rate` per second, from the line's level now.
    case flood(TestName, edges: Int, rate: Int)
    /// `HUP`: reload (from `config` when given: a replacement config);
    /// `TERM`: stop (outputs to their safe values).
    case signal(String, config: String?)
}

public enum TestExpectation: Sendable {
    case state(TestName, Bool)
    case writes(TestName, [Bool])
    case run(TestName, env: [(String, String)])
    case mode(TestName, loop: TestName?)
    case log(String)
    case held(TestName, UInt64)
    case lost(TestName, UInt64)
    case fires(TestName, UInt64)
    case task(TestName, lateMax: Duration?, skipped: UInt64?, runs: UInt64?)
    case noWrites(TestName)
    case noRun(TestName)
    case noLog(String)
    case noMode(TestName)
}

extension ConfigTestFile {
    static let topKeys = ["config", "initial", "tests"]
    static let testKeys = ["name", "initial", "steps"]
    static let actionKeys = ["press", "release", "input", "click", "hold", "flood", "signal"]
    static let expectationKeys = [
        "expect", "expect_writes", "expect_run", "expect_mode", "expect_log", "expect_held", "expect_lost", "expect_fires",
        "expect_task", "expect_no",
    ]
    static let stepKeys = ["at", "time", "between", "config"] + actionKeys + expectationKeys

    /// Reads a test file's text; every problem goes to `log` with its
    /// position (nil when it is not YAML; with errors in `log`, what could
    /// be read, so that names can still be checked and every error
    /// reported at once).
    public static func parse(_ text: String, file: String, log: DiagnosticLog) -> ConfigTestFile? {
        let r = YAMLReader(log: log)
        guard let root = r.compose(text) else { return nil }
        guard let top = r.mapping(root, "", allowed: topKeys, what: "a mapping with config and tests") else { return nil }
        var out = ConfigTestFile(file: file, config: nil, configAt: YAMLReader.position(root), tests: [])
        var sawTests = false
        for e in top {
            switch e.key {
            case "initial":
                out.initial = initial(e, r)
            case "config":
                out.config = r.string(e.value, e.path, what: "the config file's path")
                out.configAt = YAMLReader.position(e.value)
            case "tests":
                sawTests = true
                guard let items = r.list(e.value, e.path, what: "a list of tests") else { continue }
                var names: [String: Position] = [:]
                for (i, item) in items.enumerated() {
                    guard let t = parseTest(item, YAMLReader.index(e.path, i), r) else { continue }
                    if let first = names[t.name] {
                        log.error(t.at, YAMLReader.index(e.path, i) + ".name", "a test named '\(t.name)' is already at line \(first.line)")
                    }
                    names[t.name] = t.at
                    out.tests.append(t)
                }
            default: break
            }
        }
        if !sawTests { log.error(YAMLReader.position(root), "", "no tests: add `tests:`, a list of tests (docs/testing-configs.md)") }
        return out
    }

    static func parseTest(_ node: Node, _ path: String, _ r: YAMLReader) -> ConfigTest? {
        guard let entries = r.mapping(node, path, allowed: testKeys, what: "a test (name and steps)") else { return nil }
        var name: String?
        var steps: [TestStep] = []
        var sawSteps = false
        var start: [TestName: Bool] = [:]
        for e in entries {
            switch e.key {
            case "name": name = r.string(e.value, e.path, what: "the test's name")
            case "initial": start = initial(e, r)
            case "steps":
                sawSteps = true
                guard let items = r.list(e.value, e.path, what: "a list of steps") else { continue }
                for (i, item) in items.enumerated() {
                    if let s = parseStep(item, YAMLReader.index(e.path, i), r) { steps.append(s) }
                }
            default: break
            }
        }
        if name == nil { r.error(node, path, "a test needs a name") }
        if !sawSteps { r.error(node, path, "a test needs steps") }
        guard let name else { return nil }
        return ConfigTest(name: name, at: YAMLReader.position(node), initial: start, steps: steps)
    }

    /// `initial: { line: on|off, … }`.
    static func initial(_ e: YAMLReader.Entry, _ r: YAMLReader) -> [TestName: Bool] {
        var out: [TestName: Bool] = [:]
        for f in r.mapping(e.value, e.path, what: "{ input: on|off, … }") ?? [] {
            if let v = value(f.value, f.path, r) { out[TestName(name: f.key, at: YAMLReader.position(f.keyNode), path: f.path)] = v }
        }
        return out
    }

    static func parseStep(_ node: Node, _ path: String, _ r: YAMLReader) -> TestStep? {
        let errorsBefore = r.log.errorCount
        guard let entries = r.mapping(node, path, allowed: stepKeys, what: "a step") else { return nil }
        var step = TestStep(at: YAMLReader.position(node), path: path)
        var actionKey: String?
        var replacement: (String, Node)?
        for e in entries {
            switch e.key {
            case "at", "time":
                guard let d = r.duration(e.value, e.path) else { continue }
                if step.when != .now {
                    r.error(e.keyNode, e.path, "a step has one of `at` (from the test's start) and `time` (after the previous step)")
                }
                step.when = e.key == "at" ? .at(d) : .after(d)
            case "between":
                guard let items = r.list(e.value, e.path, what: "a window [from, to]") else { continue }
                guard items.count == 2 else {
                    r.error(e.value, e.path, "a window is two times, [from, to], found \(items.count)")
                    continue
                }
                guard let a = r.duration(items[0], YAMLReader.index(e.path, 0)),
                    let b = r.duration(items[1], YAMLReader.index(e.path, 1))
                else { continue }
                guard a <= b else {
                    r.error(e.value, e.path, "the window ends (\(DurationText.format(b))) before it starts (\(DurationText.format(a)))")
                    continue
                }
                step.window = (a, b)
            case "config":
                if let s = r.string(e.value, e.path, what: "a replacement config's path") { replacement = (s, e.value) }
            case let k where actionKeys.contains(k):
                if let first = actionKey {
                    r.error(e.keyNode, e.path, "a step does one thing; this one already has `\(first)` (put `\(k)` in a step of its own)")
                    continue
                }
                actionKey = k
                step.action = parseAction(k, e, r)
            default:
                let before = step.expectations.count
                parseExpectation(e, r, into: &step.expectations)
                for _ in before..<step.expectations.count { step.expectationsAt.append(YAMLReader.position(e.keyNode)) }
            }
        }
        if let (file, n) = replacement {
            if case .signal("HUP", _) = step.action {
                step.action = .signal("HUP", config: file)
            } else {
                r.error(n, YAMLReader.key(path, "config"), "`config` goes with `signal: HUP` (the config a reload reads)")
            }
        }
        if step.window != nil, step.when != .now {
            r.error(node, path, "a step with `between` runs at the window's end: leave out `at` and `time`")
        }
        if step.window != nil, step.action != nil {
            r.error(node, path, "`between` checks what happened in a window: put the action in a step of its own")
        }
        if step.action == nil && step.expectations.isEmpty && step.when == .now && r.log.errorCount == errorsBefore {
            r.error(node, path, "an empty step: give an action (\(actionKeys.joined(separator: ", "))), an expectation or a time")
        }
        return step
    }

    static func name(_ node: Node, _ path: String, _ r: YAMLReader, what: String = "a line's name") -> TestName? {
        guard let s = r.string(node, path, what: what) else { return nil }
        return TestName(name: s, at: YAMLReader.position(node), path: path)
    }

    /// `on`/`off` (and true/false, 1/0, high/low are not accepted for
    /// logical values: `on` is the line's active level).
    static func value(_ node: Node, _ path: String, _ r: YAMLReader) -> Bool? {
        guard case let .scalar(s) = node else {
            r.error(node, path, "expected on or off, found \(YAMLReader.kind(node))")
            return nil
        }
        switch s.string.lowercased() {
        case "on", "true", "yes", "1": return true
        case "off", "false", "no", "0": return false
        default:
            r.error(node, path, "expected on or off, found \(Echo(s.string))")
            return nil
        }
    }

    static func count(_ node: Node, _ path: String, _ r: YAMLReader) -> UInt64? {
        r.int(node, path, in: 0...Int.max, what: "a count").map { UInt64($0) }
    }

    static func parseAction(_ key: String, _ e: YAMLReader.Entry, _ r: YAMLReader) -> TestAction? {
        switch key {
        case "press", "release":
            return name(e.value, e.path, r).map { .level($0, active: key == "press") }
        case "input":
            guard let m = r.mapping(e.value, e.path, what: "{ line: on|off }"), m.count == 1 else {
                if case .mapping = e.value { r.error(e.value, e.path, "one line per `input` step ({ line: on|off })") }
                return nil
            }
            guard let v = value(m[0].value, m[0].path, r) else { return nil }
            return .level(TestName(name: m[0].key, at: YAMLReader.position(m[0].keyNode), path: m[0].path), active: v)
        case "click":
            let before = r.log.errorCount
            if case .scalar = e.value { return name(e.value, e.path, r).map { .click($0, count: 1, hold: nil, gap: nil) } }
            guard let m = r.mapping(e.value, e.path, allowed: ["line", "count", "hold", "gap"], what: "a line, or { line, count, hold, gap }")
            else { return nil }
            var line: TestName?
            var n = 1
            var hold: Duration?
            var gap: Duration?
            for f in m {
                switch f.key {
                case "line": line = name(f.value, f.path, r)
                case "count": n = r.int(f.value, f.path, in: 1...3, what: "1, 2 or 3 clicks") ?? 1
                case "hold": hold = r.duration(f.value, f.path)
                default: gap = r.duration(f.value, f.path)
                }
            }
            guard let line else {
                if r.log.errorCount == before { r.error(e.value, e.path, "click needs a line") }
                return nil
            }
            return .click(line, count: n, hold: hold, gap: gap)
        case "hold":
            let before = r.log.errorCount
            guard let m = r.mapping(e.value, e.path, allowed: ["line", "for"], what: "{ line: NAME, for: DURATION }") else { return nil }
            var line: TestName?
            var d: Duration?
            for f in m {
                if f.key == "line" { line = name(f.value, f.path, r) } else { d = r.duration(f.value, f.path) }
            }
            guard let line, let d else {
                if r.log.errorCount == before { r.error(e.value, e.path, "hold needs a line and how long (for)") }
                return nil
            }
            return .hold(line, for: d)
        case "flood":
            let before = r.log.errorCount
            guard let m = r.mapping(e.value, e.path, allowed: ["line", "edges", "rate"], what: "{ line, edges, rate }") else { return nil }
            var line: TestName?
            var edges: Int?
            var rate: Int?
            for f in m {
                switch f.key {
                case "line": line = name(f.value, f.path, r)
                case "edges": edges = r.int(f.value, f.path, in: 1...1_000_000, what: "a number of edges")
                default: rate = parseRate(f.value, f.path, r)
                }
            }
            guard let line, let edges, let rate else {
                if r.log.errorCount == before { r.error(e.value, e.path, "flood needs a line, edges and a rate (e.g. 2kHz)") }
                return nil
            }
            return .flood(line, edges: edges, rate: rate)
        default:  // signal
            guard let s = r.choice(e.value, e.path, ["HUP", "TERM"]) else { return nil }
            return .signal(s, config: nil)
        }
    }

    /// `2kHz`, `500Hz`, `1MHz`, or a bare number of edges per second.
    static func parseRate(_ node: Node, _ path: String, _ r: YAMLReader) -> Int? {
        guard case let .scalar(s) = node else {
            r.error(node, path, "expected a rate such as 2kHz, found \(YAMLReader.kind(node))")
            return nil
        }
        let text = s.string.trimmingSpaces
        let units: [(String, Int)] = [("MHz", 1_000_000), ("kHz", 1_000), ("Hz", 1), ("", 1)]
        for (unit, scale) in units where text.hasSuffix(unit) {
            let number = String(text.dropLast(unit.count)).trimmingSpaces
            guard let v = Int(number) else { continue }
            guard v > 0, v <= 10_000_000 / scale else { break }
            return v * scale
        }
        r.error(node, path, "'\(s.string)' is not a rate from 1Hz to 10MHz (e.g. 2kHz, 500Hz)")
        return nil
    }

    static func parseExpectation(_ e: YAMLReader.Entry, _ r: YAMLReader, into out: inout [TestExpectation]) {
        func pairs(_ what: String) -> [YAMLReader.Entry]? { r.mapping(e.value, e.path, what: what) }
        func key(_ f: YAMLReader.Entry) -> TestName { TestName(name: f.key, at: YAMLReader.position(f.keyNode), path: f.path) }
        switch e.key {
        case "expect":
            for f in pairs("{ line: on|off, … }") ?? [] {
                if let v = value(f.value, f.path, r) { out.append(.state(key(f), v)) }
            }
        case "expect_writes":
            for f in pairs("{ line: [on, off, …], … }") ?? [] {
                guard let items = r.list(f.value, f.path, what: "the writes in order, e.g. [on, off]") else { continue }
                let values = items.enumerated().compactMap { i, n in value(n, YAMLReader.index(f.path, i), r) }
                if values.count == items.count { out.append(.writes(key(f), values)) }
            }
        case "expect_run":
            out.append(contentsOf: parseRun(e, r).map { .run($0.0, env: $0.1) })
        case "expect_mode":
            if case .scalar = e.value {
                if let m = name(e.value, e.path, r, what: "a mode's name") { out.append(.mode(m, loop: nil)) }
                return
            }
            guard let m = r.mapping(e.value, e.path, allowed: ["mode", "loop"], what: "a mode, or { mode, loop }") else { return }
            var mode: TestName?
            var loop: TestName?
            for f in m {
                if f.key == "mode" { mode = name(f.value, f.path, r, what: "a mode's name") } else { loop = name(f.value, f.path, r, what: "a loop's name") }
            }
            guard let mode else { return r.error(e.value, e.path, "expect_mode needs a mode") }
            out.append(.mode(mode, loop: loop))
        case "expect_log":
            if let s = r.string(e.value, e.path, what: "text a log line contains") { out.append(.log(s)) }
        case "expect_held", "expect_lost", "expect_fires":
            for f in pairs("{ NAME: COUNT, … }") ?? [] {
                guard let n = count(f.value, f.path, r) else { continue }
                switch e.key {
                case "expect_held": out.append(.held(key(f), n))
                case "expect_lost": out.append(.lost(key(f), n))
                default: out.append(.fires(key(f), n))
                }
            }
        case "expect_task":
            guard let m = r.mapping(e.value, e.path, allowed: ["task", "late_max", "skipped", "runs"], what: "{ task, late_max, skipped, runs }")
            else { return }
            var task: TestName?
            var late: Duration?
            var skipped: UInt64?
            var runs: UInt64?
            for f in m {
                switch f.key {
                case "task": task = name(f.value, f.path, r, what: "a task's name")
                case "late_max": late = r.duration(f.value, f.path)
                case "skipped": skipped = count(f.value, f.path, r)
                default: runs = count(f.value, f.path, r)
                }
            }
            guard let task else { return r.error(e.value, e.path, "expect_task needs a task") }
            if late == nil && skipped == nil && runs == nil {
                return r.error(e.value, e.path, "expect_task needs late_max, skipped or runs")
            }
            out.append(.task(task, lateMax: late, skipped: skipped, runs: runs))
        default:  // expect_no
            guard let m = r.mapping(e.value, e.path, allowed: ["writes", "run", "log", "mode"], what: "{ writes | run | log | mode: … }")
            else { return }
            for f in m {
                switch f.key {
                case "writes":
                    for (n, node, p) in r.names(f.value, f.path) ?? [] {
                        out.append(.noWrites(TestName(name: n, at: YAMLReader.position(node), path: p)))
                    }
                case "run":
                    for (n, node, p) in r.names(f.value, f.path) ?? [] {
                        out.append(.noRun(TestName(name: n, at: YAMLReader.position(node), path: p)))
                    }
                case "log":
                    if let s = r.string(f.value, f.path, what: "text no log line may contain") { out.append(.noLog(s)) }
                default:
                    if let n = name(f.value, f.path, r, what: "a mode's name") { out.append(.noMode(n)) }
                }
            }
        }
    }

    static func parseRun(_ e: YAMLReader.Entry, _ r: YAMLReader) -> [(TestName, [(String, String)])] {
        if case .scalar = e.value { return name(e.value, e.path, r, what: "a command's name").map { [($0, [])] } ?? [] }
        guard let m = r.mapping(e.value, e.path, allowed: ["command", "env"], what: "a command, or { command, env }") else { return [] }
        var command: TestName?
        var env: [(String, String)] = []
        for f in m {
            if f.key == "command" {
                command = name(f.value, f.path, r, what: "a command's name")
            } else {
                for v in r.mapping(f.value, f.path, what: "{ VARIABLE: value }") ?? [] {
                    if let s = r.string(v.value, v.path, what: "the variable's value") { env.append((v.key, s)) }
                }
            }
        }
        guard let command else {
            r.error(e.value, e.path, "expect_run needs a command")
            return []
        }
        return [(command, env)]
    }
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        return String(s)
    }
}
