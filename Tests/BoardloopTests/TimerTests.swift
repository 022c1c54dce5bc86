import Boardloop
import BoardloopTestSupport
import Glibc
import BoardloopXCTestSupport
import XCTest

final class TimerTests: XCTestCase {
    func manualLoop() throws -> (BoardRunLoop, ManualClock) {
        let clock = ManualClock()
        return (try makeLoop(clock: .manual(clock)), clock)
    }

    /// Whole nanoseconds of a duration, clamped: one division below 2^64
    /// attoseconds, the standard library's components above and for
    /// negative durations. Both sides of that edge and of the clamps agree
    /// with a reference computed from `components`.
    func testDurationNanosecondsAcrossTheFastPathsEdgeAndTheClamps() {
        func reference(_ d: Duration) -> Int64 {
            let (s, atto) = d.components
            let (ns, o1) = s.multipliedReportingOverflow(by: 1_000_000_000)
            let (sum, o2) = ns.addingReportingOverflow(atto / 1_000_000_000)
            return o1 || o2 ? (s < 0 ? .min : .max) : sum
        }
        let edge = Duration(_high: 1, low: 0)  // 2^64 attoseconds
        var cases: [Duration] = [
            .zero, Duration(_high: 0, low: 1), Duration(_high: 0, low: 999_999_999), .nanoseconds(1),
            .nanoseconds(1) + Duration(_high: 0, low: 999_999_999), .milliseconds(1), .seconds(1), .seconds(18),
            Duration(_high: 0, low: .max), edge, edge + .nanoseconds(1), .seconds(19), .seconds(86_400),
            .seconds(10_000_000_000), .seconds(Int64.max / 1_000_000_000 + 1), .seconds(Int64.max),
        ]
        cases += cases.map { .zero - $0 }
        cases += [.nanoseconds(-1), Duration(_high: -1, low: .max), .seconds(-18), .seconds(-19)]
        for d in cases {
            XCTAssertEqual(d.nanosecondsClamped, reference(d), "\(d)")
        }
        XCTAssertEqual(Duration(_high: 0, low: .max).nanosecondsClamped, 18_446_744_073, "2^64 - 1 attoseconds")
        XCTAssertEqual(Duration.seconds(Int64.max).nanosecondsClamped, .max)
        XCTAssertEqual((Duration.zero - .seconds(Int64.max)).nanosecondsClamped, .min)
    }

    func testOneShotFiresOnceAtItsTimeAndInvalidates() throws {
        let (loop, _) = try manualLoop()
        let start = loop.now
        var fires: [MonotonicInstant] = []
        let timer = RunLoopTimer(fireAt: start + .milliseconds(10)) { _ in fires.append(loop.now) }
        try loop.add(timer, mode: .default)
        try loop.advanceManualClock(by: .milliseconds(9))
        XCTAssertEqual(fires, [])
        try loop.advanceManualClock(by: .milliseconds(100))
        XCTAssertEqual(fires, [start + .milliseconds(10)])
        XCTAssertFalse(timer.isValid)
        XCTAssertEqual(timer.lastFire?.lateness, .zero)
        XCTAssertEqual(timer.lastFire?.skippedPeriods, 0)
    }

    func testRepeatingFiresOnItsGrid() throws {
        let (loop, _) = try manualLoop()
        let start = loop.now
        var fires: [Duration] = []
        let timer = RunLoopTimer(fireAt: start + .milliseconds(10), interval: .milliseconds(10)) { _ in
            fires.append(loop.now - start)
        }
        try loop.add(timer, mode: .default)
        try loop.advanceManualClock(by: .milliseconds(45))
        XCTAssertEqual(fires, [.milliseconds(10), .milliseconds(20), .milliseconds(30), .milliseconds(40)])
        XCTAssertEqual(timer.fireDate, start + .milliseconds(50))
        XCTAssertEqual(timer.statistics.fires, 4)
        XCTAssertEqual(timer.statistics.skippedPeriods, 0)
    }

