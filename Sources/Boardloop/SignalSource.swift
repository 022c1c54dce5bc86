import CLinux
import Glibc

/// Why a signal source could not be made.
public enum SignalSourceError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The signal is not blocked in the calling thread: the kernel would run
    /// its default action (or deliver it to another thread) instead of
    /// queueing it for signalfd.
    case notBlocked(signal: Int32, name: String)
    /// SIGKILL and SIGSTOP cannot be caught, and 0 or out-of-range numbers are not signals.
    case invalidSignal(Int32)
    case runLoop(RunLoopError)
    case system(SystemError)

    public var description: String {
        switch self {
        case let .notBlocked(signal, name):
            "\(name) (\(signal)) is not blocked in this thread, so signalfd would miss it: call SignalMask.block([...]) at the start of main, before any other thread starts (threads inherit the mask)"
        case let .invalidSignal(s): "\(s) is not a signal a signal source can receive (SIGKILL and SIGSTOP cannot be caught)"
        case let .runLoop(e): e.description
        case let .system(e): e.description
        }
    }
}

/// Process-wide signal set-up for signal sources.
public enum SignalMask {
    /// Blocks `signals` in the calling thread. Call it at the start of `main`,
    /// before any thread starts: threads inherit the mask, so the signals are
    /// then queued for signalfd instead of running a default action.
    public static func block(_ signals: [Int32]) throws(SignalSourceError) {
        for s in signals where !isCatchable(s) { throw .invalidSignal(s) }
        do { try SignalMaskCalls.block(signals) } catch { throw .system(error) }
    }

    /// Unblocks `signals` in the calling thread.
    public static func unblock(_ signals: [Int32]) {
        SignalMaskCalls.unblock(signals)
    }

    /// Whether `signal` is blocked in the calling thread.
    public static func isBlocked(_ signal: Int32) -> Bool { SignalMaskCalls.isBlocked(signal) }

    /// The first and last real-time signal numbers (SIGRTMIN, SIGRTMAX).
    public static var realtimeRange: ClosedRange<Int32> { SignalMaskCalls.realtimeMinimum...SignalMaskCalls.realtimeMaximum }

    static func isCatchable(_ s: Int32) -> Bool { s >= 1 && s <= SignalMaskCalls.realtimeMaximum && s != SIGKILL && s != SIGSTOP }

    /// "SIGUSR1", "SIGRTMIN+3", ...
    public static func name(_ s: Int32) -> String {
        let names: [Int32: String] = [
            SIGHUP: "SIGHUP", SIGINT: "SIGINT", SIGQUIT: "SIGQUIT", SIGILL: "SIGILL", SIGTRAP: "SIGTRAP", SIGABRT: "SIGABRT",
            SIGBUS: "SIGBUS", SIGFPE: "SIGFPE", SIGKILL: "SIGKILL", SIGUSR1: "SIGUSR1", SIGSEGV: "SIGSEGV", SIGUSR2: "SIGUSR2",
            SIGPIPE: "SIGPIPE", SIGALRM: "SIGALRM", SIGTERM: "SIGTERM", SIGCHLD: "SIGCHLD", SIGCONT: "SIGCONT", SIGSTOP: "SIGSTOP",
            SIGTSTP: "SIGTSTP", SIGTTIN: "SIGTTIN", SIGTTOU: "SIGTTOU", SIGURG: "SIGURG", SIGXCPU: "SIGXCPU", SIGXFSZ: "SIGXFSZ",
            SIGVTALRM: "SIGVTALRM", SIGPROF: "SIGPROF", SIGWINCH: "SIGWINCH", SIGIO: "SIGIO", SIGPWR: "SIGPWR", SIGSYS: "SIGSYS",
        ]
        if let n = names[s] { return n }
        let lo = SignalMaskCalls.realtimeMinimum
        if s >= lo && s <= SignalMaskCalls.realtimeMaximum { return s == lo ? "SIGRTMIN" : "SIGRTMIN+\(s - lo)" }
        return "signal \(s)"
    }
}

/// A set of signals delivered through signalfd as a port source on one loop:
/// no classic signal handler runs, the handler is an ordinary callout on the
/// loop's thread with the signal's siginfo.
///
/// What is and is not guaranteed: the signals must be blocked in every thread
/// (`SignalMask.block` before threads start). A standard signal (SIGUSR1,
/// SIGHUP, ...) sent again while one is still pending coalesces: two SIGUSR1
/// before the loop reads may arrive as one. Real-time signals
/// (`SignalMask.realtimeRange`) queue: each arrives, in order, with its value.
/// A signal whose source's mode is not running stays pending in the kernel
/// and is delivered when the mode runs. A signal aimed at one thread
/// (tgkill) reaches only a signalfd read on that thread: add the source to
/// that thread's loop.
public final class SignalSource: @unchecked Sendable {
    /// What the kernel reported for one signal.
    public struct Info: Equatable, Sendable {
        public let signal: Int32
        /// si_code: SI_USER (kill), SI_QUEUE (sigqueue), SI_TKILL (tgkill), ...
        public let code: Int32
        public let senderPID: Int32
        public let senderUID: UInt32
        /// sigqueue's value (sival_int).
        public let value: Int32
        public var name: String { SignalMask.name(signal) }
    }

    public let signals: [Int32]
    /// The port source on its loop (order, rate limit, dispatch count).
    public private(set) var source: PortSource!
    private let signalFD: SignalFD
    private let buffer: UnsafeMutablePointer<bl_siginfo>
    private let batch: Int
    private let handler: (Info) -> Void

    /// - Parameters:
    ///   - signals: each must be blocked in the calling thread.
    ///   - batch: siginfos read per dispatch (reserved now).
    public init(signals: [Int32], order: Int = 0, batch: Int = 16, handler: @escaping (Info) -> Void) throws(SignalSourceError) {
        for s in signals {
            guard SignalMask.isCatchable(s) else { throw .invalidSignal(s) }
            guard SignalMask.isBlocked(s) else { throw .notBlocked(signal: s, name: SignalMask.name(s)) }
        }
        do { signalFD = try SignalFD(signals: signals) } catch { throw .system(error) }
        self.signals = signals
        self.batch = max(1, min(batch, 16))
        buffer = .allocate(capacity: self.batch)
        self.handler = handler
        source = PortSource(fd: signalFD.fd, order: order) { [unowned self] _, _ in self.drain() }
        // While scheduled, the loop keeps the signal source alive (as CF's
        // sources); `invalidate()` or the loop's end lets it go.
        source.lifetimeOwner = self
    }

    deinit {
        source.invalidate()
        signalFD.close()
        buffer.deallocate()
    }

    /// Adds the source to `loop` in `mode` (the loop's thread only).
    public func add(to loop: BoardRunLoop, mode: RunLoopMode = .default) throws(SignalSourceError) {
        do { try loop.add(source, mode: mode) } catch { throw .runLoop(error) }
    }

    public func invalidate() { source.invalidate() }

    private func drain() {
        let n = signalFD.read(into: buffer, max: batch)
        for i in 0..<n {
            let s = buffer[i]
            handler(Info(signal: Int32(s.signo), code: s.code, senderPID: Int32(bitPattern: s.pid), senderUID: s.uid, value: s.int_value))
        }
    }
}
