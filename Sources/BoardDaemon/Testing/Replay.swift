import Boardloop
import BoardControl
import BoardSupport
import Glibc

/// `boardd replay FILE`: a recording's edges (`boardctl record`, format in
/// docs/testing-configs.md) fed at their recorded times into a config on
/// mock chips and one manual clock; prints what the config did and how
/// that differs from what the board did while it was recorded.
public enum Replay {
    public struct Settings: Sendable {
        public var file: String
        /// Default: the config the recording names.
        public var config: String?
        /// nil: as fast as it goes; N: N times real time (the output is the same).
        public var speed: Double?
        /// A write counts as the board's when it is at most this far from it.
        public var tolerance: Duration = .milliseconds(5)
        /// How much later than the replay's a write of the board's that a
        /// timer made (a `pulse:` end, a sequence's step) may be: a loaded
        /// board runs its timers late, the replay's manual clock never does.
        public var lateTimers: Duration = .milliseconds(50)
        public var runCommands = false
        public var loadOptions: LoadOptions
        /// Output changes each mock chip keeps between two looks (a test
        /// makes it small to show none is lost past it).
        var historyCapacity = 1 << 16

        public init(file: String, config: String? = nil, loadOptions: LoadOptions) {
            self.file = file
            self.config = config
            self.loadOptions = loadOptions
        }
    }

    /// The newest recording format this boardd reads.
    public static let version: Int64 = 1
    /// The largest recording read (a regular file only: a device such as
    /// `/dev/zero` is refused before a byte is read).
    static let maximumSize = 1 << 30
    /// The longest recording a header may say it lasts (one lasts an hour
    /// at most): a replay runs its config's timers until then.
    static let maximumSeconds: Int64 = 86_400
    /// The most cells the table that aligns one output's writes may have.
    static let maximumTable = 1 << 22
    /// The furthest apart two writes of the same value may be and still be
    /// one write made early or late (`--tolerance` and `--late-timers`
    /// widen it): further apart, each is reported as made by one side only.
    static let pairWindow: Duration = .milliseconds(500)

    struct Recording {
        var config: String
        var sha256: String?
        var board: String
        var seconds: Duration
        var levels: [String: Bool]
        /// Each output's logical value at the start (recordings made before
        /// boardd wrote it have none: the config's `initial` then).
        var outputs: [String: Bool] = [:]
        var edges: [(at: Duration, line: String, rising: Bool)] = []
        /// What the board wrote, per line, in order; `timer`: a timer made
        /// it (`by` a pulse's end or a sequence's step).
        var writes: [(at: Duration, line: String, value: Bool, timer: Bool)] = []
        var reactions: [String: Int] = [:]
        var commands: [(at: Duration, name: String)] = []
        /// Runs the board refused (`max_running`), per command.
        var refused: [String: Int] = [:]
        var lost: [String: Int64] = [:]
        var dropped: Int64 = 0
        var complete = false
    }

