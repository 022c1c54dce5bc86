import Boardloop
import BoardControl
import BoardSupport
import Glibc
import Logging

/// `boardd test FILE`: each test of a test file on a fresh simulation of
/// its config (mock chips, one manual clock, no sleeping), printed like a
/// test runner: one line per test, each failing expectation with its
/// place, its time and what happened instead, and `N passed, M failed`.
public enum ConfigTestRunner {
    public struct Settings: Sendable {
        public var file: String
        /// Overrides the test file's `config:`.
        public var config: String?
        public var runCommands = false
        /// Only the tests whose name contains this.
        public var filter: String?
        /// Print each test's log (at `logLevel`) after its result.
        public var showLog = false
        public var logLevel: Logger.Level = .info
        public var loadOptions: LoadOptions

        public init(file: String, config: String? = nil, loadOptions: LoadOptions) {
            self.file = file
            self.config = config
            self.loadOptions = loadOptions
        }
    }

    /// Runs the file's tests: stdout the report, status 0 when every test
    /// passed, 1 when one failed, 2 when the test file or the config has errors.
    public static func run(_ s: Settings) -> CommandOutput {
        let text: String
        switch FileSystem.readConfigText(s.file, what: "a test file") {
        case let .success(t): text = t
        case let .failure(e): return CommandOutput(stdout: "", stderr: "\(s.file): error: cannot read the test file: \(e)\n", status: 2)
        }
        let log = DiagnosticLog(file: s.file)
        func errors(_ extra: String = "") -> CommandOutput {
            let sorted = log.items.sorted { ($0.line, $0.column) < ($1.line, $1.column) }
            let n = log.errors.count
            return CommandOutput(
                stdout: "", stderr: sorted.map { "\($0)\n" }.joined() + extra + "\(s.file): \(n) error(s); no test ran\n", status: 2)
        }
        guard let tests = ConfigTestFile.parse(text, file: s.file, log: log) else { return errors() }
        guard let configPath = s.config ?? tests.config.map({ relative($0, to: s.file) }) else {
            log.error(Position(line: 1, column: 1), "", "the test file names no config: add `config: FILE` or give --config FILE")
            return errors()
        }
        let (loaded, options) = Simulation.load(configPath, s.loadOptions)
        guard let config = loaded.config else {
            return errors(loaded.errors.map { "\($0)\n" }.joined() + "\(configPath): the config has errors\n")
        }
        check(tests, against: config, log: log, testFile: s.file)
        if log.hasErrors { return errors() }

        var out = "\(s.file): \(tests.tests.count) test(s) of \(configPath)\n"
        var passed = 0
        var failed = 0
        for t in tests.tests where s.filter.map({ t.name.contains($0) }) ?? true {
            var initial: [String: Bool] = [:]
            for (n, v) in tests.initial { initial[n.name] = v }
            for (n, v) in t.initial { initial[n.name] = v }
            let (failures, log) = run(t, config: config, settings: s, options: options, initial: initial)
            if failures.isEmpty {
                passed += 1
                out += "PASS  \(t.name)\n"
            } else {
                failed += 1
                out += "FAIL  \(t.name)\n"
                for f in failures { out += "      \(f.replacingNewlines)\n" }
            }
            if s.showLog {
                for l in log where l.level >= s.logLevel { out += "      | \(ms(l.at)) \(l.level) \(l.text)\n" }
            }
        }
        out += "\(passed) passed, \(failed) failed\n"
        return CommandOutput(stdout: out, stderr: "", status: failed == 0 ? 0 : 1)
    }

    /// A path in a file, relative to that file's directory.
    static func relative(_ path: String, to file: String) -> String {
        if path.hasPrefix("/") { return path }
        guard let slash = file.lastIndex(of: "/") else { return path }
        return String(file[...slash]) + path
    }

    // MARK: Names

