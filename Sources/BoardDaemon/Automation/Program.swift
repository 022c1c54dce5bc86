import Boardloop
import Logging
import Synchronization

/// One step of a compiled action list. Trivial (no references, no arrays):
/// the executor walks an array of them without retaining or allocating.
enum Op: Sendable, Equatable {
    case set(line: Int32, value: Bool)
    /// Sets `count` outputs of one loop at once (`Program.writes[first...]`):
    /// consecutive `set`s, each request of them written in one kernel call.
    case setMany(first: Int32, count: Int32)
    case toggle(line: Int32)
    /// Sets an output to its `safe:` value unless it is there already (a
    /// stopped run's default: an e-stop that just set it writes it once).
    case setSafe(line: Int32)
    case pulse(line: Int32, nanoseconds: Int64)
    case wait(nanoseconds: Int64)
    case run(site: Int32)
    case log(site: Int32)
    case mode(Int32)
    case start(sequence: Int32)
    case stop(sequence: Int32)
    /// If condition `condition` does not hold, continue at `elseTarget`.
    case branch(condition: Int32, elseTarget: Int32)
    case jump(Int32)
}

/// A range of ops: one action list.
struct OpRange: Sendable, Equatable {
    var start: Int32
    var end: Int32
    var isEmpty: Bool { start >= end }
}

/// A `run` action: the command and the argv it runs.
struct RunSite: Sendable {
    var command: CommandID
    var argv: [String]
}

/// A `log` action, its message made once — unless it holds `{repeat}`,
/// which each run replaces with the hold's count (empty outside a hold).
struct LogSite: Sendable {
    static let repeatPlaceholder = "{repeat}"
    var level: Logger.Level
    var message: Logger.Message
    /// The text around each `{repeat}`; nil when there is none.
    var parts: [String]?
    /// Its source for the log's rate limit (`LogWriter`): the action's text.
    var source: String

    init(level: Logger.Level, text: String) {
        self.level = level
        message = "\(text)"
        source = "log \"\(text.count > 40 ? text.prefix(40) + "…" : text)\""
        parts = text.contains(Self.repeatPlaceholder) ? text.split(separator: Self.repeatPlaceholder, omittingEmptySubsequences: false).map(String.init) : nil
    }

    func message(_ ctx: Context) -> Logger.Message {
        guard let parts else { return message }
        return "\(parts.joined(separator: ctx.repeatCount >= 0 ? String(ctx.repeatCount) : ""))"
    }
}

/// The logical value of every line, readable from any loop (conditions on
/// another loop's line): one atomic per line, written by the owner.
final class LineCell: Sendable {
    let value = Atomic<Bool>(false)
}

/// Every action list of a config, compiled once into one array of ops; the
/// loops of one config generation share it (read only).
final class Program: Sendable {
    let config: DaemonConfig
    let generation: Int32
    let ops: [Op]
    let conditions: [Condition]
    let runSites: [RunSite]
    let logSites: [LogSite]
    let reactions: [OpRange]
    let tasks: [OpRange]
    let sequences: [OpRange]
    /// What a stopped run of each sequence does: its `on_stop:`, or its
    /// outputs with a `safe:` value set to it (`DaemonConfig.safeStop`).
    let sequenceStops: [OpRange]
    let cells: [LineCell]
    /// Lines some `pulse` targets (they get a pulse timer).
    let pulsedLines: Set<Int>
    /// The writes of the `setMany` ops.
    let writes: [Write]
    /// Where the control socket's ops start (`ControlOps`).
    let control: ControlOps

    init(config: DaemonConfig, generation: Int32) {
        self.config = config
        self.generation = generation
        var b = Builder(loops: config.lines.map(\.loop))
        reactions = config.reactions.map { b.compile($0.actions) }
        tasks = config.tasks.map { b.compile($0.actions) }
        sequences = config.sequences.map { b.compile($0.steps) }
        sequenceStops = config.sequences.map { s in
            s.onStop.map { b.compile($0) } ?? b.compileSafe(config.safeStop(of: s))
        }
        control = b.compileControl(config)
        ops = b.ops
        conditions = b.conditions
        runSites = b.runSites
        logSites = b.logSites
        pulsedLines = b.pulsed
        writes = b.writes
        cells = config.lines.map { _ in LineCell() }
    }

