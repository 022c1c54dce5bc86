import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import BoardSupport
import Foundation
import Logging
import XCTest

@testable import BoardDaemon

/// Each loop's capacities are the sum of what its parts declare
/// (`LoopBudget`), and a started daemon's loops hold exactly that.
final class LoopBudgetTests: XCTestCase {
    /// The example configs and the good fixtures, started on mock chips
    /// with the daemon's options that add items on and off: every loop
    /// holds the sources, timers, observers and modes its plan counts.
    func testEveryConfigStartsWithTheUsageItsPlanCounts() throws {
        let paths = try Fixtures.configPaths()
        XCTAssertGreaterThanOrEqual(paths.count, 6)
        for path in paths {
            let result = ConfigLoader.load(path: path, options: Fixtures.options())
            let config = try XCTUnwrap(result.config, "\(path): \(result.errors.map(\.description))")
            for (watchdog, summary) in [(false, false), (true, true)] {
                let clock = ManualClock()
                var started = config
                started.board.backend = .mock
                let mock = try MockGPIO(
                    config.board.chips.enumerated().map { i, c in
                        try MockChip(
                            name: "gpiochip\(i)", label: c.label, lineCount: c.lines ?? 32, lineNames: c.names, clock: .manual(clock))
                    })
                var logger = Logger(label: "test")
                logger.logLevel = .critical
                let options = Daemon.Options(
                    logger: logger, clock: .manual(clock), modeDriver: .external, summaryInterval: summary ? .seconds(60) : nil,
                    watchdog: watchdog ? .seconds(10) : nil, mock: mock)
                let d = try Daemon(config: started, options: options)
                defer { _ = d.shutdown() }
                try d.settle()
                try d.checkLoopBudgets("\((path as NSString).lastPathComponent) (watchdog \(watchdog), summary \(summary))")
            }
        }
    }

    /// `boardd --demo`: the demo's script adds its two timers to the main
    /// loop, and the plan counts them.
    func testTheDemosTimersAreCounted() throws {
        let config = try XCTUnwrap(ConfigLoader.load(text: Demo.configText, file: "<demo>", options: Fixtures.options()).config)
        let clock = ManualClock()
        let mock = try Demo.makeChips(clock: .manual(clock))
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        var options = Daemon.Options(logger: logger, clock: .manual(clock), modeDriver: .external, summaryInterval: .seconds(4), mock: mock)
        options.demo = true
        let d = try Daemon(config: config, options: options)
        defer { _ = d.shutdown() }
        let script = Demo.Script(try Demo.ScriptFile.builtIn(), gpio: mock, loop: d.loop, logger: logger)
        try script.start()
        defer { script.stop() }
        try d.checkLoopBudgets("the demo")
        XCTAssertEqual(d.loop.usage.timers, LoopBudget.atStart(config, loop: .main, capabilities: mock.capabilities, extras: .init(options)).timers)
        options.demo = false
        XCTAssertEqual(
            LoopBudget.atStart(config, loop: .main, capabilities: mock.capabilities, extras: .init(options)).timers + 2, d.loop.usage.timers)
    }

    /// A command at its `max_running` holds what its budget says it can:
    /// the main loop's usage is the start's plus the command's share.
    func testACommandAtItsLimitHoldsItsShare() throws {
        let h = try Harness(
            """
            board: demo
            lines:
              button: { pin: BUTTON, input: { edge: both, active_low: true } }
            commands:
              nap: { argv: ["/bin/sleep", "30"], max_running: 2 }
            reactions:
              - on: { line: button, press: true }
                do: [ run: nap ]
            """)
        let d = h.daemon
        let extras = LoopBudget.Extras(d.options)
        let start = LoopBudget.atStart(d.config, loop: .main, capabilities: d.gpio.capabilities, extras: extras)
        for _ in 0..<3 {
            try h.press()
            try h.advance(10)
            try h.press(false)
            try h.advance(10)
        }
        XCTAssertEqual(h.counters.commandsRunning, 2, "the third run is refused")
        let share = CommandRunner.budget(d.config.commands[0])
        XCTAssertEqual(share, LoopBudget(sources: 6, timers: 2))
        XCTAssertEqual(d.loop.usage.sources, start.sources + share.sources)
        XCTAssertEqual(d.loop.usage.timers, start.timers + share.timers)
        XCTAssertEqual(
            LoopBudget.total(d.config, loop: .main, capabilities: d.gpio.capabilities, extras: extras),
            start + share + Daemon.runLimitBudget)
        _ = d.shutdown()
        XCTAssertEqual(h.counters.commandsRunning, 0)
    }

