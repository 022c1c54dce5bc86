// gpio-button-led: a button on line 17 toggles an LED on line 27, on a run loop.
//
//   swift run gpio-button-led                        the mock board, with simulated (bouncy) presses
//   swift run gpio-button-led --chip boardloop-sim0  a real chip by label, name (gpiochip0) or path
//   options: --button LINE --led LINE (offset or name; default BUTTON/LED by name if the
//            chip has them, else 17/27), --presses N (stop after N presses; mock default 5),
//            --active-high (button reads 1 when pressed; default: wired to ground, pull-up, active-low)
//
// The button is an edge-detecting input with a 10 ms debounce (software on
// libgpiod 1.6 and the mock, the kernel's on 2.x); its events arrive as a
// port source on the main run loop. SIGINT/SIGTERM come in through signalfd
// and stop the loop; the LED is switched off and the lines released.
import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import Glibc

struct Options {
    var chip: String?
    var button: GPIOLineSelector?
    var led: GPIOLineSelector?
    var presses: Int?
    var activeLow = true
}

func parseOptions() -> Options {
    var o = Options()
    var args = CommandLine.arguments.dropFirst()
    func line(_ s: String) -> GPIOLineSelector { UInt32(s).map { .offset($0) } ?? .name(s) }
    while let a = args.popFirst() {
        switch a {
        case "--chip": o.chip = args.popFirst()
        case "--button": o.button = args.popFirst().map(line)
        case "--led": o.led = args.popFirst().map(line)
        case "--presses": o.presses = args.popFirst().flatMap { Int($0) }
        case "--active-high": o.activeLow = false
        case "-h", "--help":
            print("usage: gpio-button-led [--chip CHIP] [--button LINE] [--led LINE] [--presses N] [--active-high]")
            exit(0)
        default:
            print("gpio-button-led: unknown argument '\(a)' (try --help)")
            exit(2)
        }
    }
    return o
}

func stamp(_ t: MonotonicInstant, since start: MonotonicInstant) -> String {
    let ms = Double((t - start).nanosecondsClamped) / 1e6
    let whole = Int(ms)
    let frac = Int((ms - Double(whole)) * 10)
    return "\(whole).\(frac) ms"
}

func run() throws {
    let options = parseOptions()
    try SignalMask.block([SIGINT, SIGTERM])
    let loop = BoardRunLoop.current

    // The chip: the mock demo board unless --chip names a real one.
    let mockBoard: MockGPIO? = options.chip == nil ? MockGPIO.exampleBoard() : nil
    let chip: GPIOChip
    do {
        if let board = mockBoard {
            chip = try GPIOChip("boardloop-mock0", backend: board)
        } else {
            chip = try GPIOChip(options.chip!)
        }
    } catch {
        print("gpio-button-led: \(error)")
        exit(1)
    }
    func pick(_ given: GPIOLineSelector?, name: String, offset: UInt32) -> GPIOLineSelector {
        if let given { return given }
        return (try? chip.offset(of: .name(name))) != nil ? .name(name) : .offset(offset)
    }
    let buttonLine = pick(options.button, name: "BUTTON", offset: 17)
    let ledLine = pick(options.led, name: "LED", offset: 27)
    print("chip \(chip.info) (\(chip.backend.backendName)); button \(buttonLine), LED \(ledLine)")

    let button: GPIOLineRequest
    let led: GPIOLineRequest
    do {
        button = try chip.request(
            buttonLine,
            .input(
                edges: .rising, bias: options.activeLow ? .pullUp : .pullDown, activeLow: options.activeLow,
                debounce: .milliseconds(10)),
            consumer: "gpio-button-led")
        led = try chip.request(ledLine, .output(false), consumer: "gpio-button-led")
    } catch {
        print("gpio-button-led: \(error)")
        exit(1)
    }

    let start = loop.now
    let limit = options.presses ?? (mockBoard != nil ? 5 : Int.max)
    var presses = 0
    var on = false
    try button.schedule(on: loop) { batch in
        if let fault = batch.fault {
            print("button source: \(fault)")
            loop.stop()
            return
        }
        if batch.lostEvents > 0 { print("  (\(batch.lostEvents) edge(s) lost before this batch)") }
        for event in batch {
            presses += 1
            on.toggle()
            do { try led.setValue(on) } catch { print("LED: \(error)") }
            let latency = Double(batch.latency(of: event).nanosecondsClamped) / 1000
            print("\(stamp(event.timestamp, since: start)): press \(presses) -> LED \(on ? "on" : "off") (edge-to-handler \(Int(latency)) µs, debounce included)")
            if presses >= limit { loop.stop() }
        }
    }

    let signals = try SignalSource(signals: [SIGINT, SIGTERM]) { info in
        print("\(info.name): stopping")
        loop.stop()
    }
    try signals.add(to: loop)

    // The mock board: a simulated finger, with contact bounce, every 400 ms.
    var simulator: RunLoopTimer?
    if let board = mockBoard, let mock = board.chip("boardloop-mock0") {
        let bounce = Duration.microseconds(300)
        let b = try mock.offset(buttonLine)
        try mock.setLevel(.offset(b), options.activeLow) // idle: released
        var pressed = false
        simulator = RunLoopTimer(fireAt: loop.now + .milliseconds(200), interval: .milliseconds(200)) { _ in
            pressed.toggle()
            // A press drives the wire to its active level, bouncing 5 times.
            let level = pressed != options.activeLow
            // The line was checked above: these cannot fail.
            try? mock.burst(.offset(b), edges: 4, spacing: bounce)
            try? mock.setLevel(.offset(b), level, at: mock.now + bounce * 4)
        }
        try loop.add(simulator!, mode: .default)
        print("mock board: simulating \(limit) bouncy presses (4 bounces each)")
    } else {
        print("press the button (Ctrl-C to stop)")
    }

    _ = try loop.run(mode: .default, timeout: .seconds(100_000_000))
    simulator?.invalidate()
    try? led.setValue(false)
    if let board = mockBoard, let mock = board.chip("boardloop-mock0") {
        let history = try mock.outputHistory(ledLine).map { $0.value ? "1" : "0" }.joined()
        print("LED history on the mock: \(history)")
    }
    print("button: \(button.statistics.delivered) presses reported, \(button.statistics.read) raw edges read, "
        + "\(button.statistics.debounced) debounced away, \(button.statistics.lostEvents) lost")
    button.release()
    led.release()
}

do {
    try run()
} catch {
    print("gpio-button-led: \(error)")
    exit(1)
}