    /// One output's value in a `setMany`.
    struct Write: Sendable, Equatable {
        var line: Int32
        var value: Bool
    }

    struct Builder {
        /// Each line's loop (the outputs a `setMany` sets share one).
        let loops: [LoopID]
        var ops: [Op] = []
        var writes: [Write] = []
        var conditions: [Condition] = []
        var runSites: [RunSite] = []
        var logSites: [LogSite] = []
        var pulsed: Set<Int> = []

        mutating func compile(_ actions: [Action]) -> OpRange {
            let start = Int32(ops.count)
            emit(actions)
            return OpRange(start: start, end: Int32(ops.count))
        }

        /// `setSafe` of each line.
        mutating func compileSafe(_ lines: [LineID]) -> OpRange {
            let start = Int32(ops.count)
            for l in lines { ops.append(.setSafe(line: Int32(l.index))) }
            return OpRange(start: start, end: Int32(ops.count))
        }

        mutating func emit(_ actions: [Action]) {
            var i = 0
            while i < actions.count {
                // Consecutive sets of one loop's outputs (`set: { a: on,
                // b: off }`), each line once: one op, which writes each
                // request once.
                if case let .set(l, _) = actions[i] {
                    var j = i + 1
                    var lines: Set<Int> = [l.index]
                    while j < actions.count, case let .set(m, _) = actions[j], loops[m.index] == loops[l.index],
                        lines.insert(m.index).inserted
                    {
                        j += 1
                    }
                    if j - i > 1 {
                        ops.append(.setMany(first: Int32(writes.count), count: Int32(j - i)))
                        for case let .set(m, v) in actions[i..<j] { writes.append(Write(line: Int32(m.index), value: v)) }
                        i = j
                        continue
                    }
                }
                emit(actions[i])
                i += 1
            }
        }

        mutating func emit(_ a: Action) {
            switch a {
            case let .set(l, v): ops.append(.set(line: Int32(l.index), value: v))
            case let .toggle(l): ops.append(.toggle(line: Int32(l.index)))
            case let .pulse(l, d):
                pulsed.insert(l.index)
                ops.append(.pulse(line: Int32(l.index), nanoseconds: d.nanosecondsClamped))
            case let .wait(d): ops.append(.wait(nanoseconds: d.nanosecondsClamped))
            case let .run(c, argv):
                ops.append(.run(site: Int32(runSites.count)))
                runSites.append(RunSite(command: c, argv: argv))
            case let .log(level, text):
                ops.append(.log(site: Int32(logSites.count)))
                logSites.append(LogSite(level: level.loggerLevel, text: text))
            case let .mode(m): ops.append(.mode(Int32(m.index)))
            case let .startSequence(s): ops.append(.start(sequence: Int32(s.index)))
            case let .stopSequence(s): ops.append(.stop(sequence: Int32(s.index)))
            case let .ifThen(c, then, els):
                let ci = Int32(conditions.count)
                conditions.append(c)
                let branchAt = ops.count
                ops.append(.jump(0))  // patched below
                emit(then)
                if els.isEmpty {
                    ops[branchAt] = .branch(condition: ci, elseTarget: Int32(ops.count))
                } else {
                    let jumpAt = ops.count
                    ops.append(.jump(0))
                    ops[branchAt] = .branch(condition: ci, elseTarget: Int32(ops.count))
                    emit(els)
                    ops[jumpAt] = .jump(Int32(ops.count))
                }
            }
        }
    }

    /// Whether `c` holds on `loop` (for `mode` conditions).
    func holds(_ c: Condition, mode: ModeID) -> Bool {
        switch c {
        case let .line(l, v): return cells[l.index].value.load(ordering: .relaxed) == v
        case let .mode(m): return m == mode
        case let .not(x): return !holds(x, mode: mode)
        case let .all(xs):
            for x in xs where !holds(x, mode: mode) { return false }
            return true
        case let .any(xs):
            for x in xs where holds(x, mode: mode) { return true }
            return false
        }
    }
}

extension LogLevel {
    var loggerLevel: Logger.Level {
        switch self {
        case .debug: .debug
        case .info: .info
        case .notice: .notice
        case .warning: .warning
        case .error: .error
        }
    }
}
