import CAllocationCounter

/// Which sanitizer the test build runs under, as its C code was compiled
/// (a sanitizer build compiles every target with it).
public enum Sanitizers {
    /// Built with ThreadSanitizer.
    public static var thread: Bool { bl_sanitizer_thread() != 0 }
    /// Built with AddressSanitizer (and its LeakSanitizer).
    public static var address: Bool { bl_sanitizer_address() != 0 }
}
