import Boardloop
import BoardloopTestSupport
import CLinux
import Glibc
import Synchronization
import BoardloopXCTestSupport
import XCTest

final class MessagePortTests: XCTestCase {
    /// 100,000 messages between two worker loops: order kept, none lost,
    /// zero heap allocations on either thread in steady state.
    func testPingPongBetweenWorkersInOrderWithoutAllocations() throws {
        let n: Int64 = 100_000
        let warm: Int64 = 2_000
        let errors = Atomic<Int>(0)
        let doneA = Atomic<Bool>(false), doneB = Atomic<Bool>(false)
        let countAllocations = AllocationCounter.isActive
        AllocationCounter.reset()

        let portB = Locked<BoardMessagePort?>(nil)
        let portA = Locked<BoardMessagePort?>(nil)
        let a = try LoopThread.start(name: "ping") { loop in
            var expected: Int64 = 0
            let p = try BoardMessagePort(label: "ping", slots: 4, slotSize: 16) { m in
                if m.id == 9 { return }
                let k = (try! m.load(as: Int64.self))
                if k != expected { errors.add(1, ordering: .relaxed) }
                expected = k + 2
                if k == warm && countAllocations { AllocationCounter.beginCountingOnThisThread() }
                if k >= n {
                    // Tell the other side to stop counting, then stop our own.
                    try? portB.withLock { $0 }!.send(id: 9, value: k, timeout: .seconds(10))
                    if countAllocations { AllocationCounter.endCountingOnThisThread() }
                    doneA.store(true, ordering: .releasing)
                    return
                }
                do { try portB.withLock { $0 }!.send(id: 1, value: k + 1, timeout: .seconds(10)) } catch { errors.add(1, ordering: .relaxed) }
            }
            try p.schedule(on: loop)
            portA.withLock { $0 = p }
        }
        let b = try LoopThread.start(name: "pong") { loop in
            var expected: Int64 = 1
            let p = try BoardMessagePort(label: "pong", slots: 4, slotSize: 16) { m in
                if m.id == 9 {
                    if countAllocations { AllocationCounter.endCountingOnThisThread() }
                    doneB.store(true, ordering: .releasing)
                    return
                }
                let k = (try! m.load(as: Int64.self))
                if k != expected { errors.add(1, ordering: .relaxed) }
                expected = k + 2
                if k == warm + 1 && countAllocations { AllocationCounter.beginCountingOnThisThread() }
                do { try portA.withLock { $0 }!.send(id: 1, value: k + 1, timeout: .seconds(10)) } catch { errors.add(1, ordering: .relaxed) }
            }
            try p.schedule(on: loop)
            portB.withLock { $0 = p }
        }
        try portA.withLock { $0 }!.send(id: 1, value: Int64(0))
        XCTAssertTrue(waitUntil(timeout: .seconds(300)) { doneA.load(ordering: .acquiring) && doneB.load(ordering: .acquiring) })
        let allocations = AllocationCounter.count
        a.stopAndJoin()
        b.stopAndJoin()
        XCTAssertEqual(errors.load(ordering: .relaxed), 0, "messages out of order, lost, or refused")
        XCTAssertEqual(portA.withLock { $0 }!.messagesReceived + portB.withLock { $0 }!.messagesReceived, UInt64(n + 2))
        // Each port's handler holds the other's box: break the cycle.
        portA.withLock { $0 = nil }
        portB.withLock { $0 = nil }
        if countAllocations {
            XCTAssertEqual(allocations, 0, "heap allocations during \(n - warm) messages")
        }
    }