    /// A timer whose loop was busy past several periods fires once, reporting
    /// the lateness and skipped periods, then stays on the original grid.
    func testMissedPeriodsFireOnceThenStayOnGrid() throws {
        let (loop, clock) = try manualLoop()
        let start = loop.now
        var fires: [TimerFire] = []
        let timer = RunLoopTimer(fireAt: start + .milliseconds(10), interval: .milliseconds(10)) { t in fires.append(t.lastFire!) }
        try loop.add(timer, mode: .default)
        clock.advance(by: .milliseconds(45)) // the loop did not run meanwhile
        _ = try loop.run(mode: .default, timeout: .zero)
        XCTAssertEqual(fires.count, 1)
        XCTAssertEqual(fires[0].scheduled, start + .milliseconds(10))
        XCTAssertEqual(fires[0].lateness, .milliseconds(35))
        XCTAssertEqual(fires[0].skippedPeriods, 3) // 20, 30, 40
        XCTAssertEqual(timer.fireDate, start + .milliseconds(50))
        try loop.advanceManualClock(by: .milliseconds(10))
        XCTAssertEqual(fires.count, 2)
        XCTAssertEqual(fires[1].scheduled, start + .milliseconds(50))
        XCTAssertEqual(fires[1].lateness, .zero)
        XCTAssertEqual(fires[1].skippedPeriods, 0)
    }

    /// A handler that blocks past several periods: the periods that passed
    /// while it ran are skipped and reported with the next fire, which is on
    /// the original grid.
    func testBlockedHandlerSkipsPeriodsAndKeepsGrid() throws {
        let (loop, clock) = try manualLoop()
        let start = loop.now
        var fires: [TimerFire] = []
        let timer = RunLoopTimer(fireAt: start + .milliseconds(10), interval: .milliseconds(10)) { t in
            fires.append(t.lastFire!)
            if fires.count == 1 { clock.advance(by: .milliseconds(35)) } // "blocks" for 35 ms
        }
        try loop.add(timer, mode: .default)
        try loop.advanceManualClock(by: .milliseconds(10))
        XCTAssertEqual(timer.fireDate, start + .milliseconds(50))
        try loop.advanceManualClock(by: .milliseconds(5))
        XCTAssertEqual(fires.map(\.scheduled), [start + .milliseconds(10), start + .milliseconds(50)])
        XCTAssertEqual(fires[1].skippedPeriods, 3)
        XCTAssertEqual(timer.statistics.skippedPeriods, 3)
    }

