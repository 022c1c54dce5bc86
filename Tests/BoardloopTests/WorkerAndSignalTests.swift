import Boardloop
import BoardloopTestSupport
import CLinux
import Glibc
import Synchronization
import BoardloopXCTestSupport
import XCTest

final class WorkerTests: XCTestCase {
    func testStartReturnsWithLoopRunningAndPerformsReachIt() throws {
        let worker = try LoopThread.start(name: "w-perform")
        XCTAssertTrue(waitUntil { worker.loop!.isWaiting }, "the loop is running (asleep) once start returned")
        let ran = Atomic<Int32>(0)
        try worker.loop!.performAndWait { ran.store(bl_gettid(), ordering: .relaxed) }
        XCTAssertEqual(ran.load(ordering: .relaxed), worker.threadID)
        worker.stopAndJoin()
    }

    func testThreadNameIsVisibleInProc() throws {
        let worker = try LoopThread.start(name: "gpio-reader-0123456789")
        let path = "/proc/\(getpid())/task/\(worker.threadID)/comm"
        let f = fopen(path, "r")
        XCTAssertNotNil(f)
        var buf = [CChar](repeating: 0, count: 32)
        _ = fgets(&buf, 32, f)
        fclose(f)
        XCTAssertEqual(string(fromC: buf).trimmingCharacters(in: .newlines), "gpio-reader-012", "15 bytes, as the kernel keeps")
        worker.stopAndJoin()
    }

    func testStopWhileBusyExitsCleanly() throws {
        let fires = Atomic<Int>(0)
        let worker = try LoopThread.start(name: "w-busy") { loop in
            try loop.add(RunLoopTimer(fireAt: loop.now, interval: .milliseconds(1)) { _ in
                fires.add(1, ordering: .relaxed)
                let end = MonotonicInstant.now + .milliseconds(20)
                while MonotonicInstant.now < end {} // busy
            }, mode: .default)
        }
        XCTAssertTrue(waitUntil { fires.load(ordering: .relaxed) >= 2 })
        worker.stop()
        worker.join()
        let after = fires.load(ordering: .relaxed)
        usleep(30_000)
        XCTAssertEqual(fires.load(ordering: .relaxed), after, "no fires after join")
    }

    func testStopBeforeStartUpFinishedDoesNotHang() throws {
        let inSetup = Atomic<Bool>(false), stopped = Atomic<Bool>(false)
        let worker = LoopThread(name: "w-early") { _ in
            inSetup.store(true, ordering: .releasing)
            XCTAssertTrue(waitUntil { stopped.load(ordering: .acquiring) })
        }
        let stopper = JoinableThread {
            XCTAssertTrue(waitUntil { inSetup.load(ordering: .acquiring) })
            worker.stop()
            stopped.store(true, ordering: .releasing)
        }
        try worker.start()
        stopper.join()
        worker.join()

        // Stopped before it was even started.
        let never = LoopThread(name: "w-never")
        never.stop()
        try never.start()
        never.join()
    }

    func testSetupErrorIsReported() throws {
        struct Boom: Error {}
        XCTAssertThrowsError(try LoopThread.start(name: "w-fail") { _ in throw Boom() }) { error in
            XCTAssertEqual(error as? LoopThreadError, .setupFailed(worker: "w-fail", error: "Boom()"))
        }
    }

