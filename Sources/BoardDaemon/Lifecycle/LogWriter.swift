import Boardloop
import Glibc
import Logging
import Synchronization

/// What wakes the log writer's thread when it sleeps: flags it raises
/// before sleeping and a non-blocking pipe it sleeps on. A producer that
/// finds its flag raised lowers it and writes one byte; a writer that is
/// awake costs producers one atomic load. The flags are stored and loaded
/// sequentially consistent on both sides, so either the producer sees the
/// writer asleep, or the writer, checking again after raising the flag,
/// sees the producer's work.
///
/// Two depths of sleep: asleep until poked (`sleeping`: every producer
/// wakes it), or napping (`napping`: the writer looks again within
/// `LogWriter.napMilliseconds` by itself, so a loop's trace record does not
/// wake it — a reaction costs its loop no system call — while a log line
/// from elsewhere still does).
final class WriterWake: @unchecked Sendable {
    let sleeping = Atomic<Bool>(false)
    let napping = Atomic<Bool>(false)
    /// The read end (the writer sleeps on it).
    let fd: Int32
    private let writeEnd: Int32

    init() {
        var fds: [Int32] = [-1, -1]
        precondition(pipe(&fds) == 0, "boardd: pipe failed (errno \(errno))")
        for f in fds {
            _ = fcntl(f, F_SETFL, fcntl(f, F_GETFL) | O_NONBLOCK)
            _ = fcntl(f, F_SETFD, FD_CLOEXEC)
        }
        fd = fds[0]
        writeEnd = fds[1]
    }

    deinit {
        close(fd)
        close(writeEnd)
    }

    /// After a trace record was published (a loop's hot path): wakes the
    /// writer only if it sleeps until poked.
    @inline(__always) func poke() {
        if sleeping.load(ordering: .sequentiallyConsistent) { wakeFromSleep() }
    }

    /// After a log line was queued: wakes the writer if it sleeps or naps.
    func pokeNow() {
        if sleeping.load(ordering: .sequentiallyConsistent) || napping.load(ordering: .sequentiallyConsistent) { wake() }
    }

    @inline(never) func wakeFromSleep() {
        guard sleeping.exchange(false, ordering: .sequentiallyConsistent) else { return }
        writeByte()
    }

    /// Wakes the writer from either sleep (a flush, a stop).
    func wake() {
        let slept = sleeping.exchange(false, ordering: .sequentiallyConsistent)
        let napped = napping.exchange(false, ordering: .sequentiallyConsistent)
        if slept || napped { writeByte() }
    }

    private func writeByte() {
        var one: UInt8 = 1
        _ = write(writeEnd, &one, 1)
    }
}

/// The daemon's log writer: one thread that writes boardd's log lines to
/// stderr (or another fd), so no loop ever blocks in `write` (a pipe that
/// nobody reads, a slow journald), and that drains every loop's trace ring
/// (`TraceLog`), formatting the per-event lines off the loops.
///
/// - Lines are queued (at most `queueCapacity`); when the queue is full a
///   line is dropped and counted, and once writing resumes the writer logs
///   one line `N log lines dropped`.
/// - Rate limit, per source, as journald does per service: at most
///   `RateLimit.burst` lines of one source per `RateLimit.interval`; the
///   rest are dropped and counted, and when the interval ends (or at stop)
///   one line says `SOURCE: suppressed M messages`. A source is the
///   swift-log `source` of the message: a `log:` action's site, a
///   reaction's trace, a line's trace, and the daemon's own messages
///   together (`boardd`).
/// - The thread runs while a daemon is attached (`attach`/`detach`; a
///   daemon attaches when it starts and detaches at the end of its stop,
///   after a last drain of its rings). With no thread, a line is written
///   at once by the caller (start-up, `--check`, `--safe-outputs`: short
///   commands print everything before they exit).
/// - A stop waits for the queue to be written for at most a bound
///   (`detach(_:timeout:)`); past it, the writer is left blocked and the
///   process exits without the rest.
public final class LogWriter: @unchecked Sendable {
    /// boardd's writer, on stderr.
    public static let shared = LogWriter(fd: 2)

