import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import Logging

/// `boardd --demo`: the demo config on the demo board (mock chips), with a
/// script that plays a person at the board: clicks, a double click, a hold,
/// a chattering contact, a flood held through a critical sequence and
/// delivered after it, and an e-stop during a running sequence. Every part
/// shows within the first 8 s; the script then repeats.
public enum Demo {
    public static let configText = """
        # The built-in demo (boardd --demo): the demo board's mock chips.
        board: demo
        lines:
          button:
            pin: BUTTON
            input: { edge: both, active_low: true, debounce: 10ms }
            priority: low
            gestures: { one_of: [click, double_click, hold], gap: 250ms, hold: 800ms }
          estop:
            pin: ESTOP
            input: { edge: falling }
            priority: high
          chatter:
            pin: CHATTER
            input: { edge: both, drain: 4096 }
            priority: low
          led: { pin: LED, output: { initial: off, safe: off } }
          valve: { pin: VALVE, output: { initial: off, safe: off } }
          fan: { pin: FAN, output: { initial: off, safe: off } }
        modes:
          critical: { admits: [high] }
        tasks:
          heartbeat: { every: 500ms, do: [ toggle: led ] }
          sample: { every: 10ms, in_modes: [critical], do: [ log: { level: debug, message: "critical tick" } ] }
        sequences:
          pour:
            mode: critical
            policy: queued
            max: 2
            steps:
              - set: { valve: on }
              - log: "pour: valve open for 600ms (button and chatter are held meanwhile)"
              - wait: 600ms
              - set: { valve: off }
              - log: "pour: valve closed"
        reactions:
          - name: click starts pour
            on: { line: button, gesture: click }
            do: [ sequence: pour ]
          - name: double click toggles the fan
            on: { line: button, gesture: double_click }
            do: [ toggle: fan, log: "fan toggled" ]
          - name: hold stops the fan
            on: { line: button, gesture: hold }
            do: [ log: "held: stopping the fan", set: { fan: off } ]
          - name: e-stop
            on: { line: estop, edge: falling }
            do: [ set: { valve: off }, stop: pour, log: { level: error, message: "EMERGENCY STOP: valve off, pour stopped" } ]
          - name: contact
            on: { line: chatter, edge: both }
            do: [ log: { level: debug, message: "contact" } ]
        workers:
          io: { lines: [estop, valve] }
        """

    /// The demo board's mock chips, with the button and e-stop at rest (high).
    public static func makeChips(clock: RunLoopClock = .monotonic, eventModel: MockChip.EventModel = .v2) throws -> MockGPIO {
        let chips = try [
            MockChip(
                name: "gpiochip0", label: "boardloop-mock0", lineCount: 32,
                lineNames: [5: "VALVE", 6: "FAN", 17: "BUTTON", 22: "ESTOP", 23: "CHATTER", 27: "LED"], eventModel: eventModel,
                clock: clock),
            MockChip(name: "gpiochip1", label: "boardloop-mock1", lineCount: 8, eventModel: eventModel, clock: clock),
        ]
        try chips[0].setLevel(17, true)  // active-low button: high is released
        try chips[0].setLevel(22, true)  // e-stop: falling edge trips it
        return try MockGPIO(chips)
    }

    /// Plays the story on the main loop's timers (the mock chip is driven
    /// from the main thread; the loops see real edges through its fds).
    public final class Script {
        let chip: MockChip
        let loop: BoardRunLoop
        let logger: Logger
        var timer: RunLoopTimer?
        var steps: [(at: Duration, what: String?, act: () throws -> Void)] = []
        var next = 0
        var cycleStart: MonotonicInstant
        let cycle: Duration = .seconds(12)

        public init(gpio: MockGPIO, loop: BoardRunLoop, logger: Logger) {
            chip = gpio.chips[0]
            self.loop = loop
            self.logger = logger
            cycleStart = loop.now
            build()
        }

        func build() {
            func at(_ ms: Int, _ what: String?, _ act: @escaping () throws -> Void) {
                steps.append((.milliseconds(ms), what, act))
            }
            let c = chip
            func click(_ ms: Int, _ what: String?) {
                at(ms, what) { try c.setLevel(17, false) }
                at(ms + 120, nil) { try c.setLevel(17, true) }
            }
            // 1. A click starts the pour sequence (critical mode, 600 ms); the
            //    chatter floods 300 edges and the button is double-clicked
            //    meanwhile: held, then delivered in order when pour ends.
            click(300, "demo: click the button (a click starts pour)")
            at(900, "demo: the contact floods 300 edges (2 per ms) during pour: held in its drain ring, none lost") {
                [unowned self] in self.flood(300)
            }
            click(1000, "demo: double click during pour (held; the fan toggles after pour)")
            click(1250, nil)
            // 2. A double click toggles the fan.
            click(2500, "demo: double click (toggles the fan)")
            click(2750, nil)
            // 3. A hold stops the fan.
            at(3800, "demo: press and hold the button for 1.2 s") { try c.setLevel(17, false) }
            at(5000, nil) { try c.setLevel(17, true) }
            // 4. A contact chatters: 40 edges, 200 µs apart, in the default mode.
            at(5600, "demo: the contact chatters (40 edges) in the default mode") { [unowned self] in self.flood(40) }
            // 5. A click starts pour again; the e-stop trips during it.
            click(6200, "demo: click again (pour), then the e-stop trips during it")
            at(6900, "demo: E-STOP pressed") { try c.setLevel(22, false) }
            at(7400, nil) { try c.setLevel(22, true) }
            at(9000, "demo: the story repeats in 3 s (Ctrl-C stops boardd: outputs go to their safe values)") {}
        }

        public func start() throws {
            let t = RunLoopTimer(fireAt: loop.now + .milliseconds(300), interval: .seconds(3600)) { [unowned self] t in
                self.fire(t)
            }
            try loop.add(t, mode: .common)
            timer = t
            let f = RunLoopTimer.rearmable { [unowned self] _ in self.floodStep() }
            try loop.add(f, mode: .common)
            floodTimer = f
        }

        func fire(_ t: RunLoopTimer) {
            let now = loop.now
            while next < steps.count && cycleStart + steps[next].at <= now {
                if let w = steps[next].what { logger.notice("\(w)") }
                do { try steps[next].act() } catch { logger.error("demo: \(error)") }
                next += 1
            }
            if next == steps.count {
                next = 0
                cycleStart = cycleStart + cycle
            }
            t.fireDate = cycleStart + steps[next].at
        }

        public func stop() {
            timer?.invalidate()
            floodTimer?.invalidate()
        }

        var floodTimer: RunLoopTimer?
        var floodLeft = 0
        var floodLevel = false

        /// `edges` edges on the contact, 2 per millisecond, in real time.
        func flood(_ edges: Int) {
            floodLeft = edges
            floodTimer?.arm(at: loop.now)
        }

        func floodStep() {
            for _ in 0..<2 where floodLeft > 0 {
                floodLevel.toggle()
                try? chip.setLevel(23, floodLevel)
                floodLeft -= 1
            }
            if floodLeft > 0 { floodTimer?.arm(after: .milliseconds(1)) }
        }
    }
}