    /// The same on the real clock: the handler really blocks. Asserted with
    /// bounds that hold however late the loop is scheduled.
    func testBlockedHandlerOnRealClockStaysOnGrid() throws {
        let loop = try makeLoop()
        let start = loop.now + .milliseconds(1)
        var fires: [TimerFire] = []
        let timer = RunLoopTimer(fireAt: start, interval: .milliseconds(5)) { t in
            fires.append(t.lastFire!)
            if fires.count == 1 { usleep(30_000) }
            if fires.count == 3 { loop.stop() }
        }
        try loop.add(timer, mode: .default)
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .stopped)
        XCTAssertEqual(fires.count, 3)
        for f in fires {
            let offset = (f.scheduled - start).nanosecondsClamped
            XCTAssertEqual(offset % 5_000_000, 0, "fire \(f) is off the grid")
            XCTAssertGreaterThanOrEqual(f.actual, f.scheduled)
        }
        // At least 30 ms passed in the first handler: ≥ 5 grid points skipped.
        XCTAssertGreaterThanOrEqual(fires[1].skippedPeriods, 5)
        XCTAssertGreaterThanOrEqual(fires[1].scheduled - fires[0].scheduled, .milliseconds(30))
    }

    /// A repeating timer keeps the timerfd periodic: once armed, each fire
    /// is a wait and a read, with no re-arm, as long as the loop is on time
    /// (a fire late by a whole period may re-arm once: the bound allows it).
    func testRepeatingTimerArmsTheTimerfdOnceNotEachFire() throws {
        let loop = try makeLoop()
        let start = loop.now + .milliseconds(2)
        var fires: [TimerFire] = []
        let timer = RunLoopTimer(fireAt: start, interval: .milliseconds(5)) { t in
            fires.append(t.lastFire!)
            if fires.count == 40 { loop.stop() }
        }
        try loop.add(timer, mode: .default)
        let arms = loop.timerArmCount, waits = loop.waitCount
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .stopped)
        XCTAssertEqual(fires.count, 40)
        for f in fires {
            XCTAssertEqual((f.scheduled - start).nanosecondsClamped % 5_000_000, 0, "fire \(f) is off the grid")
            XCTAssertGreaterThanOrEqual(f.actual, f.scheduled)
        }
        // One arm a fire before: 40 or more.
        XCTAssertLessThanOrEqual(loop.timerArmCount - arms, 20, "re-armed at most for late fires")
        XCTAssertGreaterThanOrEqual(loop.waitCount - waits, 1)
    }

    /// The periodic timerfd gives way to every other deadline and stops when
    /// its timer does: a one-shot timer between two periods fires at its
    /// time, a repeating timer moved off its grid fires at its new date and
    /// not at the old grid's, and once the repeating timer is gone the loop
    /// sleeps through a run's whole timeout (no fire nobody asked for).
    func testPeriodicTimerfdGivesWayToOtherDeadlinesAndStopsWithItsTimer() throws {
        let loop = try makeLoop()
        let start = loop.now + .milliseconds(2)
        var oneShotAt: MonotonicInstant?
        let oneShot = RunLoopTimer(fireAt: start + .milliseconds(27)) { _ in oneShotAt = loop.now }
        var fires: [TimerFire] = []
        var moved: MonotonicInstant?
        let timer = RunLoopTimer(fireAt: start, interval: .milliseconds(10)) { t in
            fires.append(t.lastFire!)
            if fires.count == 5 {
                // Off the grid: 3 ms on, then every 10 ms from there.
                moved = loop.now + .milliseconds(3)
                t.fireDate = moved!
            }
            if fires.count == 8 {
                t.invalidate()
                loop.stop()
            }
        }
        // Keeps the mode from being empty once both timers are done, and
        // leaves it no deadline (a port, never ready).
        let pipe = Pipe()
        try loop.add(PortSource(fd: pipe.readEnd) { _, _ in }, mode: .default)
        try loop.add(oneShot, mode: .default)
        try loop.add(timer, mode: .default)
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .stopped)
        XCTAssertEqual(fires.count, 8)
        let at = try XCTUnwrap(oneShotAt)
        XCTAssertGreaterThanOrEqual(at, start + .milliseconds(27))
        for f in fires.prefix(5) {
            XCTAssertEqual((f.scheduled - start).nanosecondsClamped % 10_000_000, 0, "fire \(f) is off the grid")
        }
        let m = try XCTUnwrap(moved)
        XCTAssertEqual(fires[5].scheduled, m, "the moved timer fires at its new date")
        XCTAssertGreaterThanOrEqual(fires[5].actual, m)
        for f in fires.dropFirst(5) {
            XCTAssertEqual((f.scheduled - m).nanosecondsClamped % 10_000_000, 0, "fire \(f) is off the new grid")
            XCTAssertGreaterThanOrEqual(f.actual, f.scheduled)
        }
        // Nothing left to fire: a sleep with no deadline at all (the timerfd
        // disarmed) until another thread's request, then one until a run's
        // timeout, however long the machine takes. A periodic timerfd left
        // armed would wake the loop every 10 ms.
        var waits = loop.waitCount
        let stopper = JoinableThread {
            usleep(60_000)
            _ = try? loop.perform(inModes: [.common]) { loop.stop() }
        }
        XCTAssertEqual(try loop.run(mode: .default, timeout: .seconds(10_000_000_000)), .stopped)
        stopper.join()
        XCTAssertLessThanOrEqual(loop.waitCount - waits, 2)
        waits = loop.waitCount
        XCTAssertEqual(try loop.run(mode: .default, timeout: .milliseconds(60)), .timedOut)
        XCTAssertLessThanOrEqual(loop.waitCount - waits, 2)
    }

    /// Tolerance lets the loop fire a timer late to share one wake-up.
    func testToleranceCoalescesWakeUps() throws {
        let (loop, _) = try manualLoop()
        let start = loop.now
        var fired: [String: MonotonicInstant] = [:]
        let a = RunLoopTimer(fireAt: start + .milliseconds(10), tolerance: .milliseconds(20)) { _ in fired["a"] = loop.now }
        let b = RunLoopTimer(fireAt: start + .milliseconds(25)) { _ in fired["b"] = loop.now }
        try loop.add(a, mode: .default)
        try loop.add(b, mode: .default)
        var wakes = 0
        try loop.add(RunLoopObserver(activities: .beforeTimers) { _, _ in wakes += 1 }, mode: .default)
        try loop.advanceManualClock(by: .milliseconds(24))
        XCTAssertTrue(fired.isEmpty, "a fired before its tolerance ran out although nothing else woke the loop")
        try loop.advanceManualClock(by: .milliseconds(1))
        XCTAssertEqual(fired["a"], start + .milliseconds(25))
        XCTAssertEqual(fired["b"], start + .milliseconds(25))
        XCTAssertEqual(a.lastFire?.lateness, .milliseconds(15))
    }

    /// On the real clock: both fire in the same pass, at one timerfd expiry.
    func testToleranceCoalescesOnRealClock() throws {
        let loop = try makeLoop()
        var passes = 0
        var firedIn: [Int] = []
        try loop.add(RunLoopObserver(activities: .afterWaiting) { _, _ in passes += 1 }, mode: .default)
        let a = RunLoopTimer(fireAt: loop.now + .milliseconds(2), tolerance: .milliseconds(200)) { _ in firedIn.append(passes) }
        let b = RunLoopTimer(fireAt: loop.now + .milliseconds(10)) { _ in firedIn.append(passes) }
        try loop.add(a, mode: .default)
        try loop.add(b, mode: .default)
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .finished)
        XCTAssertEqual(firedIn, [1, 1], "both timers fire after the first and only wake-up")
    }

    func testInvalidateInsideOwnHandler() throws {
        let (loop, _) = try manualLoop()
        var count = 0
        let timer = RunLoopTimer(fireAt: loop.now + .milliseconds(1), interval: .milliseconds(1)) { t in
            count += 1
            t.invalidate()
        }
        try loop.add(timer, mode: .default)
        try loop.add(farTimer(), mode: .default)
        try loop.advanceManualClock(by: .milliseconds(50))
        XCTAssertEqual(count, 1)
        XCTAssertFalse(timer.isValid)
        XCTAssertFalse(loop.contains(timer, mode: .default))
    }

    func testFireDateChange() throws {
        let (loop, _) = try manualLoop()
        let start = loop.now
        var fires: [Duration] = []
        let timer = RunLoopTimer(fireAt: start + .milliseconds(100), interval: .milliseconds(10)) { _ in fires.append(loop.now - start) }
        try loop.add(timer, mode: .default)
        // Earlier than first scheduled:
        timer.fireDate = start + .milliseconds(5)
        try loop.advanceManualClock(by: .milliseconds(26))
        XCTAssertEqual(fires, [.milliseconds(5), .milliseconds(15), .milliseconds(25)])
        // Later: the grid restarts from the new date.
        timer.fireDate = start + .milliseconds(53)
        try loop.advanceManualClock(by: .milliseconds(40)) // to 66
        XCTAssertEqual(fires.suffix(2), [.milliseconds(53), .milliseconds(63)])

        // A repeating timer moved from its own handler keeps the new date.
        var repeatingFires: [Duration] = []
        let repeatingMover = RunLoopTimer(fireAt: loop.now + .milliseconds(1), interval: .milliseconds(50)) { t in
            repeatingFires.append(loop.now - start)
            if repeatingFires.count == 1 { t.fireDate = loop.now + .milliseconds(7) }
        }
        try loop.add(repeatingMover, mode: .default)
        try loop.advanceManualClock(by: .milliseconds(30)) // to 96
        XCTAssertEqual(repeatingFires, [.milliseconds(67), .milliseconds(74)])
        repeatingMover.invalidate()
    }

    /// CF invalidates a one-shot timer after it fired even if its handler set
    /// a new fire date; the engine used to keep it scheduled.
    func testOneShotTimerRearmedInItsOwnHandlerFiresOnceAsInCF() throws {
        let clock = ManualClock()
        let loop = try makeLoop(clock: .manual(clock))
        var fires = 0
        let selfMover = RunLoopTimer(fireAt: loop.now + .milliseconds(1)) { t in
            fires += 1
            t.fireDate = loop.now + .milliseconds(7)
        }
        try loop.add(selfMover, mode: .default)
        try loop.advanceManualClock(by: .milliseconds(30))
        XCTAssertEqual(fires, 1, "a one-shot timer fires once")
        XCTAssertFalse(selfMover.isValid, "and is invalidated after its fire, as CF does")
        XCTAssertEqual(try loop.run(mode: .default, timeout: .zero), .finished)
    }

    func testTimerFiresNeverEndARun() throws {
        let loop = try makeLoop()
        var count = 0
        let timer = RunLoopTimer(fireAt: loop.now, interval: .milliseconds(1)) { _ in count += 1 }
        try loop.add(timer, mode: .default)
        XCTAssertEqual(try loop.run(mode: .default, timeout: .milliseconds(30), returnAfterSourceHandled: true), .timedOut)
        XCTAssertGreaterThanOrEqual(count, 2)
    }

    func testTimersFireInFireTimeThenOrder() throws {
        let (loop, clock) = try manualLoop()
        let t0 = loop.now + .milliseconds(5)
        let log = Log()
        for (name, at, order) in [("c", 5, 2), ("a", 5, 1), ("late", 6, 0), ("b", 5, 1)] {
            try loop.add(RunLoopTimer(fireAt: t0 + .milliseconds(at - 5), order: order) { _ in log.add(name) }, mode: .default)
        }
        clock.advance(by: .milliseconds(10))
        _ = try loop.run(mode: .default, timeout: .zero)
        XCTAssertEqual(log.entries, ["a", "b", "c", "late"])
    }

    func testLatenessReportedOnRealClock() throws {
        let loop = try makeLoop()
        var fires: [TimerFire] = []
        let timer = RunLoopTimer(fireAt: loop.now + .milliseconds(1), interval: .milliseconds(2)) { t in
            fires.append(t.lastFire!)
            if fires.count == 5 { loop.stop() }
        }
        try loop.add(timer, mode: .default)
        _ = try loop.run(mode: .default, timeout: testDeadline)
        XCTAssertEqual(fires.count, 5)
        for f in fires { XCTAssertGreaterThanOrEqual(f.lateness, .zero) }
        XCTAssertEqual(timer.statistics.fires, 5)
        XCTAssertGreaterThanOrEqual(timer.statistics.maxLateness, fires.map(\.lateness).max()!)
    }

    func testTimersOnlyTheLoopHoldsSurviveLeavingItDuringTheirOwnFire() throws {
        // The loop fires timers without retaining them; its table's reference
        // must outlive a fire that ends the timer: a one-shot timer (the loop
        // invalidates it after its handler) and a repeating one invalidating
        // itself in its handler. (ASan reports a use after free if not.)
        let loop = try makeLoop()
        final class Witness { let log: Log; let name: String
            init(_ log: Log, _ name: String) { self.log = log; self.name = name }
            deinit { log.add("\(name) released") } }
        let log = Log()
        do {
            let once = Witness(log, "one-shot")
            try loop.add(RunLoopTimer(fireAt: loop.now) { t in
                withExtendedLifetime(once) {}
                log.add("one-shot fired \(t.statistics.fires)")
            }, mode: .default)
            let repeating = Witness(log, "repeating")
            try loop.add(RunLoopTimer(fireAt: loop.now + .milliseconds(1), interval: .milliseconds(1)) { t in
                t.invalidate()
                withExtendedLifetime(repeating) {}
                log.add("repeating fired \(t.statistics.fires), valid \(t.isValid)")
            }, mode: .default)
        }
        try loop.add(RunLoopTimer(fireAt: loop.now + .milliseconds(30)) { _ in loop.stop() }, mode: .default)
        XCTAssertEqual(try loop.run(mode: .default, timeout: testDeadline), .stopped)
        XCTAssertEqual(log.entries, [
            "one-shot fired 1", "one-shot released", "repeating fired 1, valid false", "repeating released",
        ])
    }

    /// The manual clock holds its loops unretained, and a loop leaves it in
    /// its deinit: loops made and freed on one thread while another advances
    /// the clock are never woken after they are gone (the sanitizers see a
    /// use after free if they are), none is kept alive by it, and a loop
    /// that stays is still woken from its sleep by an advance.
    func testLoopsFreedWhileAnotherThreadAdvancesTheirClock() throws {
        let clock = ManualClock()
        let kept = try makeLoop(clock: .manual(clock))
        let stop = Locked(false)
        let advances = Locked(0)
        let gaveUp = Locked(false)
        let advancer = JoinableThread {
            // Bounded in real time: a kept loop the clock no longer wakes
            // is stopped, so the test fails instead of hanging.
            let deadline = MonotonicInstant.now + .seconds(20)
            while !stop.withLock({ $0 }) {
                if MonotonicInstant.now >= deadline {
                    gaveUp.withLock { $0 = true }
                    kept.stop()
                    return
                }
                clock.advance(by: .microseconds(1))
                advances.withLock { $0 += 1 }
            }
        }
        weak var last: BoardRunLoop?
        for _ in 0..<400 {
            let loop = try BoardRunLoop(clock: .manual(clock))
            _ = try loop.run(mode: .default, timeout: .zero)
            last = loop
        }
        XCTAssertNil(last, "the clock keeps no loop alive")
        // The kept loop sleeps until its timer, 5 ms of the clock away: only
        // the advancer's wake-ups end that sleep.
        let fired = Locked(false)
        try kept.add(RunLoopTimer(fireAt: kept.now + .milliseconds(5)) { _ in fired.withLock { $0 = true } }, mode: .default)
        let result = try kept.run(mode: .default, timeout: .seconds(3600), returnAfterSourceHandled: true)
        stop.withLock { $0 = true }
        XCTAssertTrue(advancer.join(within: .seconds(30)))
        XCTAssertFalse(gaveUp.withLock { $0 }, "the clock's advances did not wake the kept loop")
        XCTAssertNotEqual(result, .stopped)
        XCTAssertTrue(fired.withLock { $0 })
        XCTAssertGreaterThan(advances.withLock { $0 }, 0)
    }
}
