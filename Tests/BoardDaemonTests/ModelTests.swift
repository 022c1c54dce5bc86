import Boardloop
import BoardSupport
import BoardloopGPIO
import Foundation
import Testing

@testable import BoardDaemon

/// The resolved model of a config that uses every part of the language.
@Suite struct ModelTests {
    func load(_ path: String, board: String? = nil) throws -> DaemonConfig {
        let result = ConfigLoader.load(path: path, options: Fixtures.options(board: board))
        #expect(result.diagnostics.map(\.description) == [])
        return try #require(result.config)
    }

    @Test func linesResolveToChipLabelOffsetAndSettings() throws {
        let c = try load(Fixtures.directory + "/good/full-language.yaml")
        #expect(c.board.name == "raspberry-pi-4")
        #expect(c.lines.map(\.name) == ["button", "estop", "chatter", "led", "valve"])
        let button = c[try #require(c.line(named: "button"))]
        #expect(button.address == .offset(chip: .label("pinctrl-bcm2711"), offset: 17))
        #expect(button.physical == 11)
        #expect(
            button.settings == .input(edges: .both, bias: .pullUp, activeLow: true, debounce: .milliseconds(20)))
        #expect(c.priorities[button.priority.index] == "low")
        let chatter = c[try #require(c.line(named: "chatter"))]
        #expect(chatter.address.labelAndOffset! == ("pinctrl-bcm2711", 23))  // PIN16
        #expect(chatter.rateLimit == RateLimit(events: 100, period: .seconds(1)))
        let valve = c[try #require(c.line(named: "valve"))]
        #expect(valve.settings == .output(false))
        #expect(valve.safeValue == false)
        #expect(c.priorities[valve.priority.index] == "normal")
    }

    @Test func automationResolvesToTypedReferences() throws {
        let c = try load(Fixtures.directory + "/good/full-language.yaml")
        let led = try #require(c.line(named: "led"))
        let valve = try #require(c.line(named: "valve"))
        let pour = try #require(c.sequence(named: "pour"))
        let critical = try #require(c.mode(named: "critical"))
        #expect(c.modes.map(\.name) == ["default", "critical"])
        #expect(c[critical].admits == [PriorityID(2)])
        #expect(c.tasks.map(\.every) == [.milliseconds(500), .milliseconds(1)])
        #expect(c.tasks[0].modes == [.default] && c.tasks[1].modes == [critical])
        #expect(c.tasks[0].actions == [.toggle(led)])
        #expect(c.reactions.map(\.trigger) == [
            .press, .hold(delay: .seconds(2), repeat: .milliseconds(500)), .multiPress(count: 2, within: .milliseconds(400)),
            .edge(.falling),
        ])
        #expect(c.reactions[0].actions == [.startSequence(pour)])
        #expect(c.reactions[2].actions == [.pulse(led, .milliseconds(100))])
        #expect(c.reactions[3].actions == [.set(valve, false), .stopSequence(pour), .log(.info, "emergency stop")])
        guard case let .run(command, argv) = c.reactions[1].actions[0] else {
            Issue.record("expected run")
            return
        }
        #expect(argv == ["/usr/local/bin/notify", "held"])
        #expect(c[command].name == "notify" && c[command].maxRunning == 2 && c[command].timeout == .seconds(5))
        #expect(c[pour].mode == critical && c[pour].policy == .single)
        #expect(c[pour].steps == [.set(valve, true), .wait(.milliseconds(150)), .set(valve, false)])
    }

