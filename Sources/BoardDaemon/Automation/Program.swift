import Boardloop
import Logging
import Synchronization

/// One step of a compiled action list. Trivial (no references, no arrays):
/// the executor walks an array of them without retaining or allocating.
enum Op: Sendable, Equatable {
    case set(line: Int32, value: Bool)
    case toggle(line: Int32)
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
    let cells: [LineCell]
    /// Lines some `pulse` targets (they get a pulse timer).
    let pulsedLines: Set<Int>
    /// Where the control socket's ops start (`ControlOps`).
    let control: ControlOps

    init(config: DaemonConfig, generation: Int32) {
        self.config = config
        self.generation = generation
        var b = Builder()
        reactions = config.reactions.map { b.compile($0.actions) }
        tasks = config.tasks.map { b.compile($0.actions) }
        sequences = config.sequences.map { b.compile($0.steps) }
        control = b.compileControl(config)
        ops = b.ops
        conditions = b.conditions
        runSites = b.runSites
        logSites = b.logSites
        pulsedLines = b.pulsed
        cells = config.lines.map { _ in LineCell() }
    }

    struct Builder {
        var ops: [Op] = []
        var conditions: [Condition] = []
        var runSites: [RunSite] = []
        var logSites: [LogSite] = []
        var pulsed: Set<Int> = []

        mutating func compile(_ actions: [Action]) -> OpRange {
            let start = Int32(ops.count)
            emit(actions)
            return OpRange(start: start, end: Int32(ops.count))
        }

        mutating func emit(_ actions: [Action]) {
            for a in actions {
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
