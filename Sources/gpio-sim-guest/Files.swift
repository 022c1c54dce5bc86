import Boardloop
import Glibc

/// Small file helpers over Glibc (no Foundation in the guest program).
enum Files {
    static func read(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, 4096) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            bytes.append(contentsOf: buffer[0..<n])
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The file's first line, trimmed.
    static func readLine(_ path: String) -> String? {
        guard let s = read(path) else { return nil }
        return String(s.split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
            .trimmingCharacters()
    }

    /// Writes `text` with one write(2) (sysfs/configfs want that). Returns
    /// errno on failure, 0 on success.
    @discardableResult
    static func write(_ path: String, _ text: String) -> Int32 {
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        var utf8 = Array(text.utf8)
        let n = utf8.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        return n == utf8.count ? 0 : errno
    }

    static func list(_ path: String) -> [String] {
        guard let d = opendir(path) else { return [] }
        defer { closedir(d) }
        var names: [String] = []
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { raw in
                let b = raw.bindMemory(to: UInt8.self)
                return String(decoding: b[0..<(b.firstIndex(of: 0) ?? b.count)], as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }
}

extension String {
    func trimmingCharacters() -> String {
        var s = Substring(self)
        while let c = s.first, c == " " || c == "\n" || c == "\t" || c == "\r" { s.removeFirst() }
        while let c = s.last, c == " " || c == "\n" || c == "\t" || c == "\r" { s.removeLast() }
        return String(s)
    }
}

/// Sleeps (nanosleep), for the toggler side of the scenarios.
func sleep(_ d: Duration) {
    let ns = d.nanosecondsClamped
    var ts = timespec(tv_sec: Int(ns / 1_000_000_000), tv_nsec: Int(ns % 1_000_000_000))
    var rest = timespec()
    while nanosleep(&ts, &rest) != 0 && errno == EINTR { ts = rest }
}

extension Duration {
    /// Milliseconds with one decimal, for figures.
    var ms: String {
        let us = nanosecondsClamped / 1000
        return "\(us / 1000).\((us % 1000) / 100) ms"
    }

    var us: String { "\(nanosecondsClamped / 1000) µs" }
}

/// Writes a line straight to fd 1 (unbuffered: the serial log keeps every
/// line even if the program dies right after).
func say(_ line: String) {
    var bytes = Array((line + "\n").utf8)
    var off = 0
    while off < bytes.count {
        let n = bytes.withUnsafeMutableBytes { Glibc.write(1, $0.baseAddress! + off, $0.count - off) }
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { return }
        off += n
    }
}
