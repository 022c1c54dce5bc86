import Boardloop
import CDaemon
import Glibc
import Logging

/// Runs `run` actions on the main loop: `posix_spawn` with an argv (a shell
/// only when the command says `shell: true`) in a process group the child
/// leads, the daemon's environment without systemd's notify and watchdog
/// variables, plus the `BOARDD_*` ones of the run; stdout and stderr are
/// blocking pipes for the child, read (at most `readBudget` bytes a stream
/// a pass) through non-blocking read ends as port sources and logged line
/// by line (bounded, the rest counted); a timeout (SIGTERM to the child's
/// group, then SIGKILL after `kill_after`); and the child watched, signalled
/// and reaped by the engine's `ChildSource` (its pidfd, a port source too,
/// opened where it is spawned): no zombie outlives the loop pass that sees
/// the exit. Spawning (`bd_spawn`) is the one process call made here. Per
/// command (by name, across reloads), at most `max_running` at once;
/// refusals are counted and logged.
final class CommandRunner {
    unowned let rt: LoopRuntime
    let logger: Logger
    /// Set: a run is handed to it instead of started (`boardd test` and
    /// `boardd replay` record what would run).
    var recorder: (@Sendable (CommandRun) -> Void)?
    /// Per command: running now, started, refused.
    private(set) var running: [Int]
    private(set) var started: [UInt64]
    private(set) var refused: [UInt64]
    private var children: [Child] = []
    /// Bytes of one logged output line; longer lines are cut.
    static let maxLineBytes = 1024
    /// Lines logged per stream per run; more are counted, not logged.
    static let maxLines = 200
    /// Bytes read from one stream per readiness: the rest waits for the
    /// next pass, so tasks and signals keep their timing under a flood.
    static let readBudget = 16 * 1024
    /// Bytes read from each stream of a child that exited, before its exit
    /// is logged.
    static let drainBudget = 256 * 1024
    /// One read buffer for every stream (all are read on the main loop),
    /// allocated once.
    let readBuffer = UnsafeMutablePointer<UInt8>.allocate(capacity: CommandRunner.readBudget)

    init(runtime: LoopRuntime, logger: Logger) {
        rt = runtime
        self.logger = logger
        running = Array(repeating: 0, count: runtime.config.commands.count)
        started = Array(repeating: 0, count: runtime.config.commands.count)
        refused = Array(repeating: 0, count: runtime.config.commands.count)
    }

    deinit { readBuffer.deallocate() }

    var config: DaemonConfig { rt.config }

    /// A reload changed the commands: counters start again. A running
    /// child counts toward the command of its name at its new index (a
    /// reload may reorder `commands`), or toward none when its command is
    /// gone; it finishes under its old limits either way.
    func configChanged() {
        let n = config.commands.count
        for child in children { child.command = config.commands.firstIndex { $0.name == child.name } }
        running = (0..<n).map { i in children.filter { $0.command == i }.count }
        started = Array(repeating: 0, count: n)
        refused = Array(repeating: 0, count: n)
    }
    var runningChildren: Int { children.count }

    final class Child {
        /// The command's name: what the child is charged to across reloads.
        let name: String
        /// Its start and exit lines' source (rate-limited per command, not with
        /// the daemon's own), and its output lines' (apart: a run's own
        /// output never suppresses the line that says how it ended).
        var source: String { "command \(name)" }
        var outputSource: String { "command \(name) output" }
        /// The command's index in the running config; nil once a reload
        /// removed it.
        var command: Int?
        /// The limits it was started with.
        let timeLimit: Duration
        let killAfter: Duration
        let label: String
        let start: MonotonicInstant
        /// The child on the main loop: its exit, its signals, its reaping.
        var process: ChildSource!
        var streams: [Stream] = []
        var timeout: RunLoopTimer?
        var termSent = false
        var killSent = false
        init(command: Int, config c: CommandConfig, label: String, start: MonotonicInstant) {
            self.command = command
            name = c.name
            timeLimit = c.timeout
            killAfter = c.killAfter
            self.label = label
            self.start = start
        }
    }