    @Test func loopsOwnTheirLinesAndGetCapacitiesFromTheConfig() throws {
        let c = try load(Fixtures.directory + "/good/full-language.yaml")
        #expect(c.loops.map(\.name) == ["main", "io"])
        #expect(c.loops[0].lines.map { c[$0].name } == ["chatter", "led"])
        #expect(c.loops[1].lines.map { c[$0].name } == ["button", "estop", "valve"])
        #expect(c.loops[1].cpus == [1] && c.loops[1].realtimePriority == 50)
        #expect(c.reactions.allSatisfy { $0.loop == LoopID(1) })
        // As `boardd --config` starts it on a kernel board, at most (libgpiod
        // 1.6: a vanish check per input, debounce in the loop; a watchdog).
        // main: chatter's source, the port, the signal source, 3 per child
        // (notify: 2); chatter's drain timer (chosen: pour holds it, a task
        // runs in pour's mode) and vanish check (its rate limit needs none),
        // led's pulse, 2 tasks, pour, 2 child timeouts, the replay and
        // summary timers, the watchdog, the run-time limit; the control
        // requests, the drain's work item and a reload's hand-over. The control socket: its
        // listening socket and 16 clients (and the 2 kept for root and
        // boardd's own user), its idle and drive timers, and a recording's
        // drain timer; the command service's pulse timer.
        #expect(
            c.loops[0].capacities
                == BoardRunLoop.Capacities(
                    sources: 28, timers: 16, observers: 1, modes: 2, pendingPerforms: 34, eventsPerWait: 28, nestingDepth: 4))
        // io: 2 input sources (valve, an output, has none), the port, the
        // thread's exit source; button's debounce, hold and vanish check,
        // estop's vanish check, the replay and summary timers.
        #expect(
            c.loops[1].capacities
                == BoardRunLoop.Capacities(
                    sources: 4, timers: 6, observers: 1, modes: 2, pendingPerforms: 32, eventsPerWait: 4, nestingDepth: 4))
        let engine = c.loops[1].capacities
        // The engine accepts them.
        _ = try BoardRunLoop(capacities: engine)
    }

    @Test func aDrainTimerCountsATimerAndAPendingPerform() throws {
        func caps(_ input: String) throws -> BoardRunLoop.Capacities {
            let r = ConfigLoader.load(
                text: """
                    board: demo
                    lines:
                      flow: { pin: CHATTER, input: { \(input) }, priority: low }
                    modes:
                      critical: { admits: [] }
                    """, file: "t.yaml")
            return try #require(r.config, "\(r.diagnostics)").loops[0].capacities
        }
        let plain = try caps("edge: both, drain: 4096")
        let timed = try caps("edge: both, drain: 4096, drain_every: 10ms")
        #expect(timed.timers == plain.timers + 1)
        #expect(timed.pendingPerforms == plain.pendingPerforms + 1)
        #expect(timed.sources == plain.sources)
    }

    @Test func gesturesConditionsAndPoliciesOfTheDemo() throws {
        let c = try load(Fixtures.examples + "/demo.yaml")
        #expect(c.board.name == "demo" && c.board.backend == .mock)
        #expect(c.board.chips.map(\.label) == ["boardloop-mock0", "boardloop-mock1"])
        let button = c[try #require(c.line(named: "button"))]
        let g = try #require(button.gestures)
        #expect(g.kinds == [.click, .doubleClick, .hold])
        #expect(g.decisionLatency(.click) == .milliseconds(250))
        #expect(g.decisionLatency(.doubleClick) == .zero)
        #expect(g.decisionLatency(.hold) == .zero)
        #expect(c.reactions.prefix(3).map(\.trigger) == [.gesture(.click), .gesture(.doubleClick), .gesture(.hold)])
        #expect(c.reactions[4].condition == .mode(.default))
        #expect(c.sequences[0].policy == .queued(max: 2))
        // Every edge of the chatter counts: the flood the demo holds through
        // pour is delivered whole (no filter, no rate limit, a ring of 4096).
        let chatter = c[try #require(c.line(named: "chatter"))]
        #expect(chatter.filters.isEmpty && chatter.rateLimit == nil)
        #expect(chatter.held.drain == 4096)
    }

    @Test func theBoardCanBeOverriddenToCheckForAnotherMachine() throws {
        let c = try load(Fixtures.examples + "/doorbell.yaml", board: "raspberry-pi-3")
        #expect(c.board.name == "raspberry-pi-3")
        #expect(c.lines[0].address == .offset(chip: .label("pinctrl-bcm2835"), offset: 17))
    }

    @Test func autoDetectsTheBoardFromMachineFacts() throws {
        let facts = MachineFacts(
            model: "Raspberry Pi 5 Model B Rev 1.0", compatible: ["raspberrypi,5-model-b", "brcm,bcm2712"],
            chipLabels: ["pinctrl-rp1"])
        let text = "board: auto\nlines:\n  led: { pin: GPIO27, output: {} }\n"
        let r = ConfigLoader.load(
            text: text, file: "auto.yaml", options: Fixtures.options(machine: MachineInfo(cpuCount: 4, facts: facts)))
        let c = try #require(r.config)
        #expect(c.board.name == "raspberry-pi-5" && c.board.detected)
        #expect(c.lines[0].address == .offset(chip: .label("pinctrl-rp1"), offset: 27))
    }

    @Test func genericBoardLinesByChipAndOffsetOrName() throws {
        let text = """
            board: generic
            lines:
              a: { chip: gpiochip2, offset: 3, output: {} }
              b: { chip: /dev/gpiochip1, line_name: DOOR, input: {} }
              c: { line_name: RELAY1, output: {} }
              d: { chip: my-expander, offset: 0, input: { edge: rising } }
            """
        let r = ConfigLoader.load(text: text, file: "g.yaml", options: Fixtures.options())
        let c = try #require(r.config, "\(r.diagnostics)")
        #expect(c.lines.map(\.address) == [
            .offset(chip: .name("gpiochip2"), offset: 3), .named(chip: .path("/dev/gpiochip1"), name: "DOOR"),
            .named(chip: nil, name: "RELAY1"), .offset(chip: .label("my-expander"), offset: 0),
        ])
    }

    @Test func kernelLineNamesAndFunctionNamesAreAccepted() throws {
        let text = """
            board: raspberry-pi-4
            lines:
              a: { pin: SPI_CE0_N, output: {} }
              b: { pin: txd, output: {} }
              c: { line_name: SDA1, input: {} }
              d: { pin: bcm26, output: {} }
              e: { line_name: GPIO_GCLK, input: {} }
              f: { line_name: GPIO22, input: {} }
            """
        let c = try #require(ConfigLoader.load(text: text, file: "n.yaml", options: Fixtures.options()).config)
        #expect(c.lines.map { $0.address.labelAndOffset!.offset } == [8, 14, 2, 26, 4, 22])
        #expect(c.lines.map(\.boardPin) == ["GPIO8", "GPIO14", "GPIO2", "GPIO26", "GPIO4", "GPIO22"])
    }

    /// `line_name:` on a Pi board means what `gpioinfo` says: with no chip
    /// here, as the board file names the lines (every line, both namings).
    @Test func lineNamesOnAPiBoardAreTheKernelsNames() throws {
        let text = """
            board: raspberry-pi-4
            lines:
              bt_tx: { line_name: TXD0, output: {} }
              act_led: { line_name: STATUS_LED_G_CLK, output: {} }
              eeprom_sda: { line_name: ID_SDA, input: {} }
              mdc: { line_name: RGMII_MDC, input: {} }
            """
        let r = ConfigLoader.load(text: text, file: "n.yaml", options: Fixtures.options())
        let c = try #require(r.config, "\(r.diagnostics.map(\.description))")
        #expect(c.lines.map(\.address) == [32, 42, 0, 29].map { .offset(chip: .label("pinctrl-bcm2711"), offset: $0) })
        #expect(c.lines.map(\.boardPin) == [nil, nil, nil, nil])
    }

    /// With the chip on this machine, its own names come first; a name it
    /// does not have is looked up in the board file's namings.
    @Test func lineNamesAreLookedUpOnTheChipFirst() throws {
        var names = Array(repeating: "", count: 58)
        names[5] = "TXD0"  // a kernel that names lines its own way
        names[9] = "MY_SENSOR"
        let machine = MachineInfo(
            cpuCount: 4, facts: MachineFacts(chipLabels: ["pinctrl-bcm2711"], lineNames: ["pinctrl-bcm2711": names]))
        let text = """
            board: raspberry-pi-4
            lines:
              a: { line_name: TXD0, output: {} }
              b: { line_name: MY_SENSOR, input: {} }
              c: { chip: pinctrl-bcm2711, line_name: MY_SENSOR, input: {} }
              d: { line_name: SDA1, input: {} }
            """
        let r = ConfigLoader.load(text: text, file: "n.yaml", options: Fixtures.options(machine: machine))
        #expect(r.errors.map(\.description) == ["n.yaml:5:14: error: lines.c.chip: pinctrl-bcm2711:9 is already used by line 'b' (line 4)"])
        let options = Fixtures.options(machine: machine)
        let ok = ConfigLoader.load(text: text.replacingOccurrences(of: "  c: { chip: pinctrl-bcm2711, line_name: MY_SENSOR, input: {} }\n", with: ""), file: "n.yaml", options: options)
        let c = try #require(ok.config, "\(ok.diagnostics.map(\.description))")
        #expect(c.lines.map { $0.address.labelAndOffset!.offset } == [5, 9, 2])
        // On mock chips (--mock) this machine's chips are not the board's.
        var mock = options
        mock.mock = true
        let m = ConfigLoader.load(text: "board: raspberry-pi-4\nlines:\n  a: { line_name: TXD0, output: {} }\n", file: "n.yaml", options: mock)
        #expect(m.config?.lines.first?.address.labelAndOffset?.offset == 32)
    }

    @Test func aPinNamedAsAnotherLineSaysWhichLineThatIs() throws {
        let r = ConfigLoader.load(
            text: "board: raspberry-pi-4\nlines:\n  tx: { pin: TXD0, output: {} }\n", file: "n.yaml", options: Fixtures.options())
        #expect(
            r.errors.map(\.description) == [
                "n.yaml:3:14: error: lines.tx.pin: the raspberry-pi-4 board has no pin 'TXD0': the kernel names line 32 of pinctrl-bcm2711 so, which is not on the header; write line_name: TXD0 for that line"
            ])
    }
}

