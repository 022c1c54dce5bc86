import Boardloop
import BoardloopTestSupport
import BoardloopXCTestSupport
@preconcurrency import CoreFoundation
@preconcurrency import Foundation
import Glibc
import Synchronization
import XCTest


/// The same scenarios run on swift-corelibs CoreFoundation's CFRunLoop and on
/// boardloop's engine; the observer activity sequences and run results must
/// match exactly.
///
/// Not compared, on purpose: a port source that is already ready when the
/// loop is about to sleep. The guide's step 5 sends such a pass straight to
/// step 9 without beforeWaiting/afterWaiting, and the engine does exactly
/// that; CF on Linux applies step 5 only to the main dispatch queue's port, so
/// it notifies beforeWaiting/afterWaiting around a zero-length wait. CF on
/// Linux also has no public fd source to compare against. The engine's
/// behaviour there is asserted in ObserverSequenceTests.
final class CFDifferentialTests: XCTestCase {
    final class Box: @unchecked Sendable {
        var log: [String] = []
        var loop: CFRunLoop?
        let sleeps = Atomic<Int>(0)
    }

    /// CF's activity by the engine's name for it (the bit values are CF's).
    static func name(_ a: CFRunLoopActivity) -> String {
        RunLoopActivity(rawValue: UInt32(truncatingIfNeeded: a.rawValue)).description
    }

    /// Runs `body` on a fresh thread (its own CFRunLoop, never the main one)
    /// and returns the log and the run result.
    func onCFThread(_ body: @escaping @Sendable (Box, CFRunLoop) -> Int32) -> (log: [String], result: Int32) {
        let box = Box()
        let result = Locked<Int32>(0)
        let t = JoinableThread {
            let rl = CFRunLoopGetCurrent()!
            box.loop = rl
            let o = CFRunLoopObserverCreateWithHandler(nil, CFRunLoopActivity.allActivities.rawValue, true, 0) { _, a in
                box.log.append(Self.name(a))
                if a == .beforeWaiting { box.sleeps.add(1, ordering: .relaxed) }
            }
            CFRunLoopAddObserver(rl, o, kCFRunLoopDefaultMode)
            let r = body(box, rl)
            CFRunLoopRemoveObserver(rl, o, kCFRunLoopDefaultMode)
            result.withLock { $0 = r }
        }
        t.join()
        return (box.log, result.withLock { $0 })
    }

    /// Runs `body` with a fresh engine loop on this thread, recording activities.
    func onEngine(_ body: (Box, BoardRunLoop) throws -> RunResult) throws -> (log: [String], result: Int32) {
        let box = Box()
        let loop = try makeLoop()
        try loop.add(RunLoopObserver(activities: .allActivities) { _, a in box.log.append(a.description) }, mode: .default)
        let r = try body(box, loop)
        return (box.log, r.rawValue)
    }

    static func farCFTimer() -> CFRunLoopTimer {
        CFRunLoopTimerCreateWithHandler(nil, CFAbsoluteTimeGetCurrent() + 1e9, 0, 0, 0) { _ in }
    }

    func assertSame(_ cf: (log: [String], result: Int32), _ engine: (log: [String], result: Int32), file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(engine.log, cf.log, "activity sequences differ", file: file, line: line)
        XCTAssertEqual(engine.result, cf.result, "run results differ", file: file, line: line)
        XCTAssertFalse(cf.log.isEmpty && cf.result != 1, "CF recorded nothing", file: file, line: line)
    }