    /// Several threads flood a small port without waiting: every accepted
    /// message arrives exactly once and in each sender's order; every refused
    /// one got `.full`.
    func testFloodEveryAcceptedArrivesOnceEveryRefusedIsTyped() throws {
        let senders = 4, perSender = 3_000
        let seen = Locked<[[Int32]]>(Array(repeating: [], count: senders))
        let port = Locked<BoardMessagePort?>(nil)
        let worker = try LoopThread.start(name: "flooded") { loop in
            let p = try BoardMessagePort(label: "flooded", slots: 8, slotSize: 8) { m in
                let v = (try! m.load(as: Int32.self))
                seen.withLock { $0[Int(m.id)].append(v) }
            }
            try p.schedule(on: loop)
            port.withLock { $0 = p }
        }
        let p = port.withLock { $0 }!
        let accepted = Locked<[[Int32]]>(Array(repeating: [], count: senders))
        let refused = Atomic<Int>(0), otherErrors = Atomic<Int>(0)
        var threads: [JoinableThread] = []
        for s in 0..<senders {
            threads.append(JoinableThread {
                var mine: [Int32] = []
                for i in 0..<Int32(perSender) {
                    do throws(BoardMessagePortError) {
                        try p.send(id: Int32(s), value: i)
                        mine.append(i)
                    } catch {
                        if case .full(port: "flooded", slots: 8, waited: .zero) = error { refused.add(1, ordering: .relaxed) } else { otherErrors.add(1, ordering: .relaxed) }
                    }
                }
                accepted.withLock { $0[s] = mine }
            })
        }
        for t in threads { t.join() }
        let total = accepted.withLock { $0.map(\.count).reduce(0, +) }
        XCTAssertTrue(waitUntil { seen.withLock { $0.map(\.count).reduce(0, +) } == total })
        worker.stopAndJoin()
        XCTAssertEqual(otherErrors.load(ordering: .relaxed), 0)
        XCTAssertEqual(total + refused.load(ordering: .relaxed), senders * perSender)
        XCTAssertGreaterThan(refused.load(ordering: .relaxed), 0, "a port of 8 slots flooded by 4 threads must refuse some")
        XCTAssertEqual(seen.withLock { $0 }, accepted.withLock { $0 }, "exactly the accepted messages, each sender's in order")
    }

    /// With a timeout, senders wait for room instead: nothing is refused.
    func testSendersWaitForRoomWithinTimeout() throws {
        let port = Locked<BoardMessagePort?>(nil)
        let got = Atomic<Int>(0)
        let worker = try LoopThread.start(name: "slow") { loop in
            let p = try BoardMessagePort(label: "slow", slots: 2, slotSize: 4) { _ in got.add(1, ordering: .relaxed) }
            try p.schedule(on: loop)
            port.withLock { $0 = p }
        }
        let p = port.withLock { $0 }!
        var threads: [JoinableThread] = []
        let failures = Atomic<Int>(0)
        for _ in 0..<3 {
            threads.append(JoinableThread {
                for i in 0..<500 { do { try p.send(id: 0, value: Int32(i), timeout: .seconds(30)) } catch { failures.add(1, ordering: .relaxed) } }
            })
        }
        for t in threads { t.join() }
        XCTAssertTrue(waitUntil { got.load(ordering: .relaxed) == 1500 })
        worker.stopAndJoin()
        XCTAssertEqual(failures.load(ordering: .relaxed), 0)
    }

    func testErrorsAreTypedAndSendNothing() throws {
        let loop = try makeLoop()
        var got: [Int32] = []
        let p = try BoardMessagePort(label: "small", slots: 1, slotSize: 4) { m in got.append(m.id) }
        try p.schedule(on: loop)
        let big = [UInt8](repeating: 0, count: 5)
        XCTAssertThrowsPort(.payloadTooLarge(port: "small", size: 5, slotSize: 4)) { () throws(BoardMessagePortError) in
            try p.send(id: 1, value: (UInt32(1), UInt8(2)) as (UInt32, UInt8))
        }
        _ = big
        try p.send(id: 2)
        let start = MonotonicInstant.now
        XCTAssertThrowsPort(.full(port: "small", slots: 1, waited: .milliseconds(20))) { () throws(BoardMessagePortError) in
            try p.send(id: 3, timeout: .milliseconds(20))
        }
        XCTAssertGreaterThanOrEqual(MonotonicInstant.now - start, .milliseconds(20), "waited the timeout out")
        _ = try loop.run(mode: .default, timeout: .zero)
        XCTAssertEqual(got, [2])
        p.invalidate()
        XCTAssertThrowsPort(.invalidated(port: "small")) { () throws(BoardMessagePortError) in try p.send(id: 4) }
        XCTAssertFalse(p.isValid)
    }

