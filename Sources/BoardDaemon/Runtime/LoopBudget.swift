import Boardloop
import BoardSupport
import BoardloopGPIO

/// What one part of the daemon puts on its run loop: the items it adds at
/// start (or, for a command's children, can have at once). Each part
/// declares its own below, next to nothing else, counting what its code
/// makes; a loop's capacities are the sum (`LoopBudget.capacities`), which
/// both `boardd --check` (the plan it prints and checks the engine's limits
/// against) and the start (the loops it makes) use.
struct LoopBudget: Sendable, Equatable {
    var sources = 0
    var timers = 0
    var observers = 0
    /// Perform requests the part can have queued at once.
    var performs = 0

    static let zero = LoopBudget()

    static func + (a: Self, b: Self) -> Self {
        LoopBudget(
            sources: a.sources + b.sources, timers: a.timers + b.timers, observers: a.observers + b.observers,
            performs: a.performs + b.performs)
    }

    static func += (a: inout Self, b: Self) { a = a + b }

    static func * (n: Int, b: Self) -> Self {
        LoopBudget(sources: n * b.sources, timers: n * b.timers, observers: n * b.observers, performs: n * b.performs)
    }

    /// What the daemon's options add (`Daemon.Options`).
    struct Extras: Sendable, Equatable {
        /// SIGTERM/SIGINT/SIGHUP through a signal source (`handleSignals`).
        var signals: Bool
        /// The systemd watchdog's timer.
        var watchdog: Bool
        /// Each loop's summary timer (`summaryInterval`).
        var summary: Bool
        /// The demo's scripted person (`boardd --demo`).
        var demo: Bool
        /// The control socket's server, when the config enables it (`Daemon.Options.control`).
        var control = false
        /// The MQTT client, when the config has one (`Daemon.Options.mqtt`).
        var mqtt = false

        init(signals: Bool, watchdog: Bool, summary: Bool, demo: Bool) {
            self.signals = signals
            self.watchdog = watchdog
            self.summary = summary
            self.demo = demo
        }

        init(_ o: Daemon.Options) {
            self.init(
                signals: o.handleSignals, watchdog: o.watchdog != nil, summary: (o.summaryInterval ?? .zero) > .zero, demo: o.demo)
            control = o.control != nil
            mqtt = o.mqtt && !o.inlineWorkers
        }

        /// Whether a front end (the control socket, MQTT) runs for `config`,
        /// and with it the command service (`RemoteCommands`).
        func frontEnds(_ config: DaemonConfig) -> Bool { control && config.control.enabled || mqtt && config.mqtt != nil }

        /// The most `boardd --config FILE` makes: signals, a summary, and a
        /// watchdog when systemd asks for one.
        static let configStart: Extras = {
            var e = Extras(signals: true, watchdog: true, summary: true, demo: false)
            e.control = true
            e.mqtt = true
            return e
        }()
    }

    /// The backend capabilities a plan is made for, before a backend is
    /// opened: the mock chips' (they wake a poller when they go away and
    /// debounce in the loop, `MockGPIO.capabilities`); for kernel chips,
    /// the most any kernel needs (libgpiod 1.6: debounce in the loop and a
    /// vanish check per input request). The start counts with its backend's own.
    static func planningCapabilities(_ backend: Board.Backend) -> GPIOCapabilities {
        backend == .mock ? [.vanishWakesPoller] : []
    }

    /// The rows of docs/config.md's capacities table, by their first
    /// column: every part is counted in one (a test holds the table to
    /// this list, so a part cannot be added without its row).
    enum Row: String, CaseIterable, Sendable {
        case input = "an input line"
        case output = "an output line"
        case task = "a task"
        case sequence = "a sequence"
        case command = "a command (main loop)"
        case runtime = "every loop's runtime"
        case daemon = "the main loop's daemon"
        case worker = "a worker's thread"
        case control = "the control socket (main loop, unless `control: { enabled: false }`)"
        case recording = "a recording (`boardctl record`, main loop)"
        case commands = "the command service (main loop, with the control socket or MQTT)"
        case mqtt = "the MQTT client (main loop, with `mqtt:`)"
    }

    /// One part of a loop and what it costs.
    struct Part: Sendable, Equatable {
        var name: String
        var row: Row
        var budget: LoopBudget
        /// Made when the daemon starts; else made later, up to this many
        /// at once (a command's children, `run(for:)`'s limit).
        var atStart = true
    }