    func testTimerPassStoppedFromHandler() throws {
        let cf = onCFThread { box, rl in
            let t = CFRunLoopTimerCreateWithHandler(nil, CFAbsoluteTimeGetCurrent() + 0.005, 0, 0, 0) { _ in
                box.log.append("timer")
                CFRunLoopStop(rl)
            }
            CFRunLoopAddTimer(rl, t, kCFRunLoopDefaultMode)
            CFRunLoopAddTimer(rl, Self.farCFTimer(), kCFRunLoopDefaultMode)
            return CFRunLoopRunInMode(kCFRunLoopDefaultMode, 60, false).rawValue
        }
        let engine = try onEngine { box, loop in
            try loop.add(RunLoopTimer(fireAt: loop.now + .milliseconds(5)) { _ in
                box.log.append("timer")
                loop.stop()
            }, mode: .default)
            try loop.add(RunLoopTimer(fireAt: .distantFuture) { _ in }, mode: .default)
            return try loop.run(mode: .default, timeout: .seconds(60))
        }
        XCTAssertEqual(cf.log, ["entry", "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting", "timer", "exit"])
        assertSame(cf, engine)
    }

    func testOneShotTimerEmptiesModeAndFinishes() throws {
        let cf = onCFThread { box, rl in
            let t = CFRunLoopTimerCreateWithHandler(nil, CFAbsoluteTimeGetCurrent() + 0.002, 0, 0, 0) { _ in box.log.append("timer") }
            CFRunLoopAddTimer(rl, t, kCFRunLoopDefaultMode)
            return CFRunLoopRunInMode(kCFRunLoopDefaultMode, 60, false).rawValue
        }
        let engine = try onEngine { box, loop in
            try loop.add(RunLoopTimer(fireAt: loop.now + .milliseconds(2)) { _ in box.log.append("timer") }, mode: .default)
            return try loop.run(mode: .default, timeout: .seconds(60))
        }
        assertSame(cf, engine)
    }

