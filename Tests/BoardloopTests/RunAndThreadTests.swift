import Boardloop
import BoardloopTestSupport
import CLinux
import Glibc
import Synchronization
import BoardloopXCTestSupport
import XCTest

final class RunAndThreadTests: XCTestCase {
    func testStopFromAnotherThreadWhileSleeping() throws {
        let loop = try makeLoop()
        try loop.add(farTimer(), mode: .default)
        let t = JoinableThread {
            XCTAssertTrue(waitUntil { loop.isWaiting })
            loop.stop()
        }
        let start = MonotonicInstant.now
        XCTAssertEqual(try loop.run(mode: .default, timeout: .seconds(600)), .stopped)
        t.join()
        // The stop ended a 10-minute sleep; the bound only catches a loop that
        // did not wake at all.
        XCTAssertLessThan(MonotonicInstant.now - start, .seconds(60))
    }

    /// Two loops post work items to each other, many times over: a wake-up
    /// lost in the hand-off (the poster reading the loop as awake while the
    /// loop, about to sleep, had not yet seen the request) stalls both. The
    /// race is a matter of nanoseconds and hardware store buffers, so this
    /// catches it only now and then; each trip's deadline is what fails.
    func testCrossThreadPingPongLosesNoWakeUp() throws {
        let a = try makeLoop()
        try a.add(farTimer(), mode: .default)
        let worker = try LoopThread.start(name: "ping-pong")
        let b = worker.loop!
        final class State: @unchecked Sendable {
            var trips = 0
            var toA: PerformWorkItem?
            var toB: PerformWorkItem?
        }
        let st = State()
        let total = 50_000
        st.toA = PerformWorkItem {
            st.trips += 1
            if st.trips == total { a.stop() } else { _ = try? b.perform(st.toB!) }
        }
        st.toB = PerformWorkItem { _ = try? a.perform(st.toA!) }
        try b.perform(st.toB!)
        var lastTrips = -1
        while st.trips < total {
            // A stalled hand-off leaves both loops asleep: no trip for 10 s.
            let r = try a.run(mode: .default, timeout: testDeadline)
            XCTAssertTrue(r == .stopped || st.trips > lastTrips, "no round trip for \(testDeadline) after \(st.trips): a wake-up was lost")
            if r == .timedOut && st.trips == lastTrips { break }
            lastTrips = st.trips
        }
        XCTAssertEqual(st.trips, total)
        worker.stopAndJoin()
        st.toA = nil
        st.toB = nil
    }

    func testSignalAndWakeUpFromAnotherThreadEndsSleep() throws {
        let loop = try makeLoop()
        let performedOn = Atomic<Int32>(0)
        let source = CustomSource { performedOn.store(bl_gettid(), ordering: .relaxed) }
        try loop.add(source, mode: .default)
        let t = JoinableThread {
            XCTAssertTrue(waitUntil { loop.isWaiting })
            source.signalAndWakeUp()
        }
        XCTAssertEqual(try loop.run(mode: .default, timeout: .seconds(600), returnAfterSourceHandled: true), .handledSource)
        t.join()
        XCTAssertEqual(performedOn.load(ordering: .relaxed), bl_gettid(), "perform runs on the loop's thread")
    }

    func testUnconditionalRunEndsOnStopOrEmptyMode() throws {
        let loop = try makeLoop()
        var n = 0
        let timer = RunLoopTimer(fireAt: loop.now, interval: .milliseconds(1)) { t in
            n += 1
            if n == 3 { t.invalidate() } // the mode becomes empty: run() returns
        }
        try loop.add(timer, mode: .default)
        try loop.run()
        XCTAssertEqual(n, 3)

        let timer2 = RunLoopTimer(fireAt: loop.now, interval: .milliseconds(1)) { _ in loop.stop() }
        try loop.add(timer2, mode: .default)
        try loop.run()
        XCTAssertTrue(timer2.isValid)
    }

    func testRunUntilDeadline() throws {
        let loop = try makeLoop()
        try loop.add(farTimer(), mode: .default)
        let deadline = loop.now + .milliseconds(15)
        XCTAssertEqual(try loop.run(until: deadline), .timedOut)
        XCTAssertGreaterThanOrEqual(loop.now, deadline)
        // Already passed: one poll pass.
        XCTAssertEqual(try loop.run(until: deadline), .timedOut)
    }

    func testOwnerOnlyCallsFailClearlyFromOtherThreads() throws {
        let loop = try makeLoop()
        let owner = loop.ownerThread
        XCTAssertEqual(owner, bl_gettid())
        let t = JoinableThread {
            let caller = bl_gettid()
            XCTAssertThrows(.notOwner(operation: "BoardRunLoop.add(RunLoopTimer)", ownerThread: owner, callingThread: caller)) {
                () throws(RunLoopError) in try loop.add(farTimer(), mode: .default)
            }
            XCTAssertThrows(.notOwner(operation: "BoardRunLoop.run(mode:timeout:returnAfterSourceHandled:)", ownerThread: owner, callingThread: caller)) {
                () throws(RunLoopError) in try loop.run(mode: .default, timeout: .zero)
            }
            do throws(RunLoopError) {
                try loop.add(CustomSource {}, mode: .default)
                XCTFail("add from another thread succeeded")
            } catch {
                XCTAssertTrue(error.description.contains("must be called on the run loop's own thread (tid \(owner))"), error.description)
            }
        }
        t.join()
    }

