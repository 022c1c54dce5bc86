import BoardControl
import Boardloop
import BoardSupport
import Logging

/// The commands boardd takes from outside — set, toggle and pulse an
/// output, start and stop a sequence, set a loop's mode, reload — for every
/// front end at once. The control socket (`ControlServer`) and MQTT
/// (`MQTTBridge`) are codecs over it: each turns its wire format into these
/// calls and a `RemoteError` into its own reply (an error reply, an error
/// topic). The name lookups with their did-you-mean, what a front end is
/// permitted (`RemotePermissions`), the pulse's duration rule, the log line
/// of every mutation and the one table of pulse ends live here, once.
///
/// Main loop only. Each mutation runs through the program's control ops
/// (`ControlOps`), as a reaction's actions do (same order, same policies; a
/// line or sequence another loop owns is posted to it), with the
/// requester's origin, which a recording keeps (`control`, `mqtt`).
final class RemoteCommands {
    unowned let daemon: Daemon
    var loop: BoardRunLoop { daemon.loop }
    var logger: Logger { daemon.logger }
    var config: DaemonConfig { daemon.config }

    /// Pulse ends, soonest first: when, the output (by name: a reload may
    /// move or remove it) and who asked (the end is theirs too).
    private var pulses: [(at: UInt64, line: String, by: Requester)] = []
    private var pulseTimer: RunLoopTimer?
    /// The daemon is stopping: nothing more is taken.
    private var stopped = false

    /// Pulses in flight at most, from every front end together (a test
    /// makes it small).
    var maxPulses = 1024
    /// The pulse ends' timer.
    static let budget = LoopBudget(timers: 1)
    /// The longest pulse a front end may ask for.
    static let longestPulse = Duration.seconds(86400)

    init(daemon: Daemon) { self.daemon = daemon }

    func start() throws {
        let t = RunLoopTimer.rearmable { [unowned self] _ in self.pulseTick() }
        try loop.add(t, mode: .common)
        pulseTimer = t
    }

    /// At the daemon's stop: pending pulse ends are dropped (the stop sets
    /// every output safe).
    func stop() {
        stopped = true
        pulseTimer?.invalidate()
        pulseTimer = nil
        pulses = []
    }

    /// Pulses whose end is pending.
    var pulsesInFlight: Int { pulses.count }

    // MARK: Names

    func line(_ name: String) throws(RemoteError) -> LineID {
        guard let id = config.line(named: name) else {
            let names = config.lines.map(\.name)
            throw RemoteError(.unknownLine, "no line named \(Echo(name))\(DidYouMean.hint(name, in: names)) (lines: \(Self.list(names)))")
        }
        return id
    }

    /// An output the requester may drive.
    func output(_ name: String, _ p: RemotePermissions) throws(RemoteError) -> LineID {
        let id = try line(name)
        guard config[id].isOutput else {
            throw RemoteError(.notOutput, "line '\(config[id].name)' is an input; set, toggle and pulse drive outputs")
        }
        if let allowed = p.outputs, !allowed.contains(id) {
            throw RemoteError(
                .notPermitted,
                "output '\(name)' may not be commanded \(p.over) (\(p.key).outputs: \(Self.list(allowed.map { config[$0].name })))")
        }
        return id
    }

    func sequence(_ name: String, _ p: RemotePermissions) throws(RemoteError) -> SequenceID {
        guard let s = config.sequence(named: name) else {
            let names = config.sequences.map(\.name)
            throw RemoteError(
                .unknownSequence, "no sequence named \(Echo(name))\(DidYouMean.hint(name, in: names)) (sequences: \(Self.list(names)))")
        }
        if let allowed = p.sequences, !allowed.contains(s) {
            throw RemoteError(
                .notPermitted,
                "sequence '\(name)' may not be run \(p.over) (\(p.key).sequences: \(Self.list(allowed.map { config.sequences[$0.index].name })))")
        }
        return s
    }