    /// Every part on loop `loop` of `config`, each with what it costs.
    static func parts(_ config: DaemonConfig, loop: LoopID, capabilities: GPIOCapabilities, extras: Extras) -> [Part] {
        var out: [Part] = []
        let pulsed = Program(config: config, generation: 0).pulsedLines
        // Inputs that share a request share its source and vanish check:
        // the first line of each group counts them.
        let inputs = config.lines.indices.filter { config.lines[$0].loop == loop && config.lines[$0].isInput }
        var joins = Set<Int>()
        for g in Daemon.inputGroups(inputs.map { config.lines[$0] }) { for k in g.dropFirst() { joins.insert(inputs[k]) } }
        for (i, l) in config.lines.enumerated() where l.loop == loop {
            let b =
                l.isInput
                ? InputLine.budget(LineID(i), in: config, capabilities: capabilities, sharing: joins.contains(i))
                : OutputLine.budget(pulsed: pulsed.contains(i))
            out.append(Part(name: "line \(l.name)", row: l.isInput ? .input : .output, budget: b))
        }
        // The loop is made with room for every input on a request of its
        // own: a reload that takes a line out of its group (a rate limit, a
        // new priority) needs no larger loop than it did before grouping.
        if !joins.isEmpty {
            let vanish = capabilities.contains(.vanishWakesPoller) ? 0 : joins.count
            out.append(
                Part(
                    name: "room for the inputs that share a request to have their own", row: .input,
                    budget: LoopBudget(sources: joins.count, timers: vanish), atStart: false))
        }
        for t in config.tasks where t.loop == loop { out.append(Part(name: "task \(t.name)", row: .task, budget: TaskRunner.budget(t))) }
        for s in config.sequences where s.loop == loop {
            out.append(Part(name: "sequence \(s.name)", row: .sequence, budget: SequenceRunner.budget(s)))
        }
        out.append(Part(name: "the loop's runtime", row: .runtime, budget: LoopRuntime.budget(summary: extras.summary)))
        if loop == .main {
            for c in config.commands { out.append(Part(name: "command \(c.name)", row: .command, budget: CommandRunner.budget(c), atStart: false)) }
            out.append(Part(name: "the daemon", row: .daemon, budget: Daemon.budget(extras)))
            if extras.frontEnds(config) { out.append(Part(name: "the command service", row: .commands, budget: RemoteCommands.budget)) }
            if extras.control && config.control.enabled {
                out.append(Part(name: "the control socket", row: .control, budget: ControlServer.budget))
                out.append(Part(name: "control clients", row: .control, budget: ControlServer.clientBudget(config.control), atStart: false))
                out.append(Part(name: "a recording", row: .recording, budget: ControlServer.recordingBudget, atStart: false))
            }
            if extras.mqtt && config.mqtt != nil {
                out.append(Part(name: "the MQTT client", row: .mqtt, budget: MQTTBridge.budget))
                out.append(Part(name: "the MQTT connection", row: .mqtt, budget: MQTTClient.socketBudget, atStart: false))
            }
            out.append(Part(name: "run(for:)'s limit", row: .daemon, budget: Daemon.runLimitBudget, atStart: false))
        } else {
            out.append(Part(name: "the worker's thread", row: .worker, budget: Daemon.workerBudget))
        }
        return out
    }

    /// The sum of `parts`.
    static func total(_ config: DaemonConfig, loop: LoopID, capabilities: GPIOCapabilities, extras: Extras) -> LoopBudget {
        parts(config, loop: loop, capabilities: capabilities, extras: extras).reduce(.zero) { $0 + $1.budget }
    }

    /// The sum of the parts made at start: what a loop holds once the
    /// daemon has started, before any command runs.
    static func atStart(_ config: DaemonConfig, loop: LoopID, capabilities: GPIOCapabilities, extras: Extras) -> LoopBudget {
        parts(config, loop: loop, capabilities: capabilities, extras: extras).filter(\.atStart).reduce(.zero) { $0 + $1.budget }
    }

    /// The capacities loop `loop` is made with: the sum of its parts, and
    /// for what is not counted item by item:
    ///
    /// - observers: the parts' and one more, the observer a trace adds
    ///   while it runs (`LoopRuntime.startTracing`);
    /// - modes: the default mode and every mode of the config (each loop
    ///   makes them all, `LoopRuntime.setUpModes`);
    /// - events per wait: the sources (each is one fd, which one wait
    ///   reports once at most; more ready fds would wait for the next wait);
    /// - nesting depth: `nestingDepth`.
    static func capacities(
        _ config: DaemonConfig, loop: LoopID, capabilities: GPIOCapabilities, extras: Extras
    ) -> BoardRunLoop.Capacities {
        capacities(total(config, loop: loop, capabilities: capabilities, extras: extras), modes: config.modes.count)
    }

    static func capacities(_ b: LoopBudget, modes: Int) -> BoardRunLoop.Capacities {
        let sources = max(b.sources, 1)
        return BoardRunLoop.Capacities(
            sources: sources, timers: max(b.timers, 1), observers: b.observers + 1, modes: modes,
            pendingPerforms: max(b.performs, 1), eventsPerWait: min(sources, BoardRunLoop.Capacities.maxima.eventsPerWait),
            nestingDepth: nestingDepth)
    }

    /// Run calls nested at once: the top-level run and a nested run in a
    /// sequence's (or a `mode:` action's) mode, one at a time
    /// (`LoopRuntime.drive`): 2, and headroom.
    static let nestingDepth = 4
}

// MARK: What each part declares