    func testRealTimeSettingsApplied() throws {
        let seen = Locked<(affinity: Int32, slack: Int, policy: Int32, priority: Int32)>((0, 0, 0, 0))
        let worker = try LoopThread.start(name: "w-rt", settings: .init(cpuAffinity: [0], fifoPriority: 1, timerSlack: .microseconds(10))) { _ in
            var set = bl_cpuset()
            _ = bl_get_affinity(&set)
            var policy: Int32 = 0
            var param = sched_param()
            pthread_getschedparam(pthread_self(), &policy, &param)
            seen.withLock { $0 = (Int32(set.bytes.0), bl_get_timer_slack(), policy, param.sched_priority) }
        }
        worker.stopAndJoin()
        let s = seen.withLock { $0 }
        XCTAssertEqual(s.affinity, 1, "CPU 0 only")
        XCTAssertEqual(s.policy, SCHED_FIFO)
        XCTAssertEqual(s.priority, 1)
        XCTAssertEqual(s.slack, 0, "the kernel gives real-time threads no timer slack")

        let slack = Atomic<Int>(0)
        let w2 = try LoopThread.start(name: "w-slack", settings: .init(timerSlack: .microseconds(10))) { _ in
            slack.store(bl_get_timer_slack(), ordering: .relaxed)
        }
        w2.stopAndJoin()
        XCTAssertEqual(slack.load(ordering: .relaxed), 10_000)
    }

    /// Without CAP_SYS_NICE (dropped on the starting thread, whose
    /// credentials the worker inherits) and with RLIMIT_RTPRIO 0, SCHED_FIFO is
    /// refused: the error names the setting and what to do, and the worker
    /// did not start.
    func testRealTimePermissionErrorIsClearAndNothingHalfApplied() throws {
        var limit = rlimit()
        getrlimit(__rlimit_resource_t(14) /* RLIMIT_RTPRIO */, &limit)
        let result = Locked<LoopThreadError?>(nil)
        let setupRan = Atomic<Bool>(false)
        let t = JoinableThread {
            XCTAssertEqual(bl_drop_effective_capability(23 /* CAP_SYS_NICE */), 0)
            do {
                _ = try LoopThread.start(name: "w-noperm", settings: .init(cpuAffinity: [0], fifoPriority: 10, timerSlack: .microseconds(5))) { _ in
                    setupRan.store(true, ordering: .relaxed)
                }
            } catch let e as LoopThreadError {
                result.withLock { $0 = e }
            } catch {}
        }
        t.join()
        guard limit.rlim_cur < 10 else {
            // RLIMIT_RTPRIO allows it here: the kernel would grant FIFO 10 without the capability.
            XCTAssertNil(result.withLock { $0 })
            return
        }
        let error = try XCTUnwrap(result.withLock { $0 })
        guard case let .permissionDenied(worker, setting, hint) = error else { return XCTFail("\(error)") }
        XCTAssertEqual(worker, "w-noperm")
        XCTAssertEqual(setting, "SCHED_FIFO priority 10")
        XCTAssertTrue(hint.contains("CAP_SYS_NICE") && hint.contains("RLIMIT_RTPRIO"), hint)
        XCTAssertFalse(setupRan.load(ordering: .relaxed), "a worker whose settings failed does not run")
        XCTAssertTrue(error.description.contains("Nothing was applied"))
    }

    func testInvalidSettings() {
        XCTAssertThrowsError(try LoopThread.start(name: "w-bad", settings: .init(fifoPriority: 0))) { e in
            XCTAssertEqual(e as? LoopThreadError, .invalidSetting(worker: "w-bad", setting: "SCHED_FIFO priority 0", reason: "must be 1...99"))
        }
        XCTAssertThrowsError(try LoopThread.start(name: "w-bad", settings: .init(cpuAffinity: [4096]))) { e in
            guard case .invalidSetting(_, "CPU affinity [4096]", _) = e as? LoopThreadError else { return XCTFail("\(e)") }
        }
    }
}

final class SignalSourceTests: XCTestCase {
    static let rt = SignalMask.realtimeRange.lowerBound + 2
    static let all: [Int32] = [SIGUSR1, SIGUSR2, SIGHUP, rt]

    override func setUp() {
        // Thread-directed signals (tgkill, rt_tgsigqueueinfo) to this thread
        // only: other threads of the test process need not block them.
        XCTAssertNoThrow(try SignalMask.block(Self.all))
    }

    override func tearDown() {
        // Consume anything left pending, then unblock.
        if let s = try? SignalSource(signals: Self.all, handler: { _ in }), let loop = try? makeLoop() {
            try? s.add(to: loop)
            _ = try? loop.run(mode: .default, timeout: .zero)
            s.invalidate()
        }
        SignalMask.unblock(Self.all)
    }

