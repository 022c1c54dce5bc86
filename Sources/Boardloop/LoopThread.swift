import CLinux
import Glibc
import Synchronization

/// Why a worker could not start.
public enum LoopThreadError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The process may not apply a real-time setting; nothing was applied.
    case permissionDenied(worker: String, setting: String, hint: String)
    /// A setting is out of range; nothing was applied.
    case invalidSetting(worker: String, setting: String, reason: String)
    /// The setup closure threw; the worker's thread has ended.
    case setupFailed(worker: String, error: String)
    /// `start()` on a worker that was started before (a worker runs once).
    case alreadyStarted(worker: String)
    case runLoop(RunLoopError)
    case system(SystemError)

    public var description: String {
        switch self {
        case let .permissionDenied(w, setting, hint):
            "worker '\(w)': not permitted to set \(setting); \(hint). Nothing was applied and the worker did not start"
        case let .invalidSetting(w, setting, reason): "worker '\(w)': invalid \(setting): \(reason). The worker did not start"
        case let .setupFailed(w, e): "worker '\(w)': setup failed: \(e)"
        case let .alreadyStarted(w): "worker '\(w)' was already started; a worker runs once (make a new one to run again)"
        case let .runLoop(e): e.description
        case let .system(e): e.description
        }
    }
}

/// A named thread with its own run loop (the guide's worker threads).
/// `start` returns once the worker's loop is running, so nothing posted to it
/// afterwards can be missed; `stop()` (any thread, at any time, even while
/// the worker is still starting) ends it, and `join()` waits for its thread.
/// When the thread ends, its loop ends too: whatever was scheduled on it is
/// invalidated and released (see `BoardRunLoop.hasEnded`). A worker dropped
/// without `join()` detaches its thread, so the thread's stack is reclaimed
/// when it exits.
public final class LoopThread: @unchecked Sendable {
    /// Optional real-time settings, applied on the worker's thread before its
    /// loop starts. All or nothing: if one cannot be applied, those already
    /// applied are undone and `start` throws — unless `realtimeRequired` is
    /// false (see there).
    public struct Settings: Sendable {
        public var capacities: BoardRunLoop.Capacities
        /// CPUs the thread may run on (sched_setaffinity).
        public var cpuAffinity: [Int]?
        /// SCHED_FIFO priority 1...99 (needs CAP_SYS_NICE or an RLIMIT_RTPRIO allowance).
        public var fifoPriority: Int32?
        /// PR_SET_TIMERSLACK: how late the kernel may wake the thread to batch
        /// wake-ups (default 50 µs). The kernel gives SCHED_FIFO threads none.
        public var timerSlack: Duration?
        /// False: real time when permitted. A CPU affinity or SCHED_FIFO
        /// priority the thread cannot get (not permitted, or a CPU this
        /// machine does not have) is left out and the worker runs without
        /// it; `refused` says what was left out, why, and what grants it.
        /// A priority outside 1...99 and a bad timer slack still throw.
        public var realtimeRequired: Bool

        public init(
            capacities: BoardRunLoop.Capacities = .init(), cpuAffinity: [Int]? = nil, fifoPriority: Int32? = nil,
            timerSlack: Duration? = nil, realtimeRequired: Bool = true
        ) {
            self.capacities = capacities
            self.cpuAffinity = cpuAffinity
            self.fifoPriority = fifoPriority
            self.timerSlack = timerSlack
            self.realtimeRequired = realtimeRequired
        }
    }

    /// With `Settings.realtimeRequired` false: the real-time settings the
    /// worker runs without, each as "what: why; what grants it" (empty when
    /// everything was applied). Read it after `start()` returned.
    public var refused: [String] { monitor.withLock { refusedSettings } }
    private var refusedSettings: [String] = []
    /// The affinity is left out (optional real time, CPUs this machine lacks).
    private var skipAffinity = false

    /// Sources the worker adds to its loop beyond what `setup` schedules
    /// (its exit source): count them in `Settings.capacities.sources`.
    public static let ownSources = 1

    public let name: String
    /// The worker's loop, once `start()` has returned (nil before, and when
    /// the start failed): perform, wake up, or send to its ports.
    public var loop: BoardRunLoop? { monitor.withLock { runLoop } }
    private var runLoop: BoardRunLoop?
    /// The worker thread's kernel id (visible in /proc/PID/task/TID).
    public private(set) var threadID: Int32 = 0

