import Boardloop
import Logging

/// What the log writer needs of one program to make lines of its records,
/// made once when the program is registered: each reaction's trace level,
/// and the rate limit's source of every reaction, line, sequence and task,
/// so that deciding whether a record is written (its level, its source's
/// rate limit) describes nothing and allocates nothing.
final class TraceNames {
    let program: Program
    let levels: [Logger.Level]
    let reactionSources: [String]
    let lineSources: [String]
    let sequenceSources: [String]
    let taskSources: [String]

    init(_ p: Program) {
        program = p
        levels = p.traceLevels()
        let c = p.config
        reactionSources = c.reactions.map { "reaction \($0.name)" }
        lineSources = c.lines.map { "line \($0.name)" }
        sequenceSources = c.sequences.map { "sequence \($0.name)" }
        taskSources = c.tasks.map { "task \($0.name)" }
    }

    func lineSource(_ line: Int32) -> String { line >= 0 ? lineSources[Int(line)] : "line " }
}

extension TraceLog {
    /// The level a record is logged at and its source (nil: the daemon's
    /// own), without describing it; nil for a record that is not logged
    /// (a recording's) or whose codes are not known.
    static func levelAndSource(_ r: TraceRecord, _ n: TraceNames) -> (Logger.Level, String?)? {
        switch r.kind {
        case .reaction:
            let i = Int(r.index)
            return (i < n.levels.count ? n.levels[i] : .info, n.reactionSources[i])
        case .skipped, .edge, .output: return (.debug, n.lineSource(r.line))
        case .gesture:
            guard GestureKind(code: r.index) != nil else { return nil }
            return (.debug, n.lineSource(r.line))
        case .sequence:
            guard let step = EventSink.SequenceStep(code: r.step, number: Int(r.number), max: Int(r.other)) else { return nil }
            return (step.level, n.sequenceSources[Int(r.index)])
        case .mode:
            guard EventSink.ModeReason(code: r.step, sequence: Int(r.other)) != nil else { return nil }
            return (.info, nil)
        case .heldDelivered: return (.info, nil)
        case .lost, .ringFull, .deadlinesDeferred: return (.warning, nil)
        case .skippedPeriods: return (.notice, n.taskSources[Int(r.index)])
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