    /// Dropping the last reference to a scheduled signal source on another
    /// thread used to end the process; the loop now keeps it alive, as CF's
    /// sources, until it is invalidated (from any thread).
    func testDroppingAScheduledSignalSourceOnAnotherThreadNoLongerTraps() throws {
        let loop = try makeLoop()
        var got: [Int32] = []
        let weak = WeakRef<SignalSource>()
        do {
            let source = try SignalSource(signals: [SIGUSR1]) { got.append($0.signal) }
            try source.add(to: loop)
            weak.value = source
            let box = Locked<SignalSource?>(source)
            JoinableThread { box.withLock { $0 = nil } }.join()
        }
        XCTAssertNotNil(weak.value, "the loop keeps a scheduled signal source alive")
        XCTAssertEqual(bl_tgkill(bl_gettid(), SIGUSR1), 0)
        XCTAssertTrue(try runUntil(loop, until: { got == [SIGUSR1] }))
        JoinableThread { weak.value?.invalidate() }.join()
        XCTAssertEqual(try loop.run(mode: .default, timeout: .zero), .finished)
        XCTAssertNil(weak.value, "invalidated from another thread, it is freed at the loop's next pass")
    }

    func testSignalsArriveWithSiginfo() throws {
        let loop = try makeLoop()
        var got: [SignalSource.Info] = []
        let source = try SignalSource(signals: Self.all) { got.append($0) }
        try source.add(to: loop)
        let tid = bl_gettid()
        XCTAssertEqual(bl_tgkill(tid, SIGUSR1), 0)
        XCTAssertEqual(bl_tgsigqueue(tid, SIGUSR2, 42), 0)
        XCTAssertEqual(bl_tgkill(tid, SIGHUP), 0)
        XCTAssertEqual(bl_tgsigqueue(tid, Self.rt, 7), 0)
        XCTAssertTrue(try runUntil(loop, until: { got.count >= 4 }), "four signals arrive within the deadline (got \(got.count))")
        let pid = getpid(), uid = getuid()
        // Standard signals are delivered lowest number first, then real-time ones.
        XCTAssertEqual(got.map(\.signal), [SIGHUP, SIGUSR1, SIGUSR2, Self.rt])
        for i in got { XCTAssertEqual(i.senderPID, pid); XCTAssertEqual(i.senderUID, uid) }
        XCTAssertEqual(got[1].code, Int32(SI_TKILL))
        XCTAssertEqual(got[2].code, Int32(SI_QUEUE))
        XCTAssertEqual(got[2].value, 42)
        XCTAssertEqual(got[3].value, 7)
        XCTAssertEqual(got[3].name, "SIGRTMIN+2")
    }

    /// Exactly what is guaranteed: a standard signal sent twice before the
    /// loop reads arrives once; real-time signals queue, each with its value.
    func testStandardSignalsCoalesceRealTimeSignalsQueue() throws {
        let loop = try makeLoop()
        var got: [SignalSource.Info] = []
        let source = try SignalSource(signals: Self.all) { got.append($0) }
        try source.add(to: loop)
        let tid = bl_gettid()
        for v in 1...3 { XCTAssertEqual(bl_tgsigqueue(tid, SIGUSR1, Int32(v)), 0) }
        for v in 1...3 { XCTAssertEqual(bl_tgsigqueue(tid, Self.rt, Int32(v)), 0) }
        XCTAssertTrue(try runUntil(loop, until: { got.count >= 4 }), "four signals arrive within the deadline (got \(got.count))")
        XCTAssertEqual(try loop.run(mode: .default, timeout: .milliseconds(20), returnAfterSourceHandled: true), .timedOut, "nothing more")
        XCTAssertEqual(got.filter { $0.signal == SIGUSR1 }.count, 1, "standard signals coalesce while pending")
        XCTAssertEqual(got.filter { $0.signal == SIGUSR1 }.first?.value, 1, "the first one's siginfo is kept")
        XCTAssertEqual(got.filter { $0.signal == Self.rt }.map(\.value), [1, 2, 3], "real-time signals queue in order")
    }