    /// Status 0: the config did what the board did; 1: it did something
    /// else (the differences are printed); 2: the recording or the config
    /// cannot be used.
    public static func run(_ s: Settings) -> CommandOutput {
        let rec: Recording
        switch read(s.file) {
        case let .success(r): rec = r
        case let .failure(e): return CommandOutput(stdout: "", stderr: "\(e.message)\n", status: 2)
        }
        let configPath = s.config ?? rec.config
        let (loaded, options) = Simulation.load(configPath, s.loadOptions)
        guard var config = loaded.config else {
            return CommandOutput(
                stdout: "", stderr: loaded.errors.map { "\($0)\n" }.joined() + "\(configPath): the config has errors; nothing was replayed\n",
                status: 2)
        }
        var digest: String?
        if case let .success(bytes) = FileSystem.readBytes(configPath, limit: FileSystem.maximumConfigSize, regularOnly: true) {
            digest = SHA256.hex(bytes)
        }
        let same = digest != nil && digest == rec.sha256
        let known = Set(config.lines.filter(\.isInput).map(\.name))
        var levels: [String: Bool] = [:]
        for (k, v) in rec.levels where known.contains(k) { levels[k] = v }
        // Outputs start where the board's were when it began recording, not
        // at the config's `initial`: the first write then means what it did.
        for i in config.lines.indices where config.lines[i].isOutput {
            if let v = rec.outputs[config.lines[i].name] { config.lines[i].settings.outputValue = v }
        }
        let sim: Simulation
        do {
            sim = try Simulation(
                config: config, loadOptions: options, runCommands: s.runCommands, levels: levels, historyCapacity: s.historyCapacity)
        } catch {
            return CommandOutput(stdout: "", stderr: "\(configPath): the config did not start: \(error)\n", status: 2)
        }
        defer { sim.daemon.shutdown() }

        var out = "replay of \(s.file): \(rec.edges.count) edges in \(ms(rec.seconds)) on \(rec.board)"
        out += rec.complete ? "\n" : " (the recording ends early: no footer)\n"
        out += "config \(configPath): " + (same ? "the config it was recorded with\n" : "not the config it was recorded with (\(rec.config))\n")
        if rec.dropped > 0 { out += "note: the recording dropped \(rec.dropped) records (its ring was full); the board's side is incomplete\n" }
        var skipped: [String: Int] = [:]
        let wall = MonotonicInstant.now
        do {
            for e in rec.edges {
                guard known.contains(e.line) else {
                    skipped[e.line, default: 0] += 1
                    continue
                }
                if let speed = s.speed { pace(wall, e.at, speed) }
                try sim.advance(to: e.at)
                let (chip, selector, _) = try sim.pin(e.line)
                try chip.injectEdge(selector, e.rising ? .rising : .falling, at: sim.instant(e.at))
                try sim.daemon.settle()
                sim.keepUp()
            }
            if let speed = s.speed { pace(wall, rec.seconds, speed) }
            try sim.advance(to: max(rec.seconds, sim.now))
        } catch {
            return CommandOutput(stdout: out, stderr: "replay stopped at \(ms(sim.now)): \(error)\n", status: 2)
        }
        for (line, n) in skipped.sorted(by: { $0.key < $1.key }) {
            out += "note: \(n) edges of '\(line)' not replayed: the config has no input by that name\n"
        }

        // What the config did.
        var writes: [(at: Duration, line: String, value: Bool)] = []
        for l in config.lines where l.isOutput {
            guard let w = try? sim.writes(l.name) else { continue }
            writes += w.writes.map { ($0.at, l.name, $0.value) }
        }
        writes.sort { ($0.at, $0.line) < ($1.at, $1.line) }
        out += "\nwhat the config did:\n"
        let runs = sim.runs
        var timeline: [(at: Duration, order: Int, text: String)] = []
        for (i, w) in writes.enumerated() { timeline.append((w.at, i, "\(w.line) -> \(w.value ? "on" : "off")")) }
        for (i, r) in runs.enumerated() {
            let env = r.environment.filter { $0.hasPrefix("BOARDD_LINE=") || $0.hasPrefix("BOARDD_REACTION=") }
            timeline.append((sim.since(r.at), writes.count + i, "run \(r.name) \(env.joined(separator: " "))\(s.runCommands ? "" : " (recorded, not run)")"))
        }
        timeline.sort { ($0.at, $0.order) < ($1.at, $1.order) }
        for e in timeline { out += "  \(pad(ms(e.at)))  \(e.text)\n" }
        let counters = sim.counters()
        let fired = counters.reactionFires.filter { $0.value > 0 }.sorted { $0.key < $1.key }
        out += "  reactions: " + (fired.isEmpty ? "none fired" : fired.map { "\($0.key) \($0.value)" }.joined(separator: ", ")) + "\n"

        // The differences from the board. An output a task writes is not
        // compared: when a task runs depends on when boardd started, not
        // on the recorded inputs.
        var diffs: [String] = []
        var lateness = Lateness()
        var cells = 0
        let timed = taskWritten(config)
        let lines = Set(writes.map(\.line)).union(rec.writes.map(\.line)).subtracting(timed).sorted()
        for line in lines {
            let mine = writes.filter { $0.line == line }.map { ($0.at, $0.value) }
            let theirs = rec.writes.filter { $0.line == line }
            diffs += compare(
                line, board: theirs.map { ($0.at, $0.value) }, replay: mine, tolerance: s.tolerance, cells: &cells, late: s.lateTimers,
                timers: theirs.map(\.timer), lateness: &lateness)
        }
        for name in Set(rec.reactions.keys).union(fired.map(\.key)).sorted() {
            let b = rec.reactions[name] ?? 0
            let r = Int(counters.reactionFires[name] ?? 0)
            if b != r { diffs.append("reaction \(name): fired \(r) time(s), the board \(b)") }
        }
        for name in Set(rec.commands.map(\.name)).union(runs.map(\.name)).union(rec.refused.keys).sorted() {
            let b = rec.commands.filter { $0.name == name }.count
            let r = runs.filter { $0.name == name }.count
            let refused = rec.refused[name] ?? 0
            if s.runCommands {
                if b != r { diffs.append("command \(name): \(r) run(s), the board \(b)") }
            } else if r != b + refused {
                // Recorded, not run, no child is ever running here: every
                // run the board's max_running refused is one run here.
                diffs.append("command \(name): \(r) run(s), the board \(b)\(refused > 0 ? " and \(refused) refused (max_running)" : "")")
            }
        }
        out += "\ndifferences from the board (writes more than \(ms(s.tolerance)) apart count):\n"
        if !timed.isEmpty {
            out += "  (not compared: \(timed.sorted().joined(separator: ", ")), written by tasks, whose periods began when boardd started)\n"
        }
        if lateness.count > 0 {
            out += "  (not differences: \(lateness.count) of the board's timer writes were up to \(ms(lateness.most)) late, within --late-timers \(ms(s.lateTimers)))\n"
        }
        if diffs.isEmpty {
            out += "  none: the config did what the board did\n"
        } else {
            for d in diffs { out += "  \(d)\n" }
        }
        out += "\(diffs.count) difference(s)\n"
        return CommandOutput(stdout: out, stderr: "", status: diffs.isEmpty ? 0 : 1)
    }

