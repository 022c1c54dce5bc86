import Boardloop
import BoardloopTestSupport
import BoardloopXCTestSupport
import XCTest

/// `RunLoopTimer.rearmable`: a one-shot timer that is armed, re-armed and
/// disarmed instead of being invalidated by its fire (a boardloop
/// extension). All on the manual clock.
final class RearmableTimerTests: XCTestCase {
    func manualLoop() throws -> BoardRunLoop { try makeLoop(clock: .manual(ManualClock())) }

    func testStartsDisarmedAndDoesNotFire() throws {
        let loop = try manualLoop()
        var fires = 0
        let t = RunLoopTimer.rearmable { _ in fires += 1 }
        try loop.add(t, mode: .default)
        XCTAssertTrue(t.isRearmable)
        XCTAssertFalse(t.isArmed)
        XCTAssertFalse(t.repeats)
        XCTAssertEqual(t.fireDate, .distantFuture)
        try loop.advanceManualClock(by: .seconds(3600))
        XCTAssertEqual(fires, 0)
        XCTAssertTrue(t.isValid)
    }

    func testFiresOnceAtItsTimeAndStaysValidDisarmed() throws {
        let loop = try manualLoop()
        let start = loop.now
        var fires: [MonotonicInstant] = []
        let t = RunLoopTimer.rearmable { _ in fires.append(loop.now) }
        try loop.add(t, mode: .default)
        t.arm(after: .milliseconds(10))
        XCTAssertTrue(t.isArmed)
        XCTAssertEqual(t.fireDate, start + .milliseconds(10))
        try loop.advanceManualClock(by: .milliseconds(9))
        XCTAssertEqual(fires, [])
        try loop.advanceManualClock(by: .seconds(100))
        XCTAssertEqual(fires, [start + .milliseconds(10)], "once, at its time")
        XCTAssertTrue(t.isValid, "a fire does not invalidate it")
        XCTAssertFalse(t.isArmed)
        XCTAssertEqual(t.fireDate, .distantFuture)
        XCTAssertEqual(t.statistics.fires, 1)
        XCTAssertEqual(t.lastFire?.lateness, .zero)
        // Armed again, it fires again.
        let rearmedAt = loop.now
        t.arm(at: rearmedAt + .milliseconds(5))
        try loop.advanceManualClock(by: .seconds(1))
        XCTAssertEqual(fires.count, 2)
        XCTAssertEqual(fires.last, rearmedAt + .milliseconds(5))
    }

    func testReArmingEarlierOrLaterMovesTheOneFire() throws {
        let loop = try manualLoop()
        let start = loop.now
        var fires: [MonotonicInstant] = []
        let t = RunLoopTimer.rearmable { _ in fires.append(loop.now) }
        try loop.add(t, mode: .default)
        t.arm(at: start + .milliseconds(50))
        t.arm(at: start + .milliseconds(20))  // earlier
        try loop.advanceManualClock(by: .milliseconds(100))
        XCTAssertEqual(fires, [start + .milliseconds(20)])
        t.arm(at: start + .milliseconds(150))
        t.arm(at: start + .milliseconds(300))  // later
        try loop.advanceManualClock(by: .milliseconds(100))
        XCTAssertEqual(fires.count, 1, "not at the earlier date")
        try loop.advanceManualClock(by: .milliseconds(200))
        XCTAssertEqual(fires, [start + .milliseconds(20), start + .milliseconds(300)])
    }

    func testDisarmCancelsTheFire() throws {
        let loop = try manualLoop()
        var fires = 0
        let t = RunLoopTimer.rearmable { _ in fires += 1 }
        try loop.add(t, mode: .default)
        t.arm(after: .milliseconds(10))
        try loop.advanceManualClock(by: .milliseconds(5))
        t.disarm()
        XCTAssertFalse(t.isArmed)
        try loop.advanceManualClock(by: .seconds(10))
        XCTAssertEqual(fires, 0)
        XCTAssertTrue(t.isValid)
    }

