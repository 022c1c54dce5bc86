import CDaemon
import Glibc

/// systemd's notify protocol (`Type=notify`): a datagram of
/// newline-separated `KEY=VALUE` assignments to the `AF_UNIX` socket named
/// by `NOTIFY_SOCKET` (a leading `@` is the abstract namespace). It is one
/// `sendto` (see sd_notify(3)); boardd sends it itself rather than link
/// libsystemd, which Raspberry Pi images and static builds need not carry.
public struct SystemdNotifier: Sendable {
    public let socketPath: String

    /// From `NOTIFY_SOCKET`; nil when not run by systemd with `Type=notify`.
    public static func fromEnvironment() -> SystemdNotifier? {
        guard let p = getenv("NOTIFY_SOCKET") else { return nil }
        let s = String(cString: p)
        guard !s.isEmpty else { return nil }
        return SystemdNotifier(socketPath: s)
    }

    public init(socketPath: String) { self.socketPath = socketPath }

    /// Sends `text` (e.g. "READY=1\nSTATUS=..."); returns 0 or an errno.
    @discardableResult
    public func send(_ text: String) -> Int32 {
        var t = text
        return t.withUTF8 { p in
            p.withMemoryRebound(to: CChar.self) { c in bd_notify(socketPath, c.baseAddress, UInt(c.count)) }
        }
    }

    /// The watchdog interval systemd asks for (`WATCHDOG_USEC`, for this
    /// process when `WATCHDOG_PID` is set), or nil.
    public static func watchdogInterval() -> Duration? {
        guard let u = getenv("WATCHDOG_USEC"), let usec = UInt64(String(cString: u)), usec > 0 else { return nil }
        if let p = getenv("WATCHDOG_PID"), let pid = Int32(String(cString: p)), pid != getpid() { return nil }
        return .microseconds(Int64(usec))
    }
}