    /// The outputs a task writes, itself or through the sequences it starts.
    static func taskWritten(_ config: DaemonConfig) -> Set<String> {
        var out: Set<String> = []
        var seen: Set<Int> = []
        func visit(_ actions: [Action]) {
            for a in actions {
                switch a {
                case let .set(l, _), let .toggle(l), let .pulse(l, _): out.insert(config[l].name)
                case let .startSequence(q) where !seen.contains(q.index):
                    seen.insert(q.index)
                    visit(config[q].steps)
                    visit(config[q].onStop ?? [])
                case let .ifThen(_, then, otherwise):
                    visit(then)
                    visit(otherwise)
                default: break
                }
            }
        }
        for t in config.tasks { visit(t.actions) }
        return out
    }

    /// Waits until `at / speed` of wall time has passed since `wall`.
    static func pace(_ wall: MonotonicInstant, _ at: Duration, _ speed: Double) {
        let due = wall.nanoseconds &+ UInt64(Double(at.nanosecondsClamped) / speed)
        while MonotonicInstant.now.nanoseconds < due {
            let left = due - MonotonicInstant.now.nanoseconds
            usleep(useconds_t(min(left / 1000, 100_000)))
        }
    }

    static func ms(_ d: Duration) -> String { ConfigTestRunner.ms(d) }
    static func pad(_ s: String) -> String { s.count >= 12 ? s : String(repeating: " ", count: 12 - s.count) + s }

    struct Problem: Error {
        var message: String
    }

