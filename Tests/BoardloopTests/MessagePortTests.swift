@testable import Boardloop
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
                    let end = MonotonicInstant.now + testDeadline
                    while !release.load(ordering: .acquiring) && MonotonicInstant.now < end { usleep(1000) }
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

/// A dispatch takes everything queued under one lock acquisition and hands
/// it to the handler from a receive area: what that must not change.
extension MessagePortTests {
    /// A full ring's messages each send one more to their own port from the
    /// handler: the slots were freed when the batch was taken, so no send is
    /// refused; a dispatch delivers at most one ring's worth (4) and the
    /// rest follows in later dispatches, in order.
    func testHandlerSendsToItsOwnPortDuringABatchOneRingPerDispatch() throws {
        let loop = try makeLoop()
        var got: [Int32] = []
        var refused = 0
        var port: BoardMessagePort!
        port = try BoardMessagePort(label: "self-sender", slots: 4, slotSize: 4) { m in
            got.append(m.id)
            if m.id <= 8 { do { try port.send(id: m.id + 4) } catch { refused += 1 } }
        }
        try port.schedule(on: loop)
        for id: Int32 in 1...4 { try port.send(id: id) }
        var perDispatch: [[Int32]] = []
        for _ in 0..<3 {
            let before = got.count
            XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline, returnAfterSourceHandled: true), .handledSource)
            perDispatch.append(Array(got[before...]))
        }
        XCTAssertEqual(perDispatch, [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]], "one ring's worth per dispatch, in order")
        XCTAssertEqual(refused, 0, "the batch's slots were free for the handler's sends")
        XCTAssertEqual(port.messagesReceived, 12)
        port.invalidate()
        port = nil  // its handler refers to it
    }

    /// A sender waiting on a full ring is released when a batch is taken,
    /// before the batch's handlers finish.
    func testSenderBlockedOnAFullRingIsReleasedWhenABatchIsTaken() throws {
        let loop = try makeLoop()
        let sent = Atomic<Bool>(false)
        var got: [Int32] = []
        var releasedDuringBatch = false
        let port = try BoardMessagePort(label: "full", slots: 2, slotSize: 4) { m in
            if m.id == 1 { releasedDuringBatch = waitUntil(timeout: .seconds(10)) { sent.load(ordering: .acquiring) } }
            got.append(m.id)
        }
        try port.schedule(on: loop)
        try port.send(id: 1)
        try port.send(id: 2)
        let sender = JoinableThread {
            do { try port.send(id: 3, timeout: .seconds(30)) } catch { XCTFail("blocked sender: \(error)") }
            sent.store(true, ordering: .releasing)
        }
        XCTAssertTrue(try runUntil(loop) { got.count == 3 })
        sender.join()
        XCTAssertTrue(releasedDuringBatch, "the waiting sender got its slot while the batch was being handled")
        XCTAssertEqual(got, [1, 2, 3])
        port.invalidate()
    }

    /// A sender writes the port's eventfd after its unlock, so the write
    /// may come after the receiver took the message: such a wake-up finds
    /// nothing, calls no handler, and leaves the port working.
    func testAWakeUpWithNothingQueuedCallsNoHandlerAndThePortGoesOn() throws {
        let loop = try makeLoop()
        var got: [Int32] = []
        let port = try BoardMessagePort(label: "late", slots: 4, slotSize: 4) { m in got.append(m.id) }
        try port.schedule(on: loop)
        try port.send(id: 1)
        XCTAssertTrue(try runUntil(loop) { got == [1] })
        // The late write.
        let dispatches = port.source.dispatchCount
        XCTAssertEqual(bl_eventfd_write(port.source.fd, 1), 0)
        XCTAssertEqual(try loop.run(mode: .default, timeout: .zero, returnAfterSourceHandled: true), .handledSource)
        XCTAssertEqual(port.source.dispatchCount, dispatches + 1)
        XCTAssertEqual(got, [1])
        // Drained: the next pass finds nothing ready.
        XCTAssertEqual(try loop.run(mode: .default, timeout: .zero, returnAfterSourceHandled: true), .timedOut)
        try port.send(id: 2)
        XCTAssertTrue(try runUntil(loop) { got == [1, 2] })
        XCTAssertEqual(port.messagesReceived, 2)
        port.invalidate()
    }

    /// A sender sleeping on a full ring (its timeout far off) is woken by
    /// an invalidation from another thread and gets `.invalidated`; nothing
    /// it sent is delivered.
    func testASenderWaitingOnAFullRingIsReleasedByAnInvalidation() throws {
        let loop = try makeLoop()
        var got = 0
        let port = try BoardMessagePort(label: "full", slots: 1, slotSize: 4) { _ in got += 1 }
        try port.schedule(on: loop)
        try port.send(id: 1)
        let result = Locked<BoardMessagePortError?>(nil)
        let sender = JoinableThread {
            do throws(BoardMessagePortError) {
                try port.send(id: 2, timeout: .seconds(600))
            } catch {
                result.withLock { $0 = error }
            }
        }
        XCTAssertTrue(waitUntil { port.waitingThreadCount == 1 }, "the sender never waited")
        port.invalidate()
        XCTAssertTrue(sender.join(within: .seconds(60)), "the invalidation did not wake the waiting sender")
        XCTAssertEqual(result.withLock { $0 }, .invalidated(port: "full"))
        XCTAssertEqual(port.waitingThreadCount, 0)
        _ = try loop.run(mode: .default, timeout: .zero)
        XCTAssertEqual(got, 0)
    }

    /// A requester sleeping until its reply (its timeout far off) is woken
    /// by the reply itself.
    func testARequesterWaitingForItsReplyIsWokenByTheReply() throws {
        let port = Locked<BoardMessagePort?>(nil)
        let worker = try LoopThread.start(name: "replier") { loop in
            let p = try BoardMessagePort(label: "replier", slots: 2, slotSize: 8) { m in
                // Replies once the requester sleeps.
                _ = waitUntil(timeout: .seconds(60)) { port.withLock { $0 }!.waitingThreadCount == 1 }
                try? m.reply(id: 7, value: (try! m.load(as: Int64.self)) + 1)
            }
            try p.schedule(on: loop)
            port.withLock { $0 = p }
        }
        let p = port.withLock { $0 }!
        let reply = Locked<(id: Int32, length: Int, value: Int64)?>(nil)
        let requester = JoinableThread {
            let r = try? request(p, id: 1, value: 41, timeout: .seconds(600))
            reply.withLock { $0 = r }
        }
        XCTAssertTrue(requester.join(within: .seconds(120)), "the reply did not wake the requester")
        let r = reply.withLock { $0 }
        XCTAssertEqual(r?.id, 7)
        XCTAssertEqual(r?.value, 42)
        worker.stopAndJoin()
        port.withLock { $0 = nil }  // its handler refers to it
    }

    /// Another thread invalidates the port while the handler runs the first
    /// message of a batch: the rest of the batch is dropped, as queued
    /// messages are, and their reply ports are released.
    func testInvalidationFromAnotherThreadDuringABatchDropsTheRest() throws {
        let loop = try makeLoop()
        var got: [Int32] = []
        weak var weakReply: BoardMessagePort?
        var port: BoardMessagePort!
        port = try BoardMessagePort(label: "invalidated", slots: 8, slotSize: 4) { m in
            got.append(m.id)
            if m.id == 1 {
                let p = port!
                let t = JoinableThread { p.invalidate() }
                t.join()
            }
        }
        try port.schedule(on: loop)
        do {
            let reply = try BoardMessagePort(label: "reply", slots: 1, slotSize: 0) { _ in }
            weakReply = reply
            for id: Int32 in 1...6 { try port.send(id: id, replyPort: id == 4 ? reply : nil) }
        }
        XCTAssertNotNil(weakReply, "the queued message holds its reply port")
        try loop.add(RunLoopTimer(fireAt: loop.now + .milliseconds(30)) { _ in loop.stop() }, mode: .default)
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .stopped)
        XCTAssertEqual(got, [1], "the batch's other messages were dropped by the invalidation")
        XCTAssertNil(weakReply, "a dropped message's reply port is released")
        XCTAssertFalse(port.isValid)
        port = nil  // its handler refers to it
    }

    /// Each message of a batch carries its own reply port and request token,
    /// and its payload, valid while its handler runs. The queue holds a reply
    /// port until its message has been handled, then lets it go.
    func testABatchKeepsEachMessagesReplyPortAndPayload() throws {
        let loop = try makeLoop()
        let r1 = try BoardMessagePort(label: "r1", slots: 1, slotSize: 0) { _ in }
        let r2 = try BoardMessagePort(label: "r2", slots: 1, slotSize: 0) { _ in }
        weak var weakR3: BoardMessagePort?
        var r3Seen = false
        var got: [String] = []
        let port = try BoardMessagePort(label: "batch", slots: 8, slotSize: 8) { m in
            let v = (try? m.load(as: Int64.self)).map(String.init) ?? "-"
            let r = m.replyPort === r1 ? "r1" : m.replyPort === r2 ? "r2" : m.replyPort == nil ? "nil" : "?"
            if m.id == 5 { r3Seen = m.replyPort != nil && m.replyPort === weakR3 } else { got.append("\(m.id):\(v):\(r):\(m.expectsReply)") }
        }
        try port.schedule(on: loop)
        try port.send(id: 1, value: Int64(10), replyPort: r1)
        try port.send(id: 2)
        try port.send(id: 3, value: Int64(-30), replyPort: r2)
        try port.send(id: 4, value: Int32(4), replyPort: r1)
        do {
            let r3 = try BoardMessagePort(label: "r3", slots: 1, slotSize: 0) { _ in }
            weakR3 = r3
            try port.send(id: 5, replyPort: r3)
        }
        XCTAssertNotNil(weakR3, "the queue holds the reply port")
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline, returnAfterSourceHandled: true), .handledSource)
        XCTAssertEqual(got, ["1:10:r1:false", "2:-:nil:false", "3:-30:r2:false", "4:-:r1:false"])
        XCTAssertTrue(r3Seen)
        XCTAssertNil(weakR3, "a handled message's reply port is released")
        port.invalidate()
        r1.invalidate()
        r2.invalidate()
    }

    /// A handler that runs the loop again while its batch is being handled:
    /// each message is delivered once and in order (the port stays signalled
    /// through a batch, so the nested pass has nothing of the port's to
    /// dispatch; the message sent meanwhile comes after the batch).
    func testAHandlerRunningTheLoopAgainKeepsTheBatchInOrder() throws {
        let loop = try makeLoop()
        var got: [Int32] = []
        var port: BoardMessagePort!
        port = try BoardMessagePort(label: "nested", slots: 8, slotSize: 4) { m in
            got.append(m.id)
            if m.id == 2 {
                try? port.send(id: 10)
                _ = try? loop.run(mode: .default, timeout: .zero, returnAfterSourceHandled: true)
                got.append(-2)
            }
        }
        try port.schedule(on: loop)
        for id: Int32 in 1...5 { try port.send(id: id) }
        XCTAssertTrue(try runUntil(loop) { got.count == 7 })
        XCTAssertEqual(got, [1, 2, -2, 3, 4, 5, 10])
        port.invalidate()
        port = nil  // its handler refers to it
    }
}

extension MessagePortTests {
    /// The port's source refers to its port unowned (a weak reference would
    /// put every retain of the port on the runtime's slow path): a source
    /// kept after its port is gone is invalidated and cannot join a loop.
    func testASourceKeptAfterItsPortIsGoneCannotJoinALoop() throws {
        let loop = try makeLoop()
        var source: PortSource?
        weak var weakPort: BoardMessagePort?
        do {
            let p = try BoardMessagePort(label: "gone", slots: 1, slotSize: 0) { _ in }
            source = p.source
            weakPort = p
        }
        XCTAssertNil(weakPort, "nothing but the caller held the port")
        XCTAssertThrows(.invalidated(item: "PortSource")) { () throws(RunLoopError) in try loop.add(source!, mode: .default) }
    }
}