    func testCurrentIsPerThreadAndCreatedOnFirstUse() throws {
        // Keep the loops alive: a freed loop's address (and so its identity) can be reused.
        let loops = Locked<[BoardRunLoop]>([])
        var threads: [JoinableThread] = []
        for _ in 0..<3 {
            threads.append(JoinableThread {
                XCTAssertNil(BoardRunLoop.currentIfExists)
                let a = BoardRunLoop.current
                let b = BoardRunLoop.current
                XCTAssertTrue(a === b)
                XCTAssertTrue(a.isOwnedByCurrentThread)
                XCTAssertThrows(.currentLoopExists(thread: bl_gettid())) { () throws(RunLoopError) in try BoardRunLoop.makeCurrent() }
                loops.withLock { $0.append(a) }
            })
        }
        for t in threads { t.join() }
        XCTAssertEqual(Set(loops.withLock { $0.map(ObjectIdentifier.init) }).count, 3)
    }

    func testMakeCurrentWithCapacitiesAndMain() throws {
        let t = JoinableThread {
            let loop = try! BoardRunLoop.makeCurrent(capacities: .init(sources: 3))
            XCTAssertTrue(BoardRunLoop.current === loop)
            XCTAssertEqual(loop.capacities.sources, 3)
            XCTAssertFalse(BoardRunLoop.main.isOwnedByCurrentThread)
            XCTAssertFalse(BoardRunLoop.main === loop)
        }
        t.join()
        // XCTest runs tests on the main thread: its current loop is main.
        XCTAssertTrue(BoardRunLoop.current === BoardRunLoop.main)
        XCTAssertTrue(BoardRunLoop.main.isOwnedByCurrentThread)
    }

    func testPortErrorsAreTypedAndChangeNothing() throws {
        let loop = try makeLoop()
        let bad = PortSource(fd: 9999) { _, _ in }
        XCTAssertThrows(.invalidArgument("fd 9999 is not an open file descriptor; a port source needs an open fd")) { () throws(RunLoopError) in
            try loop.add(bad, mode: .default)
        }
        XCTAssertNil(bad.runLoop)
        XCTAssertTrue(bad.isValid)
        // A regular file cannot be watched by epoll.
        let path = "/tmp/boardloop-test-\(getpid())"
        let fd = open(path, O_CREAT | O_RDWR, 0o600)
        defer { close(fd); unlink(path) }
        let file = PortSource(fd: fd) { _, _ in }
        XCTAssertThrows(.invalidArgument(
            "fd \(fd) is a regular file or directory: such files are always ready, so epoll cannot watch them and they cannot be port sources (read them directly, or watch a pipe, socket or device instead)"
        )) { () throws(RunLoopError) in try loop.add(file, mode: .default) }
        XCTAssertNil(file.runLoop, "a refused port leaves no registration or duplicate behind")
        XCTAssertEqual(try loop.run(mode: .default, timeout: .zero), .finished, "nothing was added")
        // An item belongs to one loop.
        let pipe = Pipe()
        let port = PortSource(fd: pipe.readEnd) { _, _ in }
        try loop.add(port, mode: .default)
        let loop2 = try makeLoop()
        XCTAssertThrows(.belongsToAnotherLoop(item: "PortSource")) { () throws(RunLoopError) in try loop2.add(port, mode: .default) }
    }

    func testWritableInterestAndHangup() throws {
        let loop = try makeLoop()
        let pipe = Pipe()
        var seen: [PortSource.Events] = []
        let w = PortSource(fd: pipe.writeEnd, interest: .writable) { s, e in
            seen.append(e)
            s.interest = .readable // a pipe's write end never becomes readable: silences it
        }
        try loop.add(w, mode: .default)
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline, returnAfterSourceHandled: true), .handledSource)
        XCTAssertEqual(seen, [.writable])
        XCTAssertEqual(try loop.run(mode: .default, timeout: .milliseconds(5), returnAfterSourceHandled: true), .timedOut)
        w.invalidate()

        var fds: [Int32] = [0, 0]
        XCTAssertEqual(Glibc.pipe(&fds), 0)
        var events: PortSource.Events = []
        let r = PortSource(fd: fds[0]) { s, e in
            events = e
            s.invalidate()
        }
        try loop.add(r, mode: .default)
        close(fds[1])
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline, returnAfterSourceHandled: true), .handledSource)
        XCTAssertTrue(events.contains(.hangup), "\(events)")
        close(fds[0])
    }

    func testPortOrderAmongReadyPorts() throws {
        let loop = try makeLoop()
        let log = Log()
        let pipes = [Pipe(), Pipe(), Pipe()]
        for (i, order) in [5, -1, 2].enumerated() {
            let p = pipes[i]
            try loop.add(PortSource(fd: p.readEnd, order: order) { _, _ in
                _ = p.readByte()
                log.add("order \(order)")
            }, mode: .default)
            p.write([1])
        }
        for _ in 0..<3 { _ = try loop.run(mode: .default, timeout: testDeadline, returnAfterSourceHandled: true) }
        XCTAssertEqual(log.entries, ["order -1", "order 2", "order 5"], "one port per pass, lowest order first")
    }

    func testCustomSourcesFireInOrderAndStopAfterHandleTakesOne() throws {
        let loop = try makeLoop()
        let log = Log()
        var sources: [CustomSource] = []
        for order in [3, 1, 2] {
            let s = CustomSource(order: order) { log.add("s\(order)") }
            try loop.add(s, mode: .default)
            sources.append(s)
        }
        for s in sources { s.signal() }
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline, returnAfterSourceHandled: true), .handledSource)
        XCTAssertEqual(log.entries, ["s1"])
        _ = try loop.run(mode: .default, timeout: .zero)
        XCTAssertEqual(log.entries, ["s1", "s2", "s3"])
    }
}
