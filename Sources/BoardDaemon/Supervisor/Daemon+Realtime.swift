import Boardloop
import Glibc
import Logging

/// Workers' real-time settings when they are refused (`realtime:`).
extension Daemon {
    /// `mlockall` when a worker asks for it (`mlockall: true`). When it
    /// fails and every worker that asks is `realtime: optional`, returns
    /// what was refused (their warnings name it); otherwise throws.
    static func lockMemory(_ config: DaemonConfig) throws -> String? {
        let asking = config.loops.filter(\.lockMemory)
        guard !asking.isEmpty, mlockall(MCL_CURRENT | MCL_FUTURE) != 0 else { return nil }
        let e = errno
        let why =
            String(cString: strerror(e))
            + (e == EPERM || e == ENOMEM
                ? " (it needs CAP_IPC_LOCK or a large enough RLIMIT_MEMLOCK: LimitMEMLOCK=infinity in the unit)" : "")
        if asking.allSatisfy({ $0.realtime == .optional }) { return "mlockall: \(why)" }
        throw DaemonError.setup("mlockall failed: \(why)")
    }

    /// The one warning of a worker that runs without real-time settings it
    /// was refused (nothing when it got them all).
    func warnRefused(_ plan: LoopPlan, _ refused: [String]) {
        guard !refused.isEmpty else { return }
        logger.warning(
            "worker '\(plan.name)': runs without what it was refused (realtime: optional): \(refused.joined(separator: "; "))")
    }

    /// A worker's start error, named once: the thread's errors name the
    /// worker already, the engine's do not.
    static func workerStartError(_ name: String, _ error: Error) -> DaemonError {
        let text = "\(error)"
        return .setup(text.hasPrefix("worker '\(name)'") ? text : "worker '\(name)': \(text)")
    }
}
