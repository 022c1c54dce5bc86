import Boardloop
import BoardloopTestSupport
import CLinux
import Glibc
import BoardloopXCTestSupport
import XCTest

/// Child sources on real children: `/bin/sh` and `sleep`, spawned with every
/// signal unblocked and at its default action, in a process group each
/// leads.
final class ChildSourceTests: XCTestCase {
    /// Spawns `argv` (stdout onto `stdout` if given); returns its pid.
    private func spawn(_ argv: [String], stdout: Int32? = nil) throws -> pid_t {
        var attr = posix_spawnattr_t()
        var actions = posix_spawn_file_actions_t()
        posix_spawnattr_init(&attr)
        posix_spawn_file_actions_init(&actions)
        defer {
            posix_spawnattr_destroy(&attr)
            posix_spawn_file_actions_destroy(&actions)
        }
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attr, &none)
        posix_spawnattr_setsigdefault(&attr, &all)
        posix_spawnattr_setpgroup(&attr, 0)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))
        if let stdout { posix_spawn_file_actions_adddup2(&actions, stdout, 1) }
        var cargs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) }
        cargs.append(nil)
        defer { for p in cargs { free(p) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, argv[0], &actions, &attr, cargs, environ)
        guard rc == 0 else { throw SystemError(call: "posix_spawn", errno: rc) }
        return pid
    }

    /// Whether `pid` is a process that has not ended (a zombie has).
    private func isRunning(_ pid: pid_t) -> Bool {
        guard kill(pid, 0) == 0 else { return false }
        guard let f = fopen("/proc/\(pid)/stat", "r") else { return false }
        defer { fclose(f) }
        var buf = [CChar](repeating: 0, count: 512)
        guard fgets(&buf, 512, f) != nil else { return false }
        let text = string(fromC: buf)
        guard let close = text.lastIndex(of: ")") else { return false }
        return !text[text.index(after: close)...].hasPrefix(" Z")
    }

    /// Waits until `pid` has exited without reaping it (WNOWAIT).
    private func waitUntilExitedUnreaped(_ pid: pid_t) {
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR {}
    }

    func testExitStatusIsDeliveredOnceAndTheChildIsReaped() throws {
        let loop = try makeLoop()
        try loop.add(farTimer(), mode: .default)
        let pid = try spawn(["/bin/sh", "-c", "exit 3"])
        var got: [ChildSource.Status] = []
        let child = try ChildSource(pid: pid) { c, status in
            XCTAssertEqual(c.pid, pid)
            got.append(status)
        }
        try child.add(to: loop)
        XCTAssertTrue(try runUntil(loop, until: { !got.isEmpty }), "the exit is reported")
        XCTAssertEqual(got, [.exited(code: 3)])
        XCTAssertEqual(child.status, .exited(code: 3))
        XCTAssertFalse(child.isValid, "the source ends with the exit")
        XCTAssertFalse(loop.contains(child.source, mode: .default))
        // More passes call nothing again.
        for _ in 0..<5 { _ = try loop.run(mode: .default, timeout: .milliseconds(2)) }
        XCTAssertEqual(got.count, 1, "the handler fires once")
        XCTAssertEqual(child.reapIfExited(), .exited(code: 3), "the status stays")
        XCTAssertEqual(got.count, 1)
        // Reaped: nothing is left to wait for, and the pid is no longer ours.
        var status: Int32 = 0
        XCTAssertEqual(waitpid(pid, &status, WNOHANG), -1)
        XCTAssertEqual(errno, ECHILD)
        XCTAssertThrowsError(try child.send(signal: SIGTERM), "no signal once reaped")
        XCTAssertThrowsError(try child.signalProcessGroup(SIGTERM), "no group signal once reaped (the id may be reused)")
    }

    func testExitZeroAndStatusesOfSeveralChildren() throws {
        let loop = try makeLoop()
        try loop.add(farTimer(), mode: .default)
        var got: [pid_t: ChildSource.Status] = [:]
        var sources: [ChildSource] = []
        for code in [0, 1, 255] {
            let pid = try spawn(["/bin/sh", "-c", "exit \(code)"])
            let c = try ChildSource(pid: pid) { c, s in
                XCTAssertNil(got[c.pid], "once per child")
                got[c.pid] = s
            }
            try c.add(to: loop)
            sources.append(c)
        }
        XCTAssertTrue(try runUntil(loop, until: { got.count == 3 }))
        XCTAssertEqual(sources.map { got[$0.pid] }, [.exited(code: 0), .exited(code: 1), .exited(code: 255)])
    }

    func testChildKilledBySignal() throws {
        let loop = try makeLoop()
        try loop.add(farTimer(), mode: .default)
        let pid = try spawn(["/bin/sleep", "30"])
        var got: [ChildSource.Status] = []
        let child = try ChildSource(pid: pid) { _, s in got.append(s) }
        try child.add(to: loop)
        _ = try loop.run(mode: .default, timeout: .milliseconds(5))
        XCTAssertEqual(got, [], "no exit while it sleeps")
        XCTAssertNil(child.reapIfExited())
        XCTAssertTrue(isRunning(pid))
        try child.send(signal: SIGTERM)
        XCTAssertTrue(try runUntil(loop, until: { !got.isEmpty }))
        XCTAssertEqual(got, [.killed(signal: SIGTERM, coreDumped: false)])
        XCTAssertEqual(got.first?.description, "killed by SIGTERM")
    }

    /// The group signal reaches what the child started; the child's own
    /// signal through its pidfd reaches only the child.
    func testProcessGroupSignalReachesGrandchildren() throws {
        let loop = try makeLoop()
        try loop.add(farTimer(), mode: .default)
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        let pid = try spawn(["/bin/sh", "-c", "/bin/sleep 30 & echo $!; wait"], stdout: fds[1])
        close(fds[1])
        var buf = [CChar](repeating: 0, count: 32)
        XCTAssertGreaterThan(read(fds[0], &buf, 31), 0, "the shell wrote its grandchild's pid")
        close(fds[0])
        let grandchild = try XCTUnwrap(pid_t(string(fromC: buf).split(separator: "\n").first ?? ""))
        defer { kill(grandchild, SIGKILL) }
        XCTAssertTrue(isRunning(grandchild))
        var got: [ChildSource.Status] = []
        let child = try ChildSource(pid: pid) { _, s in got.append(s) }
        try child.add(to: loop)
        try child.signalProcessGroup(SIGKILL)
        XCTAssertTrue(try runUntil(loop, until: { !got.isEmpty }))
        XCTAssertEqual(got, [.killed(signal: SIGKILL, coreDumped: false)])
        // The grandchild, whose parent is gone, is reaped by init (or a
        // subreaper): gone or a zombie, it no longer runs.
        let end = MonotonicInstant.now + testDeadline
        while isRunning(grandchild) && MonotonicInstant.now < end { sched_yield() }
        XCTAssertFalse(isRunning(grandchild), "SIGKILL reached the group")
    }

    /// Invalidated before the exit: the handler is never called, and the
    /// child is left for the caller to reap.
    func testInvalidationBeforeExitCallsNothingAndLeavesTheChildUnreaped() throws {
        let loop = try makeLoop()
        try loop.add(farTimer(), mode: .default)
        let pid = try spawn(["/bin/sleep", "30"])
        var calls = 0
        let child = try ChildSource(pid: pid) { _, _ in calls += 1 }
        try child.add(to: loop)
        child.invalidate()
        XCTAssertFalse(child.isValid)
        XCTAssertFalse(loop.contains(child.source, mode: .default))
        try child.send(signal: SIGKILL)
        waitUntilExitedUnreaped(pid)
        for _ in 0..<5 { _ = try loop.run(mode: .default, timeout: .milliseconds(2)) }
        XCTAssertEqual(calls, 0, "no handler after invalidation")
        XCTAssertNil(child.status, "the loop did not reap it")
        XCTAssertEqual(child.waitForExit(), .killed(signal: SIGKILL, coreDumped: false), "the caller reaps it")
        XCTAssertEqual(calls, 0)
    }

    /// Reaped by someone else first: the handler learns the status is lost,
    /// and the source ends (a pidfd stays readable: it must not spin).
    func testChildReapedElsewhereEndsTheSource() throws {
        let loop = try makeLoop()
        try loop.add(farTimer(), mode: .default)
        let pid = try spawn(["/bin/sh", "-c", "exit 7"])
        var got: [ChildSource.Status] = []
        let child = try ChildSource(pid: pid) { _, s in got.append(s) }
        try child.add(to: loop)
        var status: Int32 = 0
        XCTAssertEqual(waitpid(pid, &status, 0), pid)
        XCTAssertTrue(try runUntil(loop, until: { !got.isEmpty }))
        XCTAssertEqual(got, [.lost])
        for _ in 0..<5 { _ = try loop.run(mode: .default, timeout: .milliseconds(2)) }
        XCTAssertEqual(got.count, 1)
        XCTAssertEqual(child.source.dispatchCount, 1, "the source ended instead of being dispatched again")
    }

    /// Without running a loop: a sleep until one of several exits, bounded
    /// by a deadline, then the exited one reaped with its handler called.
    func testWaitForAnyExitWithoutALoop() throws {
        let a = try spawn(["/bin/sleep", "30"])
        let b = try spawn(["/bin/sleep", "30"])
        var got: [pid_t: ChildSource.Status] = [:]
        let ca = try ChildSource(pid: a) { c, s in got[c.pid] = s }
        let cb = try ChildSource(pid: b) { c, s in got[c.pid] = s }
        defer {
            try? cb.send(signal: SIGKILL)
            cb.waitForExit()
        }
        let start = MonotonicInstant.now
        XCTAssertFalse(ChildSource.waitForAnyExit(of: [ca, cb], until: start + .milliseconds(30)), "neither exits")
        XCTAssertGreaterThanOrEqual(MonotonicInstant.now - start, .milliseconds(30), "it slept until the deadline")
        try ca.signalProcessGroup(SIGKILL)
        XCTAssertTrue(ChildSource.waitForAnyExit(of: [ca, cb], until: .now + testDeadline))
        XCTAssertEqual(ca.reapIfExited(), .killed(signal: SIGKILL, coreDumped: false))
        XCTAssertNil(cb.reapIfExited())
        XCTAssertEqual(got, [a: .killed(signal: SIGKILL, coreDumped: false)])
        XCTAssertTrue(ChildSource.waitForAnyExit(of: [ca], until: .now), "every child reaped: nothing to wait for")
    }

    /// A pidfd made by the caller is adopted; `waitForExit()` waits even on
    /// a non-blocking one (where `waitid` alone would return at once).
    func testAdoptedNonBlockingPidfdStillWaits() throws {
        let pid = try spawn(["/bin/sleep", "30"])
        let fd = bl_pidfd_open(pid)
        XCTAssertGreaterThanOrEqual(fd, 0)
        XCTAssertEqual(fcntl(fd, F_SETFL, O_NONBLOCK), 0)
        var calls = 0
        let child = ChildSource(pidfd: fd, pid: pid) { _, _ in calls += 1 }
        XCTAssertNil(child.reapIfExited(), "still running")
        try child.send(signal: SIGKILL)
        XCTAssertEqual(child.waitForExit(), .killed(signal: SIGKILL, coreDumped: false))
        XCTAssertEqual(calls, 1)
    }

    /// From the signal to the handler — the exit's wake-up, the dispatch,
    /// the reap — nothing is allocated on the loop's thread once the source
    /// is running. (Counted until the handler starts: the source leaves its
    /// loop after the handler, and that is not on the event path.)
    func testExitDispatchAllocatesNothing() throws {
        try XCTSkipUnless(AllocationCounter.isActive, "malloc interposer not linked: a sanitizer build (TSan, ASan) owns malloc; the normal test run counts")
        let loop = try makeLoop()
        try loop.add(farTimer(), mode: .default)
        var got = 0
        var last: ChildSource.Status?
        var counting = false
        var counted = -1
        let handler: (ChildSource, ChildSource.Status) -> Void = { _, s in
            if counting {
                AllocationCounter.endCountingOnThisThread()
                counting = false
                counted = AllocationCounter.count
            }
            got += 1
            last = s
        }
        // Warm up: one child through the whole path first.
        let warm = try ChildSource(pid: try spawn(["/bin/sh", "-c", "exit 0"]), handler: handler)
        try warm.add(to: loop)
        XCTAssertTrue(try runUntil(loop, until: { got == 1 }))

        let child = try ChildSource(pid: try spawn(["/bin/sleep", "30"]), handler: handler)
        try child.add(to: loop)
        _ = try loop.run(mode: .default, timeout: .zero)
        AllocationCounter.reset()
        counting = true
        AllocationCounter.beginCountingOnThisThread()
        try child.send(signal: SIGKILL)
        var passes = 0
        while got < 2 && passes < 10_000 {
            _ = try loop.run(mode: .default, timeout: .seconds(10), returnAfterSourceHandled: true)
            passes += 1
        }
        if counting { AllocationCounter.endCountingOnThisThread() }
        XCTAssertEqual(got, 2)
        XCTAssertEqual(last, .killed(signal: SIGKILL, coreDumped: false))
        XCTAssertEqual(counted, 0, "heap allocations from the signal to the handler")
    }
}
