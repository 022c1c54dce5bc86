import Boardloop
import BoardSupport
import BoardloopGPIO

// The resolved config: what loading a config file yields once every name is
// resolved and every rule checked. Plain value types, no Foundation: the
// runtime's event path reads it as it is. References between parts are
// typed indices into the config's arrays (`LineID` indexes `lines`, ...).

/// A loaded, checked config.
public struct DaemonConfig: Sendable, Equatable {
    /// The config file as the user named it.
    public var file: String
    public var board: BoardChoice
    /// Priority names, lowest first; `PriorityID` indexes this.
    public var priorities: [String]
    public var lines: [LineConfig]
    /// Modes; index 0 is the loop's default mode, which admits every priority.
    public var modes: [ModeConfig]
    public var tasks: [TaskConfig]
    public var reactions: [ReactionConfig]
    public var sequences: [SequenceConfig]
    public var commands: [CommandConfig]
    /// The run loops: index 0 is the main loop, then one per worker, in
    /// the config's order.
    public var loops: [LoopPlan]
    /// Warnings found while loading (a config with warnings still loads).
    public var warnings: [Diagnostic]
    /// The control socket (`control:`).
    public var control = ControlConfig()
    /// How the log is written (`log:`).
    public var log = LogConfig()
    /// The MQTT client (`mqtt:`; nil: none).
    public var mqtt: MQTTConfig?

    public func line(named name: String) -> LineID? { lines.firstIndex { $0.name == name }.map(LineID.init) }
    public func mode(named name: String) -> ModeID? { modes.firstIndex { $0.name == name }.map(ModeID.init) }
    public func sequence(named name: String) -> SequenceID? {
        sequences.firstIndex { $0.name == name }.map(SequenceID.init)
    }
    public subscript(id: LineID) -> LineConfig { lines[id.index] }
    public subscript(id: ModeID) -> ModeConfig { modes[id.index] }
    public subscript(id: SequenceID) -> SequenceConfig { sequences[id.index] }
    public subscript(id: CommandID) -> CommandConfig { commands[id.index] }
    public subscript(id: LoopID) -> LoopPlan { loops[id.index] }
}

public struct LineID: Hashable, Comparable, Sendable { public let index: Int
    public init(_ index: Int) { self.index = index }
    public static func < (a: Self, b: Self) -> Bool { a.index < b.index }
}
public struct ModeID: Hashable, Comparable, Sendable { public let index: Int
    public init(_ index: Int) { self.index = index }
    public static func < (a: Self, b: Self) -> Bool { a.index < b.index }
    /// The default mode.
    public static let `default` = ModeID(0)
}
public struct PriorityID: Hashable, Comparable, Sendable { public let index: Int
    public init(_ index: Int) { self.index = index }
    public static func < (a: Self, b: Self) -> Bool { a.index < b.index }
}
public struct SequenceID: Hashable, Comparable, Sendable { public let index: Int
    public init(_ index: Int) { self.index = index }
    public static func < (a: Self, b: Self) -> Bool { a.index < b.index }
}
public struct CommandID: Hashable, Comparable, Sendable { public let index: Int
    public init(_ index: Int) { self.index = index }
    public static func < (a: Self, b: Self) -> Bool { a.index < b.index }
}
public struct LoopID: Hashable, Comparable, Sendable { public let index: Int
    public init(_ index: Int) { self.index = index }
    public static func < (a: Self, b: Self) -> Bool { a.index < b.index }
    /// The main loop.
    public static let main = LoopID(0)
}

/// The board a config runs on.
public struct BoardChoice: Sendable, Equatable {
    public var name: String
    public var title: String
    /// Where the board file came from.
    public var file: String
    public var backend: Board.Backend
    /// The board's chips (the runtime makes mock chips from these for `mock`).
    public var chips: [Board.Chip]
    /// True when `board: auto` found it on this machine.
    public var detected: Bool
    /// The board's pins (mock chips name their lines after them).
    public var pins: [Board.Pin] = []
    /// `--mock`: mock chips serve the board whatever its backend (`MockBoard`).
    public var mock = false
}

public struct ModeConfig: Sendable, Equatable {
    public var name: String
    /// Priorities whose lines' sources are in this mode (the default mode
    /// admits all of them).
    public var admits: [PriorityID]
}

public struct TaskConfig: Sendable, Equatable {
    public var name: String
    public var every: Duration
    /// The modes the task's timer is in.
    public var modes: [ModeID]
    public var actions: [Action]
    public var loop: LoopID
}

