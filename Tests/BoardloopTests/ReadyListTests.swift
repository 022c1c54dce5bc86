import Boardloop
import BoardloopTestSupport
import Glibc
import BoardloopXCTestSupport
import XCTest

/// Ports found ready by one `epoll_wait` are handled one per pass, lowest
/// order first, without waiting again; what changes meanwhile (a source
/// removed, a timer due, a nested run in another mode) is respected.
final class ReadyListTests: XCTestCase {
    func testPortsReadyAtOneWaitAreHandledOnePerPassInOrderWithOneWait() throws {
        let loop = try makeLoop()
        let log = Log()
        var passes = 0
        try loop.add(RunLoopObserver(activities: .beforeTimers) { _, _ in passes += 1 }, mode: .default)
        let orders = [30, 10, 50, 20, 40]
        let pipes = orders.map { _ in Pipe() }
        var sources: [PortSource] = []
        for (i, order) in orders.enumerated() {
            let pipe = pipes[i]
            let s = PortSource(fd: pipe.readEnd, order: order) { _, _ in
                _ = pipe.readByte()
                log.add("p\(order)")
                if log.entries.count == orders.count { loop.stop() }
            }
            try loop.add(s, mode: .default)
            sources.append(s)
        }
        for p in pipes { p.write([1]) }
        let waitsBefore = loop.waitCount
        let result = try loop.run(mode: .default, timeout: testDeadline)
        XCTAssertEqual(result, .stopped)
        XCTAssertEqual(log.entries, ["p10", "p20", "p30", "p40", "p50"])
        XCTAssertEqual(passes, 5, "one port per pass")
        XCTAssertEqual(loop.waitCount - waitsBefore, 1, "all five came from one epoll_wait")
    }