    /// docs/config.md's table of what each part costs is the code's: each
    /// figure in it is taken from the parts' declarations.
    func testTheDocsTableStatesTheDeclarations() throws {
        let config = try XCTUnwrap(
            ConfigLoader.load(
                text: """
                    board: demo
                    lines:
                      plain: { pin: BUTTON, input: { edge: both } }
                      settled: { pin: ESTOP, input: { edge: both, settle: 5ms } }
                      debounced: { pin: CHATTER, input: { edge: both, debounce: 5ms } }
                      drained: { pin: MOCK0_10, input: { edge: both, drain: 100, drain_every: 10ms }, priority: low }
                      held: { pin: MOCK0_11, input: { edge: both } }
                      out: { pin: LED, output: {} }
                      pulsed: { pin: FAN, output: {} }
                    modes:
                      critical: { admits: [high] }
                    tasks:
                      t: { every: 1s, do: [ pulse: { pulsed: 10ms } ] }
                    sequences:
                      p: { policy: parallel, max: 3, steps: [ toggle: out ] }
                    commands:
                      c: { argv: ["/bin/true"], max_running: 1 }
                    reactions:
                      - on: { line: held, hold: 1s }
                        do: [ toggle: out ]
                    """, file: "t.yaml", options: Fixtures.options()
            ).config)
        let quiet: GPIOCapabilities = [.kernelDebounce, .vanishWakesPoller]
        func input(_ name: String, _ caps: GPIOCapabilities = quiet) -> LoopBudget {
            InputLine.budget(config.line(named: name)!, in: config, capabilities: caps)
        }
        let plain = input("plain")
        XCTAssertEqual(plain, LoopBudget(sources: plain.sources))
        let filter = input("settled").timers, hold = input("held").timers
        XCTAssertEqual(filter, hold, "one line timer, whatever needs it")
        let drained = input("drained")
        let debounce = input("debounced", [.vanishWakesPoller]).timers - input("debounced").timers
        let vanish = input("plain", [.kernelDebounce]).timers
        let output = OutputLine.budget(pulsed: false), pulsed = OutputLine.budget(pulsed: true)
        let task = TaskRunner.budget(config.tasks[0])
        let one = SequenceRunner.budget(SequenceConfig(name: "s", mode: nil, policy: .single, steps: [], loop: .main))
        XCTAssertEqual(SequenceRunner.budget(config.sequences[0]), 3 * one)
        let child = CommandRunner.budget(config.commands[0])
        let runtime = LoopRuntime.budget(summary: false)
        let summary = LoopRuntime.budget(summary: true).timers - runtime.timers
        let signals = Daemon.budget(.init(signals: true, watchdog: false, summary: false, demo: false))
        let watchdog = Daemon.budget(.init(signals: false, watchdog: true, summary: false, demo: false))
        let demo = Daemon.budget(.init(signals: false, watchdog: false, summary: false, demo: true))
        let worker = Daemon.workerBudget
        let rows = [
            "| an input line | \(plain.sources) (its line request; inputs that share a request hold one between them, and the loop is made with room for each to have its own, so a reload that takes a line out of its group fits) | \(filter) with `delayed_on`, `delayed_off`, `settle`, `gestures` or a `hold` reaction; \(drained.timers) with `drain_every` when a mode holds the line; \(debounce) with `debounce` where the kernel does not debounce (libgpiod 1.6, the mock chips); \(vanish) where a chip going away does not wake the poller (libgpiod 1.6: the vanish check, one per request) | \(drained.performs) with the `drain_every` timer (its drain's work item) |",
            "| an output line | \(output.sources) | \(pulsed.timers) when some `pulse` targets it | \(pulsed.performs) |",
            "| a task | \(task.sources) | \(task.timers) | \(task.performs) |",
            "| a sequence | \(one.sources) | \(one.timers) per run it can have at once (1; `max` for `parallel`) | \(one.performs) |",
            "| a command (main loop) | \(child.sources) per `max_running` (stdout, stderr, pidfd) | \(child.timers) per `max_running` (its timeout) | \(child.performs) |",
            "| every loop's runtime | \(runtime.sources) (its message port) | \(runtime.timers) (the held-event replay) + \(summary) (the summary, unless summaries are off) | \(runtime.performs) (control requests: the nested mode run, the start, the stop, a reload's swap; with headroom) |",
            "| the main loop's daemon | \(signals.sources) (the signals) | \(watchdog.timers) (the systemd watchdog, when systemd asks for one) + \(Daemon.runLimitBudget.timers) (a run-time limit) + \(demo.timers) (`--demo`'s script) | \(signals.performs) (a reload's read handed back from its thread, with signals or the control socket) |",
            "| a worker's thread | \(worker.sources) (its exit source) | \(worker.timers) | \(worker.performs) |",
            "| the control socket (main loop, unless `control: { enabled: false }`) | \(ControlServer.budget.sources) (the listening socket) + 1 per `max_clients` + \(ControlServer.clientBudget(ControlConfig()).sources - ControlConfig().maxClients) (a client each, as they connect; the \(ControlConfig.keptClients) kept for root and boardd's own user) | \(ControlServer.budget.timers) (the idle timeout; the scheduled mock-chip drives and a trace's end) | \(ControlServer.budget.performs) |",
            "| a recording (`boardctl record`, main loop) | \(ControlServer.recordingBudget.sources) | \(ControlServer.recordingBudget.timers) (its drain, while it runs) | \(ControlServer.recordingBudget.performs) |",
            "| the command service (main loop, with the control socket or MQTT) | \(RemoteCommands.budget.sources) | \(RemoteCommands.budget.timers) (the pulse ends of every front end) | \(RemoteCommands.budget.performs) |",
            "| the MQTT client (main loop, with `mqtt:`) | \(MQTTBridge.budget.sources + MQTTClient.socketBudget.sources) (the broker connection, while it is open) | \(MQTTBridge.budget.timers) (libmosquitto's `loop_misc`, armed for when the keepalive is due, and the reconnect timer; the stats and discovery) | \(MQTTBridge.budget.performs) (the connecting thread's hand-over; the event feed's work item, with headroom) |",
        ]
        let docs = try String(contentsOfFile: Fixtures.packageRoot + "/docs/config.md", encoding: .utf8)
        for row in rows { XCTAssertTrue(docs.contains(row + "\n"), "docs/config.md lacks: \(row)") }
        XCTAssertTrue(docs.contains("nesting depth \(LoopBudget.nestingDepth) (the top-level run"))
        // Row for row: the table has a row for each kind of part the plan
        // counts, and no other (a part cannot be added without its row).
        let table = try XCTUnwrap(docs.components(separatedBy: "<!-- loop budget: begin").dropFirst().first?.components(separatedBy: "<!-- loop budget: end").first)
        let firsts = table.split(separator: "\n").filter { $0.hasPrefix("| ") && !$0.hasPrefix("| Part |") }.map {
            String($0.dropFirst(2).prefix { $0 != "|" }).trimmingCharacters(in: .whitespaces)
        }
        XCTAssertEqual(firsts, LoopBudget.Row.allCases.map(\.rawValue))
        XCTAssertEqual(rows.count, LoopBudget.Row.allCases.count, "every row's figures are checked")
    }