    func testRegistryNamesAreUnique() throws {
        let a = try BoardMessagePort(label: "a", slots: 1, slotSize: 0) { _ in }
        let b = try BoardMessagePort(label: "b", slots: 1, slotSize: 0) { _ in }
        try a.register(name: "boardloop.test.unique")
        XCTAssertThrowsPort(.nameInUse("boardloop.test.unique")) { () throws(BoardMessagePortError) in try b.register(name: "boardloop.test.unique") }
        XCTAssertTrue(BoardMessagePortRegistry.lookup("boardloop.test.unique") === a)
        a.invalidate()
        XCTAssertNil(BoardMessagePortRegistry.lookup("boardloop.test.unique"))
        try b.register(name: "boardloop.test.unique")
        XCTAssertTrue(BoardMessagePortRegistry.lookup("boardloop.test.unique") === b)
        b.invalidate()
    }

    /// The guide's check-in: the main thread makes a port, starts a worker;
    /// the worker makes its own port and checks in by name with it; the two
    /// then exchange messages both ways.
    func testCheckInHandshake() throws {
        let loop = try makeLoop()
        let log = Log()
        var workerPort: BoardMessagePort?
        let mainPort = try BoardMessagePort(label: "main", slots: 8, slotSize: 16) { m in
            switch m.id {
            case 1:
                workerPort = m.replyPort
                log.add("checked in: \(m.replyPort?.label ?? "nil")")
                try! workerPort!.send(id: 10, value: Int64(5))
            case 11:
                log.add("answer \((try! m.load(as: Int64.self)))")
                loop.stop()
            default: log.add("unexpected \(m.id)")
            }
        }
        try mainPort.schedule(on: loop)
        try mainPort.register(name: "boardloop.test.checkin")
        let worker = try LoopThread.start(name: "checkin") { wl in
            let mine = try BoardMessagePort(label: "worker", slots: 8, slotSize: 16) { m in
                if m.id == 10 { try? BoardMessagePortRegistry.lookup("boardloop.test.checkin")!.send(id: 11, value: (try! m.load(as: Int64.self)) * 3) }
            }
            try mine.schedule(on: wl)
            try BoardMessagePortRegistry.lookup("boardloop.test.checkin")!.send(id: 1, replyPort: mine)
        }
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .stopped)
        worker.stopAndJoin()
        mainPort.invalidate()
        XCTAssertEqual(log.entries, ["checked in: worker", "answer 15"])
    }

    func testRequestReplyTimeoutAndLateReply() throws {
        let lateReply = Locked<BoardMessagePortError?>(nil)
        let port = Locked<BoardMessagePort?>(nil)
        let release = Atomic<Bool>(false)
        let worker = try LoopThread.start(name: "replier") { loop in
            let p = try BoardMessagePort(label: "replier", slots: 2, slotSize: 8) { m in
                switch m.id {
                case 1: try? m.reply(id: 100, value: (try! m.load(as: Int64.self)) * 2)
                case 2: break // never replies
                case 3:
                    // Replies only after the requester gave up.
                    while !release.load(ordering: .acquiring) { usleep(1000) }
                    do throws(BoardMessagePortError) { try m.reply(id: 300, value: Int64(0)) } catch { lateReply.withLock { $0 = error } }
                default: break
                }
            }
            try p.schedule(on: loop)
            port.withLock { $0 = p }
        }
        let p = port.withLock { $0 }!
        let r = try request(p, id: 1, value: 21, timeout: .seconds(30))
        XCTAssertEqual(r.id, 100)
        XCTAssertEqual(r.length, 8)
        XCTAssertEqual(r.value, 42)

        // A reply that never comes times out cleanly, many times over a
        // port with only two reply slots: the slots are not leaked.
        for _ in 0..<5 {
            XCTAssertThrowsPort(.replyTimedOut(port: "replier", waited: .milliseconds(10))) { () throws(BoardMessagePortError) in
                _ = try request(p, id: 2, value: 0, timeout: .milliseconds(10))
            }
        }
        XCTAssertThrowsPort(.replyTimedOut(port: "replier", waited: .milliseconds(10))) { () throws(BoardMessagePortError) in
            _ = try request(p, id: 3, value: 0, timeout: .milliseconds(10))
        }
        release.store(true, ordering: .releasing)
        let r2 = try request(p, id: 1, value: 4, timeout: .seconds(30))
        XCTAssertEqual(r2.id, 100)
        XCTAssertEqual(lateReply.withLock { $0 }, .replyAbandoned(port: "replier"))
        worker.stopAndJoin()
    }

    func testRequestFromOwnerThreadIsRefused() throws {
        let loop = try makeLoop()
        let p = try BoardMessagePort(label: "own", slots: 1, slotSize: 0) { _ in }
        try p.schedule(on: loop)
        XCTAssertThrowsPort(.requestFromOwnerThread(port: "own")) { () throws(BoardMessagePortError) in
            _ = try request(p, id: 1, value: 0, timeout: .seconds(1))
        }
    }
}

