import Boardloop
import BoardloopTestSupport
import Glibc
import XCTest

final class ModeTests: XCTestCase {
    let other: RunLoopMode = "boardloop.other"

    func testItemsInAnotherModeDoNotFireAndAreHeld() throws {
        let loop = try RunLoop()
        let log = Log()
        let pipe = Pipe()
        let port = PortSource(fd: pipe.readEnd) { _, _ in
            while let b = pipe.readByte() { log.add("port \(b)") }
        }
        let source = CustomSource { log.add("source") }
        let timer = RunLoopTimer(fireAt: loop.now) { _ in log.add("timer") }
        try loop.add(port, mode: other)
        try loop.add(source, mode: other)
        try loop.add(timer, mode: other)
        try loop.add(farTimer(), mode: .default)

        pipe.write([1, 2, 3])
        source.signal()
        XCTAssertEqual(try loop.run(mode: .default, timeout: .milliseconds(30)), .timedOut)
        XCTAssertEqual(log.entries, [], "items of another mode fired in the default mode")
        XCTAssertEqual(port.dispatchCount, 0)
        XCTAssertTrue(source.isSignalled, "the signal is held for the source's mode")

        // Running the other mode delivers everything that was held.
        let end = MonotonicInstant.now + testDeadline
        while log.entries.count < 5 && MonotonicInstant.now < end {
            XCTAssertEqual(try loop.run(mode: other, timeout: .zero), .timedOut)
        }
        XCTAssertEqual(log.entries.filter { $0.hasPrefix("port") }, ["port 1", "port 2", "port 3"])
        XCTAssertTrue(log.entries.contains("source"))
        XCTAssertTrue(log.entries.contains("timer"))
    }

    func testCommonModes() throws {
        let loop = try RunLoop()
        XCTAssertEqual(loop.commonModes, [.default])
        var fired: [RunLoopMode] = []
        let source = CustomSource { fired.append(loop.currentMode!) }
        try loop.add(source, mode: .common)
        XCTAssertTrue(loop.contains(source, mode: .default))
        XCTAssertFalse(loop.contains(source, mode: other))

        // A mode added to the common set gains the common items.
        try loop.addCommonMode(other)
        XCTAssertTrue(loop.contains(source, mode: other))
        XCTAssertEqual(Set(loop.commonModes), [.default, other])
        // ... and items added to .common later join every common mode.
        let timer = RunLoopTimer(fireAt: .distantFuture) { _ in }
        try loop.add(timer, mode: .common)
        XCTAssertTrue(loop.contains(timer, mode: other))
        XCTAssertTrue(loop.contains(timer, mode: .default))

        source.signal()
        _ = try loop.run(mode: other, timeout: .zero)
        source.signal()
        _ = try loop.run(mode: .default, timeout: .zero)
        XCTAssertEqual(fired, [other, .default])

        // Removing from .common removes it from every common mode.
        try loop.remove(source, mode: .common)
        XCTAssertFalse(loop.contains(source, mode: other))
        XCTAssertFalse(loop.contains(source, mode: .default))
        XCTAssertNil(source.runLoop)
    }

    func testAnItemInSeveralModesStaysOneItem() throws {
        let loop = try RunLoop()
        let pipe = Pipe()
        let port = PortSource(fd: pipe.readEnd) { _, _ in _ = pipe.readByte() }
        try loop.add(port, mode: .default)
        try loop.add(port, mode: other)
        try loop.add(port, mode: other) // adding again is a no-op
        pipe.write([1, 2])
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline, returnAfterSourceHandled: true), .handledSource)
        XCTAssertEqual(try loop.run(mode: other, timeout: testDeadline, returnAfterSourceHandled: true), .handledSource)
        XCTAssertEqual(port.dispatchCount, 2, "one item, counted across modes")

        try loop.remove(port, mode: .default)
        XCTAssertFalse(loop.contains(port, mode: .default))
        XCTAssertTrue(loop.contains(port, mode: other))
        XCTAssertTrue(port.isValid)
        pipe.write([3])
        XCTAssertEqual(try loop.run(mode: .default, timeout: .zero), .finished)
        XCTAssertEqual(try loop.run(mode: other, timeout: testDeadline, returnAfterSourceHandled: true), .handledSource)
        XCTAssertEqual(port.dispatchCount, 3)
    }

    func testScheduleAndCancelCallbacksPerMode() throws {
        let loop = try RunLoop()
        let log = Log()
        let source = CustomSource(
            schedule: { _, mode in log.add("schedule \(mode)") },
            cancel: { _, mode in log.add("cancel \(mode)") },
            perform: {})
        try loop.add(source, mode: .default)
        try loop.add(source, mode: other)
        try loop.remove(source, mode: .default)
        source.invalidate()
        XCTAssertEqual(log.entries, [
            "schedule kCFRunLoopDefaultMode", "schedule boardloop.other", "cancel kCFRunLoopDefaultMode", "cancel boardloop.other",
        ])
        XCTAssertFalse(source.isValid)
        XCTAssertThrows(.invalidated(item: "CustomSource")) { () throws(RunLoopError) in try loop.add(source, mode: .default) }
    }

    /// The outer run's port stays ready and undelivered while a nested run
    /// in another mode runs; it is delivered again once the outer run resumes.
    func testNestedRunInAnotherModeWhileOuterPortStaysReady() throws {
        let loop = try RunLoop()
        let log = Log()
        let pipe = Pipe()
        var nested = false
        let innerTimer = RunLoopTimer(fireAt: loop.now + .milliseconds(5)) { _ in log.add("inner timer") }
        try loop.add(innerTimer, mode: other)
        let innerProbe = RunLoopObserver(activities: .afterWaiting) { _, _ in log.add("inner woke") }
        try loop.add(innerProbe, mode: other)
        let port = PortSource(fd: pipe.readEnd) { _, _ in
            let b = pipe.readByte()!
            log.add("port \(b) in \(loop.currentMode!)")
            if !nested {
                nested = true
                // The port is still readable (one byte left) during this nested run.
                let r = try! loop.run(mode: self.other, timeout: testDeadline)
                log.add("nested \(r)")
            } else {
                loop.stop()
            }
        }
        try loop.add(port, mode: .default)
        pipe.write([1, 2])
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .stopped)
        XCTAssertEqual(log.entries, [
            "port 1 in kCFRunLoopDefaultMode", "inner woke", "inner timer", "nested finished",
            "port 2 in kCFRunLoopDefaultMode",
        ])
        XCTAssertEqual(loop.currentMode, nil)
        XCTAssertEqual(loop.runDepth, 0)
    }

    func testNestedRunInTheSameMode() throws {
        let loop = try RunLoop()
        let log = Log()
        let timer = RunLoopTimer(fireAt: loop.now + .milliseconds(2)) { _ in
            log.add("timer depth \(loop.runDepth)")
            loop.stop() // stops the innermost run only
        }
        try loop.add(timer, mode: .default)
        let source = CustomSource {
            log.add("source depth \(loop.runDepth)")
            let r = try! loop.run(mode: .default, timeout: testDeadline)
            log.add("nested \(r)")
        }
        try loop.add(source, mode: .default)
        source.signal()
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline, returnAfterSourceHandled: true), .handledSource)
        XCTAssertEqual(log.entries, ["source depth 1", "timer depth 2", "nested stopped"])
    }
}