    final class Stream {
        let name: String
        let fd: Int32
        var source: PortSource?
        /// The line being read (at most `maxLineBytes`), allocated once.
        var pending: [UInt8] = []
        /// Bytes since the last newline.
        var midLine = false
        var logged = 0
        var linesNotLogged = 0
        /// Bytes of lines not logged and of long lines' cut ends.
        var bytesNotLogged = 0
        init(name: String, fd: Int32) {
            self.name = name
            self.fd = fd
            pending.reserveCapacity(CommandRunner.maxLineBytes)
        }
    }

    func run(site: Int, _ ctx: Context) {
        let s = rt.program.runSites[site]
        let c = config.commands[s.command.index]
        let ci = s.command.index
        guard running[ci] < c.maxRunning else {
            refused[ci] &+= 1
            rt.events.command(ci, refusedWith: running[ci])
            logger.warning(
                "command \(c.name): \(running[ci]) already running (max_running \(c.maxRunning)); this run is refused (\(refused[ci]) refused so far)",
                source: "command \(c.name)")
            return
        }
        var argv = s.argv
        if c.shell { argv = ["/bin/sh", "-c", argv.first ?? ""] }
        guard let program = argv.first else { return }
        // The run's own variables, then (for a child) the daemon's environment before them.
        var own: [String] = []
        if ctx.line >= 0 {
            own.append("BOARDD_LINE=\(config.lines[Int(ctx.line)].name)")
            if ctx.edge >= 0 { own.append("BOARDD_EDGE=\(ctx.edge == 1 ? "rising" : "falling")") }
            own.append("BOARDD_TIMESTAMP_NS=\(ctx.timestamp)")
        }
        if ctx.reaction >= 0 { own.append("BOARDD_REACTION=\(config.reactions[Int(ctx.reaction)].name)") }
        if ctx.task >= 0 { own.append("BOARDD_TASK=\(config.tasks[Int(ctx.task)].name)") }
        if ctx.repeatCount >= 0 { own.append("BOARDD_REPEAT=\(ctx.repeatCount)") }
        own.append("BOARDD_ORIGIN=\(ctx.origin.name)")
        if let recorder {
            started[ci] &+= 1
            logger.info("command \(c.name): would run: \(argv.joined(separator: " "))", source: "command \(c.name)")
            recorder(CommandRun(name: c.name, argv: argv, environment: own, at: rt.loop.now))
            return
        }
        var env: [String] = []
        var e = environ
        while let p = e.pointee {
            let entry = String(cString: p)
            if !Self.withheld(entry) { env.append(entry) }
            e += 1
        }
        env += own

        var outPipe: [Int32] = [-1, -1]
        var errPipe: [Int32] = [-1, -1]
        // Read ends non-blocking (for the loop), write ends blocking (for the child).
        guard bd_pipe(&outPipe) == 0 else { return spawnFailed(c, "pipe2", errno) }
        guard bd_pipe(&errPipe) == 0 else {
            close(outPipe[0]); close(outPipe[1])
            return spawnFailed(c, "pipe2", errno)
        }
        var pid: pid_t = 0
        var pidfd: Int32 = -1
        let rc = withCStrings(argv) { cargv in
            withCStrings(env) { cenv in
                bd_spawn(&pid, &pidfd, program, cargv, cenv, outPipe[1], errPipe[1], program.contains("/") ? 0 : 1)
            }
        }
        close(outPipe[1])
        close(errPipe[1])
        guard rc == 0, pidfd >= 0 else {
            close(outPipe[0]); close(errPipe[0])
            // A child spawned without a pidfd was killed and reaped by bd_spawn.
            return rc != 0 ? spawnFailed(c, "posix_spawn \(program)", rc) : spawnFailed(c, "pidfd_open", -pidfd)
        }
        running[ci] += 1
        started[ci] &+= 1
        let label = "command \(c.name) [pid \(pid)]"
        let child = Child(command: ci, config: c, label: label, start: rt.loop.now)
        logger.info("\(label): started: \(argv.joined(separator: " "))", source: "command \(c.name)")
        rt.events.command(ci, started: pid)
        children.append(child)
        child.process = ChildSource(pidfd: pidfd, pid: pid) { [unowned self, unowned child] _, status in
            self.reaped(child, status: status)
        }
        do {
            try child.process.add(to: rt.loop, mode: .common)
            for (name, fd) in [("stdout", outPipe[0]), ("stderr", errPipe[0])] {
                let stream = Stream(name: name, fd: fd)
                let src = PortSource(fd: fd) { [unowned self, unowned child, unowned stream] _, _ in
                    self.readable(stream, child)
                }
                try rt.loop.add(src, mode: .common)
                stream.source = src
                child.streams.append(stream)
            }
            let t = RunLoopTimer(fireAt: rt.loop.now + c.timeout, interval: c.killAfter) { [unowned self, unowned child] _ in
                self.timedOut(child)
            }
            try rt.loop.add(t, mode: .common)
            child.timeout = t
        } catch {
            logger.error("\(label): cannot watch the child on the loop: \(error); killing it")
            for fd in [outPipe[0], errPipe[0]] where !child.streams.contains(where: { $0.fd == fd }) { close(fd) }
            signalGroup(child, SIGKILL)
            // Reaped here, its handler (`reaped`) reads and closes its
            // streams and ends its sources: nothing of the child stays on
            // the loop (its sources hold it unowned).
            child.process.waitForExit()
        }
    }

