import CAllocationCounter

/// Counts heap allocations (malloc, calloc, realloc, memalign & co.) made by
/// the calling thread, through the malloc interposer of CAllocationCounter.
/// The interposer is linked into any executable that links this target; the
/// count is real, and `isActive` proves the interposer is in the path.
public enum AllocationCounter {
    /// Whether the interposer is the process's malloc (checked by making an
    /// allocation and seeing it counted).
    public static var isActive: Bool { bl_alloc_interposer_active() != 0 }

    /// Runs `body` with counting on for the calling thread; returns the number
    /// of allocation calls it made and the bytes requested.
    public static func measure<E: Error>(_ body: () throws(E) -> Void) throws(E) -> (allocations: Int, bytes: Int) {
        bl_alloc_reset()
        bl_alloc_counting_begin()
        do {
            try body()
        } catch {
            bl_alloc_counting_end()
            throw error
        }
        bl_alloc_counting_end()
        return (Int(bl_alloc_count()), Int(bl_alloc_bytes()))
    }
}

extension AllocationCounter {
    /// Zeroes the process-wide count (of every counting thread).
    public static func reset() { bl_alloc_reset() }
    /// Starts counting the calling thread's allocations into the shared count.
    public static func beginCountingOnThisThread() { bl_alloc_counting_begin() }
    /// Stops counting the calling thread's allocations.
    public static func endCountingOnThisThread() { bl_alloc_counting_end() }
    /// Allocations counted since the last reset, over all counting threads.
    public static var count: Int { Int(bl_alloc_count()) }
    /// Allocations counted on the calling thread alone since its last
    /// `resetThisThread()` (the shared `count` adds up every counting thread).
    public static var countOnThisThread: Int { Int(bl_alloc_thread_count()) }
    /// Zeroes the calling thread's own count.
    public static func resetThisThread() { bl_alloc_thread_reset() }
}