    /// Every name a test uses must be in the config: each one that is not
    /// is an error at its place, with the nearest names.
    static func check(_ file: ConfigTestFile, against config: DaemonConfig, log: DiagnosticLog, testFile: String) {
        let lines = config.lines.map(\.name)
        let inputs = config.lines.filter(\.isInput).map(\.name)
        let outputs = config.lines.filter(\.isOutput).map(\.name)
        func known(_ n: TestName, _ names: [String], _ what: String) {
            guard !names.contains(n.name) else { return }
            let all = what == "input" ? inputs : what == "output" ? outputs : names
            let hint = DidYouMean.hint(n.name, in: all)
            if what == "input" || what == "output", lines.contains(n.name) {
                log.error(n.at, n.path, "line '\(n.name)' is \(what == "input" ? "an output" : "an input"); this needs an \(what)")
            } else {
                log.error(
                    n.at, n.path,
                    "no \(what) named '\(n.name)'" + (hint.isEmpty ? (all.isEmpty ? " (the config has none)" : " (the config has \(all.joined(separator: ", ")))") : hint))
            }
        }
        let modes = config.modes.map(\.name)
        let loops = config.loops.map(\.name)
        for n in file.initial.keys { known(n, inputs, "input") }
        for t in file.tests {
            for n in t.initial.keys { known(n, inputs, "input") }
            for step in t.steps {
                switch step.action {
                case let .level(n, _), let .click(n, _, _, _), let .hold(n, _), let .flood(n, _, _): known(n, inputs, "input")
                case let .signal(_, replacement?):
                    let path = relative(replacement, to: testFile)
                    if case .failure = FileSystem.readConfigText(path) { log.error(step.at, step.path + ".config", "cannot read the replacement config '\(path)'") }
                default: break
                }
                for e in step.expectations {
                    switch e {
                    case let .state(n, _): known(n, lines, "line")
                    case let .writes(n, _), let .noWrites(n): known(n, outputs, "output")
                    case let .held(n, _), let .lost(n, _): known(n, inputs, "input")
                    case let .run(n, _), let .noRun(n): known(n, config.commands.map(\.name), "command")
                    case let .mode(n, loop):
                        known(n, modes, "mode")
                        if let loop { known(loop, loops, "loop") }
                    case let .noMode(n): known(n, modes, "mode")
                    case let .fires(n, _): known(n, config.reactions.map(\.name), "reaction")
                    case let .task(n, _, _, _): known(n, config.tasks.map(\.name), "task")
                    case .log, .noLog: break
                    }
                    if step.window != nil, case let .state(n, _) = e, inputs.contains(n.name) {
                        log.error(n.at, n.path, "a window watches an output's writes; '\(n.name)' is an input (leave out `between`)")
                    }
                }
            }
        }
    }

    // MARK: Running one test

    static func run(
        _ t: ConfigTest, config: DaemonConfig, settings: ConfigTestRunner.Settings, options: LoadOptions, initial: [String: Bool]
    ) -> ([String], [Simulation.LogLine]) {
        let sim: Simulation
        do {
            sim = try Simulation(
                config: config, loadOptions: options, runCommands: settings.runCommands, logLevel: .debug, initial: initial)
        } catch {
            return (["\(settings.file):\(t.at.line):\(t.at.column): the config did not start: \(error)"], [])
        }
        let failures = run(t, sim, settings: settings)
        sim.daemon.shutdown()
        return (failures, sim.log)
    }

    static func run(_ t: ConfigTest, _ sim: Simulation, settings: ConfigTestRunner.Settings) -> [String] {
        var failures: [String] = []
        var stopped = false
        for step in t.steps {
            let place = "\(settings.file):\(step.at.line):\(step.at.column)"
            do {
                switch step.when {
                case .now: break
                case let .after(d): try sim.advance(to: sim.now + d)
                case let .at(d):
                    if d < sim.now {
                        failures.append("\(place): at \(ms(d)): the test is at \(ms(sim.now)) already (the steps before took until then)")
                        return failures
                    }
                    try sim.advance(to: d)
                }
                if let w = step.window { try sim.advance(to: w.to) }
                if let a = step.action {
                    if stopped {
                        failures.append("\(place): at \(ms(sim.now)): the daemon stopped (signal: TERM) before this step")
                        return failures
                    }
                    if case .signal("TERM", _) = a { stopped = true }
                    try perform(a, sim, settings: settings)
                }
            } catch {
                failures.append("\(place): at \(ms(sim.now)): \(error)")
                return failures
            }
            for (e, at) in zip(step.expectations, step.expectationsAt) {
                if let why = check(e, sim, window: step.window) {
                    let when = step.window.map { "between \(ms($0.from)) and \(ms($0.to))" } ?? "at \(ms(sim.now))"
                    failures.append("\(settings.file):\(at.line):\(at.column): \(when): expected \(describe(e)): \(why)")
                }
            }
        }
        return failures
    }

    static func perform(_ a: TestAction, _ sim: Simulation, settings: ConfigTestRunner.Settings) throws {
        switch a {
        case let .level(n, active):
            try sim.setActive(n.name, active)
        case let .hold(n, d):
            try sim.setActive(n.name, true)
            try sim.advance(to: sim.now + d)
            try sim.setActive(n.name, false)
        case let .click(n, count, hold, gap):
            let l = try sim.pin(n.name).2
            let timing = clickTiming(l)
            for i in 0..<count {
                if i > 0 { try sim.advance(to: sim.now + (gap ?? timing.gap)) }
                try sim.setActive(n.name, true)
                try sim.advance(to: sim.now + (hold ?? timing.hold))
                try sim.setActive(n.name, false)
            }
        case let .flood(n, edges, rate):
            let (chip, selector, _) = try sim.pin(n.name)
            var high = try chip.level(selector)
            let from = sim.now
            for k in 0..<edges {
                let due = from + .nanoseconds(Int64(k) * 1_000_000_000 / Int64(rate))
                try sim.advance(to: due)
                high.toggle()
                try chip.setLevel(selector, high)
                try sim.daemon.settle()
            }
        case let .signal(s, replacement):
            if s == "HUP" {
                sim.daemon.reload(from: replacement.map { relative($0, to: settings.file) })
                try sim.daemon.settle()
            } else {
                sim.daemon.requestStop("SIGTERM (a test step)")
                sim.daemon.shutdown()
            }
        }
    }

