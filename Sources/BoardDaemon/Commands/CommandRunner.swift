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
/// group, then SIGKILL after `kill_after`); and the child reaped through
/// its pidfd, a port source too: no zombie outlives the loop pass that
/// sees the exit. Per command (by name, across reloads), at most
/// `max_running` at once; refusals are counted and logged.
final class CommandRunner {
    unowned let rt: LoopRuntime
    let logger: Logger
    /// Per command: running now, started, refused.
    private(set) var running: [Int]
    private(set) var started: [UInt64]
    private(set) var refused: [UInt64]
    private var children: [Child] = []
    private(set) var failures: UInt64 = 0
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
    private let readBuffer = UnsafeMutablePointer<UInt8>.allocate(capacity: CommandRunner.readBudget)

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
        let pid: pid_t
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
        var pidSource: PortSource?
        var streams: [Stream] = []
        var timeout: RunLoopTimer?
        var termSent = false
        var killSent = false
        /// waitpid collected the child: its status is the one to report.
        var reaped = false
        init(pid: pid_t, command: Int, config c: CommandConfig, label: String, start: MonotonicInstant) {
            self.pid = pid
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
            logger.warning(
                "command \(c.name): \(running[ci]) already running (max_running \(c.maxRunning)); this run is refused (\(refused[ci]) refused so far)",
                source: "command \(c.name)")
            return
        }
        var argv = s.argv
        if c.shell { argv = ["/bin/sh", "-c", argv.first ?? ""] }
        guard let program = argv.first else { return }
        var env: [String] = []
        var e = environ
        while let p = e.pointee {
            let entry = String(cString: p)
            if !Self.withheld(entry) { env.append(entry) }
            e += 1
        }
        if ctx.line >= 0 {
            env.append("BOARDD_LINE=\(config.lines[Int(ctx.line)].name)")
            if ctx.edge >= 0 { env.append("BOARDD_EDGE=\(ctx.edge == 1 ? "rising" : "falling")") }
            env.append("BOARDD_TIMESTAMP_NS=\(ctx.timestamp)")
        }
        if ctx.reaction >= 0 { env.append("BOARDD_REACTION=\(config.reactions[Int(ctx.reaction)].name)") }
        if ctx.task >= 0 { env.append("BOARDD_TASK=\(config.tasks[Int(ctx.task)].name)") }
        if ctx.repeatCount >= 0 { env.append("BOARDD_REPEAT=\(ctx.repeatCount)") }