    /// Variables of the daemon's environment a child does not get: the
    /// `BOARDD_*` ones (set per run), and systemd's notify socket and
    /// watchdog (a child could report READY or pet the watchdog for boardd).
    static let withheldVariables = ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"]

    static func withheld(_ entry: String) -> Bool {
        if entry.hasPrefix("BOARDD_") { return true }
        let name = entry.prefix { $0 != "=" }
        return withheldVariables.contains { $0 == name }
    }

    private func spawnFailed(_ c: CommandConfig, _ call: String, _ e: Int32) {
        logger.error("command \(c.name): \(call) failed: \(String(cString: strerror(e)))")
    }

    private func timedOut(_ child: Child) {
        if !child.termSent {
            child.termSent = true
            logger.warning("\(child.label): still running after its timeout \(child.timeLimit.short): SIGTERM")
            signalGroup(child, SIGTERM)
        } else if !child.killSent {
            // On a manual clock (`boardd test --run-commands`, replay) no
            // real time passed since the SIGTERM: the child gets its
            // `kill_after` in real time to end on it, as on a board.
            if rt.loop.manualClock != nil,
                ChildSource.waitForAnyExit(of: [child.process], until: .now + child.killAfter), child.process.reapIfExited() != nil
            {
                return
            }
            child.killSent = true
            logger.warning("\(child.label): still running \(child.killAfter.short) after SIGTERM: SIGKILL")
            signalGroup(child, SIGKILL)
        }
    }

    /// Signals the child's process group (the child leads it: it was
    /// spawned with POSIX_SPAWN_SETPGROUP), so what it started goes too.
    /// Only while the child is not reaped (`ChildSource` refuses after):
    /// until then its pid, and so the group's id, cannot be reused.
    private func signalGroup(_ child: Child, _ sig: Int32) {
        try? child.process.signalProcessGroup(sig)
    }

    private func finish(_ child: Child, status: ChildSource.Status) {
        guard let i = children.firstIndex(where: { $0 === child }) else { return }
        children.remove(at: i)
        if let ci = child.command, ci < running.count { running[ci] = max(0, running[ci] - 1) }
        child.timeout?.invalidate()
        for s in child.streams {
            report(s, child)
            s.source?.invalidate()
            close(s.fd)
        }
        child.streams = []
        let took = (rt.loop.now - child.start).short
        if let ci = child.command {
            switch status {
            case let .exited(code): rt.events.command(ci, ended: 1, status: code)
            case let .killed(sig, _): rt.events.command(ci, ended: 2, status: sig)
            case .lost: rt.events.command(ci, ended: 3, status: 0)
            }
        }
        switch status {
        case let .exited(code):
            let text = "\(child.label): exited with status \(code) after \(took)"
            if code == 0 { logger.info("\(text)", source: child.source) } else { logger.warning("\(text)", source: child.source) }
        case let .killed(sig, _):
            logger.warning(
                "\(child.label): killed by \(SignalMask.name(sig))\(child.termSent ? " (timeout)" : "") after \(took)")
        case .lost:
            logger.warning("\(child.label): ended after \(took); its exit status was collected elsewhere")
        }
    }

