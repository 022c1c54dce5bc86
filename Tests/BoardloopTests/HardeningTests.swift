@testable import Boardloop
import BoardloopTestSupport
import Glibc
import Synchronization
import BoardloopXCTestSupport
import XCTest

/// Misuse that used to crash, hang, leak or lose events, one test per bug,
/// each named after it: cross-thread changes, fd reuse and hangups, what an
/// ended thread leaves behind, hostile input, and CF's semantics.
final class HardeningTests: XCTestCase {
    // MARK: Thread rules

    func testInvalidateFromAnotherThreadNoLongerTrapsAndStopsEveryItemKind() throws {
        let loop = try makeLoop()
        let pipe = Pipe()
        pipe.write([1]) // never read: the port is ready on every pass
        var calls = (port: 0, timer: 0, custom: 0, observer: 0)
        let port = PortSource(fd: pipe.readEnd) { _, _ in calls.port += 1 }
        let timer = RunLoopTimer(fireAt: loop.now, interval: .milliseconds(1)) { _ in calls.timer += 1 }
        var custom: CustomSource!
        custom = CustomSource {
            calls.custom += 1
            custom.signal()
        }
        let observer = RunLoopObserver(activities: .beforeTimers) { _, _ in calls.observer += 1 }
        try loop.add(port, mode: .default)
        try loop.add(timer, mode: .default)
        try loop.add(custom, mode: .default)
        try loop.add(observer, mode: .default)
        custom.signal()
        _ = try loop.run(mode: .default, timeout: .milliseconds(20))
        XCTAssertTrue(calls.port > 0 && calls.timer > 0 && calls.custom > 0 && calls.observer > 0, "\(calls)")

        let items = (port, timer, custom!, observer)
        JoinableThread {
            items.0.invalidate()
            items.1.invalidate()
            items.2.invalidate()
            items.3.invalidate()
        }.join()
        let before = calls
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .finished, "the owner removed them at its next pass")
        XCTAssertTrue(calls == before, "no handler was started after invalidate() returned: \(before) → \(calls)")
        XCTAssertFalse(port.isValid || timer.isValid || custom.isValid || observer.isValid)
        custom = nil // its perform closure refers to it
    }

    func testFireDateAndInterestSetFromAnotherThreadAreAppliedByTheOwner() throws {
        let loop = try makeLoop(clock: .manual(ManualClock()))
        let start = loop.now
        var fired: [Duration] = []
        let timer = RunLoopTimer(fireAt: start + .seconds(100)) { _ in fired.append(loop.now - start) }
        let pipe = Pipe()
        pipe.write([1])
        var reads = 0
        let port = PortSource(fd: pipe.readEnd, interest: []) { _, _ in
            reads += 1
            _ = pipe.readByte()
        }
        try loop.add(timer, mode: .default)
        try loop.add(port, mode: .default)
        try loop.advanceManualClock(by: .milliseconds(1))
        XCTAssertEqual(reads, 0, "no interest, no dispatch")
        JoinableThread {
            timer.fireDate = start + .milliseconds(5)
            port.interest = .readable
        }.join()
        try loop.advanceManualClock(by: .milliseconds(10))
        XCTAssertEqual(fired, [.milliseconds(5)])
        XCTAssertEqual(reads, 1)
        XCTAssertEqual(port.interest, .readable)
    }

    func testDroppingAScheduledMessagePortOnAnotherThreadKeepsItAliveUntilInvalidated() throws {
        let loop = try makeLoop()
        let weakPort = WeakRef<BoardMessagePort>()
        var got: [Int32] = []
        do {
            let port = try BoardMessagePort(label: "dropped", slots: 4, slotSize: 8) { m in got.append(m.id) }
            try port.schedule(on: loop)
            weakPort.value = port
            let box = Locked<BoardMessagePort?>(port)
            // The last reference besides the loop's goes on another thread.
            JoinableThread {
                try? box.withLock { $0 }?.send(id: 7)
                box.withLock { $0 = nil }
            }.join()
        }
        XCTAssertNotNil(weakPort.value, "a scheduled port stays alive, as CF's sources do")
        XCTAssertTrue(try runUntil(loop, until: { got == [7] }))
        JoinableThread { weakPort.value?.invalidate() }.join()
        XCTAssertEqual(try loop.run(mode: .default, timeout: .zero), .finished)
        XCTAssertNil(weakPort.value, "invalidated from another thread, it is freed at the loop's next pass")
    }

    func testAnInvalidationFromAnotherThreadHoldsEvenIfTheOwnerRemovedTheItemFirst() throws {
        let loop = try makeLoop()
        let timer = RunLoopTimer(fireAt: .distantFuture) { _ in }
        try loop.add(timer, mode: .default)
        JoinableThread { timer.invalidate() }.join()
        try loop.remove(timer, mode: .default)
        XCTAssertFalse(timer.isValid)
        XCTAssertThrows(.invalidated(item: "RunLoopTimer")) { () throws(RunLoopError) in try loop.add(timer, mode: "other") }
        // A fire date set from another thread for a timer that then left its loop is kept.
        let moved = RunLoopTimer(fireAt: .distantFuture) { _ in }
        try loop.add(moved, mode: .default)
        try loop.add(farTimer(), mode: .default)
        JoinableThread { moved.fireDate = MonotonicInstant(nanoseconds: 42) }.join()
        try loop.remove(moved, mode: .default)
        _ = try loop.run(mode: .default, timeout: .zero)
        XCTAssertEqual(moved.fireDate, MonotonicInstant(nanoseconds: 42))
    }

    func testPerformToALoopWhoseThreadExitedIsRefusedWithLoopEnded() throws {
        let box = Locked<BoardRunLoop?>(nil)
        JoinableThread { box.withLock { $0 = BoardRunLoop.current } }.join()
        let loop = try XCTUnwrap(box.withLock { $0 })
        XCTAssertTrue(loop.hasEnded)
        XCTAssertThrows(.loopEnded(thread: loop.ownerThread)) { () throws(RunLoopError) in try loop.perform {} }
        XCTAssertThrows(.loopEnded(thread: loop.ownerThread)) { () throws(RunLoopError) in try loop.performAndWait {} }
        XCTAssertThrows(.loopEnded(thread: loop.ownerThread)) { () throws(RunLoopError) in
            try loop.perform(PerformWorkItem {})
        }
    }

    func testPerformAndWaitIsReleasedWhenTheTargetLoopsThreadExits() throws {
        let box = Locked<BoardRunLoop?>(nil)
        let target = JoinableThread {
            let loop = BoardRunLoop.current
            box.withLock { $0 = loop }
            // Exits, without ever running its loop, once a request is queued.
            _ = waitUntil { loop.performs.mayHavePending }
        }
        XCTAssertTrue(waitUntil { box.withLock { $0 } != nil })
        let loop = try XCTUnwrap(box.withLock { $0 })
        let result = Locked<RunLoopError?>(nil)
        let waiter = JoinableThread {
            do throws(RunLoopError) { try loop.performAndWait {} } catch { result.withLock { $0 = error } }
        }
        XCTAssertTrue(waitUntil { result.withLock { $0 } != nil }, "the waiter was released (it used to block forever)")
        XCTAssertEqual(result.withLock { $0 }, .loopEnded(thread: loop.ownerThread))
        waiter.join()
        target.join()
    }

    // MARK: Kernel resources

    /// Adds `stale` on a pipe, closes the pipe, and opens a new one, which
    /// gets the same fd numbers (the scenario under test).
    private func reuseStaleFD(_ stale: (Int32) -> PortSource, on loop: BoardRunLoop) throws -> (stale: PortSource, fresh: (read: Int32, write: Int32)) {
        let old = rawPipe()
        let source = stale(old.read)
        try loop.add(source, mode: .default)
        close(old.read)
        close(old.write)
        let fresh = rawPipe()
        XCTAssertEqual(fresh.read, old.read, "the fd number is reused (the scenario under test)")
        return (source, fresh)
    }

    func testInvalidatingAStaleSourceAfterItsFdNumberWasReusedLeavesTheNewSourceAlone() throws {
        let loop = try makeLoop()
        let (stale, fresh) = try reuseStaleFD({ PortSource(fd: $0) { _, _ in } }, on: loop)
        defer { close(fresh.read); close(fresh.write) }
        var got: [UInt8] = []
        let new = PortSource(fd: fresh.read) { _, _ in got += readAll(fresh.read) }
        try loop.add(new, mode: .default)
        stale.invalidate()
        writeBytes(fresh.write, [5])
        XCTAssertTrue(try runUntil(loop, until: { got == [5] }), "the new source still gets its pipe's data (got \(got))")
    }

    func testAStaleSourceAddedToAnotherModeDoesNotReceiveTheNewFilesData() throws {
        let loop = try makeLoop()
        var staleEvents: [PortSource.Events] = []
        let (stale, fresh) = try reuseStaleFD({ PortSource(fd: $0) { _, e in staleEvents.append(e) } }, on: loop)
        defer { close(fresh.read); close(fresh.write) }
        try loop.add(stale, mode: "other")
        try loop.add(farTimer(), mode: "other")
        writeBytes(fresh.write, [9])
        _ = try loop.run(mode: "other", timeout: .milliseconds(50))
        XCTAssertFalse(staleEvents.contains { $0.contains(.readable) }, "the stale source watches its own (old) pipe: \(staleEvents)")
        XCTAssertEqual(readAll(fresh.read), [9], "the new pipe's byte is still there")
    }

    func testAPipeWhoseWriterClosedNoLongerSpinsTheLoop() throws {
        let loop = try makeLoop()
        let p = rawPipe()
        defer { close(p.read) }
        writeBytes(p.write, [1, 2])
        close(p.write)
        var calls: [PortSource.Events] = []
        var data: [UInt8] = []
        let port = PortSource(fd: p.read) { _, e in
            calls.append(e)
            data += readAll(p.read)
        }
        try loop.add(port, mode: .default)
        // The engine used to call this handler ~750,000 times a second.
        XCTAssertEqual(try loop.run(mode: .default, timeout: .milliseconds(100)), .finished, "the hung-up source left the loop")
        XCTAssertEqual(calls.count, 1)
        XCTAssertTrue(calls.first?.contains(.hangup) == true)
        XCTAssertEqual(data, [1, 2], "what was left was read in the last dispatch")
        XCTAssertTrue(port.endedByHangup)
        XCTAssertFalse(port.isValid)
    }

    func testAHandlerThatRearmsAfterAHangupKeepsItsSource() throws {
        let loop = try makeLoop()
        let p = rawPipe()
        defer { close(p.read) }
        close(p.write)
        var calls = 0
        let port = PortSource(fd: p.read) { s, _ in
            calls += 1
            if calls < 4 { s.rearm() }
        }
        try loop.add(port, mode: .default)
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .finished)
        XCTAssertEqual(calls, 4, "kept three times, ended after the fourth")
        XCTAssertTrue(port.endedByHangup)
    }

    func testInvalidateRemovesAnFdTheUserClosedWhileADuplicateStaysOpen() throws {
        let loop = try makeLoop()
        let p = rawPipe()
        let userDup = dup(p.read)
        defer { close(userDup); close(p.write) }
        var calls = 0
        let port = PortSource(fd: p.read) { _, _ in calls += 1 }
        try loop.add(port, mode: .default)
        try loop.add(farTimer(), mode: .default)
        close(p.read)
        port.invalidate()
        writeBytes(p.write, [1])
        XCTAssertEqual(try loop.run(mode: .default, timeout: .milliseconds(50)), .timedOut)
        XCTAssertEqual(calls, 0, "the registration left the epoll set although the user's fd was gone")
    }

    func testTheEnginesFdsAreCloseOnExec() throws {
        let loop = try makeLoop()
        let pipe = Pipe()
        let port = PortSource(fd: pipe.readEnd) { _, _ in }
        try loop.add(port, mode: .default)
        for fd in [loop.poller.wake.fd, loop.poller.timer.fd, loop.modeStates[0].epfd, port.registeredFD] {
            XCTAssertGreaterThanOrEqual(fd, 0)
            XCTAssertNotEqual(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0, "fd \(fd) would leak into an exec'd child")
        }
        port.invalidate()
    }

    // MARK: Memory and lifetime

    func testAWorkersLoopReleasesWhatWasScheduledOnItWhenTheWorkerEnds() throws {
        let fdsBefore = openFDCount()
        let held = WeakRef<Holder>()
        do {
            let worker = try LoopThread.start(name: "cycle") { loop in
                // The handler holds an object that holds the loop: the cycle
                // that kept a GPIO request (and its line) alive after its worker ended.
                let holder = Holder(loop: loop)
                held.value = holder
                try loop.add(PortSource(fd: holder.pipe.readEnd) { _, _ in _ = holder.pipe.readByte() }, mode: .default)
            }
            XCTAssertNotNil(held.value)
            worker.stopAndJoin()
        }
        XCTAssertNil(held.value, "the ended loop released the source, its handler and what it held")
        XCTAssertEqual(openFDCount(), fdsBefore, "and every fd: the pipe, the loop's own and its duplicate")
    }

    func testAStandaloneLoopEndsWhenItsThreadExits() throws {
        let box = Locked<(BoardRunLoop, PortSource)?>(nil)
        let pipe = Pipe()
        let fd = pipe.readEnd
        JoinableThread {
            let loop = try! makeLoop()
            let port = PortSource(fd: fd) { _, _ in _ = loop.now }
            try! loop.add(port, mode: .default)
            box.withLock { $0 = (loop, port) }
        }.join()
        let (loop, port) = try XCTUnwrap(box.withLock { $0 })
        XCTAssertTrue(loop.hasEnded)
        XCTAssertFalse(port.isValid, "what was scheduled on it was invalidated and released")
        box.withLock { $0 = nil }
    }

    func testEndIsOwnerOnlyAndNotInsideARun() throws {
        let loop = try makeLoop()
        let refused = Locked<RunLoopError?>(nil)
        JoinableThread {
            do throws(RunLoopError) { try loop.end() } catch { refused.withLock { $0 = error } }
        }.join()
        guard case .notOwner? = refused.withLock({ $0 }) else { return XCTFail("\(String(describing: refused.withLock { $0 }))") }
        var inside: RunLoopError?
        try loop.add(RunLoopTimer(fireAt: loop.now) { _ in
            do throws(RunLoopError) { try loop.end() } catch { inside = error }
        }, mode: .default)
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .finished)
        XCTAssertEqual(inside, .invalidArgument("BoardRunLoop.end() inside a run call of the same loop; end it after the run returns"))
        let timer = farTimer()
        try loop.add(timer, mode: .default)
        try loop.end()
        XCTAssertTrue(loop.hasEnded)
        XCTAssertFalse(timer.isValid)
        XCTAssertThrows(.loopEnded(thread: loop.ownerThread)) { () throws(RunLoopError) in try loop.add(farTimer(), mode: .default) }
    }

    func testAWorkersSetupPortStaysAliveAndAnswersByName() throws {
        // The README's example: the port is made in `setup` and not kept.
        let worker = try LoopThread.start(name: "sampler") { loop in
            let port = try BoardMessagePort(label: "sampler", slots: 8, slotSize: 16) { message in
                if let reading = try? message.load(as: Double.self) {
                    try? message.replyPort?.send(id: 2, value: reading * 2)
                }
            }
            try port.schedule(on: loop)
            try port.register(name: "hardening.sampler")
        }
        let loop = try makeLoop()
        var answer: Double?
        let replies = try BoardMessagePort(label: "replies", slots: 4, slotSize: 16) { m in answer = try? m.load(as: Double.self) }
        try replies.schedule(on: loop)
        let sampler = try XCTUnwrap(BoardMessagePortRegistry.lookup("hardening.sampler"), "the port outlived setup")
        try sampler.send(id: 1, value: 21.0, replyPort: replies, timeout: testDeadline)
        XCTAssertTrue(try runUntil(loop, until: { answer != nil }))
        XCTAssertEqual(answer, 42.0)
        worker.stopAndJoin()
        XCTAssertNil(BoardMessagePortRegistry.lookup("hardening.sampler"), "its loop ended and released it, and its name")
        XCTAssertFalse(sampler.isValid)
        XCTAssertThrowsError(try sampler.send(id: 1)) { e in XCTAssertEqual(e as? BoardMessagePortError, .invalidated(port: "sampler")) }
        replies.invalidate()
    }

    func testAPortRegisteredUnderTwoNamesReleasesBothOnInvalidate() throws {
        let port = try BoardMessagePort(slots: 1, slotSize: 0) { _ in }
        try port.register(name: "hardening.a")
        try port.register(name: "hardening.b")
        XCTAssertTrue(BoardMessagePortRegistry.lookup("hardening.b") === port)
        port.invalidate()
        XCTAssertNil(BoardMessagePortRegistry.lookup("hardening.a"))
        XCTAssertNil(BoardMessagePortRegistry.lookup("hardening.b"))
    }

    func testAnInvalidatedPortCannotRegisterAName() throws {
        let port = try BoardMessagePort(label: "gone", slots: 1, slotSize: 0) { _ in }
        port.invalidate()
        XCTAssertThrowsError(try port.register(name: "hardening.gone")) { e in
            XCTAssertEqual(e as? BoardMessagePortError, .invalidated(port: "gone"))
        }
        XCTAssertNil(BoardMessagePortRegistry.lookup("hardening.gone"))
    }

    func testAWorkerStoppedButNeverJoinedReclaimsItsThreadStack() throws {
        let tasksBefore = taskCount()
        let before = threadStackMappings()
        for i in 0..<24 {
            let w = try LoopThread.start(name: "unjoined-\(i)")
            w.stop()
        }
        XCTAssertTrue(waitUntil { taskCount() <= tasksBefore }, "the workers' threads exited")
        // A thread nobody joins or detaches keeps its stack mapped for good:
        // 24 more stacks. Detached, an exited thread's stack is unmapped or
        // kept in glibc's cache of at most 40 MiB (5 default stacks) for reuse.
        // (Counted by stack-sized mappings: the process's total address space
        // also grows with each thread's malloc arena, which says nothing here.)
        let grown = threadStackMappings() - before
        XCTAssertLessThanOrEqual(grown, 6, "\(grown) thread stacks stayed mapped")
    }

    func testAMessagePortDroppedInsideAnotherPortsHandlerWhileItsMessageIsReadyDoesNotCrash() throws {
        let loop = try makeLoop()
        var log: [String] = []
        var b: BoardMessagePort? = try BoardMessagePort(label: "b", slots: 1, slotSize: 0, order: 1) { _ in log.append("b") }
        var c: BoardMessagePort? = try BoardMessagePort(label: "c", slots: 1, slotSize: 0, order: 2) { _ in log.append("c") }
        let weakC = WeakRef<BoardMessagePort>()
        weakC.value = c
        let a = try BoardMessagePort(label: "a", slots: 1, slotSize: 0, order: 0) { _ in
            log.append("a")
            b = nil // the last reference but the loop's: b stays scheduled
            c?.invalidate() // c leaves the loop before its ready message is handled
            c = nil
        }
        for p in [a, b!, c!] { try p.schedule(on: loop) }
        for p in [a, b!, c!] { try p.send(id: 1) }
        XCTAssertTrue(try runUntil(loop, until: { log.count >= 2 }))
        _ = try loop.run(mode: .default, timeout: .milliseconds(20))
        XCTAssertEqual(log, ["a", "b"])
        XCTAssertNil(weakC.value, "the invalidated port was freed")
        a.invalidate()
    }

    // MARK: Input that must not crash

    func testAZeroByteMessageLoadedAsADoubleThrowsInsteadOfTrapping() throws {
        let loop = try makeLoop()
        var errors: [BoardMessagePortError] = []
        let port = try BoardMessagePort(label: "p", slots: 1, slotSize: 8) { m in
            do throws(BoardMessagePortError) { _ = try m.load(as: Double.self) } catch { errors.append(error) }
        }
        try port.schedule(on: loop)
        try port.send(id: 1)
        XCTAssertTrue(try runUntil(loop, until: { !errors.isEmpty }))
        XCTAssertEqual(errors, [.payloadTooShort(port: "p", size: 0, needed: 8)])
        port.invalidate()
    }

    func testCapacitiesAtTheirOldMaximaAreRefusedNamingTheCapacity() {
        XCTAssertThrows(.invalidArgument("BoardRunLoop.Capacities.sources is 16777216; it must be between 1 and 1048576")) {
            () throws(RunLoopError) in try makeLoop(capacities: .init(sources: 1 << 24))
        }
        XCTAssertThrows(.invalidArgument(
            "BoardRunLoop.Capacities reserve about 288 MiB; a loop may reserve at most 256 MiB (lower sources, timers, pendingPerforms or nestingDepth)")) {
            () throws(RunLoopError) in try makeLoop(capacities: .init(sources: 1 << 20, timers: 1 << 20, pendingPerforms: 1 << 20, nestingDepth: 1))
        }
        XCTAssertThrowsError(try BoardMessagePort(slots: 1 << 20, slotSize: 1 << 20) { _ in }) { e in
            XCTAssertEqual(e as? BoardMessagePortError, .runLoop(.invalidArgument("BoardMessagePort 'message port': 1048576 slots; the limit is 65536")))
        }
        XCTAssertThrowsError(try BoardMessagePort(slots: 1 << 16, slotSize: 1 << 20) { _ in }) { e in
            XCTAssertEqual(e as? BoardMessagePortError, .runLoop(.invalidArgument(
                "BoardMessagePort 'message port': 65536 slots of 1048576 bytes need 131072 MiB (message and reply rings); the limit is 64 MiB")))
        }
    }

    func testANegativeTimerIntervalMakesAOneShotTimerAsInCF() throws {
        let loop = try makeLoop(clock: .manual(ManualClock()))
        var fires = 0
        let t = RunLoopTimer(fireAt: loop.now + .milliseconds(1), interval: .milliseconds(-5)) { _ in fires += 1 }
        XCTAssertFalse(t.repeats)
        try loop.add(t, mode: .default)
        try loop.advanceManualClock(by: .milliseconds(50))
        XCTAssertEqual(fires, 1)
        XCTAssertFalse(t.isValid)
    }

    func testARateLimitOfZeroEventsIsATypedError() {
        XCTAssertThrows(.invalidArgument("RateLimit count is 0; it must be at least 1")) { () throws(RunLoopError) in
            try RateLimit(count: 0, per: .seconds(1))
        }
        XCTAssertThrows(.invalidArgument("RateLimit interval is 0.0 seconds; it must be positive")) { () throws(RunLoopError) in
            try RateLimit(count: 1, per: .zero)
        }
    }

    func testAWorkerStartedTwiceThrowsAndItsLoopIsNilBeforeStart() throws {
        let w = LoopThread(name: "twice")
        XCTAssertNil(w.loop, "no loop before start (it used to trap)")
        try w.start()
        XCTAssertNotNil(w.loop)
        XCTAssertThrowsError(try w.start()) { e in XCTAssertEqual(e as? LoopThreadError, .alreadyStarted(worker: "twice")) }
        w.stopAndJoin()
    }

    // MARK: CF semantics

    func testAPerformForANeverUsedModeRunsWhenThatModeRuns() throws {
        let loop = try makeLoop()
        let ran = Cell(false)
        try loop.perform(inModes: ["fresh"]) { ran.value = true }
        XCTAssertEqual(try loop.run(mode: "fresh", timeout: .zero), .timedOut, "a pass was made (it used to return .finished at once)")
        XCTAssertTrue(ran.value, "as in CF, the request made the mode and ran in it")
        XCTAssertFalse(loop.performs.mayHavePending, "and no slot is held")
        XCTAssertEqual(try loop.run(mode: "fresh", timeout: .zero), .finished)
    }

    func testCustomSourcesOfEqualOrderPerformInTheOrderTheyWereSignalled() throws {
        let loop = try makeLoop()
        var log: [String] = []
        let sources = ["a", "b", "c"].map { name in CustomSource { log.append(name) } }
        for s in sources { try loop.add(s, mode: .default) }
        sources[2].signal()
        sources[0].signal()
        sources[1].signal()
        for _ in 0..<3 {
            XCTAssertEqual(try loop.run(mode: .default, timeout: .zero, returnAfterSourceHandled: true), .handledSource)
        }
        XCTAssertEqual(log, ["c", "a", "b"])
    }

    func testALoneTimerWithToleranceFiresAtItsFireDateNotAtTheEndOfItsWindow() throws {
        let loop = try makeLoop(clock: .manual(ManualClock()))
        let t = RunLoopTimer(fireAt: loop.now + .milliseconds(10), interval: .milliseconds(10), tolerance: .milliseconds(1)) { _ in }
        try loop.add(t, mode: .default)
        try loop.advanceManualClock(by: .milliseconds(35))
        XCTAssertEqual(t.statistics.fires, 3)
        XCTAssertEqual(t.statistics.maxLateness, .zero, "a 10% tolerance used to be a 10% delay on every fire")
    }

    func testToleranceLetsATimerWaitForAnotherWhoseFireDateIsInsideItsWindow() throws {
        let loop = try makeLoop(clock: .manual(ManualClock()))
        let start = loop.now
        var log: [(String, Duration)] = []
        let early = RunLoopTimer(fireAt: start + .milliseconds(10), tolerance: .milliseconds(5)) { _ in log.append(("early", loop.now - start)) }
        let late = RunLoopTimer(fireAt: start + .milliseconds(13)) { _ in log.append(("late", loop.now - start)) }
        try loop.add(early, mode: .default)
        try loop.add(late, mode: .default)
        XCTAssertEqual(loop.nextTimerDeadline(loop.modeStates[0]), (start + .milliseconds(13)).nanoseconds, "one wake-up serves both")
        try loop.advanceManualClock(by: .milliseconds(20))
        XCTAssertEqual(log.map(\.0), ["early", "late"])
        XCTAssertEqual(log.map(\.1), [.milliseconds(13), .milliseconds(13)])
    }

    func testChangingAScheduledTimersToleranceMovesTheLoopsWakeUp() throws {
        let loop = try makeLoop(clock: .manual(ManualClock()))
        let start = loop.now
        let early = RunLoopTimer(fireAt: start + .milliseconds(10)) { _ in }
        try loop.add(early, mode: .default)
        try loop.add(RunLoopTimer(fireAt: start + .milliseconds(13)) { _ in }, mode: .default)
        XCTAssertEqual(loop.nextTimerDeadline(loop.modeStates[0]), (start + .milliseconds(10)).nanoseconds)
        early.tolerance = .milliseconds(5)
        XCTAssertEqual(loop.nextTimerDeadline(loop.modeStates[0]), (start + .milliseconds(13)).nanoseconds, "the window now holds the other timer")
        early.tolerance = .zero
        XCTAssertEqual(loop.nextTimerDeadline(loop.modeStates[0]), (start + .milliseconds(10)).nanoseconds)
    }

    // MARK: Nested runs

    func testAStopInsideANestedRunDoesNotStopTheOuterRun() throws {
        let loop = try makeLoop()
        var inner: RunResult?
        try loop.add(RunLoopTimer(fireAt: loop.now + .milliseconds(1)) { _ in loop.stop() }, mode: "inner")
        try loop.add(farTimer(), mode: "inner")
        try loop.add(RunLoopTimer(fireAt: loop.now) { _ in
            inner = try? loop.run(mode: "inner", timeout: testDeadline)
        }, mode: .default)
        try loop.add(farTimer(), mode: .default)
        let outer = try loop.run(mode: .default, timeout: .milliseconds(100))
        XCTAssertEqual(inner, .stopped)
        XCTAssertEqual(outer, .timedOut, "the nested run's stop did not leak into the outer run")
    }

    func testEveryPortHandlerRunsWhileTheLoopIsInThePortsOwnMode() throws {
        let loop = try makeLoop()
        let outerPipe = Pipe(), innerPipe = Pipe(), secondOuter = Pipe()
        var seen: [(port: String, mode: RunLoopMode?)] = []
        let second = PortSource(fd: secondOuter.readEnd, order: 1) { _, _ in
            seen.append(("second", loop.currentMode))
            _ = secondOuter.readByte()
        }
        let innerPort = PortSource(fd: innerPipe.readEnd) { _, _ in
            seen.append(("inner", loop.currentMode))
            _ = innerPipe.readByte()
        }
        let first = PortSource(fd: outerPipe.readEnd, order: 0) { _, _ in
            seen.append(("first", loop.currentMode))
            _ = outerPipe.readByte()
            // A nested run in another mode while `second` waits on the ready list.
            _ = try? loop.run(mode: "inner", timeout: .milliseconds(20))
        }
        try loop.add(first, mode: .default)
        try loop.add(second, mode: .default)
        try loop.add(innerPort, mode: "inner")
        outerPipe.write([1])
        secondOuter.write([1])
        innerPipe.write([1])
        XCTAssertTrue(try runUntil(loop, until: { seen.count >= 3 }))
        XCTAssertEqual(seen.map(\.port), ["first", "inner", "second"])
        XCTAssertEqual(seen.map(\.mode), [.default, "inner", .default], "no port was dispatched outside its mode")
    }

    // MARK: What a dispatch reports

    func testEveryCombinationOfEpollBitsMapsToTheEventsItMeans() {
        // (EPOLLIN, PRI, OUT, ERR, HUP, RDHUP) and bits that must not leak:
        // EPOLLRDNORM 0x40, EPOLLWRNORM 0x100, EPOLLEXCLUSIVE 1 << 28, EPOLLET 1 << 31.
        let bits: [UInt32] = [0x1, 0x2, 0x4, 0x8, 0x10, 0x2000, 0x40, 0x100, 1 << 28, 1 << 31]
        for mask in 0..<(1 << bits.count) {
            var e: UInt32 = 0
            for (k, b) in bits.enumerated() where mask & (1 << k) != 0 { e |= b }
            var expected: PortSource.Events = []
            if e & (0x1 | 0x2) != 0 { expected.insert(.readable) }
            if e & 0x4 != 0 { expected.insert(.writable) }
            if e & 0x8 != 0 { expected.insert(.error) }
            if e & (0x10 | 0x2000) != 0 { expected.insert(.hangup) }
            XCTAssertEqual(PortSource.Events(epoll: e), expected, "epoll events 0x\(String(e, radix: 16))")
        }
    }
}