    /// The ready list is sorted only while the mode's ports have more than
    /// one order: a port of a lower order joining ports of one order must
    /// still come first, and after it leaves, nothing is left unsorted.
    func testAPortOfALowerOrderJoiningPortsOfOneOrderIsHandledFirst() throws {
        let loop = try makeLoop()
        let log = Log()
        let pipes = (0..<4).map { _ in Pipe() }
        func port(_ i: Int, order: Int) -> PortSource {
            PortSource(fd: pipes[i].readEnd, order: order) { _, _ in
                _ = pipes[i].readByte()
                log.add("p\(i)")
            }
        }
        for i in 0..<3 { try loop.add(port(i, order: 5), mode: .default) }
        let urgent = port(3, order: -1)
        try loop.add(urgent, mode: .default)
        for p in pipes { p.write([1]) }  // the kernel reports them in this order
        for _ in 0..<4 { _ = try loop.run(mode: .default, timeout: testDeadline, returnAfterSourceHandled: true) }
        XCTAssertEqual(log.entries.first, "p3", "the order -1 port is handled before the three of order 5")
        XCTAssertEqual(log.entries.count, 4)
        try loop.remove(urgent, mode: .default)
        pipes[0].write([1])
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline, returnAfterSourceHandled: true), .handledSource)
        XCTAssertEqual(log.entries.last, "p0")
    }

    // MARK: What a handler of a batch causes, the very next pass sees

    /// Three ports ready at one wait, orders 0, 1, 2; port `at`'s handler
    /// runs `hook`, the last one stops the loop. The first port of a batch
    /// is dispatched by a full pass (the one that waited), the others by
    /// passes that only dispatch the next port while nothing else has work:
    /// each test runs with the hook in both, and expects the same.
    private func runBatch(hookAt at: Int, _ body: (BoardRunLoop, Log) throws -> () -> Void,
                          clock: RunLoopClock = .monotonic, file: StaticString = #filePath, line: UInt = #line) throws -> [String] {
        let loop = try makeLoop(clock: clock)
        let log = Log()
        let hook = try body(loop, log)
        try addThreeReadyPorts(loop, log) { i in
            if i == at { hook() }
            if i == 2 { loop.stop() }
        }
        let waits = loop.waitCount
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .stopped, file: file, line: line)
        XCTAssertEqual(loop.waitCount - waits, 1, "one wait reported all three", file: file, line: line)
        return log.entries
    }

    /// Ports of orders 0, 1 and 2 on pipes holding a byte each: each
    /// handler reads its byte, logs "p<i>" and calls `then(i)`.
    @discardableResult
    private func addThreeReadyPorts(_ loop: BoardRunLoop, _ log: Log, then: @escaping (Int) -> Void = { _ in }) throws -> [PortSource] {
        var sources: [PortSource] = []
        for i in 0..<3 {
            let pipe = Pipe()
            let s = PortSource(fd: pipe.readEnd, order: i) { _, _ in
                _ = pipe.readByte()
                log.add("p\(i)")
                then(i)
            }
            try loop.add(s, mode: .default)
            sources.append(s)
            pipe.write([1])
        }
        return sources
    }

    func testAnObserverAddedByAHandlerOfABatchIsNotifiedFromTheNextPass() throws {
        for at in 0...1 {
            let entries = try runBatch(hookAt: at) { loop, log in
                let observer = RunLoopObserver(activities: [.beforeTimers, .beforeSources]) { _, activity in log.add("\(activity)") }
                return { try! loop.add(observer, mode: .default) }
            }
            let pass = ["beforeTimers", "beforeSources"]
            let expected = at == 0 ? ["p0"] + pass + ["p1"] + pass + ["p2"] : ["p0", "p1"] + pass + ["p2"]
            XCTAssertEqual(entries, expected, "hook in p\(at)")
        }
    }

    func testAPerformPostedByAHandlerOfABatchRunsAtTheEndOfItsPass() throws {
        for at in 0...1 {
            let entries = try runBatch(hookAt: at) { loop, log in { _ = try! loop.perform { log.add("perform") } } }
            var expected = ["p0", "p1", "p2"]
            expected.insert("perform", at: at + 1)
            XCTAssertEqual(entries, expected, "hook in p\(at)")
        }
    }

    func testAPerformPostedFromAnotherThreadDuringABatchRunsBeforeTheNextPort() throws {
        for at in 0...1 {
            let entries = try runBatch(hookAt: at) { loop, log in {
                // Queued (the poster has returned) before the handler returns.
                let poster = JoinableThread { _ = try! loop.perform { log.add("remote perform") } }
                poster.join()
            } }
            var expected = ["p0", "p1", "p2"]
            expected.insert("remote perform", at: at + 1)
            XCTAssertEqual(entries, expected, "hook in p\(at)")
        }
    }

    func testACustomSourceSignalledByAHandlerOfABatchIsPerformedInTheNextPass() throws {
        for at in 0...1 {
            let entries = try runBatch(hookAt: at) { loop, log in
                let custom = CustomSource { log.add("custom") }
                try loop.add(custom, mode: .default)
                return { custom.signal() }
            }
            var expected = ["p0", "p1", "p2"]
            expected.insert("custom", at: at + 1)
            XCTAssertEqual(entries, expected, "hook in p\(at)")
        }
    }

    func testATimerThatFallsDueDuringABatchFiresBeforeTheNextPort() throws {
        for at in 0...1 {
            let clock = ManualClock()
            let entries = try runBatch(hookAt: at, { loop, log in
                try loop.add(RunLoopTimer(fireAt: clock.now + .milliseconds(10)) { _ in log.add("timer") }, mode: .default)
                return { clock.advance(by: .milliseconds(10)) }
            }, clock: .manual(clock))
            var expected = ["p0", "p1", "p2"]
            expected.insert("timer", at: at + 1)
            XCTAssertEqual(entries, expected, "hook in p\(at)")
        }
    }

    func testAStopFromAHandlerOfABatchEndsTheRunAfterItsPassAndTheRestComeInTheNext() throws {
        for at in 0...1 {
            let loop = try makeLoop()
            let log = Log()
            try addThreeReadyPorts(loop, log) { i in
                if i == at {
                    loop.stop()
                    _ = try! loop.perform { log.add("perform") }
                }
                if i == 2 { loop.stop() }
            }
            XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .stopped)
            var expected = Array(["p0", "p1", "p2"][...at])
            expected.append("perform")
            XCTAssertEqual(log.entries, expected, "the pass ran what its handler posted, then the run ended (hook in p\(at))")
            XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .stopped)
            XCTAssertEqual(log.entries, expected + ["p0", "p1", "p2"][(at + 1)...], "the kernel reported the rest again")
        }
    }

    func testAHandlerOfABatchRemovingTheLastSourcesEndsTheRunAsFinished() throws {
        for at in 0...1 {
            let loop = try makeLoop()
            let log = Log()
            var sources: [PortSource] = []
            sources = try addThreeReadyPorts(loop, log) { i in
                if i == at { for s in sources { s.invalidate() } }
            }
            XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .finished, "hook in p\(at)")
            XCTAssertEqual(log.entries, Array(["p0", "p1", "p2"][...at]))
            sources = []
        }
    }

    func testWithReturnAfterSourceHandledEachPortOfABatchIsOneRun() throws {
        let loop = try makeLoop()
        let log = Log()
        try addThreeReadyPorts(loop, log)
        for i in 0..<3 {
            XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline, returnAfterSourceHandled: true), .handledSource)
            XCTAssertEqual(log.entries.count, i + 1)
        }
        XCTAssertEqual(log.entries, ["p0", "p1", "p2"])
    }

    func testAPortRemovedByAnEarlierHandlerOfTheBatchIsNotHandled() throws {
        let loop = try makeLoop()
        let log = Log()
        let a = Pipe(), b = Pipe()
        var second: PortSource!
        let first = PortSource(fd: a.readEnd, order: 1) { _, _ in
            _ = a.readByte()
            log.add("a")
            try! loop.remove(second, mode: .default)
        }
        second = PortSource(fd: b.readEnd, order: 2) { _, _ in log.add("b") }
        try loop.add(first, mode: .default)
        try loop.add(second, mode: .default)
        try loop.add(RunLoopTimer(fireAt: loop.now + .milliseconds(30)) { _ in loop.stop() }, mode: .default)
        a.write([1])
        b.write([1])
        let result = try loop.run(mode: .default, timeout: testDeadline)
        XCTAssertEqual(result, .stopped)
        XCTAssertEqual(log.entries, ["a"])
        XCTAssertEqual(b.readByte(), 1, "b was ready all along: only its removal kept it from being handled")
    }

    func testDueTimersFireDespiteAFloodOfReadyPorts() throws {
        // The port is never drained: it is ready on every pass. With a
        // before/afterWaiting observer the guide's step 5 applies (a ready
        // port skips the sleep), and without one the ready list does; either
        // way the timer must fire.
        for withWaitObserver in [false, true] {
            let loop = try makeLoop()
            if withWaitObserver { try loop.add(RunLoopObserver(activities: .beforeWaiting) { _, _ in }, mode: .default) }
            let pipe = Pipe()
            pipe.write([1])
            let flood = PortSource(fd: pipe.readEnd) { _, _ in }
            try loop.add(flood, mode: .default)
            var fired = false
            try loop.add(RunLoopTimer(fireAt: loop.now + .milliseconds(20)) { _ in
                fired = true
                loop.stop()
            }, mode: .default)
            let result = try loop.run(mode: .default, timeout: .seconds(30))
            XCTAssertEqual(result, .stopped, "wait observer: \(withWaitObserver)")
            XCTAssertTrue(fired)
            XCTAssertGreaterThan(flood.dispatchCount, 10, "the port was handled meanwhile")
        }
    }

    func testANestedRunInAnotherModeLosesNothingOfTheBatch() throws {
        let loop = try makeLoop()
        let log = Log()
        let inner: RunLoopMode = "inner"
        let innerSource = CustomSource { log.add("inner") }
        try loop.add(innerSource, mode: inner)
        let pipes = [Pipe(), Pipe(), Pipe()]
        for (i, pipe) in pipes.enumerated() {
            let s = PortSource(fd: pipe.readEnd, order: i) { _, _ in
                _ = pipe.readByte()
                log.add("p\(i)")
                if i == 0 {
                    innerSource.signal()
                    _ = try? loop.run(mode: inner, timeout: .zero)
                }
                if log.entries.filter({ $0.hasPrefix("p") }).count == 3 { loop.stop() }
            }
            try loop.add(s, mode: .default)
        }
        for p in pipes { p.write([1]) }
        let result = try loop.run(mode: .default, timeout: testDeadline)
        XCTAssertEqual(result, .stopped)
        XCTAssertEqual(log.entries, ["p0", "inner", "p1", "p2"])
    }

    func testAPortDrainedByAnotherHandlerOfTheBatchIsCalledAndFindsNothing() throws {
        // The documented cost of the ready list, as with any epoll loop that
        // handles a batch: readiness can go stale within the batch, which
        // is why port fds must be non-blocking.
        let loop = try makeLoop()
        let shared = Pipe()
        let other = Pipe()
        var reads: [UInt8?] = []
        let drainer = PortSource(fd: other.readEnd, order: 0) { _, _ in
            _ = other.readByte()
            reads.append(shared.readByte()) // takes the byte meant for the next source
        }
        let victim = PortSource(fd: shared.readEnd, order: 1) { _, _ in
            reads.append(shared.readByte())
            loop.stop()
        }
        try loop.add(drainer, mode: .default)
        try loop.add(victim, mode: .default)
        shared.write([5])
        other.write([1])
        let result = try loop.run(mode: .default, timeout: testDeadline)
        XCTAssertEqual(result, .stopped)
        XCTAssertEqual(reads, [5, nil])
    }

    func testASourceOnlyTheLoopHoldsSurvivesInvalidatingItselfInItsHandler() throws {
        // The loop dispatches without retaining the source; its port table's
        // reference must outlive a dispatch whose handler removes the source
        // (ASan reports a use after free if it does not).
        let loop = try makeLoop()
        let pipe = Pipe()
        final class Gone { let log: Log; init(_ log: Log) { self.log = log }; deinit { log.add("released") } }
        let log = Log()
        do {
            let gone = Gone(log)
            try loop.add(PortSource(fd: pipe.readEnd) { source, _ in
                _ = pipe.readByte()
                source.invalidate()
                withExtendedLifetime(gone) {}
                log.add("handled \(source.dispatchCount), valid \(source.isValid)")
            }, mode: .default)
        }
        try loop.add(RunLoopTimer(fireAt: loop.now + .milliseconds(30)) { _ in loop.stop() }, mode: .default)
        pipe.write([1])
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .stopped)
        XCTAssertEqual(log.entries, ["handled 1, valid false", "released"])
    }

    func testASourceRemovedInANestedRunOfItsOwnHandlerLivesUntilTheOuterDispatchEnds() throws {
        let loop = try makeLoop()
        let outer = Pipe(), inner = Pipe()
        let log = Log()
        final class Gone { let log: Log; init(_ log: Log) { self.log = log }; deinit { log.add("released") } }
        var outerSource: PortSource? = nil
        do {
            let gone = Gone(log)
            outerSource = PortSource(fd: outer.readEnd) { source, _ in
                _ = outer.readByte()
                inner.write([1])
                _ = try? loop.run(mode: .default, timeout: testDeadline, returnAfterSourceHandled: true)
                withExtendedLifetime(gone) {}
                log.add("outer after nested run, valid \(source.isValid)")
            }
        }
        try loop.add(outerSource!, mode: .default)
        try loop.add(PortSource(fd: inner.readEnd) { source, _ in
            _ = inner.readByte()
            outerSource?.invalidate()
            outerSource = nil
            source.invalidate()
            log.add("inner")
        }, mode: .default)
        try loop.add(RunLoopTimer(fireAt: loop.now + .milliseconds(30)) { _ in loop.stop() }, mode: .default)
        outer.write([1])
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .stopped)
        XCTAssertEqual(log.entries, ["inner", "outer after nested run, valid false", "released"])
    }
}