    func loopIndex(_ name: String) throws(RemoteError) -> Int {
        guard let i = config.loops.firstIndex(where: { $0.name == name }) else {
            let names = config.loops.map(\.name)
            throw RemoteError(.unknownLoop, "no loop named \(Echo(name))\(DidYouMean.hint(name, in: names)) (loops: \(Self.list(names)))")
        }
        return i
    }

    func mode(_ name: String, _ p: RemotePermissions) throws(RemoteError) -> ModeID {
        guard let m = config.mode(named: name) else {
            let names = config.modes.map(\.name)
            throw RemoteError(.unknownMode, "no mode named \(Echo(name))\(DidYouMean.hint(name, in: names)) (modes: \(Self.list(names)))")
        }
        if let allowed = p.modes, !allowed.contains(m) {
            throw RemoteError(
                .notPermitted, "mode '\(name)' may not be set \(p.over) (\(p.key).modes: \(Self.list(allowed.map { config.modes[$0.index].name })))")
        }
        return m
    }

    /// A pulse's duration in the config's grammar ("500ms", "2s"): more
    /// than zero and at most 24 h.
    static func pulseDuration(_ text: String) throws(RemoteError) -> Duration {
        switch DurationText.parse(text) {
        case let .success(d):
            guard d > .zero, d <= longestPulse else { throw RemoteError(.badArgument, "the duration must be more than zero and at most 24h") }
            return d
        case let .failure(p): throw RemoteError(.badArgument, p.message(text, suggest: "ms"))
        }
    }

    static func list(_ names: [String]) -> String { names.isEmpty ? "none" : names.joined(separator: ", ") }

    // MARK: Outputs

    /// An output's value now (its cell).
    func value(_ id: LineID) -> Bool { daemon.main.program.cells[id.index].value.load(ordering: .relaxed) }

    /// Sets the output. A command to an output replaces a pulse's pending
    /// end on it (an on after a pulse stays on).
    func set(_ id: LineID, _ on: Bool, by r: Requester) throws(RemoteError) {
        try taking()
        endPendingPulse(config[id].name)
        perform(daemon.main.program.control.set(line: id.index, on), "set \(config[id].name) \(on ? "on" : "off")", by: r)
    }

    /// Toggles the output; returns its new value.
    @discardableResult
    func toggle(_ id: LineID, by r: Requester) throws(RemoteError) -> Bool {
        try taking()
        let to = !value(id)
        endPendingPulse(config[id].name)
        perform(daemon.main.program.control.toggle(line: id.index), "toggle \(config[id].name) (to \(to ? "on" : "off"))", by: r)
        return to
    }

    /// Sets the output on now and off after `d` (a second pulse on the
    /// line ends at its own time). Refused `busy` past `maxPulses`.
    func pulse(_ id: LineID, for d: Duration, by r: Requester) throws(RemoteError) {
        try taking()
        let name = config[id].name
        // Refused before anything changes: the line's own pending end (which
        // this pulse would replace) stays if this one cannot be taken.
        let replaced = pulses.contains { $0.line == name } ? 1 : 0
        guard pulses.count - replaced < maxPulses else {
            throw RemoteError(.busy, "\(pulses.count) pulses are in flight (at most \(maxPulses)); try again when they end")
        }
        endPendingPulse(name)
        perform(daemon.main.program.control.set(line: id.index, true), "pulse \(name) for \(DurationText.format(d))", by: r)
        let at = loop.now.nanoseconds &+ UInt64(d.nanosecondsClamped)
        let i = pulses.firstIndex { $0.at > at } ?? pulses.endIndex
        pulses.insert((at, name, r), at: i)
        pulseTimer?.arm(at: MonotonicInstant(nanoseconds: pulses[0].at))
    }

    private func endPendingPulse(_ name: String) {
        guard pulses.contains(where: { $0.line == name }) else { return }
        pulses.removeAll { $0.line == name }
        armPulses()
    }

    private func armPulses() {
        if let p = pulses.first { pulseTimer?.arm(at: MonotonicInstant(nanoseconds: p.at)) } else { pulseTimer?.disarm() }
    }