    public struct RateLimit: Sendable, Equatable {
        public var burst: Int
        public var interval: Duration
        public init(burst: Int = 200, interval: Duration = .seconds(5)) {
            self.burst = burst
            self.interval = interval
        }
    }

    public let fd: Int32
    /// The rate limit given at init (a config without `log: rate_limit`
    /// goes back to it).
    public let defaultRateLimit: RateLimit?
    let queueCapacity: Int
    /// How often a busy writer drains the rings (it sleeps on the wake pipe
    /// once two polls in a row found nothing).
    static let busyPollMilliseconds: Int32 = 20
    /// How long a quiet writer naps while the loops traced recently.
    static let napMilliseconds: Int32 = 250
    /// For how long after the loops' last trace record the writer naps
    /// (then it sleeps until poked: an idle daemon does not wake).
    static let napAfterTraces: UInt64 = 10_000_000_000
    let wake = WriterWake()
    /// The format of the writer's own lines (drops, suppressions).
    let journal: Bool
    let start: UInt64

    private let lock = Lock()
    // With `lock` held:
    private var lines: [String] = []
    private var dropped: UInt64 = 0
    private var queued: UInt64 = 0
    private var written: UInt64 = 0
    private var users = 0
    private var running = false
    private var stopRequested = false
    /// A stop found the thread still writing past its bound (the fd
    /// blocks): later flushes do not wait for it again.
    private var gaveUp = false
    private var traces: [TraceLog] = []
    private var windows: [String: SourceWindow] = [:]
    /// nil: off.
    private var limit: RateLimit? {
        didSet { (interval, burst) = Self.counts(limit) }
    }
    /// `limit`'s period in nanoseconds (0: off) and its lines, read for
    /// every record the trace log may write (no exclusivity check: the
    /// lock orders them).
    @exclusivity(unchecked) private var interval: UInt64 = 0
    @exclusivity(unchecked) private var burst = 0

    /// A limit's period in nanoseconds (at least 1; 0: off) and its lines.
    private static func counts(_ l: RateLimit?) -> (UInt64, Int) {
        guard let l else { return (0, 0) }
        return (UInt64(max(1, l.interval.nanosecondsClamped)), l.burst)
    }

    /// One source's rate-limit window, kept for the writer's life (its
    /// fields with the writer's lock held). The trace log holds the window
    /// of each reaction, line, sequence and task it logs for, so that the
    /// limit asks no dictionary for a record (`admits(_:level:now:)`).
    final class SourceWindow: @unchecked Sendable {
        let source: String
        /// The daemon's own messages: its notices and worse are never suppressed.
        let isDaemon: Bool
        @exclusivity(unchecked) fileprivate var start: UInt64 = 0
        @exclusivity(unchecked) fileprivate var count = 0
        @exclusivity(unchecked) fileprivate var suppressed: UInt64 = 0
        @exclusivity(unchecked) fileprivate var started = false
        fileprivate init(_ source: String) {
            self.source = source
            isDaemon = source == LogWriter.daemonSource
        }
    }

    public init(fd: Int32, rateLimit: RateLimit? = RateLimit(), queueCapacity: Int = 2048) {
        self.fd = fd
        defaultRateLimit = rateLimit
        limit = rateLimit
        (interval, burst) = Self.counts(rateLimit)
        self.queueCapacity = queueCapacity
        journal = getenv("JOURNAL_STREAM") != nil
        start = MonotonicInstant.now.nanoseconds
        lines.reserveCapacity(queueCapacity)
    }

    /// The rate limit in force (nil: off).
    public var rateLimit: RateLimit? {
        get { lock.withLock { limit } }
        set {
            lock.withLock {
                guard limit != newValue else { return }
                // Lines suppressed under the old limit are still reported
                // when their window ends.
                limit = newValue
            }
        }
    }

    /// Whether the writer's thread runs (lines are queued, not written by the caller).
    public var isRunning: Bool { lock.withLock { running } }

    /// Lines of `source` suppressed in its current window, not yet reported.
    func suppressed(_ source: String) -> UInt64 { lock.withLock { windows[source]?.suppressed ?? 0 } }

