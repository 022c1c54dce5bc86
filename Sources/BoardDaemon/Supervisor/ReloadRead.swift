import Boardloop
import Glibc

/// A reload's config, read and checked on a thread of its own so that the
/// main loop goes on meanwhile (its timers, the control socket, a stop):
/// however long a file takes to parse (a large file, substitutions used
/// many times, many includes, all capped), no source waits for it. The
/// result comes back to the main loop through one work item, and the swap
/// happens there, between passes, as before.
///
/// A stop does not wait for a read: `abandon()` (main loop) makes sure the
/// thread never touches the loop again, and the thread's result is dropped
/// when it ends. The thread reads files and nothing else the daemon has.
final class ReloadRead: @unchecked Sendable {
    let file: String
    private let lock = Lock()
    // With `lock` held:
    private var result: LoadResult?
    private var abandoned = false
    private weak var loop: BoardRunLoop?
    private var item: PerformWorkItem?

    /// Starts reading `file` with `options`; `finished` runs on `loop`'s
    /// thread once the result is there (`take()` returns it); a failure
    /// when no thread could be started.
    static func start(
        _ file: String, options: LoadOptions, on loop: BoardRunLoop, before: (@Sendable () -> Void)? = nil,
        finished: @escaping @Sendable () -> Void
    ) -> Result<ReloadRead, ThreadStartError> {
        let read = ReloadRead(file: file, loop: loop, item: PerformWorkItem(modes: [.common], finished))
        let run: @Sendable () -> Void = {
            before?()
            read.run(options)
        }
        switch DaemonThread.startDetached(name: "boardd-reload", run) {
        case .success: return .success(read)
        case let .failure(e): return .failure(e)
        }
    }

    private init(file: String, loop: BoardRunLoop, item: PerformWorkItem) {
        self.file = file
        self.loop = loop
        self.item = item
    }

    /// On the read's thread.
    private func run(_ options: LoadOptions) {
        let r = ConfigLoader.load(path: file, options: options)
        lock.withLock {
            result = r
            guard !abandoned, let loop, let item else { return }
            // Under the lock: `abandon()` cannot return while the loop is
            // reached from here, so the loop is never released on this thread
            // (its owner still holds it).
            // The main loop has room for it: the daemon's budget counts
            // one pending perform for the read in flight.
            _ = try? loop.perform(item)
        }
    }

    /// The read's result, once it is there (main loop).
    func take() -> LoadResult? { lock.withLock { result } }

    /// At a stop: the thread's result will be dropped and the loop not
    /// reached from it (main loop).
    func abandon() {
        lock.withLock {
            abandoned = true
            loop = nil
            item = nil
        }
    }
}
