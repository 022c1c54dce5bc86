import Boardloop
import Glibc

extension Lock {
    /// `withLock`, compiled in this module: a mock chip takes its lock on
    /// every injected edge and every read, and the engine's generic
    /// `withLock` is a call into another module that is not specialised
    /// (about 90 instructions an edge in the GPIO instruction scenario).
    @inline(__always)
    func locked<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