    /// The GPIO layer's timers an input's budget counts are the ones its
    /// request schedules, on every combination of the capabilities that
    /// decide them (the daemon's tests run on the mock chips alone, which
    /// have one of them).
    func testTheGPIOLayersTimersAreTheOnesARequestSchedules() throws {
        let config = try XCTUnwrap(
            ConfigLoader.load(
                text: "board: demo\nlines:\n  button: { pin: BUTTON, input: { edge: both, debounce: 10ms } }\n", file: "t.yaml",
                options: Fixtures.options()
            ).config)
        let line = config.lines[0]
        let mock = try Demo.makeChips()
        for caps: GPIOCapabilities in [[], [.vanishWakesPoller], [.kernelDebounce], [.kernelDebounce, .vanishWakesPoller]] {
            let backend = CapabilitiesBackend(mock, caps)
            let chip = try GPIOChip.open("boardloop-mock0", backend: backend)
            defer { chip.close() }
            let request = try chip.request(.offset(17), line.settings)
            defer { request.release() }
            let loop = try BoardRunLoop()
            try request.schedule(on: loop) { _ in }
            defer { request.unschedule() }
            let budget = InputLine.budget(LineID(0), in: config, capabilities: caps)
            XCTAssertEqual(loop.usage.sources, budget.sources, "\(caps)")
            XCTAssertEqual(loop.usage.timers, budget.timers, "\(caps)")
        }
    }

    /// The capabilities a mock board's plan is made for are the mock
    /// chips' own, in what decides a budget (software debounce, vanish checks).
    func testTheMockPlanningCapabilitiesAreTheMockChips() throws {
        let mock = try Demo.makeChips()
        let relevant: GPIOCapabilities = [.kernelDebounce, .vanishWakesPoller]
        XCTAssertEqual(LoopBudget.planningCapabilities(.mock).intersection(relevant), mock.capabilities.intersection(relevant))
    }