    private let settings: Settings
    private let setup: @Sendable (BoardRunLoop) throws -> Void
    private let exitRequested = Atomic<Bool>(false)
    private let exitSource: CustomSource
    private let monitor = Monitor()
    private var started = false
    private var startError: LoopThreadError?
    private var handle = pthread_t()
    private var joined = false
    private var threadStarted = false
    /// The thread has left `main()` (its loop has ended).
    private var finished = false

    /// Makes a worker that is not started yet; `stop()` may be called on it
    /// at any time, even before or during `start()`.
    public init(name: String, settings: Settings = Settings(), setup: @escaping @Sendable (BoardRunLoop) throws -> Void = { _ in }) {
        self.name = name
        self.settings = settings
        self.setup = setup
        // Performed on the worker's thread: stops the innermost run there.
        exitSource = CustomSource(order: Int.min) { BoardRunLoop.currentIfExists?.stop() }
    }

    deinit {
        // The thread holds the worker while it runs, so a worker is freed
        // only once its thread is done (or was never started). A thread
        // nobody joined is detached so that its stack is reclaimed.
        if threadStarted && !joined { pthread_detach(handle) }
    }

    /// Starts a worker thread named `name` (the first 15 bytes show in
    /// `ps -L` and /proc/PID/task/*/comm) with its own loop. `setup` runs on
    /// the worker's thread with its loop before the loop starts: install the
    /// worker's sources there. Returns once the loop is running.
    public static func start(
        name: String, settings: Settings = Settings(), setup: @escaping @Sendable (BoardRunLoop) throws -> Void = { _ in }
    ) throws(LoopThreadError) -> LoopThread {
        let w = LoopThread(name: name, settings: settings, setup: setup)
        try w.start()
        return w
    }

    /// Starts the worker's thread; returns once its loop is running (or, if
    /// `stop()` came first, once the thread is on its way out).
    public func start() throws(LoopThreadError) {
        if let p = settings.fifoPriority, !(1...99).contains(p) {
            throw .invalidSetting(worker: name, setting: "SCHED_FIFO priority \(p)", reason: "must be 1...99")
        }
        if let cpus = settings.cpuAffinity {
            let n = OSThread.cpuCount
            if cpus.isEmpty || cpus.contains(where: { $0 < 0 || $0 >= n || $0 >= 1024 }) {
                let reason = "CPUs must be 0...\(n - 1) and at least one"
                if settings.realtimeRequired || cpus.isEmpty || cpus.contains(where: { $0 < 0 }) {
                    throw .invalidSetting(worker: name, setting: "CPU affinity \(cpus)", reason: reason)
                }
                skipAffinity = true
                refuse("CPU affinity \(cpus): this machine has no such CPU (\(reason))")
            }
        }
        let alreadyStarted = monitor.withLock { () -> Bool in
            if threadStarted { return true }
            threadStarted = true
            return false
        }
        if alreadyStarted { throw .alreadyStarted(worker: name) }
        let context = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(&handle, nil, { p in
            let worker = Unmanaged<LoopThread>.fromOpaque(p!).takeRetainedValue()
            worker.main()
            worker.monitor.withLock {
                worker.finished = true
                worker.monitor.broadcast()
            }
            return nil
        }, context)
        if rc != 0 {
            Unmanaged<LoopThread>.fromOpaque(context).release()
            monitor.withLock { threadStarted = false }
            throw .system(SystemError(call: "pthread_create", errno: rc))
        }
        let error = monitor.withLock { () -> LoopThreadError? in
            while !started { _ = monitor.wait(until: nil) }
            return startError
        }
        if let error {
            join()
            throw error
        }
    }

    /// Ends the worker: its loop stops at the end of the current callout and
    /// its thread exits. Safe from any thread, at any time; idempotent.
    public func stop() {
        exitRequested.store(true, ordering: .releasing)
        exitSource.signal()
        monitor.withLock { runLoop }?.wakeUp()
    }

    /// Waits for the worker's thread to end (after `stop()`).
    public func join() {
        let mustJoin = monitor.withLock { () -> Bool in
            if joined || !threadStarted { return false }
            joined = true
            return true
        }
        if mustJoin { pthread_join(handle, nil) }
    }

    /// Waits at most `timeout` for the worker's thread to end (after
    /// `stop()`), and joins it if it did. Returns false when the thread is
    /// still running then (a handler that does not return): a caller that
    /// must not hang, such as a daemon's stop, goes on without it.
    public func join(timeout: Duration) -> Bool {
        let deadline = MonotonicClock.nanoseconds &+ UInt64(max(timeout.nanosecondsClamped, 0))
        let ended = monitor.withLock { () -> Bool in
            while threadStarted && !finished {
                if !monitor.wait(until: deadline) { break }
            }
            return !threadStarted || finished
        }
        if ended { join() }
        return ended
    }