// MARK: Helpers

final class WeakRef<T: AnyObject>: @unchecked Sendable {
    weak var value: T?
}

final class Holder: @unchecked Sendable {
    let loop: BoardRunLoop
    let pipe = Pipe()
    init(loop: BoardRunLoop) { self.loop = loop }
}

/// A non-blocking, close-on-exec pipe as raw fds (the test closes them
/// itself; a child a test forks or spawns inherits neither across exec).
func rawPipe() -> (read: Int32, write: Int32) {
    var fds: [Int32] = [0, 0]
    precondition(pipe(&fds) == 0)
    for fd in fds {
        _ = fcntl(fd, F_SETFL, O_NONBLOCK)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    }
    return (fds[0], fds[1])
}

func writeBytes(_ fd: Int32, _ bytes: [UInt8]) {
    bytes.withUnsafeBytes { b in precondition(write(fd, b.baseAddress, b.count) == b.count) }
}

func readAll(_ fd: Int32) -> [UInt8] {
    var out: [UInt8] = []
    var b: UInt8 = 0
    while read(fd, &b, 1) == 1 { out.append(b) }
    return out
}

func openFDCount() -> Int { directoryEntries("/proc/self/fd") - 1 } // less opendir's own fd
func taskCount() -> Int { directoryEntries("/proc/self/task") }

