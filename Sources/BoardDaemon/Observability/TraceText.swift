import Boardloop
import Logging

/// What the log writer needs of one program to make lines of its records,
/// made once when the program is registered: each reaction's trace level,
/// and the rate limit's source of every reaction, line, sequence and task
/// with its window (asked of the writer the first time one is needed), so
/// that deciding whether a record is written (its level, its source's rate
/// limit) describes nothing, hashes nothing and allocates nothing. Used
/// with the trace log's lock held.
final class TraceNames {
    let program: Program
    let levels: [Logger.Level]
    let reactionSources: [String]
    let lineSources: [String]
    let sequenceSources: [String]
    let taskSources: [String]
    // (No exclusivity checks: read for every record, with the trace
    // log's lock held, which orders them.)
    @exclusivity(unchecked) private var reactionWindows: [LogWriter.SourceWindow?]
    @exclusivity(unchecked) private var lineWindows: [LogWriter.SourceWindow?]
    @exclusivity(unchecked) private var sequenceWindows: [LogWriter.SourceWindow?]
    @exclusivity(unchecked) private var taskWindows: [LogWriter.SourceWindow?]
    @exclusivity(unchecked) private var daemonWindow: LogWriter.SourceWindow?

    /// A record's rate-limit source, by index.
    enum Source {
        case reaction(Int), line(Int32), sequence(Int), task(Int)
        /// The daemon's own (a mode change, a loss).
        case daemon
    }

    init(_ p: Program) {
        program = p
        levels = p.traceLevels()
        let c = p.config
        reactionSources = c.reactions.map { "reaction \($0.name)" }
        lineSources = c.lines.map { "line \($0.name)" }
        sequenceSources = c.sequences.map { "sequence \($0.name)" }
        taskSources = c.tasks.map { "task \($0.name)" }
        reactionWindows = Array(repeating: nil, count: reactionSources.count)
        lineWindows = Array(repeating: nil, count: lineSources.count)
        sequenceWindows = Array(repeating: nil, count: sequenceSources.count)
        taskWindows = Array(repeating: nil, count: taskSources.count)
    }

    func lineSource(_ line: Int32) -> String { line >= 0 ? lineSources[Int(line)] : "line " }

    /// The source's name (nil: the daemon's own).
    func name(_ s: Source) -> String? {
        switch s {
        case .reaction(let i): return reactionSources[i]
        case .line(let l): return lineSource(l)
        case .sequence(let i): return sequenceSources[i]
        case .task(let i): return taskSources[i]
        case .daemon: return nil
        }
    }

    /// The source's rate-limit window in `writer`.
    func window(_ s: Source, _ writer: LogWriter) -> LogWriter.SourceWindow {
        switch s {
        case .reaction(let i): return Self.cached(&reactionWindows, i, reactionSources, writer)
        case .line(let l) where l >= 0: return Self.cached(&lineWindows, Int(l), lineSources, writer)
        case .sequence(let i): return Self.cached(&sequenceWindows, i, sequenceSources, writer)
        case .task(let i): return Self.cached(&taskWindows, i, taskSources, writer)
        case .line: return writer.window("line ")
        case .daemon:
            if let w = daemonWindow { return w }
            let w = writer.window(LogWriter.daemonSource)
            daemonWindow = w
            return w
        }
    }

    @inline(__always) private static func cached(
        _ windows: inout [LogWriter.SourceWindow?], _ i: Int, _ names: [String], _ writer: LogWriter
    ) -> LogWriter.SourceWindow {
        if let w = windows[i] { return w }
        let w = writer.window(names[i])
        windows[i] = w
        return w
    }
}

extension TraceLog {
    /// The level a record is logged at and its source (nil: the daemon's
    /// own), without describing it; nil for a record that is not logged
    /// (a recording's) or whose codes are not known.
    static func levelAndSource(_ r: TraceRecord, _ n: TraceNames) -> (Logger.Level, String?)? {
        guard let (level, source) = admission(r, n) else { return nil }
        return (level, n.name(source))
    }

    /// `levelAndSource`, the source by index: what the writer asks for
    /// every record before it describes one.
    @inline(__always) static func admission(_ r: TraceRecord, _ n: TraceNames) -> (Logger.Level, TraceNames.Source)? {
        switch r.kind {
        case .reaction:
            let i = Int(r.index)
            return (i < n.levels.count ? n.levels[i] : .info, .reaction(i))
        case .skipped, .edge, .output: return (.debug, .line(r.line))
        case .gesture:
            guard GestureKind(code: r.index) != nil else { return nil }
            return (.debug, .line(r.line))
        case .sequence:
            guard let step = EventSink.SequenceStep(code: r.step, number: Int(r.number), max: Int(r.other)) else { return nil }
            return (step.level, .sequence(Int(r.index)))
        case .mode:
            guard EventSink.ModeReason(code: r.step, sequence: Int(r.other)) != nil else { return nil }
            return (.info, .daemon)
        case .heldDelivered: return (.info, .daemon)
        case .lost, .ringFull, .deadlinesDeferred: return (.warning, .daemon)
        case .skippedPeriods: return (.notice, .task(Int(r.index)))
        case .rawEdge, .command: return nil
        }
    }