        var outPipe: [Int32] = [-1, -1]
        var errPipe: [Int32] = [-1, -1]
        // Read ends non-blocking (for the loop), write ends blocking (for the child).
        guard bd_pipe(&outPipe) == 0 else { return spawnFailed(c, "pipe2", errno) }
        guard bd_pipe(&errPipe) == 0 else {
            close(outPipe[0]); close(outPipe[1])
            return spawnFailed(c, "pipe2", errno)
        }
        var pid: pid_t = 0
        let rc = withCStrings(argv) { cargv in
            withCStrings(env) { cenv in
                bd_spawn(&pid, program, cargv, cenv, outPipe[1], errPipe[1], program.contains("/") ? 0 : 1)
            }
        }
        close(outPipe[1])
        close(errPipe[1])
        guard rc == 0 else {
            close(outPipe[0]); close(errPipe[0])
            return spawnFailed(c, "posix_spawn \(program)", rc)
        }
        running[ci] += 1
        started[ci] &+= 1
        let label = "command \(c.name) [pid \(pid)]"
        let child = Child(pid: pid, command: ci, config: c, label: label, start: rt.loop.now)
        logger.info("\(label): started: \(argv.joined(separator: " "))", source: "command \(c.name)")
        children.append(child)
        let pfd = bd_pidfd_open(pid)
        do {
            if pfd >= 0 {
                let src = PortSource(fd: pfd) { [unowned self, unowned child] _, _ in self.exited(child) }
                try rt.loop.add(src, mode: .common)
                child.pidSource = src
            } else {
                logger.error("\(label): pidfd_open failed (errno \(errno)); the child is reaped when its output closes")
            }
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
            kill(-pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            child.reaped = true
            // Nothing of the child may stay on the loop: its sources hold it unowned.
            child.pidSource?.invalidate()
            child.pidSource = nil
            if pfd >= 0 { close(pfd) }
            for fd in [outPipe[0], errPipe[0]] where !child.streams.contains(where: { $0.fd == fd }) { close(fd) }
            finish(child, status: status)
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
        failures &+= 1
        logger.error("command \(c.name): \(call) failed: \(String(cString: strerror(e)))")
    }

    /// Reads once, at most `readBudget` bytes, from a readable stream: a
    /// child that writes without pause cannot keep the loop from its
    /// timers and other sources (what is left stays readable for the next
    /// pass: the loop's sources are level-triggered).
    private func readable(_ s: Stream, _ child: Child) {
        let n = read(s.fd, readBuffer, Self.readBudget)
        if n > 0 {
            consume(s, child, UnsafePointer(readBuffer), n)
        } else if n == 0 || (errno != EAGAIN && errno != EINTR) {
            closeStream(s, child)
        }
    }

    /// What is in the pipes of a child that exited, read before its exit
    /// is reported: until EAGAIN, or at most `drainBudget` bytes a stream
    /// (something the child started may still hold the pipe and write).
    private func drain(_ child: Child) {
        for s in child.streams {
            var left = Self.drainBudget
            while left > 0 && s.source != nil {
                let n = read(s.fd, readBuffer, min(left, Self.readBudget))
                if n > 0 {
                    consume(s, child, UnsafePointer(readBuffer), n)
                    left -= n
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    if n == 0 || errno != EAGAIN { closeStream(s, child) }
                    break
                }
            }
        }
    }

    /// Splits what was read into lines: the first `maxLines` are logged
    /// (each cut at `maxLineBytes`), the rest counted.
    private func consume(_ s: Stream, _ child: Child, _ p: UnsafePointer<UInt8>, _ n: Int) {
        var i = 0
        while i < n {
            let nl = memchr(p + i, 10, n - i).map { $0.assumingMemoryBound(to: UInt8.self) - UnsafeMutablePointer(mutating: p) }
            let end = nl ?? n
            let count = end - i
            if count > 0 {
                s.midLine = true
                if s.logged < Self.maxLines {
                    let take = min(count, Self.maxLineBytes - s.pending.count)
                    if take > 0 { s.pending.append(contentsOf: UnsafeBufferPointer(start: p + i, count: take)) }
                    s.bytesNotLogged += count - take
                } else {
                    s.bytesNotLogged += count
                }
            }
            guard let nl else { break }
            endLine(s, child)
            i = nl + 1
        }
    }

    /// A line of `s` ended (at a newline, or at the stream's end).
    private func endLine(_ s: Stream, _ child: Child) {
        s.midLine = false
        guard s.logged < Self.maxLines else {
            s.linesNotLogged += 1
            return
        }
        s.logged += 1
        let label = child.label
        if s.name == "stderr" {
            logger.warning("\(label) stderr: \(String(decoding: s.pending, as: UTF8.self))", source: child.outputSource)
        } else {
            logger.info("\(label): \(String(decoding: s.pending, as: UTF8.self))", source: child.outputSource)
        }
        s.pending.removeAll(keepingCapacity: true)
    }

    /// The stream's last line (without a newline), and what was not logged.
    private func report(_ s: Stream, _ child: Child) {
        if s.midLine { endLine(s, child) }
        if s.linesNotLogged > 0 {
            logger.notice(
                "\(child.label): \(s.linesNotLogged) more \(s.name) lines not logged (\(s.bytesNotLogged) bytes of \(s.name) not logged in all)")
        } else if s.bytesNotLogged > 0 {
            logger.notice("\(child.label): \(s.bytesNotLogged) bytes of \(s.name) not logged (lines cut at \(Self.maxLineBytes) bytes)")
        }
    }

    private func closeStream(_ s: Stream, _ child: Child) {
        report(s, child)
        s.source?.invalidate()
        s.source = nil
        close(s.fd)
        child.streams.removeAll { $0 === s }
        // Without a pidfd, the end of the output is the exit (not when the
        // child was already reaped: its exit is reported by whoever reaped it).
        if child.pidSource == nil && child.streams.isEmpty && !child.reaped {
            child.reaped = true
            var status: Int32 = 0
            waitpid(child.pid, &status, 0)
            finish(child, status: status)
        }
    }

    private func exited(_ child: Child) {
        var status: Int32 = 0
        let r = waitpid(child.pid, &status, WNOHANG)
        guard r == child.pid else { return }
        reaped(child, status: status)
    }

    private func timedOut(_ child: Child) {
        if !child.termSent {
            child.termSent = true
            logger.warning("\(child.label): still running after its timeout \(child.timeLimit.short): SIGTERM")
            signalGroup(child, SIGTERM)
        } else if !child.killSent {
            child.killSent = true
            logger.warning("\(child.label): still running \(child.killAfter.short) after SIGTERM: SIGKILL")
            signalGroup(child, SIGKILL)
        }
    }

    /// Signals the child's process group (the child leads it: it was
    /// spawned with POSIX_SPAWN_SETPGROUP), so what it started goes too.
    /// Only while the child is not reaped: until then its pid, and so the
    /// group's id, cannot be reused.
    private func signalGroup(_ child: Child, _ sig: Int32) {
        if kill(-child.pid, sig) != 0 && errno == ESRCH { kill(child.pid, sig) }
    }

    private func finish(_ child: Child, status: Int32) {
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
        let sig = status & 0x7f
        if sig == 0 {
            let code = (status >> 8) & 0xff
            let text = "\(child.label): exited with status \(code) after \(took)"
            if code == 0 { logger.info("\(text)", source: child.source) } else { logger.warning("\(text)", source: child.source) }
        } else {
            logger.warning(
                "\(child.label): killed by \(SignalMask.name(sig))\(child.termSent ? " (timeout)" : "") after \(took)")
        }
    }

    /// Time `stopAll` allows past the largest `kill_after` by default.
    static let stopMargin: Duration = .seconds(1)

    /// Stops and reaps every child (shutdown), all at once: SIGTERM to
    /// every child's process group, then each group still running its
    /// command's `kill_after` later gets SIGKILL; at `deadline` (by
    /// default the largest `kill_after` of the children plus `stopMargin`
    /// from now) every group left gets SIGKILL, and every child is reaped
    /// before this returns. Blocks the calling (main loop's) thread; waits
    /// on the children's pidfds. Logs a line per child killed and one for
    /// all.
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
        var fds: [pollfd] = []
        fds.reserveCapacity(total)
        while true {
            // Reap what exited.
            left.removeAll { entry in
                var status: Int32 = 0
                let r = waitpid(entry.child.pid, &status, WNOHANG)
                guard r == entry.child.pid || (r < 0 && errno == ECHILD) else { return false }
                reaped(entry.child, status: status)
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
                for entry in left {
                    var status: Int32 = 0
                    while waitpid(entry.child.pid, &status, 0) < 0 && errno == EINTR {}
                    reaped(entry.child, status: status)
                }
                break
            }
            // Sleep until a child exits, the next SIGKILL is due or the deadline.
            var next = end
            for entry in left where !entry.child.killSent && entry.killAt < next { next = entry.killAt }
            fds.removeAll(keepingCapacity: true)
            var blind = false
            for entry in left {
                if let fd = entry.child.pidSource?.fd { fds.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0)) } else { blind = true }
            }
            let ns = next.nanoseconds > now.nanoseconds ? next.nanoseconds - now.nanoseconds : 0
            var ms = Int32(clamping: (ns + 999_999) / 1_000_000)
            if blind { ms = min(ms, 10) }  // a child without a pidfd: look again soon
            _ = poll(&fds, nfds_t(fds.count), max(ms, 1))
        }
        let took = (MonotonicInstant.now - start).short
        logger.notice(
            "commands: \(total) \(total == 1 ? "child" : "children") stopped in \(took): \(total - killed) ended after SIGTERM, \(killed) needed SIGKILL")
    }

    /// A child `stopAll` reaped.
    /// A child waitpid collected (its exit seen, or at the stop): its pidfd
    /// ends, what is left in its pipes is read, then its exit is reported.
    private func reaped(_ child: Child, status: Int32) {
        child.reaped = true
        if let src = child.pidSource {
            src.invalidate()
            close(src.fd)
            child.pidSource = nil
        }
        drain(child)
        finish(child, status: status)
    }
}

/// Calls `body` with a NULL-terminated C array of `strings`.
func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
    var ptrs: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
    ptrs.append(nil)
    defer { for p in ptrs { free(p) } }
    return ptrs.withUnsafeBufferPointer { body($0.baseAddress!) }
}
