import Boardloop
import BoardloopTestSupport
import BoardloopXCTestSupport
import Glibc
import XCTest

/// A port source's fd closed, or closed and its number reused, behind the
/// source's back.
final class FDReuseTests: XCTestCase {
    /// A non-blocking pipe as raw fds (the test closes them itself).
    func rawPipe() -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        precondition(pipe(&fds) == 0)
        for fd in fds {
            _ = fcntl(fd, F_SETFL, O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        return (fds[0], fds[1])
    }

    /// A stale source (its fd closed, the number then reused by another
    /// file) is refused when added: it would read the new file's data.
    func testAddingAStaleSourceWhoseFDNumberWasReusedIsRefused() throws {
        let loop = try makeLoop()
        try loop.add(farTimer(), mode: .default)
        let old = rawPipe()
        var seen: [UInt8] = []
        let stale = PortSource(fd: old.read) { s, _ in
            var b: UInt8 = 0
            if read(s.fd, &b, 1) == 1 { seen.append(b) }
        }
        // On a loop and off it again: the source is fine while the number is its file.
        try loop.add(stale, mode: .default)
        try loop.remove(stale, mode: .default)
        close(old.read)
        close(old.write)
        let new = rawPipe()
        defer { close(new.write) }
        // The old number now refers to the new pipe's read end (the lowest
        // free number usually is the old one already).
        if new.read != old.read {
            XCTAssertEqual(dup2(new.read, old.read), old.read)
            close(new.read)
        }
        defer { close(old.read) }
        var secret: UInt8 = 42
        XCTAssertEqual(write(new.write, &secret, 1), 1)
        XCTAssertThrows(.fdReused(fd: old.read)) { () throws(RunLoopError) in try loop.add(stale, mode: .default) }
        XCTAssertFalse(loop.contains(stale, mode: .default))
        XCTAssertTrue(RunLoopError.fdReused(fd: old.read).description.contains("fd \(old.read)"))
        _ = try loop.run(mode: .default, timeout: .milliseconds(20))
        XCTAssertEqual(seen, [], "a stale source read another file's data")
        // A source made for the new file is accepted.
        let fresh = PortSource(fd: old.read) { s, _ in
            var b: UInt8 = 0
            if read(s.fd, &b, 1) == 1 { seen.append(b) }
        }
        try loop.add(fresh, mode: .default)
        XCTAssertTrue(try runUntil(loop, until: { seen == [42] }))
        fresh.invalidate()
    }

    /// The fd closed while the source is scheduled: the loop's duplicate
    /// keeps the pipe (and its unread byte), so it stays ready; the
    /// handler's read fails with EBADF. The source ends after that first
    /// EBADF instead of being dispatched for ever.
    func testAClosedFDEndsItsSourceAfterTheFirstEBADF() throws {
        let loop = try makeLoop()
        try loop.add(farTimer(), mode: .default)
        let p = rawPipe()
        defer { close(p.write) }
        var calls = 0
        var badFD = 0
        let source = PortSource(fd: p.read) { s, _ in
            calls += 1
            var b: UInt8 = 0
            if read(s.fd, &b, 1) < 0 && errno == EBADF { badFD += 1 }
        }
        try loop.add(source, mode: .default)
        var byte: UInt8 = 1
        XCTAssertEqual(write(p.write, &byte, 1), 1)
        close(p.read)
        _ = try loop.run(mode: .default, timeout: .milliseconds(50))
        XCTAssertEqual(calls, 1, "a closed fd kept the source dispatching")
        XCTAssertEqual(badFD, 1)
        XCTAssertFalse(source.isValid)
        XCTAssertTrue(source.endedByClosedFD)
        XCTAssertFalse(source.endedByHangup)
        XCTAssertFalse(loop.contains(source, mode: .default))
    }

    /// An EBADF that has nothing to do with any source ends none.
    func testAnUnrelatedEBADFEndsNoSource() throws {
        let loop = try makeLoop()
        let p = rawPipe()
        defer { close(p.read); close(p.write) }
        var calls = 0
        let source = PortSource(fd: p.read) { s, _ in
            calls += 1
            var b: UInt8 = 0
            _ = read(s.fd, &b, 1)
            _ = fcntl(-1, F_GETFD)  // errno = EBADF, for no source's fd
        }
        try loop.add(source, mode: .default)
        var byte: UInt8 = 1
        for _ in 0..<3 {
            XCTAssertEqual(write(p.write, &byte, 1), 1)
            _ = try loop.run(mode: .default, timeout: testDeadline, returnAfterSourceHandled: true)
        }
        _ = try loop.run(mode: .default, timeout: .zero)
        XCTAssertEqual(calls, 3)
        XCTAssertTrue(source.isValid)
        XCTAssertFalse(source.endedByClosedFD)
    }
}