    /// Time `stopAll` allows past the largest `kill_after` by default.
    static let stopMargin: Duration = .seconds(1)

    /// Stops and reaps every child (shutdown), all at once: SIGTERM to
    /// every child's process group, then each group still running its
    /// command's `kill_after` later gets SIGKILL; at `deadline` (by
    /// default the largest `kill_after` of the children plus `stopMargin`
    /// from now) every group left gets SIGKILL, and every child is reaped
    /// before this returns. Blocks the calling (main loop's) thread without
    /// running the loop (its clock may be manual): waits on the children's
    /// pidfds through `ChildSource.waitForAnyExit`. Logs a line per child
    /// killed and one for all.
    func stopAll(deadline: MonotonicInstant? = nil) {
        guard !children.isEmpty else { return }
        let start = MonotonicInstant.now
        let end = deadline ?? start + (children.map(\.killAfter).max() ?? .zero) + Self.stopMargin
        var left: [(child: Child, killAt: MonotonicInstant)] = []
        for child in children {
            child.timeout?.invalidate()
            child.timeout = nil
            signalGroup(child, SIGTERM)
            left.append((child, start + child.killAfter))
        }
        let total = left.count
        var killed = 0
        while true {
            // Reap what exited (each one's handler reports it).
            left.removeAll { entry in
                guard let status = entry.child.process.reapIfExited() else { return false }
                settle(entry.child, status)
                return true
            }
            if left.isEmpty { break }
            let now = MonotonicInstant.now
            for entry in left where !entry.child.killSent && (entry.killAt <= now || end <= now) {
                entry.child.killSent = true
                killed += 1
                let why = entry.killAt <= now ? "\(entry.child.killAfter.short) after SIGTERM" : "at the stop deadline"
                logger.warning("\(entry.child.label): still running \(why): SIGKILL")
                signalGroup(entry.child, SIGKILL)
            }
            if end <= now {
                // Every group left has SIGKILL, which cannot be caught: reap.
                for entry in left { settle(entry.child, entry.child.process.waitForExit()) }
                break
            }
            // Sleep until a child exits, the next SIGKILL is due or the deadline.
            var next = end
            for entry in left where !entry.child.killSent && entry.killAt < next { next = entry.killAt }
            _ = ChildSource.waitForAnyExit(of: left.map { $0.child.process }, until: next)
        }
        let took = (MonotonicInstant.now - start).short
        logger.notice(
            "commands: \(total) \(total == 1 ? "child" : "children") stopped in \(took): \(total - killed) ended after SIGTERM, \(killed) needed SIGKILL")
    }

    /// A child reaped (its exit seen on the loop, or at the stop): what is
    /// left in its pipes is read, then its exit is reported. Its pidfd
    /// closes with its `ChildSource`, when the child is let go.
    private func reaped(_ child: Child, status: ChildSource.Status) {
        drain(child)
        finish(child, status: status)
    }

    /// A child `stopAll` reaped: its handler reported it, unless its source
    /// was no longer valid (the loop ended, say): then it is reported here.
    private func settle(_ child: Child, _ status: ChildSource.Status) {
        if children.contains(where: { $0 === child }) { reaped(child, status: status) }
    }
}

/// Calls `body` with a NULL-terminated C array of `strings`.
func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
    var ptrs: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
    ptrs.append(nil)
    defer { for p in ptrs { free(p) } }
    return ptrs.withUnsafeBufferPointer { body($0.baseAddress!) }
}

/// A command run that was recorded, not started (`Daemon.Options.commandRecorder`).
public struct CommandRun: Sendable, Equatable {
    public var name: String
    /// The argv it would have run (`/bin/sh -c …` for a shell command).
    public var argv: [String]
    /// The `BOARDD_*` variables of the run, as `NAME=value`.
    public var environment: [String]
    /// When (the daemon's clock).
    public var at: MonotonicInstant
}