private func directoryEntries(_ path: String) -> Int {
    guard let d = opendir(path) else { return -1 }
    defer { closedir(d) }
    var n = 0
    while let e = readdir(d) {
        let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if name != "." && name != ".." { n += 1 }
    }
    return n
}

/// Private anonymous read-write mappings the size of a default thread stack
/// (glibc maps a stack and its guard page as one block of the default size).
func threadStackMappings() -> Int {
    var attr = pthread_attr_t()
    var size = 0
    // A fresh attribute reports the default stack size (glibc).
    guard pthread_attr_init(&attr) == 0, pthread_attr_getstacksize(&attr, &size) == 0 else { return -1 }
    pthread_attr_destroy(&attr)
    guard let f = fopen("/proc/self/maps", "r") else { return -1 }
    defer { fclose(f) }
    var n = 0
    var line = [CChar](repeating: 0, count: 512)
    while fgets(&line, 512, f) != nil {
        // "start-end perms offset dev inode [path]": anonymous ones have no path.
        let fields = string(fromC: line).split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard fields.count == 5, fields[1] == "rw-p", fields[4] == "0" else { continue }
        let range = fields[0].split(separator: "-").compactMap { Int($0, radix: 16) }
        guard range.count == 2 else { continue }
        let length = range[1] - range[0]
        if length <= size && length >= size - 65536 { n += 1 }
    }
    return n
}