    /// The fire disarms it before its handler runs; the handler may arm it
    /// again (a periodic step of its own choosing), or leave it disarmed.
    func testArmingFromItsOwnHandler() throws {
        let loop = try manualLoop()
        let start = loop.now
        var fires: [MonotonicInstant] = []
        var armedInHandler: [Bool] = []
        let t = RunLoopTimer.rearmable { t in
            armedInHandler.append(t.isArmed)
            fires.append(loop.now)
            if fires.count < 3 { t.arm(after: .milliseconds(7)) }
        }
        try loop.add(t, mode: .default)
        t.arm(after: .milliseconds(1))
        try loop.advanceManualClock(by: .seconds(1))
        XCTAssertEqual(fires, [start + .milliseconds(1), start + .milliseconds(8), start + .milliseconds(15)])
        XCTAssertEqual(armedInHandler, [false, false, false], "disarmed when its handler starts")
        XCTAssertFalse(t.isArmed)
        XCTAssertTrue(t.isValid)
    }

    /// Invalidated, it does not fire, and arming it does nothing.
    func testInvalidatedItNeverFires() throws {
        let loop = try manualLoop()
        var fires = 0
        let t = RunLoopTimer.rearmable { _ in fires += 1 }
        try loop.add(t, mode: .default)
        t.arm(after: .milliseconds(1))
        t.invalidate()
        t.arm(after: .milliseconds(2))
        try loop.advanceManualClock(by: .seconds(1))
        XCTAssertEqual(fires, 0)
        XCTAssertFalse(t.isValid)
    }

    /// A plain one-shot timer is still invalidated by its fire, even when
    /// its handler sets a new date (as CF's).
    func testAPlainOneShotStillInvalidates() throws {
        let loop = try manualLoop()
        var fires = 0
        let t = RunLoopTimer(fireAt: loop.now + .milliseconds(1)) { t in
            fires += 1
            t.fireDate = loop.now + .milliseconds(1)
        }
        try loop.add(t, mode: .default)
        XCTAssertFalse(t.isRearmable)
        try loop.advanceManualClock(by: .seconds(1))
        XCTAssertEqual(fires, 1)
        XCTAssertFalse(t.isValid)
    }

    /// A mode whose timers are all disarmed has no timer deadline, as a mode
    /// without timers: arming one gives it that date, its fire (or a
    /// disarm) takes it away again. A timer made for `.distantFuture` is
    /// the same.
    func testDisarmedTimersGiveTheModeNoDeadline() throws {
        let loop = try manualLoop()
        let never = MonotonicInstant(nanoseconds: .max)
        let t = RunLoopTimer.rearmable { _ in }
        try loop.add(t, mode: .default)
        try loop.add(farTimer(), mode: .default)
        XCTAssertEqual(loop.nextDeadline(mode: .default), never)
        let at = loop.now + .milliseconds(7)
        t.arm(at: at)
        XCTAssertEqual(loop.nextDeadline(mode: .default), at)
        try loop.advanceManualClock(by: .milliseconds(10))
        XCTAssertEqual(t.statistics.fires, 1)
        XCTAssertEqual(loop.nextDeadline(mode: .default), never, "fired: disarmed again")
        t.arm(after: .seconds(1))
        XCTAssertEqual(loop.nextDeadline(mode: .default), loop.now + .seconds(1))
        t.disarm()
        XCTAssertEqual(loop.nextDeadline(mode: .default), never)
    }

    /// On the real clock, a loop whose only timers are disarmed sleeps with
    /// the timerfd left alone (no arm for a date that never comes) until
    /// something wakes it.
    func testASleepWithOnlyDisarmedTimersDoesNotArmTheTimerfd() throws {
        let loop = try makeLoop()
        try loop.add(RunLoopTimer.rearmable { _ in }, mode: .default)
        try loop.add(farTimer(), mode: .default)
        let arms = loop.timerArmCount, waits = loop.waitCount
        let stopper = JoinableThread {
            // Stops the loop once it sleeps (or, bounded, if it never does).
            _ = waitUntil(timeout: testDeadline) { loop.isWaiting }
            loop.stop()
        }
        XCTAssertEqual(try loop.run(mode: .default, timeout: .seconds(1_000_000_000)), .stopped)
        stopper.join()
        XCTAssertGreaterThanOrEqual(loop.waitCount - waits, 1, "it slept")
        XCTAssertEqual(loop.timerArmCount - arms, 0)
    }
}