    /// A click as a person makes one on this line: held well inside its
    /// click gesture's limits (and its debounce), released for half the
    /// multi-click gap between clicks.
    static func clickTiming(_ l: LineConfig) -> (hold: Duration, gap: Duration) {
        let debounce = l.settings.debounce
        guard let g = l.gestures else { return (max(.milliseconds(100), debounce * 3), .milliseconds(150) + debounce * 2) }
        var hold = max(.milliseconds(100), g.clickMin + debounce * 2)
        if hold >= g.clickMax { hold = (g.clickMin + g.clickMax) / 2 }
        return (hold, max(g.gap / 2, debounce * 3))
    }

    // MARK: Expectations

    /// nil when `e` holds; else what happened instead.
    static func check(_ e: TestExpectation, _ sim: Simulation, window: (from: Duration, to: Duration)?) -> String? {
        let from = window?.from ?? .zero
        let to = window?.to ?? sim.now
        func inWindow(_ t: Duration) -> Bool { t >= from && t <= to }
        do {
            switch e {
            case let .state(n, v):
                if let window {
                    if try sim.writes(n.name, from: from, to: to).contains(where: { $0.value == v }) { return nil }
                    let (initial, writes) = try sim.writes(n.name)
                    let changes = changesTo(v, initial: initial, writes)
                    if let before = changes.last(where: { $0 < window.from }) {
                        return "\(n.name) became \(onOff(v)) at \(ms(before)), before the window"
                    }
                    if let after = changes.first(where: { $0 > window.to }) {
                        return "\(n.name) became \(onOff(v)) at \(ms(after)), after the window"
                    }
                    return "\(n.name) did not become \(onOff(v)) (\(history(initial, writes)))"
                }
                let now = try sim.value(n.name)
                if now == v { return nil }
                if try sim.pin(n.name).2.isOutput {
                    let (initial, writes) = try sim.writes(n.name)
                    return "\(n.name) is \(onOff(now)) (\(history(initial, writes)))"
                }
                return "\(n.name) is \(onOff(now))"
            case let .writes(n, values):
                let writes = try sim.writes(n.name, from: from, to: to)
                if writes.map(\.value) == values { return nil }
                let (initial, all) = try sim.writes(n.name)
                return writes.isEmpty ? "\(n.name) was not written (\(history(initial, all)))" : "\(n.name) was written \(list(Array(writes)))"
            case let .noWrites(n):
                let writes = try sim.writes(n.name, from: from, to: to)
                return writes.isEmpty ? nil : "\(n.name) was written \(list(Array(writes)))"
            case let .run(n, env):
                let runs = sim.runs.filter { $0.name == n.name }
                let timed = runs.filter { inWindow(sim.since($0.at)) }
                if timed.contains(where: { r in env.allSatisfy { r.environment.contains("\($0.0)=\($0.1)") } }) { return nil }
                if timed.isEmpty {
                    return runs.isEmpty ? "\(n.name) did not run" : "\(n.name) ran at \(runs.map { ms(sim.since($0.at)) }.joined(separator: ", ")) only"
                }
                let seen = timed.map { r in
                    "at \(ms(sim.since(r.at))) with " + env.map { k, _ in r.environment.first { $0.hasPrefix(k + "=") } ?? "\(k) unset" }.joined(separator: " ")
                }
                return "\(n.name) ran " + seen.joined(separator: "; ")
            case let .noRun(n):
                let runs = sim.runs.filter { $0.name == n.name && inWindow(sim.since($0.at)) }
                return runs.isEmpty ? nil : "\(n.name) ran at \(runs.map { ms(sim.since($0.at)) }.joined(separator: ", "))"
            case let .mode(n, loop):
                let modes = sim.modes()
                let hit = modes.contains { $0.mode == n.name && (loop == nil || $0.loop == loop!.name) }
                return hit ? nil : "the loops' modes are " + modes.map { "\($0.loop): \($0.mode)" }.joined(separator: ", ")
            case let .noMode(n):
                let modes = sim.modes().filter { $0.mode == n.name }
                return modes.isEmpty ? nil : "loop(s) \(modes.map(\.loop).joined(separator: ", ")) in \(n.name)"
            case let .log(text):
                if sim.log.contains(where: { inWindow($0.at) && $0.text.contains(text) }) { return nil }
                if let other = sim.log.first(where: { $0.text.contains(text) }) { return "it was logged at \(ms(other.at)), outside the window" }
                return "no log line contains it" + lastLines(sim, window: (from, to))
            case let .noLog(text):
                guard let l = sim.log.first(where: { inWindow($0.at) && $0.text.contains(text) }) else { return nil }
                return "logged at \(ms(l.at)): \(l.text)"
            case let .held(n, count):
                let c = sim.counters().lines[n.name]?.heldInRing ?? 0
                return c == count ? nil : "\(c) held"
            case let .lost(n, count):
                let c = sim.counters().lines[n.name]?.lost ?? 0
                return c == count ? nil : "\(c) lost"
            case let .fires(n, count):
                let c = sim.counters().reactionFires[n.name] ?? 0
                return c == count ? nil : "it fired \(c) time(s)"
            case let .task(n, late, skipped, runs):
                guard let c = sim.counters().tasks[n.name] else { return "the task has no figures" }
                var wrong: [String] = []
                if let late, c.max > late { wrong.append("its latest run was \(DurationText.format(c.max)) late") }
                if let skipped, c.skippedPeriods != skipped { wrong.append("\(c.skippedPeriods) periods skipped") }
                if let runs, c.runs != runs { wrong.append("\(c.runs) runs") }
                return wrong.isEmpty ? nil : wrong.joined(separator: ", ")
            }
        } catch {
            return "\(error)"
        }
    }

