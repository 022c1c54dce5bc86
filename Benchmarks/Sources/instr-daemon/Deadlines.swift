import BoardDaemon
import BoardSupport
import Boardloop
import BoardloopGPIOMock
import Foundation
import Logging

// A deadline-heavy config: `lines` inputs, each with `delayed_on` and
// `delayed_off` filters and a [click, hold] gesture group whose click
// toggles an output. One event is one button interaction on the next line
// in turn: the press, the clock moved past its `delayed_on`, the release,
// the clock moved past its `delayed_off` (the click fires then). On the
// engine's manual clock, so the count is exact: what the filters' and
// gestures' deadlines cost, and how it changes with 50 lines' timers in
// the loop against one line's.

/// The mock board the scenario runs on: one chip of 64 lines.
private let boardYAML = """
    name: bench64
    title: "64 mock lines"
    backend: mock
    chips:
      - { label: boardloop-mock0, lines: 64, idle_high: [\((0..<50).map(String.init).joined(separator: ", "))] }
    pins:
    \((0..<64).map { "  - { name: L\($0), chip: boardloop-mock0, offset: \($0) }" }.joined(separator: "\n"))

    """

func deadlinesConfig(lines: Int) -> String {
    var y = "board: bench64\nlines:\n"
    for i in 0..<lines {
        y += """
              in\(i):
                pin: L\(i)
                input: { edge: both, active_low: true, delayed_on: 2ms, delayed_off: 2ms }
                gestures: { one_of: [click, hold], click_min: 1ms, click_max: 100ms, hold: 200ms }

            """
    }
    y += "  out: { pin: L63, output: { initial: off } }\nreactions:\n"
    for i in 0..<lines {
        y += "  - { name: click\(i), on: { line: in\(i), gesture: click }, do: [ toggle: out ] }\n"
    }
    return y
}

func deadlinesScenario(_ n: Int, lines: Int) throws {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("instr-deadlines-\(getpid())")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    try boardYAML.write(to: dir.appendingPathComponent("bench64.yaml"), atomically: true, encoding: .utf8)
    let config = loadConfig(deadlinesConfig(lines: lines), file: "deadlines.yaml", catalog: BoardCatalog(directories: [dir.path]))
    let clock = ManualClock()
    let mock = try MockBoard.chips(config.board.chips, clock: .manual(clock))
    let daemon = try Daemon(
        config: config,
        options: .init(logger: instrLogger(), clock: .manual(clock), modeDriver: .external, summaryInterval: nil, mock: mock))
    let chip = mock.chips[0]
    try deadlineInteractions(daemon, chip, n, lines: lines)
    let fired = (0..<lines).reduce(UInt64(0)) { $0 + (daemon.counters.reactionFires["click\($1)"] ?? 0) }
    precondition(fired == UInt64(n), "deadlines: \(fired) clicks of \(n) interactions")
    daemon.shutdown()
}

/// `n` interactions, each on the next line in turn.
@inline(never)
func deadlineInteractions(_ daemon: Daemon, _ chip: MockChip, _ n: Int, lines: Int) throws {
    for k in 0..<n {
        let line = UInt32(k % lines)
        try chip.setLevel(.offset(line), false)  // pressed (active low)
        try daemon.advance(by: .milliseconds(3), step: .milliseconds(3))
        try chip.setLevel(.offset(line), true)
        try daemon.advance(by: .milliseconds(3), step: .milliseconds(3))
    }
}