    /// `stop()` then `join()`.
    public func stopAndJoin() {
        stop()
        join()
    }

    private func finishStart(_ error: LoopThreadError?) {
        monitor.withLock {
            startError = error
            started = true
            monitor.broadcast()
        }
    }

    private func main() {
        OSThread.setName(name)
        if let error = applySettings() {
            finishStart(error)
            return
        }
        let loop: BoardRunLoop
        do {
            loop = try BoardRunLoop.makeCurrent(capacities: settings.capacities)
            try loop.add(exitSource, mode: .common)
        } catch {
            finishStart(.runLoop(error))
            return
        }
        monitor.withLock {
            runLoop = loop
            threadID = OSThread.uncachedID
        }
        // However the thread leaves from here on, its loop ends on the way
        // out and releases what was scheduled on it.
        defer { loop.endOnOwnerThread() }
        do {
            try setup(loop)
        } catch {
            monitor.withLock { runLoop = nil }
            finishStart(.setupFailed(worker: name, error: "\(error)"))
            return
        }
        // Report "running" from inside the first run.
        let ready = RunLoopObserver(activities: .entry, repeats: false, order: Int.min) { [unowned self] _, _ in
            finishStart(nil)
        }
        do { try loop.add(ready, mode: .common) } catch {
            finishStart(.runLoop(error))
            return
        }
        // The exit source's perform stops whichever run is innermost; a stop
        // made before the loop ran is kept by the signalled source and the flag.
        while !exitRequested.load(ordering: .acquiring) {
            do { _ = try loop.run(mode: .default, timeout: .seconds(86_400)) } catch { break }
        }
        if ready.isValid { finishStart(nil) }
        exitSource.invalidate()
    }

    private func refuse(_ what: String) { monitor.withLock { refusedSettings.append(what) } }

    private func applySettings() -> LoopThreadError? {
        var savedAffinity: bl_cpuset?
        var affinityApplied = false
        let savedSlack = OSThread.timerSlack
        var slackApplied = false
        func undo() {
            if slackApplied { _ = OSThread.setTimerSlack(nanoseconds: UInt(max(savedSlack, 1))) }
            if affinityApplied, let savedAffinity { OSThread.restoreAffinity(savedAffinity) }
        }
        if let cpus = settings.cpuAffinity, !skipAffinity {
            savedAffinity = OSThread.affinity()
            if let e = OSThread.setAffinity(cpus) {
                let denied = e == .operationNotPermitted
                if !settings.realtimeRequired {
                    refuse(
                        "CPU affinity \(cpus): "
                            + (denied ? "not permitted (EPERM); it needs CAP_SYS_NICE (AmbientCapabilities=CAP_SYS_NICE in a systemd unit)" : e.description))
                } else {
                    return denied
                        ? .permissionDenied(worker: name, setting: "CPU affinity \(cpus)", hint: "sched_setaffinity was refused (EPERM): the process lacks CAP_SYS_NICE")
                        : .invalidSetting(worker: name, setting: "CPU affinity \(cpus)", reason: e.description)
                }
            } else {
                affinityApplied = true
            }
        }
        if let slack = settings.timerSlack {
            let ns = slack.nanosecondsClamped
            if ns < 1 || OSThread.setTimerSlack(nanoseconds: UInt(ns)) != nil {
                undo()
                return .invalidSetting(worker: name, setting: "timer slack \(slack)", reason: "must be at least 1 ns")
            }
            slackApplied = true
        }
        if let p = settings.fifoPriority, let e = OSThread.setFIFOPriority(p) {
            let denied = e == .operationNotPermitted
            if !settings.realtimeRequired {
                refuse(
                    "SCHED_FIFO priority \(p): "
                        + (denied
                            ? "not permitted (EPERM); it needs CAP_SYS_NICE (AmbientCapabilities=CAP_SYS_NICE in a systemd unit) or an RLIMIT_RTPRIO of at least \(p) (LimitRTPRIO=\(p) in the unit)"
                            : e.description))
            } else {
                undo()
                return denied
                    ? .permissionDenied(
                        worker: name, setting: "SCHED_FIFO priority \(p)",
                        hint: "real-time scheduling needs CAP_SYS_NICE (run as root or `setcap cap_sys_nice+ep` the binary) or an RLIMIT_RTPRIO of at least \(p) (`ulimit -r`, limits.conf rtprio)")
                    : .invalidSetting(worker: name, setting: "SCHED_FIFO priority \(p)", reason: e.description)
            }
        }
        return nil
    }
}