func XCTAssertThrowsPort<T>(_ expected: BoardMessagePortError, file: StaticString = #filePath, line: UInt = #line, _ body: () throws(BoardMessagePortError) -> T) {
    do {
        _ = try body()
        XCTFail("expected \(expected), nothing was thrown", file: file, line: line)
    } catch {
        XCTAssertEqual(error, expected, file: file, line: line)
    }
}

/// sendRequest with an Int64 payload and reply.
func request(_ p: BoardMessagePort, id: Int32, value: Int64, timeout: Duration) throws(BoardMessagePortError) -> (id: Int32, length: Int, value: Int64) {
    let req = UnsafeMutableRawBufferPointer.allocate(byteCount: 8, alignment: 8)
    let out = UnsafeMutableRawBufferPointer.allocate(byteCount: 8, alignment: 8)
    defer { req.deallocate(); out.deallocate() }
    req.storeBytes(of: value, as: Int64.self)
    out.storeBytes(of: 0, as: Int64.self)
    let r = try p.sendRequest(id: id, payload: UnsafeRawBufferPointer(req), timeout: timeout, replyInto: out)
    return (r.id, r.length, out.load(as: Int64.self))
}

extension MessagePortTests {
    func testAPortOnlyItsLoopHoldsSurvivesInvalidatingItselfInItsHandler() throws {
        // The port's source calls the port without retaining it; the loop
        // must keep the port alive through the dispatch in which it leaves
        // (the receive path goes on using the port after the handler
        // returns: a use after free that ASan reports in a release build).
        let loop = try makeLoop()
        let log = Log()
        final class Witness { let log: Log; init(_ log: Log) { self.log = log }; deinit { log.add("released") } }
        weak var weakPort: BoardMessagePort?
        do {
            let witness = Witness(log)
            let port = try BoardMessagePort(label: "self-invalidating", slots: 4, slotSize: 8) { msg in
                withExtendedLifetime(witness) {}
                weakPort?.invalidate()
                log.add("got \(msg.id), valid \(weakPort?.isValid ?? true)")
            }
            try port.schedule(on: loop)
            weakPort = port
            try port.send(id: 7)
            try port.send(id: 8)
        }
        try loop.add(RunLoopTimer(fireAt: loop.now + .milliseconds(30)) { _ in loop.stop() }, mode: .default)
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .stopped)
        XCTAssertEqual(log.entries, ["got 7, valid false", "released"], "the second message was dropped by the invalidation")
        XCTAssertNil(weakPort)
    }
}