extension InputLine {
    /// An input line: its request's port source; the line's timer when it
    /// has filters, a gesture group or a hold reaction (`needsTimer`); with
    /// `drain_every`, when a mode holds it, the drain timer and its work
    /// item; and the GPIO layer's per-request timers
    /// (`GPIOLineRequest.schedule`): a debounce timer where the backend
    /// does not debounce in the kernel, and a vanish check where a chip
    /// going away does not wake the poller. A line that joins a request
    /// another line of its group counted (`sharing`) adds no source and no
    /// vanish check.
    static func budget(_ id: LineID, in config: DaemonConfig, capabilities: GPIOCapabilities, sharing: Bool = false) -> LoopBudget {
        let l = config[id]
        var b = LoopBudget(sources: sharing ? 0 : 1)
        let holds = config.reactions.contains { $0.line == id && $0.trigger.hasDeadlines }
        if !l.filters.isEmpty || l.gestures != nil || holds { b.timers += 1 }
        let held = config.modes.dropFirst().contains { !$0.admits.contains(l.priority) }
        if l.held.drainsOnTimer && held {
            b.timers += 1
            b.performs += 1
        }
        if l.settings.edgeDetection != .none && l.settings.debounce > .zero && !capabilities.contains(.kernelDebounce) {
            b.timers += 1
        }
        if !capabilities.contains(.vanishWakesPoller) && !sharing { b.timers += 1 }
        return b
    }
}

extension OutputLine {
    /// An output line: a pulse timer when some `pulse` action targets it.
    static func budget(pulsed: Bool) -> LoopBudget { LoopBudget(timers: pulsed ? 1 : 0) }
}

extension TaskRunner {
    /// A task: its timer.
    static func budget(_ task: TaskConfig) -> LoopBudget { LoopBudget(timers: 1) }
}

extension SequenceRunner {
    /// A sequence: a timer per run it can have at once (`max` for
    /// `parallel`, else 1).
    static func budget(_ sequence: SequenceConfig) -> LoopBudget { LoopBudget(timers: sequence.policy.concurrentRuns) }
}

extension CommandRunner {
    /// A command, on the main loop: per child it can have running
    /// (`max_running`), 3 port sources (stdout, stderr, pidfd) and its
    /// timeout timer.
    static func budget(_ command: CommandConfig) -> LoopBudget {
        command.maxRunning * LoopBudget(sources: 3, timers: 1)
    }
}

extension LoopRuntime {
    /// Perform requests a loop's runtime and the daemon's control can have
    /// queued at once, with headroom: the nested-run drive item (posted
    /// again by mode switches before it runs), the start's ready request,
    /// the stop's request and a reload's swap (one at a time).
    static let controlPerforms = 32

    /// Every loop's own: its message port, the held-event replay timer,
    /// the summary timer (when the daemon logs summaries), and room for the
    /// control requests.
    static func budget(summary: Bool) -> LoopBudget {
        LoopBudget(sources: 1, timers: 1 + (summary ? 1 : 0), performs: controlPerforms)
    }
}

extension ControlServer {
    /// The control socket, on the main loop: its listening socket, the
    /// idle timer and the timer of the mock-chip drives and a trace's end
    /// it schedules.
    static let budget = LoopBudget(sources: 1, timers: 2)

    /// A recording's drain timer (`record`, one at a time), made when it starts.
    static let recordingBudget = LoopBudget(timers: 1)

    /// Its clients, made as they connect: a source per client it may have
    /// at once (`max_clients`).
    static func clientBudget(_ c: ControlConfig) -> LoopBudget { LoopBudget(sources: c.maxClients + ControlConfig.keptClients) }
}

extension Demo.Script {
    /// The demo's script and flood timers, on the main loop.
    static let budget = LoopBudget(timers: 2)
}

extension Daemon {
    /// `run(for:)`'s time limit: made when `run` is called with one, so
    /// always counted on the main loop.
    static let runLimitBudget = LoopBudget(timers: 1)

    /// The main loop's daemon items: the signal source, the systemd
    /// watchdog's timer and the demo's timers; with signals or the control
    /// socket (what asks for a reload), the hand-over of a reload read off
    /// the main loop (`ReloadRead`, one at a time).
    static func budget(_ e: LoopBudget.Extras) -> LoopBudget {
        var b = LoopBudget.zero
        if e.signals { b.sources += 1 }
        if e.signals || e.control { b.performs += 1 }
        if e.watchdog { b.timers += 1 }
        if e.demo { b += Demo.Script.budget }
        return b
    }

    /// A worker's thread: its exit source.
    static let workerBudget = LoopBudget(sources: LoopThread.ownSources)

    /// The capacities loop `i` is made with for `config` by this daemon
    /// (its backend and options).
    func capacities(for config: DaemonConfig, loop i: Int) -> BoardRunLoop.Capacities {
        Self.capacities(config, loop: i, gpio: gpio, options: options)
    }

    static func capacities(_ config: DaemonConfig, loop i: Int, gpio: any GPIOBackend, options: Options) -> BoardRunLoop.Capacities {
        LoopBudget.capacities(config, loop: LoopID(i), capabilities: gpio.capabilities, extras: LoopBudget.Extras(options))
    }
}