    /// Reads a recording: its header, its records and its footer.
    static func read(_ file: String) -> Result<Recording, Problem> {
        let bytes: [UInt8]
        switch FileSystem.readBytes(file, limit: maximumSize, what: "a recording", regularOnly: true) {
        case let .success(b): bytes = b
        case let .failure(e): return .failure(Problem(message: "\(file): cannot read the recording: \(e)"))
        }
        var rec: Recording?
        var number = 0
        for raw in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            number += 1
            if raw.isEmpty { continue }
            let json: JSON
            do { json = try JSON.parse(raw) } catch {
                return .failure(Problem(message: "\(file):\(number): not JSON: \(error.message)"))
            }
            func fail(_ m: String) -> Result<Recording, Problem> { .failure(Problem(message: "\(file):\(number): \(m)")) }
            guard rec != nil else {
                switch header(json, raw) {
                case let .success(h): rec = h
                case let .failure(why): return fail(why.message)
                }
                continue
            }
            // In place: a copy of the recording would copy its records.
            if let why = add(json, raw, to: &rec!) { return fail(why) }
        }
        guard var r = rec else { return .failure(Problem(message: "\(file): empty: not a boardd recording")) }
        // Records of different loops are merged by time; equal times keep the file's order.
        r.edges = r.edges.enumerated().sorted { ($0.element.at, $0.offset) < ($1.element.at, $1.offset) }.map(\.element)
        r.writes = r.writes.enumerated().sorted { ($0.element.at, $0.offset) < ($1.element.at, $1.offset) }.map(\.element)
        if r.seconds == .zero, let last = r.edges.last { r.seconds = last.at }
        return .success(r)
    }

    /// Adds a record (or the footer) to the recording; what is wrong with it, or nil.
    static func add(_ json: JSON, _ raw: ArraySlice<UInt8>, to r: inout Recording) -> String? {
        if case .bool(true)? = json["end"] {
            r.complete = true
            if case let .int(d)? = json["dropped"] { r.dropped = d }
            return nil
        }
        guard case let .string(kind)? = json["kind"] else { return "a record needs \"kind\"" }
        let t: Int64
        switch json["t"] {
        case let .int(n)?: t = n
        case nil: return "a record needs \"t\" (nanoseconds since the start)"
        case let found?: return "\"t\" must be a whole number of nanoseconds, found \(shown(found, "t", in: raw))"
        }
        // An edge the kernel stamped before the start (read after it)
        // is in the levels the header gives already.
        if t < 0 && kind == "edge" { return nil }
        let at = Duration.nanoseconds(max(t, 0))
        var line = ""
        if case let .string(l)? = json["line"] { line = l }
        switch kind {
        case "edge":
            guard case let .string(e)? = json["edge"], e == "rising" || e == "falling" else {
                return "an edge needs \"edge\": \"rising\" or \"falling\""
            }
            r.edges.append((at, line, e == "rising"))
        case "write":
            guard case let .int(v)? = json["value"] else { return "a write needs \"value\": 0 or 1" }
            var timer = false
            if case let .string(by)? = json["by"] { timer = by == "pulse" || by.hasPrefix("sequence:") }
            r.writes.append((at, line, v != 0, timer))
        case "reaction":
            if case let .string(n)? = json["name"] { r.reactions[n, default: 0] += 1 }
        case "command":
            if case let .string(n)? = json["name"] {
                switch json["event"] {
                case .string("start")?: r.commands.append((at, n))
                case .string("refused")?: r.refused[n, default: 0] += 1
                default: break
                }
            }
        case "lost":
            if case let .int(c)? = json["count"] { r.lost[line, default: 0] += c }
        default: break  // newer kinds and the ones replay does not compare
        }
        return nil
    }

    /// A recording's first line: its version, its config, its length, its
    /// inputs' levels at the start.
    static func header(_ json: JSON, _ raw: ArraySlice<UInt8>) -> Result<Recording, Problem> {
        func fail(_ m: String) -> Result<Recording, Problem> { .failure(Problem(message: m)) }
        let v: Int64
        switch json["boardd_recording"] {
        case nil: return fail("not a boardd recording (its first line has no \"boardd_recording\" version)")
        case let .int(n)? where n >= 1: v = n
        case let found?: return fail("version \(shown(found, "boardd_recording", in: raw)) is out of range; this boardd reads version \(version)")
        }
        guard v <= version else {
            return fail("a recording of format version \(v); this boardd reads version \(version) and older: update boardd")
        }
        guard case let .string(config)? = json["config"] else { return fail("the header has no config") }
        guard let length = seconds(json["seconds"]) else {
            return fail("\"seconds\" must be from 0 to \(maximumSeconds), found \(shown(json["seconds"] ?? .null, "seconds", in: raw))")
        }
        var levels: [String: Bool] = [:]
        if case let .object(fields)? = json["levels"] {
            for (k, v) in fields { if case let .int(x) = v { levels[k] = x != 0 } }
        }
        var sha: String?
        if case let .string(s)? = json["config_sha256"] { sha = s }
        var board = "?"
        if case let .string(b)? = json["board"] { board = b }
        var r = Recording(config: config, sha256: sha, board: board, seconds: length, levels: levels)
        if case let .object(fields)? = json["outputs"] {
            for (k, v) in fields { if case let .int(x) = v { r.outputs[k] = x != 0 } }
        }
        return .success(r)
    }

    /// The header's length: none is zero; nil when it is not a number from
    /// 0 to `maximumSeconds`.
    static func seconds(_ v: JSON?) -> Duration? {
        switch v {
        case nil: .zero
        case let .int(s)? where (0...maximumSeconds).contains(s): .seconds(s)
        case let .double(s)? where s >= 0 && s <= Double(maximumSeconds): .nanoseconds(Int64(s * 1e9))
        default: nil
        }
    }

    /// A value a message names: a number as the line wrote it (JSON keeps
    /// a large or fractional one as a double, which would print otherwise),
    /// anything else by its kind.
    static func shown(_ v: JSON, _ key: String, in line: ArraySlice<UInt8>) -> String {
        switch v {
        case .int, .double:
            return rawNumber(after: key, in: line) ?? Echo(v.serialized).bare
        default: return v.kind
        }
    }

    /// The number's text after `"key":` in a line, when it is there.
    static func rawNumber(after key: String, in line: ArraySlice<UInt8>) -> String? {
        let quoted = Array("\"\(key)\"".utf8)
        guard let at = line.indices.first(where: { line[$0...].starts(with: quoted) }) else { return nil }
        var i = at + quoted.count
        while i < line.endIndex, line[i] == 0x20 || line[i] == 0x09 || line[i] == UInt8(ascii: ":") { i += 1 }
        let start = i
        while i < line.endIndex, i - start < 40, "0123456789+-.eE".utf8.contains(line[i]) { i += 1 }
        return i > start ? String(decoding: line[start..<i], as: UTF8.self) : nil
    }
}
