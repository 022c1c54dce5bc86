import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import BoardSupport
import Logging

/// `boardd --demo`: `examples/demo.yaml` on the demo board
/// (`boards/demo.yaml`, mock chips), with a scripted person at the board
/// (`examples/demo.script.yaml`): clicks, a double click, a hold, a
/// chattering contact, a flood held through a critical sequence and
/// delivered after it, and an e-stop during a running sequence. The three
/// files are compiled into boardd (Package.swift, `resources`: the config and
/// script here, the board with every board file in BoardSupport), so the demo
/// needs no checkout and runs exactly what the files say.
public enum Demo {
    /// `examples/demo.yaml`, as built in.
    public static let configText = String(decoding: PackageResources.demo_config_yaml, as: UTF8.self)
    /// `examples/demo.script.yaml`, as built in.
    public static let scriptText = String(decoding: PackageResources.demo_script_yaml, as: UTF8.self)
    /// `boards/demo.yaml`, as built in (with every board file: BoardSupport).
    public static let boardText = BoardCatalog.builtInBoards["demo"]!

    /// The names diagnostics and the summary give the built-in files.
    public static let configFile = "examples/demo.yaml (built in)"
    public static let scriptFile = "examples/demo.script.yaml (built in)"

    /// A catalog of the built-in demo board alone: `--demo` runs on the board
    /// it was built with, whatever board files the machine has.
    public static var catalog: BoardCatalog { BoardCatalog(directories: [], builtIn: ["demo": boardText]) }

    /// The built-in demo board.
    public static let board: Board = {
        let log = DiagnosticLog(file: "boards/demo.yaml (built in)")
        guard let b = catalog.board(named: "demo", log: log) else {
            // A test loads the same text: a broken board file fails it first.
            fatalError("the built-in demo board does not load: \(log.items.map(\.description))")
        }
        return b
    }()

    /// The demo board's mock chips (made from `boards/demo.yaml`: the button
    /// and the e-stop rest high).
    public static func makeChips(
        clock: RunLoopClock = .monotonic, eventModel: MockChip.EventModel = .v2, eventBufferSize: Int? = nil,
        historyCapacity: Int = 4096
    ) throws -> MockGPIO {
        try MockBoard.chips(
            board.chips, clock: clock, eventModel: eventModel, eventBufferSize: eventBufferSize, historyCapacity: historyCapacity)
    }

    /// A scripted person, as `examples/demo.script.yaml` describes one: steps
    /// at times from the start of a cycle, each logging what it says and
    /// setting lines (by the board's names) or flooding one.
    public struct ScriptFile: Sendable, Equatable {
        public struct Level: Sendable, Equatable {
            public var chip: String
            public var offset: UInt32
            public var high: Bool
            public init(chip: String, offset: UInt32, high: Bool) {
                self.chip = chip
                self.offset = offset
                self.high = high
            }
        }
        public enum Action: Sendable, Equatable {
            case none
            case set([Level])
            /// Toggle the line `edges` times, `Script.floodPerMillisecond` edges per ms.
            case flood(chip: String, offset: UInt32, edges: Int)
        }
        public struct Step: Sendable, Equatable {
            public var at: Duration
            public var say: String?
            public var action: Action
        }
        public var cycle: Duration
        public var steps: [Step]

        /// Reads a script for `board`; nil with the errors in `log`.
        public static func parse(_ text: String, board: Board, log: DiagnosticLog) -> ScriptFile? {
            let r = YAMLReader(log: log)
            guard let root = r.compose(text), let entries = r.mapping(root, "", allowed: ["cycle", "steps"]) else {
                if !log.hasErrors { log.error(.none, "", "the script is empty") }
                return nil
            }
            var cycle: Duration?
            var steps: [Step] = []
            for e in entries {
                if e.key == "cycle" {
                    cycle = r.duration(e.value, e.path)
                    continue
                }
                for (i, node) in (r.list(e.value, e.path) ?? []).enumerated() {
                    let path = YAMLReader.index(e.path, i)
                    if let step = parseStep(node, path, r, board: board) {
                        if let last = steps.last, step.at < last.at {
                            r.error(node, path, "at \(step.at) is before the step above it (\(last.at)): steps are in time order")
                        }
                        steps.append(step)
                    }
                }
            }
            guard let cycle, cycle > .zero else {
                log.error(.none, "cycle", "the script needs a cycle (a duration above zero)")
                return nil
            }
            if let last = steps.last, last.at >= cycle {
                log.error(.none, "steps", "the last step (at \(last.at)) is not within the cycle (\(cycle))")
            }
            return log.hasErrors ? nil : ScriptFile(cycle: cycle, steps: steps)
        }

