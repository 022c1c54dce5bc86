import Boardloop
import BoardloopTestSupport
import BoardloopXCTestSupport
import Glibc
import XCTest

/// A port source's fd closed, or closed and its number reused, behind the
/// source's back.
final class FDReuseTests: XCTestCase {
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

    /// Re-added after its number was reused: a source that was invalidated
    /// (here by the closed-fd check's own path, `reportClosedFD()`) cannot
    /// join a loop again at all (`.invalidated`); one that was only removed
    /// is refused by identity (`.fdReused`) — also when it was made before
    /// its fd was open, so that its identity was taken when it first joined.
    func testAStaleSourceReAddedAfterItsFDNumberWasReusedIsRefused() throws {
        let loop = try makeLoop()
        try loop.add(farTimer(), mode: .default)
        var seen: [UInt8] = []
        func reader(_ s: PortSource, _: PortSource.Events) {
            var b: UInt8 = 0
            if read(s.fd, &b, 1) == 1 { seen.append(b) }
        }
        // Made for a number nothing is open on yet: its identity is taken at add.
        let probe = rawPipe()
        close(probe.read)
        close(probe.write)
        let early = PortSource(fd: probe.read, handler: reader)
        let old = rawPipe()
        defer { close(old.write) }
        if old.read != probe.read {
            XCTAssertEqual(dup2(old.read, probe.read), probe.read)
            close(old.read)
        }
        let number = probe.read
        let ended = PortSource(fd: number, handler: reader)
        try loop.add(early, mode: .default)
        try loop.add(ended, mode: .default)
        ended.reportClosedFD()
        XCTAssertTrue(ended.endedByClosedFD)
        try loop.remove(early, mode: .default)
        close(number)
        let new = rawPipe()
        defer { close(new.write) }
        if new.read != number {
            XCTAssertEqual(dup2(new.read, number), number)
            close(new.read)
        }
        defer { close(number) }
        var secret: UInt8 = 42
        XCTAssertEqual(write(new.write, &secret, 1), 1)
        XCTAssertThrows(.invalidated(item: "PortSource")) { () throws(RunLoopError) in try loop.add(ended, mode: .default) }
        XCTAssertThrows(.fdReused(fd: number)) { () throws(RunLoopError) in try loop.add(early, mode: .default) }
        XCTAssertFalse(loop.contains(ended, mode: .default))
        XCTAssertFalse(loop.contains(early, mode: .default))
        _ = try loop.run(mode: .default, timeout: .zero)
        XCTAssertEqual(seen, [], "a stale source read another file's data")
        // A source made for the new file is accepted and gets its data.
        let fresh = PortSource(fd: number, handler: reader)
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

    // MARK: Closed fds, without errno to tell

    /// Runs `loop` one handled source at a time while `source` is valid, at
    /// most `limit` passes (a loop that would dispatch it for ever fails
    /// the test instead of hanging it).
    func runWhileValid(_ loop: BoardRunLoop, _ source: PortSource, limit: Int) throws {
        var passes = 0
        while source.isValid && passes < limit {
            _ = try loop.run(mode: .default, timeout: testDeadline, returnAfterSourceHandled: true)
            passes += 1
        }
    }

    /// A handler that reads EBADF and then makes another failing call
    /// (EAGAIN on an empty pipe), so errno no longer says EBADF when it
    /// returns, and never reports it: the loop's own check still ends the
    /// source, within `closedFDCheckInterval` dispatches.
    func testAClosedFDEndsItsSourceEvenWhenErrnoNoLongerSaysEBADF() throws {
        let loop = try makeLoop()
        let p = rawPipe()
        let empty = rawPipe()
        defer { close(p.write); close(empty.read); close(empty.write) }
        let interval = PortSource.closedFDCheckInterval
        var calls = 0
        var badFD = 0
        var errnoAtReturn: [Int32] = []
        let source = PortSource(fd: p.read) { s, _ in
            calls += 1
            var b: UInt8 = 0
            if read(s.fd, &b, 1) < 0 && errno == EBADF { badFD += 1 }
            // The second failing call: errno is EAGAIN from here on.
            let second = read(empty.read, &b, 1)
            if errnoAtReturn.count < 4 { errnoAtReturn.append(second < 0 ? errno : 0) }
        }
        try loop.add(source, mode: .default)
        var byte: UInt8 = 1
        XCTAssertEqual(write(p.write, &byte, 1), 1)
        close(p.read)
        errno = 0  // (not EBADF from before: the wait's fast path would end it)
        try runWhileValid(loop, source, limit: 2 * interval + 8)
        let errnoAfterRun = errno
        XCTAssertEqual(errnoAtReturn, [EAGAIN, EAGAIN, EAGAIN, EAGAIN], "errno was EBADF when the handler returned")
        XCTAssertFalse(source.isValid, "a closed fd kept the source dispatching (\(calls) dispatches)")
        XCTAssertTrue(source.endedByClosedFD)
        XCTAssertFalse(source.endedByHangup)
        XCTAssertLessThanOrEqual(calls, interval, "dispatched past the loop's check")
        XCTAssertGreaterThan(calls, 1, "ended by errno after all")
        XCTAssertEqual(UInt64(calls), source.dispatchCount)
        XCTAssertEqual(badFD, calls)
        XCTAssertFalse(loop.contains(source, mode: .default))
        XCTAssertEqual(errnoAfterRun, EAGAIN, "the loop's check changed the errno its handler left")
    }

    /// A handler that reports its EBADF (`reportClosedFD()`) ends its source
    /// at once, whatever it does to errno afterwards: dispatched once.
    func testAHandlerThatReportsItsClosedFDEndsItsSourceAtOnce() throws {
        let loop = try makeLoop()
        let p = rawPipe()
        let empty = rawPipe()
        defer { close(p.write); close(empty.read); close(empty.write) }
        var calls = 0
        var errnoAtReturn: Int32 = 0
        let source = PortSource(fd: p.read) { s, _ in
            calls += 1
            var b: UInt8 = 0
            if read(s.fd, &b, 1) < 0 && errno == EBADF { s.reportClosedFD() }
            // The second failing call: errno is EAGAIN when it returns.
            if read(empty.read, &b, 1) < 0 { errnoAtReturn = errno }
        }
        try loop.add(source, mode: .default)
        var byte: UInt8 = 1
        XCTAssertEqual(write(p.write, &byte, 1), 1)
        close(p.read)
        errno = 0
        try runWhileValid(loop, source, limit: 2 * PortSource.closedFDCheckInterval + 8)
        XCTAssertEqual(calls, 1, "the source was dispatched after its handler reported its fd closed")
        XCTAssertEqual(errnoAtReturn, EAGAIN)
        XCTAssertFalse(source.isValid)
        XCTAssertTrue(source.endedByClosedFD)
        XCTAssertFalse(source.endedByHangup)
        XCTAssertFalse(loop.contains(source, mode: .default))
    }

    /// `reportClosedFD()` from another thread: the loop applies it when it
    /// next runs, as an invalidation, and marks the source.
    func testAClosedFDReportedFromAnotherThreadEndsTheSource() throws {
        let loop = try makeLoop()
        let p = rawPipe()
        defer { close(p.read); close(p.write) }
        let source = PortSource(fd: p.read) { _, _ in }
        try loop.add(source, mode: .default)
        let reporter = JoinableThread { source.reportClosedFD() }
        XCTAssertTrue(reporter.join(within: testDeadline))
        XCTAssertEqual(try loop.run(mode: .default, timeout: .zero), .finished)
        XCTAssertFalse(source.isValid)
        XCTAssertTrue(source.endedByClosedFD)
        XCTAssertEqual(source.dispatchCount, 0)
    }

    /// A source whose fd the program closed and whose number a new file
    /// then got, while the old source was still scheduled: the stale
    /// handler reads the new file (no EBADF at all), and the loop's
    /// duplicate keeps the old file ready. The loop's check sees the number
    /// is another file now and ends the stale source; the new file's source
    /// on the same number is not mistaken for it, however often it is
    /// dispatched.
    func testAStaleSourceWhoseFDNumberWasReusedEndsAndTheNewOneIsKept() throws {
        let loop = try makeLoop()
        let interval = PortSource.closedFDCheckInterval
        let old = rawPipe()
        defer { close(old.write) }
        var staleCalls = 0
        var stolen: [UInt8] = []
        let stale = PortSource(fd: old.read) { s, _ in
            staleCalls += 1
            var b: UInt8 = 0
            if read(s.fd, &b, 1) == 1 { stolen.append(b) }
        }
        try loop.add(stale, mode: .default)
        var byte: UInt8 = 1
        XCTAssertEqual(write(old.write, &byte, 1), 1)
        close(old.read)
        let new = rawPipe()
        defer { close(new.write) }
        if new.read != old.read {
            XCTAssertEqual(dup2(new.read, old.read), old.read)
            close(new.read)
        }
        defer { close(old.read) }
        // The new file's source, on the same number; its handler reads only
        // after it has been dispatched more than twice the check's interval.
        var seen: [UInt8] = []
        var freshCalls = 0
        let fresh = PortSource(fd: old.read) { s, _ in
            freshCalls += 1
            guard freshCalls > 2 * interval else { return }
            var b: UInt8 = 0
            if read(s.fd, &b, 1) == 1 { seen.append(b) }
        }
        try loop.add(fresh, mode: .default)
        errno = 0
        try runWhileValid(loop, stale, limit: 2 * interval + 8)
        XCTAssertFalse(stale.isValid, "the stale source kept dispatching (\(staleCalls) dispatches)")
        XCTAssertTrue(stale.endedByClosedFD)
        XCTAssertLessThanOrEqual(staleCalls, interval)
        XCTAssertEqual(freshCalls, 0, "the new file had nothing to read yet")
        // The new file's data goes to its own source, dispatched well past
        // the check's interval without being ended.
        var secret: UInt8 = 42
        XCTAssertEqual(write(new.write, &secret, 1), 1)
        var passes = 0
        while seen.isEmpty && fresh.isValid && passes < 4 * interval {
            _ = try loop.run(mode: .default, timeout: testDeadline, returnAfterSourceHandled: true)
            passes += 1
        }
        XCTAssertEqual(seen, [42])
        XCTAssertEqual(stolen, [], "the stale source read the new file's data")
        XCTAssertTrue(fresh.isValid, "the new file's source was taken for a closed one")
        XCTAssertFalse(fresh.endedByClosedFD)
        XCTAssertEqual(freshCalls, 2 * interval + 1)
        fresh.invalidate()
    }
}