    /// The window of `source` (made the first time it is asked for): what
    /// `admits(_:level:now:)` takes.
    func window(_ source: String) -> SourceWindow { lock.withLock { windowLocked(source) } }

    private func windowLocked(_ source: String) -> SourceWindow {
        if let w = windows[source] { return w }
        let w = SourceWindow(source)
        windows[source] = w
        return w
    }

    /// Lines dropped because the queue was full, not yet reported.
    var pendingDrops: UInt64 { lock.withLock { dropped } }

    // MARK: Lines

    /// Queues a formatted line (ending in a newline) of `source`, or writes
    /// it at once when no thread runs. Never blocks on the fd while the
    /// thread runs. `admitted`: `admits(source:level:)` let it through already.
    public func submit(_ text: String, source: String, level: Logger.Level = .info, admitted: Bool = false) {
        let now = admitted ? 0 : MonotonicInstant.now.nanoseconds
        var summary: String?
        let queuedIt = lock.withLock { () -> Bool? in
            guard admitted || admitsLocked(windowLocked(source), level: level, now: now, summary: &summary) else { return nil }
            guard running else { return false }
            if let summary { enqueue(summary) }
            enqueue(text)
            return true
        }
        switch queuedIt {
        case true?: wake.pokeNow()
        case false?:
            if let summary { writeAll(summary) }
            writeAll(text)
        case nil: break
        }
    }

    /// Whether a line of `source` at `level` is written now, by the rate
    /// limit: true takes its place in the window (the line must follow,
    /// `submit(_:source:level:admitted:)`), false counts it as suppressed.
    /// Lets a caller decide before it formats the line.
    func admits(source: String, level: Logger.Level) -> Bool {
        let now = MonotonicInstant.now.nanoseconds
        pthread_mutex_lock(lock.mutex)
        return admitsUnlocking(windowLocked(source), level: level, now: now)
    }

    /// `admits(source:level:)` for a window already at hand, at `now` (the
    /// trace log reads the clock once a batch): no dictionary, no clock.
    func admits(_ w: SourceWindow, level: Logger.Level, now: UInt64) -> Bool {
        pthread_mutex_lock(lock.mutex)
        return admitsUnlocking(w, level: level, now: now)
    }

    /// Both `admits`, from the lock taken: decides, releases the lock, then
    /// queues (or writes) the summary of a window that ended. (The mutex by
    /// hand, not `withLock`'s closure: this runs for every record the trace
    /// log may write.)
    private func admitsUnlocking(_ w: SourceWindow, level: Logger.Level, now: UInt64) -> Bool {
        var summary: String?
        let ok = admitsLocked(w, level: level, now: now, summary: &summary)
        guard let summary else {
            pthread_mutex_unlock(lock.mutex)
            return ok
        }
        let queuedSummary = running
        if queuedSummary { enqueue(summary) }
        pthread_mutex_unlock(lock.mutex)
        if queuedSummary { wake.pokeNow() } else { writeAll(summary) }
        return ok
    }

    /// With the lock held. The daemon's own notices and worse (start,
    /// reload, stop, its figures at stop) are never suppressed: what floods
    /// has a source of its own (a log action, a reaction, a command, a
    /// sequence).
    private func admitsLocked(_ w: SourceWindow, level: Logger.Level, now: UInt64, summary: inout String?) -> Bool {
        guard interval != 0, !(level >= .notice && w.isDaemon) else { return true }
        return admit(w, now: now, summary: &summary)
    }

    /// With the lock held.
    private func enqueue(_ text: String) {
        if lines.count >= queueCapacity {
            dropped &+= 1
        } else {
            lines.append(text)
            queued &+= 1
        }
    }

    /// The rate limit, with the lock held and a limit in force
    /// (`admitsLocked` asks): false drops the line. A window
    /// that ended with lines suppressed gives its summary (`summary`).
    private func admit(_ w: SourceWindow, now: UInt64, summary: inout String?) -> Bool {
        if !w.started || now &- w.start >= interval {
            // A new window; the one that ended says what it suppressed.
            if w.suppressed > 0 { summary = suppressedLine(w.source, w.suppressed, limit) }
            w.start = now
            w.count = 0
            w.suppressed = 0
            w.started = true
        }
        if w.count >= burst {
            w.suppressed &+= 1
            return false
        }
        w.count += 1
        return true
    }

