import Boardloop
import BoardloopTestSupport
import BoardloopXCTestSupport
import Glibc
import XCTest

/// A process that forks while it has loops. The child shares the loops'
/// epoll sets with the parent (an epoll fd names one kernel object, whoever
/// holds it): whatever the child changes in them, the parent's loops see.
/// The child holds copies of the loops as well; it must not be able to use
/// them.
final class ForkTests: XCTestCase {
    /// Waits (on its pidfd, at most `testDeadline`) for child `pid` and
    /// returns its exit code; a child that does not exit in time is killed
    /// and reported as -1, so a child stuck in a lock fails the test rather
    /// than hanging it.
    static func exitCode(of pid: pid_t) throws -> Int32 {
        let child = try ChildSource(pid: pid) { _, _ in }
        if !ChildSource.waitForAnyExit(of: [child], until: MonotonicInstant.now + testDeadline) {
            try? child.send(signal: SIGKILL)
            _ = child.waitForExit()
            return -1
        }
        guard case let .exited(code)? = child.reapIfExited() else { return -2 }
        return code
    }

    /// A byte written to `p` reaches `source` on `loop` at the next pass:
    /// level-triggered and already ready, so a zero-timeout run finds it if
    /// the fd is still in the mode's epoll set.
    static func deliversNow(_ loop: BoardRunLoop, _ p: (read: Int32, write: Int32), _ received: () -> Int) throws -> Bool {
        let before = received()
        var byte: UInt8 = 7
        XCTAssertEqual(write(p.write, &byte, 1), 1)
        _ = try loop.run(mode: .default, timeout: .zero, returnAfterSourceHandled: true)
        return received() == before + 1
    }

    /// The child's copy of a loop refuses it as it refuses any thread that
    /// does not own it (`.notOwner`): a child that removed the source would
    /// take it off the epoll set it shares with the parent, whose source
    /// would stay scheduled and never fire again. (Before the fix, the
    /// child's thread kept the parent thread's cached id and passed the
    /// owner check.) The child calls nothing but the failing `remove` and
    /// `_exit`.
    func testAForkedChildCannotChangeItsParentsLoop() throws {
        let loop = try makeLoop()
        let p = rawPipe()
        defer { close(p.read); close(p.write) }
        var received = 0
        let source = PortSource(fd: p.read) { s, _ in
            var b: UInt8 = 0
            if read(s.fd, &b, 1) == 1 { received += 1 }
        }
        try loop.add(source, mode: .default)
        let pid = fork()
        if pid == 0 {
            // 0: refused as not the owner; 1: the child changed the loop; 2: another error.
            var code: Int32 = 1
            do throws(RunLoopError) { try loop.remove(source, mode: .default) } catch {
                if case .notOwner = error { code = 0 } else { code = 2 }
            }
            _exit(code)
        }
        XCTAssertGreaterThan(pid, 0)
        XCTAssertEqual(try Self.exitCode(of: pid), 0, "the forked child was taken for the loop's owner")
        XCTAssertTrue(loop.contains(source, mode: .default))
        XCTAssertTrue(try Self.deliversNow(loop, p) { received }, "the parent's source went deaf after the child's remove")
        source.invalidate()
    }

    /// A worker thread forks and its copy in the child exits (pthread_exit,
    /// which runs the thread's exit handlers in the child): the exit must
    /// not end the worker's loops, which in the child are the parent's
    /// (their epoll sets shared). The worker's loop still delivers.
    func testAForkedChildOfAWorkerThreadExitingLeavesTheWorkersLoopAlone() throws {
        // The child's last thread ends in pthread_exit, so the child runs
        // the process's exit: under ThreadSanitizer its runtime aborts there
        // (a forked child of a threaded process: exit 66), and under
        // LeakSanitizer its leak check sees the parent's other threads'
        // memory as lost. The normal run checks it; the sanitizer runs
        // check the other fork tests.
        try XCTSkipIf(Sanitizers.thread || Sanitizers.address, "a sanitizer's runtime cannot run a forked child to its pthread_exit")
        let p = rawPipe()
        defer { close(p.read); close(p.write) }
        let outcome = Locked<[String]>([])
        let worker = JoinableThread {
            do {
                let loop = try BoardRunLoop.makeCurrent()
                var received = 0
                let source = PortSource(fd: p.read) { s, _ in
                    var b: UInt8 = 0
                    if read(s.fd, &b, 1) == 1 { received += 1 }
                }
                try loop.add(source, mode: .default)
                let pid = fork()
                if pid == 0 { pthread_exit(nil) }
                let code = try Self.exitCode(of: pid)
                let delivered = try Self.deliversNow(loop, p) { received }
                outcome.withLock { $0 = ["exit \(code)", "scheduled \(loop.contains(source, mode: .default))", "delivered \(delivered)"] }
            } catch {
                outcome.withLock { $0 = ["error \(error)"] }
            }
        }
        XCTAssertTrue(worker.join(within: testDeadline))
        XCTAssertEqual(outcome.withLock { $0 }, ["exit 0", "scheduled true", "delivered true"])
    }

    /// A child that closes every fd it inherited, or just exits, takes
    /// nothing off the parent's epoll sets: a registration goes only when
    /// the last fd of its file is closed, and the parent still holds them.
    func testAForkedChildClosingItsFDsAndExitingLeavesTheParentsSourcesWatched() throws {
        let loop = try makeLoop()
        let p = rawPipe()
        defer { close(p.read); close(p.write) }
        var received = 0
        let source = PortSource(fd: p.read) { s, _ in
            var b: UInt8 = 0
            if read(s.fd, &b, 1) == 1 { received += 1 }
        }
        try loop.add(source, mode: .default)
        let pid = fork()
        if pid == 0 {
            var fd: Int32 = 3
            while fd < 4096 { close(fd); fd += 1 }
            _exit(0)
        }
        XCTAssertEqual(try Self.exitCode(of: pid), 0)
        XCTAssertTrue(try Self.deliversNow(loop, p) { received })
        source.invalidate()
    }

    /// Every fd a loop and its sources open is close-on-exec, so a child
    /// that execs holds none of them (no epoll set, no duplicate of a
    /// source's fd keeping a file — a GPIO line, a pipe's end — open).
    func testEveryFDTheLoopOpensIsCloseOnExec() throws {
        func inheritable() -> Set<Int32> {
            var fds = Set<Int32>()
            guard let d = opendir("/proc/self/fd") else { return fds }
            defer { closedir(d) }
            let own = dirfd(d)
            while let e = readdir(d) {
                let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                guard let fd = Int32(name), fd != own else { continue }
                let flags = fcntl(fd, F_GETFD)
                if flags >= 0 && flags & FD_CLOEXEC == 0 { fds.insert(fd) }
            }
            return fds
        }
        let before = inheritable()
        let loop = try makeLoop(capacities: .init(modes: 4))
        let p = rawPipe()
        defer { close(p.read); close(p.write) }
        let source = PortSource(fd: p.read) { _, _ in }
        try loop.add(source, mode: .common)
        try loop.add(source, mode: RunLoopMode("other"))
        try loop.add(RunLoopTimer(fireAt: .distantFuture) { _ in }, mode: .default)
        let port = try BoardMessagePort(label: "fork-test", slots: 4, slotSize: 8) { _ in }
        try port.schedule(on: loop)
        _ = try loop.run(mode: .default, timeout: .zero)
        XCTAssertEqual(inheritable().subtracting(before), [], "the loop opened fds an exec'd child would inherit")
        source.invalidate()
        port.invalidate()
    }
}