    private func pulseTick() {
        let now = loop.now.nanoseconds
        let ops = daemon.main.program.control
        while let p = pulses.first, p.at <= now {
            pulses.removeFirst()
            // An output the config no longer has, or no longer as an output, is left alone.
            if let id = config.line(named: p.line), config[id].isOutput {
                perform(ops.set(line: id.index, false), "pulse of \(p.line) ends", by: p.by)
            }
        }
        armPulses()
    }

    // MARK: Sequences, modes, reload

    func start(_ s: SequenceID, by r: Requester) throws(RemoteError) {
        try taking()
        perform(daemon.main.program.control.start(sequence: s.index), "sequence start \(config.sequences[s.index].name)", by: r)
    }

    func stop(_ s: SequenceID, by r: Requester) throws(RemoteError) {
        try taking()
        perform(daemon.main.program.control.stop(sequence: s.index), "sequence stop \(config.sequences[s.index].name)", by: r)
    }

    /// Sets loop `loop`'s mode (a worker's is posted to it).
    func setMode(loop i: Int, _ m: ModeID, by r: Requester) throws(RemoteError) {
        try taking()
        let program = daemon.main.program
        let pc = program.control.mode(m.index)
        let what = "mode \(config.loops[i].name) \(config.modes[m.index].name)"
        guard i != 0 else { return perform(pc, what, by: r) }
        log(what, by: r)
        do {
            try daemon.ports[i].send(
                id: PortMessage.action.rawValue, value: Post(generation: program.generation, op: pc, ctx: Context(origin: r.origin)),
                timeout: .zero)
        } catch {
            throw RemoteError(.internal, "could not post the mode to loop '\(config.loops[i].name)': \(error)")
        }
    }

    /// Asks for a reload; `done` gets its outcome on the main loop, once
    /// the config read off the loop is applied or refused.
    func reload(by r: Requester, _ done: @escaping (Daemon.ReloadOutcome) -> Void) throws(RemoteError) {
        try taking()
        log("reload", by: r)
        daemon.requestReload(done)
    }

    // MARK: Performing

    private func taking() throws(RemoteError) {
        if stopped { throw RemoteError(.stopping, "boardd is stopping; the command was not run") }
    }

    /// Logged at notice for every mutation, with who asked.
    func log(_ what: String, by r: Requester) { Self.log(what, by: r, logger) }

    static func log(_ what: String, by r: Requester, _ logger: Logger) {
        logger.notice("\(r.origin.name): \(what) (\(r.peer.map { "\($0), " } ?? "")origin \(r.origin.name))")
    }

    private func perform(_ pc: Int32, _ what: String, by r: Requester) {
        log(what, by: r)
        let main = daemon.main
        let was = main.events.writing(Context(origin: r.origin))
        main.perform(pc, Context(origin: r.origin))
        main.events.restore(was)
    }
}

/// Who asks: the front end, and for the control socket the peer's
/// credentials (for the log).
struct Requester: Sendable {
    var origin: Origin
    var peer: String?

    static let mqtt = Requester(origin: .mqtt)
    static func control(_ peer: String) -> Requester { Requester(origin: .control, peer: peer) }
}

/// What a front end may command: nil is everything (the control socket,
/// whose file mode and group decide who connects); MQTT's come from
/// `mqtt.commands`.
struct RemotePermissions: Sendable {
    var outputs: [LineID]?
    var sequences: [SequenceID]?
    var modes: [ModeID]?
    /// The config key that grants them, for a refusal ("mqtt.commands").
    var key = ""
    /// The front end, for a refusal ("over MQTT").
    var over = ""

    static let all = RemotePermissions()
}

/// A command refused: a code each front end maps to its reply (the
/// control protocol sends it as the error's `code`) and a message that
/// says what, where and why.
struct RemoteError: Error, Sendable, Equatable {
    enum Code: String, Sendable, CaseIterable {
        case unknownLine = "unknown-line"
        case unknownSequence = "unknown-sequence"
        case unknownLoop = "unknown-loop"
        case unknownMode = "unknown-mode"
        case notOutput = "not-output"
        case notPermitted = "not-permitted"
        case badArgument = "bad-argument"
        case busy
        case stopping
        case `internal`
    }

    var code: Code
    var message: String

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
}
