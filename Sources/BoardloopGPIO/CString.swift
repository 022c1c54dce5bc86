import Glibc

/// Reads a NUL-terminated string out of a fixed C char array (imported as a
/// tuple). Not for the event path: it makes a String.
@inline(__always)
func stringFromCArray<T>(_ tuple: T) -> String {
    withUnsafeBytes(of: tuple) { raw in
        let bytes = raw.bindMemory(to: UInt8.self)
        let n = bytes.firstIndex(of: 0) ?? bytes.count
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[0..<n]), as: UTF8.self)
    }
}

/// The program's name, for the default consumer label (what `gpioinfo`
/// shows as the line's user). The kernel keeps 31 bytes of it.
package enum ProgramName {
    package static let current: String = {
        let arg0 = CommandLine.arguments.first ?? "boardloop"
        let base = arg0.split(separator: "/").last.map(String.init) ?? arg0
        return truncatedConsumer(base.isEmpty ? "boardloop" : base)
    }()

    /// `name` cut to the 31 bytes the kernel keeps, on a character boundary.
    package static func truncatedConsumer(_ name: String) -> String {
        var out = ""
        var bytes = 0
        for ch in name {
            let n = String(ch).utf8.count
            if bytes + n > 31 { break }
            out.append(ch)
            bytes += n
        }
        return out
    }
}

/// The Linux kernel release as (major, minor), from uname(2); (0, 0) if unknown.
func kernelVersion() -> (Int, Int) {
    var u = utsname()
    guard uname(&u) == 0 else { return (0, 0) }
    let release = stringFromCArray(u.release)
    let parts = release.split(whereSeparator: { !$0.isNumber }).prefix(2).compactMap { Int($0) }
    return parts.count == 2 ? (parts[0], parts[1]) : (0, 0)
}