    /// A record in words: what the log writes and `events` and traces show.
    struct Described {
        var level: Logger.Level
        var text: String
        /// The log line's source (nil: the daemon's own).
        var source: String?
        var kind: String
        var fields: [(String, TraceEvent.Value)]
    }

    /// `r` (of `config`'s program, made on loop `loop`) in words; nil for
    /// a record whose codes are not known.
    static func describe(_ r: TraceRecord, loop: Int, names: TraceNames) -> Described? {
        guard let (level, source) = levelAndSource(r, names) else { return nil }
        let config = names.program.config
        let line = r.line >= 0 ? config.lines[Int(r.line)].name : ""
        let text: String
        let kind: String
        var fields: [(String, TraceEvent.Value)] = []
        switch r.kind {
        case .reaction:
            let reaction = config.reactions[Int(r.index)]
            text = "\(line): \(reaction.trigger.traceName)\(r.repeatCount > 0 ? " (repeat \(r.repeatCount))" : "") -> \(reaction.name)\(held(r.nanoseconds))"
            kind = "reaction"
            fields = [("reaction", .string(reaction.name)), ("took_ns", .int(Int64(clamping: r.nanoseconds)))]
            if r.repeatCount > 0 { fields.append(("repeat", .int(Int64(r.repeatCount)))) }
        case .skipped:
            let name = config.reactions[Int(r.index)].name
            text = "\(line): \(name) skipped (its condition does not hold)"
            kind = "skipped"
            fields = [("reaction", .string(name))]
        case .edge:
            text = "\(line): \(r.flag ? "on" : "off")\(held(r.nanoseconds))"
            kind = "edge"
            fields = [("value", .bool(r.flag)), ("late_ns", .int(Int64(clamping: r.nanoseconds)))]
        case .output:
            text = "\(line) = \(r.flag ? "on" : "off")"
            kind = "output"
            fields = [("value", .bool(r.flag))]
        case .gesture:
            guard let g = GestureKind(code: r.index) else { return nil }
            text = "\(line): gesture \(g.traceName)"
            kind = "gesture"
            fields = [("gesture", .string(g.traceName))]
        case .sequence:
            let name = config.sequences[Int(r.index)].name
            guard let step = EventSink.SequenceStep(code: r.step, number: Int(r.number), max: Int(r.other)) else { return nil }
            text = "sequence \(name): \(step.text)"
            kind = "sequence"
            fields = [("sequence", .string(name)), ("step", .string(step.name))]
        case .mode:
            guard let why = EventSink.ModeReason(code: r.step, sequence: Int(r.other)) else { return nil }
            let new = Int(r.index)
            let held = config.lines.filter { l in
                l.isInput && l.loop.index == loop && !(new == 0 || config.modes[new].admits.contains(l.priority))
            }.map(\.name)
            text =
                "mode \(config.modes[Int(r.number)].name) -> \(config.modes[new].name) (\(why.text(config)))\(held.isEmpty ? "" : "; holding \(held.joined(separator: ", "))")"
            kind = "mode"
            fields = [("mode", .string(config.modes[new].name)), ("from", .string(config.modes[Int(r.number)].name))]
        case .heldDelivered:
            text = "\(line): delivering \(r.number) held events, in order"
            kind = "held"
            fields = [("count", .int(Int64(r.number)))]
        case .lost:
            text = "\(line): \(EventSink.LossKind(rawValue: r.step)?.text(r.nanoseconds) ?? "\(r.nanoseconds) event(s) lost")"
            kind = "lost"
            fields = [("count", .int(Int64(clamping: r.nanoseconds)))]
        case .ringFull:
            text = "\(line): held-event ring full (\(r.number) events); \(r.nanoseconds) lost so far"
            kind = "ring-full"
        case .deadlinesDeferred:
            text = "\(line): \(r.number) deadlines were due at once; the rest fire in the next pass"
            kind = "deadlines-deferred"
        case .skippedPeriods:
            let name = config.tasks[Int(r.index)].name
            text = "task \(name): \(r.nanoseconds) period(s) skipped (it ran late)"
            kind = "skipped-periods"
            fields = [("task", .string(name)), ("count", .int(Int64(clamping: r.nanoseconds)))]
        case .rawEdge, .command: return nil
        }
        return Described(level: level, text: text, source: source, kind: kind, fields: fields)
    }

    private static func held(_ ns: UInt64) -> String {
        ns > 50_000_000 ? " (held \(Duration.nanoseconds(Int64(clamping: ns)).short))" : ""
    }
}

extension Program {
    /// The level each reaction's firing is traced at: debug for a reaction
    /// that only logs at debug (a chattering contact), else info.
    func traceLevels() -> [Logger.Level] {
        reactions.map { r in
            for pc in r.start..<r.end {
                if case let .log(site) = ops[Int(pc)], logSites[Int(site)].level == .debug { continue }
                return .info
            }
            return .debug
        }
    }
}