/// Every example config passes the check (in process; the CLI tests run
/// them through the binary too).
@Suite struct ExampleTests {
    static let examples = [
        "demo", "doorbell", "fan-controller", "pump-valve", "sim-button",
        "fleet/greenhouse-1", "fleet/greenhouse-2", "fleet/greenhouse-3",
    ]

    @Test(arguments: examples)
    func examplePassesCheck(_ name: String) throws {
        let r = ConfigLoader.load(path: "\(Fixtures.examples)/\(name).yaml", options: Fixtures.options())
        #expect(r.diagnostics.map(\.description) == [])
        #expect(r.config != nil)
    }

    /// Every config, that is: `demo.script.yaml` is the demo's scripted
    /// person (DemoTests reads it), and `fleet/common.yaml` and
    /// `fleet/mqtt.yaml` the packages the fleet's boards include
    /// (fragments, not configs).
    @Test func everyExampleIsListed() throws {
        let paths = try Fixtures.configPaths().filter { $0.hasPrefix(Fixtures.examples + "/") }
        #expect(paths.map { String($0.dropFirst(Fixtures.examples.count + 1).dropLast(5)) }.sorted() == Self.examples.sorted())
        let fleet = try FileManager.default.contentsOfDirectory(atPath: Fixtures.examples + "/fleet").filter { $0.hasSuffix(".yaml") }
        #expect(Set(fleet) == Set(["common.yaml", "mqtt.yaml"] + (1...3).flatMap { ["greenhouse-\($0).yaml", "greenhouse-\($0).test.yaml"] }))
    }
}