    static func describe(_ e: TestExpectation) -> String {
        switch e {
        case let .state(n, v): "\(n.name) \(onOff(v))"
        case let .writes(n, v): "\(n.name) written [\(v.map(onOff).joined(separator: ", "))]"
        case let .noWrites(n): "no writes to \(n.name)"
        case let .run(n, env): "\(n.name) to run" + (env.isEmpty ? "" : " with " + env.map { "\($0.0)=\($0.1)" }.joined(separator: " "))
        case let .noRun(n): "\(n.name) not to run"
        case let .mode(n, loop): "mode \(n.name)" + (loop.map { " on loop \($0.name)" } ?? "")
        case let .noMode(n): "no loop in mode \(n.name)"
        case let .log(t): "a log line with \"\(t)\""
        case let .noLog(t): "no log line with \"\(t)\""
        case let .held(n, c): "\(c) events of \(n.name) held"
        case let .lost(n, c): "\(c) events of \(n.name) lost"
        case let .fires(n, c): "reaction \(n.name) to fire \(c) time(s)"
        case let .task(n, late, skipped, runs):
            "task \(n.name)"
                + [late.map { " late at most \(DurationText.format($0))" }, skipped.map { " \($0) periods skipped" }, runs.map { " \($0) runs" }]
                .compactMap { $0 }.joined(separator: ",")
        }
    }

    static func changesTo(_ v: Bool, initial: Bool?, _ writes: [Simulation.Write]) -> [Duration] {
        var prior = initial
        var out: [Duration] = []
        for w in writes {
            if w.value == v && prior != v { out.append(w.at) }
            prior = w.value
        }
        return out
    }

    static func history(_ initial: Bool?, _ writes: [Simulation.Write]) -> String {
        let start = initial.map { "initially \(onOff($0))" } ?? "never set"
        guard !writes.isEmpty else { return start + ", not written since" }
        let shown = writes.suffix(6)
        return start + (writes.count > shown.count ? ", …" : "") + ", then " + list(Array(shown))
    }

    static func list(_ writes: [Simulation.Write]) -> String {
        writes.map { "\(onOff($0.value)) at \(ms($0.at))" }.joined(separator: ", ")
    }

    static func lastLines(_ sim: Simulation, window: (Duration, Duration)) -> String {
        let lines = sim.log.filter { $0.at >= window.0 && $0.at <= window.1 }.suffix(3)
        guard !lines.isEmpty else { return " (nothing was logged)" }
        return "; the last lines: " + lines.map { "\"\($0.text)\"" }.joined(separator: ", ")
    }

    static func onOff(_ v: Bool) -> String { v ? "on" : "off" }

    /// A time from the test's start: `150 ms`, `42.458997 ms`, `12.00025 s`.
    static func ms(_ d: Duration) -> String { DurationText.offset(d) }
}

extension Simulation {
    /// An instant of the simulation's clock as time since its start.
    func since(_ i: MonotonicInstant) -> Duration { .nanoseconds(Int64(i.nanoseconds &- start.nanoseconds)) }
}

extension String {
    var replacingNewlines: String { split(separator: "\n", omittingEmptySubsequences: false).joined(separator: "\n      ") }
}