    /// What each input costs: the line's timer only with filters, gestures
    /// or a hold reaction (not for a click, a multi-press or a rate limit);
    /// a debounce timer only where the backend does not debounce in the
    /// kernel; a vanish check only where the poller is not woken.
    func testAnInputsBudgetCountsOnlyWhatItMakes() throws {
        let config = try XCTUnwrap(
            ConfigLoader.load(
                text: """
                    board: demo
                    lines:
                      button: { pin: BUTTON, input: { edge: both, active_low: true, debounce: 10ms } }
                      chatter: { pin: CHATTER, input: { edge: both }, rate_limit: { events: 10, per: 1s } }
                      estop: { pin: ESTOP, input: { edge: both } }
                      led: { pin: LED, output: {} }
                    reactions:
                      - on: { line: button, click: true }
                        do: [ toggle: led ]
                      - on: { line: estop, hold: 1s }
                        do: [ set: { led: off } ]
                    """, file: "t.yaml", options: Fixtures.options()
            ).config)
        func timers(_ name: String, _ caps: GPIOCapabilities) -> Int {
            InputLine.budget(config.line(named: name)!, in: config, capabilities: caps).timers
        }
        XCTAssertEqual(timers("button", [.vanishWakesPoller]), 1, "software debounce only")
        XCTAssertEqual(timers("button", [.vanishWakesPoller, .kernelDebounce]), 0)
        XCTAssertEqual(timers("button", []), 2, "software debounce and the vanish check")
        XCTAssertEqual(timers("chatter", [.vanishWakesPoller]), 0, "a rate limit is held by the engine, without a timer")
        XCTAssertEqual(timers("estop", [.vanishWakesPoller]), 1, "a hold reaction's timer")
        for name in ["button", "chatter", "estop"] {
            XCTAssertEqual(InputLine.budget(config.line(named: name)!, in: config, capabilities: []).sources, 1)
        }
    }
}

extension Daemon {
    /// Checks every loop's usage now against the budget it was made with:
    /// sources, timers, observers and modes equal to its parts made at
    /// start (not the command children's, nor `run(for:)`'s limit, made
    /// later); queued performs, ready fds and nesting within their capacities.
    func checkLoopBudgets(_ what: String, file: StaticString = #filePath, line: UInt = #line) throws {
        for i in config.loops.indices {
            let name = "\(what), loop \(config.loops[i].name)"
            let plan = LoopBudget.atStart(config, loop: LoopID(i), capabilities: gpio.capabilities, extras: LoopBudget.Extras(options))
            let caps = capacities(for: config, loop: i)
            let (usage, made) = try i == 0 ? (loop.usage, loop.capacities) : onWorker(i - 1, timeout: .seconds(20)) { ($0.loop.usage, $0.loop.capacities) }.get()
            XCTAssertEqual(made, caps, "\(name): made with its plan", file: file, line: line)
            XCTAssertEqual(usage.sources, plan.sources, "\(name): sources", file: file, line: line)
            XCTAssertEqual(usage.timers, plan.timers, "\(name): timers", file: file, line: line)
            XCTAssertEqual(usage.observers, plan.observers, "\(name): observers", file: file, line: line)
            XCTAssertEqual(usage.modes, caps.modes, "\(name): modes", file: file, line: line)
            XCTAssertLessThanOrEqual(usage.pendingPerforms, caps.pendingPerforms, "\(name): pending performs", file: file, line: line)
            XCTAssertLessThanOrEqual(usage.portSources, caps.eventsPerWait, "\(name): events per wait", file: file, line: line)
            XCTAssertGreaterThanOrEqual(caps.nestingDepth, 2, "\(name): a run and a nested mode run", file: file, line: line)
        }
    }
}

/// The mock chips behind other capabilities (a kernel debounce, a poller
/// the chip's going away does not wake).
private final class CapabilitiesBackend: GPIOChipOpening, @unchecked Sendable {
    let mock: MockGPIO
    let capabilities: GPIOCapabilities
    init(_ mock: MockGPIO, _ capabilities: GPIOCapabilities) {
        self.mock = mock
        self.capabilities = capabilities
    }
    var backendName: String { "mock with \(capabilities)" }
    func listChips() throws(GPIOError) -> [GPIOChipInfo] { try mock.listChips() }
    func openChip(_ chip: String) throws(GPIOError) -> any GPIOChipDriver { try mock.openChip(chip) }
}