    func testTimeout() throws {
        let cf = onCFThread { _, rl in
            CFRunLoopAddTimer(rl, Self.farCFTimer(), kCFRunLoopDefaultMode)
            return CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0.02, false).rawValue
        }
        let engine = try onEngine { _, loop in
            try loop.add(RunLoopTimer(fireAt: .distantFuture) { _ in }, mode: .default)
            return try loop.run(mode: .default, timeout: .milliseconds(20))
        }
        XCTAssertEqual(cf.result, 3)
        assertSame(cf, engine)
    }

    func testZeroTimeoutPoll() throws {
        let cf = onCFThread { _, rl in
            CFRunLoopAddTimer(rl, Self.farCFTimer(), kCFRunLoopDefaultMode)
            return CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0, false).rawValue
        }
        let engine = try onEngine { _, loop in
            try loop.add(RunLoopTimer(fireAt: .distantFuture) { _ in }, mode: .default)
            return try loop.run(mode: .default, timeout: .zero)
        }
        assertSame(cf, engine)
    }

    /// CF keeps the stop flag per run: a stop made before the run is forgotten.
    func testStopBeforeRunIsForgotten() throws {
        let cf = onCFThread { _, rl in
            CFRunLoopAddTimer(rl, Self.farCFTimer(), kCFRunLoopDefaultMode)
            CFRunLoopStop(rl)
            return CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0.02, false).rawValue
        }
        let engine = try onEngine { _, loop in
            try loop.add(RunLoopTimer(fireAt: .distantFuture) { _ in }, mode: .default)
            loop.stop()
            return try loop.run(mode: .default, timeout: .milliseconds(20))
        }
        XCTAssertEqual(cf.result, 3)
        assertSame(cf, engine)
    }

    /// A stop from the entry observer ends the run before its first pass.
    func testStopFromEntryObserver() throws {
        let cf = onCFThread { _, rl in
            CFRunLoopAddTimer(rl, Self.farCFTimer(), kCFRunLoopDefaultMode)
            let o = CFRunLoopObserverCreateWithHandler(nil, CFRunLoopActivity.entry.rawValue, true, 0) { _, _ in CFRunLoopStop(rl) }
            CFRunLoopAddObserver(rl, o, kCFRunLoopDefaultMode)
            return CFRunLoopRunInMode(kCFRunLoopDefaultMode, 60, false).rawValue
        }
        let engine = try onEngine { _, loop in
            try loop.add(RunLoopTimer(fireAt: .distantFuture) { _ in }, mode: .default)
            try loop.add(RunLoopObserver(activities: .entry) { _, _ in loop.stop() }, mode: .default)
            return try loop.run(mode: .default, timeout: .seconds(60))
        }
        XCTAssertEqual(cf.result, 2)
        assertSame(cf, engine)
    }

    func testEmptyModeFinishes() throws {
        let cf = onCFThread { _, _ in CFRunLoopRunInMode(kCFRunLoopDefaultMode, 60, false).rawValue }
        let engine = try onEngine { _, loop in try loop.run(mode: .default, timeout: .seconds(60)) }
        XCTAssertEqual(cf.result, 1)
        assertSame(cf, engine)
    }

    /// A version-0 source signalled before the run, with return-after-handled.
    func testCustomSourceReturnAfterHandled() throws {
        let cf = onCFThread { box, rl in
            let source = Self.makeCFSource(box)
            CFRunLoopAddSource(rl, source, kCFRunLoopDefaultMode)
            CFRunLoopSourceSignal(source)
            return CFRunLoopRunInMode(kCFRunLoopDefaultMode, 60, true).rawValue
        }
        let engine = try onEngine { box, loop in
            let s = CustomSource { box.log.append("source") }
            try loop.add(s, mode: .default)
            s.signal()
            return try loop.run(mode: .default, timeout: .seconds(60), returnAfterSourceHandled: true)
        }
        XCTAssertEqual(cf.result, 4)
        assertSame(cf, engine)
    }

    /// A version-0 source that stops the loop from its perform callback.
    func testCustomSourceStops() throws {
        let cf = onCFThread { box, rl in
            let source = Self.makeCFSource(box, stops: true)
            CFRunLoopAddSource(rl, source, kCFRunLoopDefaultMode)
            CFRunLoopSourceSignal(source)
            return CFRunLoopRunInMode(kCFRunLoopDefaultMode, 60, false).rawValue
        }
        let engine = try onEngine { box, loop in
            let s = CustomSource {
                box.log.append("source")
                loop.stop()
            }
            try loop.add(s, mode: .default)
            s.signal()
            return try loop.run(mode: .default, timeout: .seconds(60))
        }
        assertSame(cf, engine)
    }

    /// Signalled from another thread while the loop sleeps, then woken.
    func testCustomSourceSignalledFromAnotherThreadWhileSleeping() throws {
        let cf = onCFThread { box, rl in
            let source = Self.makeCFSource(box)
            CFRunLoopAddSource(rl, source, kCFRunLoopDefaultMode)
            let other = JoinableThread {
                XCTAssertTrue(waitUntil { CFRunLoopIsWaiting(rl) })
                CFRunLoopSourceSignal(source)
                CFRunLoopWakeUp(rl)
            }
            defer { other.join() }
            return CFRunLoopRunInMode(kCFRunLoopDefaultMode, 60, true).rawValue
        }
        let engine = try onEngine { box, loop in
            let s = CustomSource { box.log.append("source") }
            try loop.add(s, mode: .default)
            let other = JoinableThread {
                XCTAssertTrue(waitUntil { loop.isWaiting })
                s.signal()
                loop.wakeUp()
            }
            defer { other.join() }
            return try loop.run(mode: .default, timeout: .seconds(60), returnAfterSourceHandled: true)
        }
        XCTAssertEqual(cf.log, [
            "entry", "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting",
            "beforeTimers", "beforeSources", "source", "exit",
        ])
        assertSame(cf, engine)
    }

    /// Woken from another thread with nothing to do, then stopped.
    func testWakeUpThenStop() throws {
        let cf = onCFThread { box, rl in
            CFRunLoopAddTimer(rl, Self.farCFTimer(), kCFRunLoopDefaultMode)
            let other = JoinableThread {
                XCTAssertTrue(waitUntil { CFRunLoopIsWaiting(rl) })
                CFRunLoopWakeUp(rl)
                XCTAssertTrue(waitUntil { box.sleeps.load(ordering: .relaxed) >= 2 && CFRunLoopIsWaiting(rl) })
                CFRunLoopStop(rl)
            }
            defer { other.join() }
            return CFRunLoopRunInMode(kCFRunLoopDefaultMode, 60, false).rawValue
        }
        let sleeps = Atomic<Int>(0)
        let engine = try onEngine { _, loop in
            try loop.add(RunLoopTimer(fireAt: .distantFuture) { _ in }, mode: .default)
            try loop.add(RunLoopObserver(activities: .beforeWaiting, order: 9) { _, _ in sleeps.add(1, ordering: .relaxed) }, mode: .default)
            let other = JoinableThread {
                XCTAssertTrue(waitUntil { loop.isWaiting })
                loop.wakeUp()
                XCTAssertTrue(waitUntil { sleeps.load(ordering: .relaxed) >= 2 && loop.isWaiting })
                loop.stop()
            }
            defer { other.join() }
            return try loop.run(mode: .default, timeout: .seconds(60))
        }
        assertSame(cf, engine)
    }

    /// A timer's handler runs the loop in another mode (a nested run) whose
    /// one-shot timer empties it; then stops the outer run.
    func testNestedRunInAnotherMode() throws {
        let inner = "boardloop.inner"
        let cf = onCFThread { box, rl in
            let innerMode: CFRunLoopMode = CFStringCreateWithCString(nil, inner, CFStringBuiltInEncodings.UTF8.rawValue)
            let o = CFRunLoopObserverCreateWithHandler(nil, CFRunLoopActivity.allActivities.rawValue, true, 0) { _, a in
                box.log.append("inner " + Self.name(a))
            }
            CFRunLoopAddObserver(rl, o, innerMode)
            let innerTimer = CFRunLoopTimerCreateWithHandler(nil, CFAbsoluteTimeGetCurrent() + 0.002, 0, 0, 0) { _ in
                box.log.append("inner timer")
            }
            CFRunLoopAddTimer(rl, innerTimer, innerMode)
            let t = CFRunLoopTimerCreateWithHandler(nil, CFAbsoluteTimeGetCurrent() + 0.001, 0, 0, 0) { _ in
                box.log.append("outer timer")
                let r = CFRunLoopRunInMode(innerMode, 60, false)
                box.log.append("inner result \(r.rawValue)")
                CFRunLoopStop(rl)
            }
            CFRunLoopAddTimer(rl, t, kCFRunLoopDefaultMode)
            CFRunLoopAddTimer(rl, Self.farCFTimer(), kCFRunLoopDefaultMode)
            return CFRunLoopRunInMode(kCFRunLoopDefaultMode, 60, false).rawValue
        }
        let engine = try onEngine { box, loop in
            let mode = RunLoopMode(inner)
            try loop.add(RunLoopObserver(activities: .allActivities) { _, a in box.log.append("inner \(a)") }, mode: mode)
            try loop.add(RunLoopTimer(fireAt: loop.now + .milliseconds(2)) { _ in box.log.append("inner timer") }, mode: mode)
            try loop.add(RunLoopTimer(fireAt: loop.now + .milliseconds(1)) { _ in
                box.log.append("outer timer")
                let r = try! loop.run(mode: mode, timeout: .seconds(60))
                box.log.append("inner result \(r.rawValue)")
                loop.stop()
            }, mode: .default)
            try loop.add(RunLoopTimer(fireAt: .distantFuture) { _ in }, mode: .default)
            return try loop.run(mode: .default, timeout: .seconds(60))
        }
        XCTAssertTrue(cf.log.contains("inner result 1"), "\(cf.log)")
        assertSame(cf, engine)
    }

    /// A stop made by a beforeSources observer: the pass does not sleep,
    /// but CF still calls the beforeWaiting and afterWaiting observers
    /// around a wait that returns at once.
    func testStopPendingStillNotifiesWaitObservers() throws {
        let cf = onCFThread { _, rl in
            CFRunLoopAddTimer(rl, Self.farCFTimer(), kCFRunLoopDefaultMode)
            let o = CFRunLoopObserverCreateWithHandler(nil, CFRunLoopActivity.beforeSources.rawValue, true, 9) { _, _ in CFRunLoopStop(rl) }
            CFRunLoopAddObserver(rl, o, kCFRunLoopDefaultMode)
            return CFRunLoopRunInMode(kCFRunLoopDefaultMode, 60, false).rawValue
        }
        let engine = try onEngine { _, loop in
            try loop.add(RunLoopTimer(fireAt: .distantFuture) { _ in }, mode: .default)
            try loop.add(RunLoopObserver(activities: .beforeSources, order: 9) { _, _ in loop.stop() }, mode: .default)
            return try loop.run(mode: .default, timeout: .seconds(60))
        }
        XCTAssertEqual(cf.log, ["entry", "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting", "exit"])
        XCTAssertEqual(cf.result, 2)
        assertSame(cf, engine)
    }

    /// A perform request (a block) that stops the loop: the blocks run in
    /// step 3, and the pass still notifies the wait observers.
    func testBlockThatStopsStillNotifiesWaitObservers() throws {
        let cf = onCFThread { box, rl in
            CFRunLoopAddTimer(rl, Self.farCFTimer(), kCFRunLoopDefaultMode)
            CFRunLoopPerformBlock(rl, kCFRunLoopDefaultMode as CFTypeRef) {
                box.log.append("block")
                CFRunLoopStop(rl)
            }
            return CFRunLoopRunInMode(kCFRunLoopDefaultMode, 60, false).rawValue
        }
        let engine = try onEngine { box, loop in
            try loop.add(RunLoopTimer(fireAt: .distantFuture) { _ in }, mode: .default)
            try loop.perform(inModes: [.default]) {
                box.log.append("block")
                loop.stop()
            }
            return try loop.run(mode: .default, timeout: .seconds(60))
        }
        XCTAssertEqual(cf.log, ["entry", "beforeTimers", "beforeSources", "block", "beforeWaiting", "afterWaiting", "exit"])
        assertSame(cf, engine)
    }

    /// Another thread invalidates the mode's only timer between two runs:
    /// the next run finds the mode empty and returns `finished` at once,
    /// without calling the entry and exit observers.
    func testModeEmptiedFromAnotherThreadFinishesWithoutObservers() throws {
        let cf = onCFThread { _, rl in
            let timer = Self.farCFTimer()
            CFRunLoopAddTimer(rl, timer, kCFRunLoopDefaultMode)
            let other = JoinableThread { CFRunLoopTimerInvalidate(timer) }
            other.join()
            return CFRunLoopRunInMode(kCFRunLoopDefaultMode, 60, false).rawValue
        }
        let engine = try onEngine { _, loop in
            let timer = RunLoopTimer(fireAt: .distantFuture) { _ in }
            try loop.add(timer, mode: .default)
            let other = JoinableThread { timer.invalidate() }
            other.join()
            return try loop.run(mode: .default, timeout: .seconds(60))
        }
        XCTAssertEqual(cf.log, [])
        XCTAssertEqual(cf.result, 1)
        assertSame(cf, engine)
    }

    static func makeCFSource(_ box: Box, stops: Bool = false) -> CFRunLoopSource {
        final class Info {
            let box: Box
            let stops: Bool
            init(_ box: Box, _ stops: Bool) { self.box = box; self.stops = stops }
        }
        let info = Unmanaged.passRetained(Info(box, stops)).toOpaque()
        var context = CFRunLoopSourceContext(
            version: 0, info: info, retain: nil, release: nil, copyDescription: nil, equal: nil, hash: nil,
            schedule: nil, cancel: nil,
            perform: { p in
                let info = Unmanaged<Info>.fromOpaque(p!).takeUnretainedValue()
                info.box.log.append("source")
                if info.stops { CFRunLoopStop(CFRunLoopGetCurrent()) }
            })
        return CFRunLoopSourceCreate(nil, 0, &context)
    }
}
