import Foundation
import Glibc

/// A child's stdout and stderr read to their ends at the same time: a
/// child that fills one pipe while the test reads the other would block
/// in `write` for ever (an AddressSanitizer build's report at exit is
/// larger than a pipe holds).
enum ChildOutput {
    static func readBoth(_ out: Pipe, _ err: Pipe) -> (stdout: Data, stderr: Data) {
        let handles = [out.fileHandleForReading, err.fileHandleForReading]
        var fds = handles.map { pollfd(fd: $0.fileDescriptor, events: Int16(POLLIN), revents: 0) }
        var data = [Data(), Data()]
        var open = [true, true]
        var buffer = [UInt8](repeating: 0, count: 65536)
        while open.contains(true) {
            for i in fds.indices {
                fds[i].fd = open[i] ? handles[i].fileDescriptor : -1
                fds[i].revents = 0
            }
            if poll(&fds, nfds_t(fds.count), -1) < 0 {
                if errno == EINTR { continue }
                break
            }
            for i in fds.indices where open[i] && fds[i].revents != 0 {
                let n = buffer.withUnsafeMutableBytes { read(fds[i].fd, $0.baseAddress, $0.count) }
                if n > 0 {
                    data[i].append(contentsOf: buffer[0..<n])
                } else if n == 0 || (errno != EINTR && errno != EAGAIN) {
                    open[i] = false
                }
            }
        }
        return (data[0], data[1])
    }
}

enum TestBuild {
    /// Whether this build (the tests' and the boardd they run, built
    /// together) runs under AddressSanitizer.
    static let addressSanitized = linked("__asan_init")
    /// Whether it runs under AddressSanitizer or ThreadSanitizer.
    static let sanitized = addressSanitized || linked("__tsan_init")

    private static func linked(_ symbol: String) -> Bool { dlsym(UnsafeMutableRawPointer(bitPattern: 0), symbol) != nil }
}