    private func suppressedLine(_ source: String, _ n: UInt64, _ limit: RateLimit?) -> String {
        let rule = limit.map { "rate limit: \($0.burst) lines per \($0.interval.short)" } ?? "rate limit, since turned off"
        return format(.notice, "\(Self.sourceName(source)): suppressed \(n) messages (\(rule))")
    }

    /// The summaries of the windows that ended (`all`: every window with
    /// suppressed lines, at stop), with the lock held.
    private func endedWindows(now: UInt64, all: Bool) -> [String] {
        // With the limit turned off (`interval` 0), what it suppressed is reported now.
        var out: [String] = []
        for (source, w) in windows where w.suppressed > 0 && (all || now &- w.start >= interval) {
            out.append(suppressedLine(source, w.suppressed, limit))
            w.suppressed = 0
        }
        return out
    }

    /// When the next window with suppressed lines ends (nil: none).
    private func nextWindowEnd() -> UInt64? {
        var next: UInt64?
        for w in windows.values where w.suppressed > 0 { next = min(next ?? .max, w.start &+ interval) }
        return next
    }

    /// The daemon's own messages carry their module as source.
    static func sourceName(_ source: String) -> String { source == daemonSource ? "boardd" : source }
    /// The source of the daemon's own messages (swift-log's default: the module).
    static let daemonSource = "BoardDaemon"

    func format(_ level: Logger.Level, _ message: String) -> String {
        BoarddLogHandler.format(level: level, message: message, journal: journal, start: start)
    }

    private func writeAll(_ text: String) {
        var t = text
        t.withUTF8 { p in
            guard let base = p.baseAddress else { return }
            var off = 0
            while off < p.count {
                let n = write(fd, base + off, p.count - off)
                if n <= 0 {
                    if n < 0 && errno == EINTR { continue }
                    return
                }
                off += n
            }
        }
    }

    /// Waits (at most `timeout`) until every line queued so far is written.
    /// Returns false when the time ran out.
    @discardableResult
    public func flush(timeout: Duration) -> Bool {
        let (target, stuck) = lock.withLock { (running ? queued : 0, gaveUp) }
        if stuck { return false }
        wake.wake()
        return waitUntil(timeout: timeout) { written >= target || !running }
    }

    private func waitUntil(timeout: Duration, _ done: () -> Bool) -> Bool {
        let deadline = MonotonicInstant.now.nanoseconds &+ UInt64(max(0, timeout.nanosecondsClamped))
        while true {
            if lock.withLock(done) { return true }
            if MonotonicInstant.now.nanoseconds >= deadline { return false }
            usleep(1000)
        }
    }

    // MARK: Daemons

    /// A daemon starts: its rings are drained from now on, and the thread
    /// runs (started by the first daemon).
    func attach(_ trace: TraceLog) {
        let start = lock.withLock { () -> Bool in
            traces.append(trace)
            users += 1
            stopRequested = false
            gaveUp = false
            if running { return false }
            running = true
            return true
        }
        if start { startThread() }
        wake.wake()
    }

    /// A daemon stopped: a last drain of its rings (on this thread), then,
    /// for the last daemon, the queue is written and the thread ends.
    /// Waits at most `timeout`; returns false when the queue was not
    /// written by then (the fd blocks: the writer is left to it).
    @discardableResult
    func detach(_ trace: TraceLog, timeout: Duration) -> Bool {
        trace.drain()
        let last = lock.withLock { () -> Bool in
            traces.removeAll { $0 === trace }
            users -= 1
            if users == 0 { stopRequested = true }
            return users == 0
        }
        guard last else { return flush(timeout: timeout) }
        wake.wake()
        if waitUntil(timeout: timeout, { !running }) { return true }
        lock.withLock { gaveUp = true }
        return false
    }

