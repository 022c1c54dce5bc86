import Boardloop
import Glibc

/// A thread could not be started: pthread_create's error.
struct ThreadStartError: Error, CustomStringConvertible {
    var errno: Int32
    var description: String { "cannot start a thread: \(String(cString: strerror(errno)))" }
}

/// The daemon's short-lived threads off the loops (a reload's read, the
/// MQTT client's connect): each runs its body once and ends.
enum DaemonThread {
    /// Starts a thread that runs `body`; the caller joins or detaches it.
    static func start(_ body: @escaping @Sendable () -> Void) -> Result<pthread_t, ThreadStartError> {
        let arg = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
        var t = pthread_t()
        let rc = pthread_create(
            &t, nil,
            { a in
                Unmanaged<ThreadBody>.fromOpaque(a!).takeRetainedValue().run()
                return nil
            }, arg)
        guard rc == 0 else {
            Unmanaged<ThreadBody>.fromOpaque(arg).release()
            return .failure(ThreadStartError(errno: rc))
        }
        return .success(t)
    }

    /// Starts a thread named `name` that runs `body`; nobody joins it.
    static func startDetached(name: String, _ body: @escaping @Sendable () -> Void) -> Result<Void, ThreadStartError> {
        start {
            OSThread.setName(name)
            body()
        }.map { pthread_detach($0) }
    }
}

/// A thread's body, handed to pthread_create retained.
private final class ThreadBody {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}
