import CLinux

/// A 32-bit word in shared memory that threads read and write atomically
/// and sleep on until it changes. The corresponding C functions are the
/// `futex` system call (FUTEX_WAIT, FUTEX_WAKE) and C11 atomics.
enum Futex {
    /// Reads the word (acquire).
    @inline(__always)
    static func load(_ word: UnsafeMutablePointer<UInt32>) -> UInt32 { bl_atomic_load_u32(word) }

    /// Writes the word (release).
    @inline(__always)
    static func store(_ word: UnsafeMutablePointer<UInt32>, _ value: UInt32) { bl_atomic_store_u32(word, value) }

    /// Wakes every thread sleeping on the word.
    @inline(__always)
    static func wakeAll(_ word: UnsafeMutablePointer<UInt32>) { _ = bl_futex_wake(word, Int32.max) }

    /// Sleeps while the word holds `expected`, for at most
    /// `timeoutNanoseconds` (-1: no limit). Returns early on a wake-up, a
    /// signal or a spurious wake-up: callers re-read the word.
    @inline(__always)
    static func wait(_ word: UnsafeMutablePointer<UInt32>, whileEqualTo expected: UInt32, timeoutNanoseconds: Int64 = -1) {
        _ = bl_futex_wait(word, expected, timeoutNanoseconds)
    }
}