    private func startThread() {
        // Every signal blocked in the new thread (it inherits the mask): the
        // daemon takes its signals through a signalfd on the main loop.
        var all = sigset_t(), old = sigset_t()
        sigfillset(&all)
        pthread_sigmask(SIG_SETMASK, &all, &old)
        defer { pthread_sigmask(SIG_SETMASK, &old, nil) }
        var handle = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(&handle, nil, { p in
            let w = Unmanaged<LogWriter>.fromOpaque(p!).takeRetainedValue()
            w.main()
            return nil
        }, context)
        if rc != 0 {
            Unmanaged<LogWriter>.fromOpaque(context).release()
            lock.withLock { running = false }
            return
        }
        pthread_detach(handle)
    }

    /// The thread: drain the rings, write the queue, sleep.
    private func main() {
        var batch: [String] = []
        batch.reserveCapacity(queueCapacity)
        var quiet = 0
        var lastTrace: UInt64 = 0
        while true {
            let snapshot = lock.withLock { traces }
            var found = false
            for t in snapshot where t.drain() { found = true }
            let now = MonotonicInstant.now.nanoseconds
            let (drops, summaries, stopping, wakeAt) = lock.withLock { () -> (UInt64, [String], Bool, UInt64?) in
                swap(&lines, &batch)
                let d = dropped
                dropped = 0
                let s = endedWindows(now: now, all: stopRequested)
                return (d, s, stopRequested, nextWindowEnd())
            }
            for l in batch { writeAll(l) }
            if drops > 0 { writeAll(format(.warning, "\(drops) log lines dropped (the log queue was full: stderr was not read fast enough)")) }
            for s in summaries { writeAll(s) }
            let n = UInt64(batch.count)
            let busy = found || n > 0
            batch.removeAll(keepingCapacity: true)
            let exit = lock.withLock { () -> Bool in
                written &+= n
                if stopRequested && lines.isEmpty && dropped == 0 {
                    running = false
                    return true
                }
                return false
            }
            if exit { return }
            if stopping { continue }
            if found { lastTrace = MonotonicInstant.now.nanoseconds }
            quiet = busy ? 0 : quiet + 1
            if quiet < 2 {
                sleep(milliseconds: Self.busyPollMilliseconds)
                continue
            }
            // Quiet, but the loops traced within `napAfterTraces`: nap (the
            // loops' records do not wake a napping writer, so a reaction now
            // and then costs its loop no system call).
            if MonotonicInstant.now.nanoseconds &- lastTrace < Self.napAfterTraces {
                wake.napping.store(true, ordering: .sequentiallyConsistent)
                let pending = lock.withLock { !lines.isEmpty || dropped > 0 || stopRequested }
                if !pending { sleep(milliseconds: Self.napMilliseconds) }
                wake.napping.store(false, ordering: .sequentiallyConsistent)
                quiet = 1
                continue
            }
            // Idle: sleep until a producer pokes (or a rate-limit window ends).
            wake.sleeping.store(true, ordering: .sequentiallyConsistent)
            let pending = lock.withLock { !lines.isEmpty || dropped > 0 || stopRequested } || snapshot.contains { $0.pending }
            if pending {
                wake.sleeping.store(false, ordering: .sequentiallyConsistent)
                continue
            }
            var timeout: Int32 = -1
            if let at = wakeAt {
                let t = MonotonicInstant.now.nanoseconds
                timeout = at > t ? Int32(clamping: (at - t) / 1_000_000 + 1) : 0
            }
            sleep(milliseconds: timeout)
            wake.sleeping.store(false, ordering: .sequentiallyConsistent)
            quiet = 1  // one more poll before sleeping again
        }
    }

    /// Sleeps on the wake pipe (at most `milliseconds`; -1: until poked)
    /// and empties it.
    private func sleep(milliseconds: Int32) {
        var p = pollfd(fd: wake.fd, events: Int16(POLLIN), revents: 0)
        // The pipe is read only when poked (a nap that ran out costs the
        // poll alone), and again only while a read fills the buffer (a
        // pipe's read returns what it holds, so a shorter one emptied it).
        guard poll(&p, 1, milliseconds) > 0 else { return }
        var buf: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        let size = MemoryLayout.size(ofValue: buf)
        while withUnsafeMutableBytes(of: &buf, { read(wake.fd, $0.baseAddress, $0.count) }) == size {}
    }
}
