import BoardDaemon
import BoardSupport
import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import Glibc
import Logging

// The daemon layer's cost per reaction: an edge on the demo board's button
// toggles its LED, once through boardd's config path (a `Daemon` on the mock
// chips, its loop driven here one pass per edge) and once written by hand
// with the engine and the GPIO layer, the same chips, the same work: the
// difference is what the config path adds (the trigger, the compiled
// actions, the executor, the counters and the reaction's time).

/// An edge toggles the LED, written by hand; with `second`, it also
/// toggles the valve (a second reaction on the line).
func engineReaction(_ n: Int, second: Bool = false) throws {
    let mock = try Demo.makeChips()
    let loop = try BoardRunLoop()
    let chip = try GPIOChip("boardloop-mock0", backend: mock)
    let button = try chip.request(.offset(17), .input(edges: .both, activeLow: true), consumer: "instr")
    let led = try chip.request(.offset(27), .output(false), consumer: "instr")
    let valve = try chip.request(.offset(5), .output(false), consumer: "instr")
    var on = false, open = false
    var got = 0
    try button.schedule(on: loop) { batch in
        for _ in batch {
            on.toggle()
            try? led.setValue(on)
            if second {
                open.toggle()
                try? valve.setValue(open)
            }
            got += 1
        }
    }
    // (The mode read once, outside the edges, as in boardd's driver.)
    let mode = RunLoopMode.default
    try drive(mock.chips[0], n) { _ = try loop.run(mode: mode, timeout: .zero, returnAfterSourceHandled: true) }
    precondition(got == n, "reaction engine: \(got) of \(n) edges")
    button.release()
    led.release()
    valve.release()
}

/// The same reaction through boardd's config path, at a log level:
/// `.critical` (no trace) or boardd's default, `.info` (each reaction traced:
/// a record in the loop's trace ring, formatted and written by the log
/// writer's thread, which callgrind counts too).
func boarddReaction(_ n: Int, level: Logger.Level = .critical, second: Bool = false) throws {
    let yaml = """
        board: demo
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true } }
          led: { pin: LED, output: { initial: off } }
          valve: { pin: VALVE, output: { initial: off } }
        reactions:
          - name: toggle
            on: { line: button, edge: both }
            do: [ toggle: led ]
        \(second ? "  - { name: second, on: { line: button, edge: both }, do: [ toggle: valve ] }" : "")
        """
    let config = loadConfig(yaml, file: "instr.yaml")
    let mock = try Demo.makeChips()
    let daemon = try Daemon(
        config: config, options: .init(logger: instrLogger(level), modeDriver: .external, summaryInterval: nil, mock: mock))
    let loop = daemon.loop
    // The mode read once, outside the edges: the driver's own work is the
    // hand-written one's (whose inlined loop reads it once), not a global's
    // accessor per edge.
    let mode = RunLoopMode.default
    try callgrindWindowEdges(mock.chips[0], n) { _ = try loop.run(mode: mode, timeout: .zero, returnAfterSourceHandled: true) }
    let fired = daemon.counters.reactionFires["toggle"] ?? 0
    precondition(fired == UInt64(n), "reaction boardd: \(fired) of \(n) edges")
    daemon.shutdown()
}

/// The same reaction at `info` in a flood the log's rate limit throttles,
/// counted whole: the loop's record and the log writer's part, the
/// deciding that a suppressed line is not written. The records are drained
/// on this thread every 64 edges, where the writer's thread drains them
/// every 20 ms in boardd (inline, on the manual clock: no writer thread, so
/// the count is exact run to run); the window is an hour, so both runs
/// write the same 200 lines and the difference is suppressed records
/// alone. At `.notice` (nothing traced), the same setup's reference;
/// `describedFirst`: through a handler the trace log does not know as
/// boardd's own, so each record is described and formatted before the
/// rate limit drops it (how every record went before the level and the
/// limit were asked first).
func boarddReactionFlood(_ n: Int, level: Logger.Level, describedFirst: Bool = false) throws {
    let yaml = """
        board: demo
        log: { rate_limit: { lines: 200, per: 1h } }
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true } }
          led: { pin: LED, output: { initial: off } }
        reactions:
          - name: toggle
            on: { line: button, edge: both }
            do: [ toggle: led ]
        """
    let config = loadConfig(yaml, file: "instr.yaml")
    let clock = ManualClock()
    let mock = try Demo.makeChips(clock: .manual(clock))
    var logger = instrLogger(level)
    if describedFirst {
        logger = Logger(label: "instr") { label in Forwarding(BoarddLogHandler(label: label, level: level, journal: false)) }
        logger.logLevel = level
    }
    var options = Daemon.Options(logger: logger, clock: .manual(clock), modeDriver: .external, summaryInterval: nil, mock: mock)
    options.inlineWorkers = true
    let daemon = try Daemon(config: config, options: options)
    let loop = daemon.loop
    let mode = RunLoopMode.default
    var edges = 0
    try drive(mock.chips[0], n) {
        _ = try loop.run(mode: mode, timeout: .zero, returnAfterSourceHandled: true)
        edges += 1
        if edges & 63 == 0 { daemon.flushEvents() }
    }
    daemon.flushEvents()
    let fired = daemon.counters.reactionFires["toggle"] ?? 0
    precondition(fired == UInt64(n), "reaction boardd-flood: \(fired) of \(n) edges")
    daemon.shutdown()
}

/// boardd's handler under another type: the trace log hands it every
/// record described, as any handler not its own.
struct Forwarding: LogHandler {
    var inner: BoarddLogHandler
    init(_ h: BoarddLogHandler) { inner = h }
    var logLevel: Logger.Level {
        get { inner.logLevel }
        set { inner.logLevel = newValue }
    }
    var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = newValue }
    }
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = newValue }
    }
    func log(event: LogEvent) { inner.log(event: event) }
}

/// `drive`, under a name of its own: at `info`, scripts/instructions.sh
/// counts only what runs inside it on the loop's thread (callgrind's
/// `--toggle-collect`), so the log writer's formatting on its thread and
/// the last drain at the daemon's stop are not the reaction's cost.
@inline(never)
func callgrindWindowEdges(_ chip: MockChip, _ n: Int, pass: () throws -> Void) throws {
    try drive(chip, n, pass: pass)
}

/// `n` edges on the button, a loop pass after each.
private func drive(_ chip: MockChip, _ n: Int, pass: () throws -> Void) throws {
    var level = true  // released (active low)
    for _ in 0..<n {
        level.toggle()
        try chip.setLevel(.offset(17), level)
        try pass()
    }
}

/// A scenario's config, loaded as boardd loads one; a config that does not
/// load ends the driver with its errors. The boards come from the
/// checkout's boards/ (scripts/instructions.sh runs from the checkout's
/// root, with a copy of this binary elsewhere) unless `catalog` says.
func loadConfig(_ yaml: String, file: String, catalog: BoardCatalog? = nil) -> DaemonConfig {
    let catalog = catalog ?? BoardCatalog(directories: ["boards"] + BoardCatalog.standardDirectories())
    let loaded = ConfigLoader.load(text: yaml, file: file, options: LoadOptions(catalog: catalog))
    guard let config = loaded.config else {
        fputs("instr-daemon: \(file) does not load: \(loaded.errors.map(\.description))\n", stderr)
        exit(1)
    }
    return config
}

/// boardd's log handler at `level` (`.critical`: quiet, nothing traced).
func instrLogger(_ level: Logger.Level = .critical) -> Logger {
    var logger = Logger(label: "instr") { label in BoarddLogHandler(label: label, level: level, journal: false) }
    logger.logLevel = level
    return logger
}