    func testSignalInAModeNotRunningIsHeld() throws {
        let loop = try makeLoop()
        var got: [Int32] = []
        let source = try SignalSource(signals: Self.all) { got.append($0.signal) }
        try source.add(to: loop, mode: "signals")
        try loop.add(farTimer(), mode: .default)
        XCTAssertEqual(bl_tgkill(bl_gettid(), SIGUSR2), 0)
        XCTAssertEqual(try loop.run(mode: .default, timeout: .milliseconds(20)), .timedOut)
        XCTAssertEqual(got, [])
        XCTAssertEqual(try loop.run(mode: "signals", timeout: testDeadline, returnAfterSourceHandled: true), .handledSource)
        XCTAssertEqual(got, [SIGUSR2])
    }

    /// A signal aimed at a worker's thread arrives on the worker's loop.
    func testSignalArrivesOnTheRightLoop() throws {
        let mainGot = Locked<[Int32]>([]), workerGot = Locked<[Int32]>([])
        let loop = try makeLoop()
        let mine = try SignalSource(signals: [SIGUSR1]) { i in mainGot.withLock { $0.append(i.signal) } }
        try mine.add(to: loop)
        // The worker inherits this thread's mask (SIGHUP blocked).
        let worker = try LoopThread.start(name: "w-signals") { wl in
            let s = try SignalSource(signals: [SIGHUP]) { i in workerGot.withLock { $0.append(i.signal) } }
            try s.add(to: wl)
            try wl.add(RunLoopObserver(activities: .exit) { _, _ in withExtendedLifetime(s) {} }, mode: .default)
        }
        XCTAssertEqual(bl_tgkill(worker.threadID, SIGHUP), 0)
        XCTAssertEqual(bl_tgkill(bl_gettid(), SIGUSR1), 0)
        XCTAssertTrue(waitUntil { workerGot.withLock { $0 } == [SIGHUP] })
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline, returnAfterSourceHandled: true), .handledSource)
        XCTAssertEqual(mainGot.withLock { $0 }, [SIGUSR1])
        worker.stopAndJoin()
    }

    func testUnblockedSignalIsRefusedClearly() throws {
        SignalMask.unblock([SIGUSR2])
        XCTAssertThrowsError(try SignalSource(signals: [SIGUSR1, SIGUSR2]) { _ in }) { e in
            XCTAssertEqual(e as? SignalSourceError, .notBlocked(signal: SIGUSR2, name: "SIGUSR2"))
            XCTAssertTrue("\(e)".contains("SignalMask.block"))
        }
        XCTAssertThrowsError(try SignalSource(signals: [SIGKILL]) { _ in }) { e in
            XCTAssertEqual(e as? SignalSourceError, .invalidSignal(SIGKILL))
        }
    }

    /// Process-directed kill()/sigqueue() need every thread to block the
    /// signals, which an XCTest process cannot promise; the worker-demo
    /// example blocks them first thing in main and checks deliveries itself.
    func testProcessDirectedSignalsInWorkerDemo() throws {
        var exe = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &exe, 4095)
        XCTAssertGreaterThan(n, 0)
        var dir = string(fromC: exe)
        while !dir.hasSuffix("/") { dir.removeLast() }
        let demo = dir + "worker-demo"
        // The test target depends on worker-demo, so it is always built.
        XCTAssertEqual(access(demo, X_OK), 0, "worker-demo not built next to the tests at \(demo)")
        let pipe = popen("timeout 60 '\(demo)' --self-test 2>&1", "r")
        XCTAssertNotNil(pipe)
        var output = ""
        var line = [CChar](repeating: 0, count: 512)
        while fgets(&line, 512, pipe) != nil { output += string(fromC: line) }
        let status = pclose(pipe)
        XCTAssertEqual(status, 0, output)
        XCTAssertTrue(output.contains("ALL PASS"), output)
        XCTAssertFalse(output.contains("FAIL"), output)
    }
}