        static func parseStep(_ node: Node, _ path: String, _ r: YAMLReader, board: Board) -> Step? {
            guard let entries = r.mapping(node, path, allowed: ["at", "say", "set", "flood"]) else { return nil }
            var at: Duration?
            var step = Step(at: .zero, say: nil, action: .none)
            func line(_ node: Node, _ path: String) -> (chip: String, offset: UInt32)? {
                guard let name = r.string(node, path) else { return nil }
                guard let l = board.pin(named: name)?.chipLine else {
                    r.error(node, path, "the \(board.name) board has no GPIO line '\(name)'")
                    return nil
                }
                return l
            }
            for e in entries {
                switch e.key {
                case "at": at = r.duration(e.value, e.path)
                case "say": step.say = r.string(e.value, e.path)
                case "set":
                    var levels: [Level] = []
                    for l in r.mapping(e.value, e.path) ?? [] {
                        guard let c = line(l.keyNode, l.path), let v = r.choice(l.value, l.path, ["low", "high"]) else { continue }
                        levels.append(Level(chip: c.chip, offset: c.offset, high: v == "high"))
                    }
                    step.action = .set(levels)
                default:  // flood
                    var target: (chip: String, offset: UInt32)?
                    var edges: Int?
                    for f in r.mapping(e.value, e.path, allowed: ["line", "edges"]) ?? [] {
                        if f.key == "line" { target = line(f.value, f.path) } else { edges = r.int(f.value, f.path, in: 1...100_000) }
                    }
                    guard let target, let edges else {
                        r.error(e.value, e.path, "a flood needs a line and a number of edges")
                        continue
                    }
                    step.action = .flood(chip: target.chip, offset: target.offset, edges: edges)
                }
            }
            if entries.contains(where: { $0.key == "set" }) && entries.contains(where: { $0.key == "flood" }) {
                r.error(node, path, "a step either sets lines or floods one, not both")
            }
            guard let at else {
                r.error(node, path, "a step needs 'at' (a time from the start of the cycle)")
                return nil
            }
            step.at = at
            return step
        }

        /// The built-in script on the built-in demo board.
        public static func builtIn() throws -> ScriptFile {
            let log = DiagnosticLog(file: Demo.scriptFile)
            guard let s = parse(Demo.scriptText, board: Demo.board, log: log) else {
                throw ScriptError(diagnostics: log.items)
            }
            return s
        }
    }

    public struct ScriptError: Error, CustomStringConvertible {
        public var diagnostics: [Diagnostic]
        public var description: String { diagnostics.map(\.description).joined(separator: "\n") }
    }

    /// Plays a script on the main loop's timers (the mock chips are driven
    /// from the main thread; the loops see real edges through their fds),
    /// over and over until `stop()`. Two timers, the steps and a flood
    /// (`Demo.Script.budget`).
    public final class Script {
        static let floodPerMillisecond = 2
        let script: ScriptFile
        let gpio: MockGPIO
        let loop: BoardRunLoop
        let logger: Logger
        var timer: RunLoopTimer?
        var next = 0
        var cycleStart: MonotonicInstant

        public init(_ script: ScriptFile, gpio: MockGPIO, loop: BoardRunLoop, logger: Logger) {
            self.script = script
            self.gpio = gpio
            self.loop = loop
            self.logger = logger
            cycleStart = loop.now
        }

        public func start() throws {
            guard let first = script.steps.first else { return }
            let t = RunLoopTimer.rearmable { [unowned self] t in self.fire(t) }
            try loop.add(t, mode: .common)
            t.arm(at: cycleStart + first.at)
            timer = t
            let f = RunLoopTimer.rearmable { [unowned self] _ in self.floodStep() }
            try loop.add(f, mode: .common)
            floodTimer = f
        }

        public func stop() {
            timer?.invalidate()
            floodTimer?.invalidate()
        }

        func fire(_ t: RunLoopTimer) {
            let steps = script.steps
            let now = loop.now
            while next < steps.count && cycleStart + steps[next].at <= now {
                if let w = steps[next].say { logger.notice("\(w)") }
                do { try perform(steps[next].action) } catch { logger.error("demo: \(error)") }
                next += 1
            }
            if next == steps.count {
                next = 0
                cycleStart = cycleStart + script.cycle
            }
            t.arm(at: cycleStart + steps[next].at)
        }

        func perform(_ action: ScriptFile.Action) throws {
            switch action {
            case .none: break
            case let .set(levels):
                for l in levels { try gpio.chip(l.chip)?.setLevel(.offset(l.offset), l.high) }
            case let .flood(chip, offset, edges):
                guard let c = gpio.chip(chip) else { return }
                flood = (c, offset, try c.level(.offset(offset)), edges)
                floodTimer?.arm(at: loop.now)
            }
        }

        var floodTimer: RunLoopTimer?
        var flood: (chip: MockChip, offset: UInt32, level: Bool, left: Int)?

        func floodStep() {
            guard var f = flood else { return }
            for _ in 0..<Self.floodPerMillisecond where f.left > 0 {
                f.level.toggle()
                try? f.chip.setLevel(.offset(f.offset), f.level)
                f.left -= 1
            }
            flood = f.left > 0 ? f : nil
            if f.left > 0 { floodTimer?.arm(after: .milliseconds(1)) }
        }
    }
}