public struct ReactionConfig: Sendable, Equatable {
    /// `reactions[N]` or the reaction's `name`.
    public var name: String
    public var line: LineID
    public var trigger: Trigger
    /// Checked when the trigger fires; the actions run only when it holds.
    public var condition: Condition?
    public var actions: [Action]
    /// The loop of the trigger line.
    public var loop: LoopID
}

public indirect enum Condition: Sendable, Equatable {
    /// The line's logical value is `value`.
    case line(LineID, Bool)
    /// The loop's current mode is this one.
    case mode(ModeID)
    case not(Condition)
    case all([Condition])
    case any([Condition])
}

public indirect enum Action: Sendable, Equatable {
    case set(LineID, Bool)
    case toggle(LineID)
    /// Set on, then off after the duration.
    case pulse(LineID, Duration)
    /// Sequences only.
    case wait(Duration)
    case run(command: CommandID, argv: [String])
    case log(LogLevel, String)
    /// Switch the loop that runs the action to this mode.
    case mode(ModeID)
    case startSequence(SequenceID)
    case stopSequence(SequenceID)
    case ifThen(Condition, then: [Action], else: [Action])
}

public enum LogLevel: String, Sendable, Equatable, CaseIterable {
    case debug, info, notice, warning, error
}

public struct SequenceConfig: Sendable, Equatable {
    public var name: String
    /// The mode the loop runs in while the sequence runs (nil: the mode it is in).
    public var mode: ModeID?
    public var policy: SequencePolicy
    public var steps: [Action]
    public var loop: LoopID
    /// What a stopped run does (`on_stop:`): a stop action, a front end's
    /// stop, a reload that stops it, or a `restart` start. Nil: a stop
    /// sets the outputs its steps write that have a `safe:` value to it.
    public var onStop: [Action]? = nil
}

/// What happens when a sequence is started while it runs (ESPHome's script modes).
public enum SequencePolicy: Sendable, Equatable, CustomStringConvertible {
    /// The new start is ignored (and counted).
    case single
    /// The running one stops; the sequence starts again.
    case restart
    /// Starts wait, at most `max` of them; more are refused (and counted).
    case queued(max: Int)
    /// Up to `max` run at once; more are refused (and counted).
    case parallel(max: Int)

    public var description: String {
        switch self {
        case .single: "single"
        case .restart: "restart"
        case let .queued(m): "queued(max \(m))"
        case let .parallel(m): "parallel(max \(m))"
        }
    }

    /// How many runs can be in progress at once.
    public var concurrentRuns: Int {
        if case let .parallel(m) = self { return m }
        return 1
    }
}

public struct CommandConfig: Sendable, Equatable {
    public var name: String
    /// The program and arguments, when the command names them (`run: NAME`).
    public var argv: [String]?
    /// Run `argv[0]` through `/bin/sh -c`.
    public var shell: Bool
    /// After this the child's process group gets SIGTERM, then SIGKILL
    /// after `killAfter` (which also bounds each child's stop at shutdown).
    public var timeout: Duration
    public var killAfter: Duration
    /// Runs at once; more are refused (and counted).
    public var maxRunning: Int
    /// False for a command made for an inline `run: [argv]` with no entry.
    public var declared: Bool
}

/// One run loop: the main loop or a worker, with what it owns.
public struct LoopPlan: Sendable, Equatable {
    /// `main`, or the worker's name.
    public var name: String
    public var lines: [LineID]
    /// CPUs to pin the worker to (empty: any).
    public var cpus: [Int]
    /// SCHED_FIFO priority 1...99 (nil: the normal scheduler).
    public var realtimePriority: Int?
    public var timerSlack: Duration?
    public var lockMemory: Bool
    /// Whether the worker may run without the real-time settings it is
    /// refused (`cpu`, `priority`, `mlockall`).
    public var realtime: RealtimePolicy = .required
    /// The engine capacities the loop needs, at most, as `boardd --config`
    /// starts it (the sum of its parts' budgets, `LoopBudget`; see
    /// `docs/config.md`, "Capacities"); the start counts them again for its
    /// own backend and options.
    public var capacities: BoardRunLoop.Capacities
}

/// A worker's `realtime:`: whether real-time settings it cannot get stop the
/// daemon (`required`) or are left out with one warning (`optional`).
public enum RealtimePolicy: String, Sendable, Equatable, CaseIterable {
    case required, optional
}
