extension BoardRunLoop {
    /// After a timer's fire date changed: its key and its place in each heap.
    func timerMoved(_ timer: RunLoopTimer) {
        timerKeys[Int(timer.item.slot)].move(to: timer.fireNanoseconds, tolerance: timer.toleranceNanoseconds)
        timerKeyChanged(timer)
    }

    /// After a repeating timer's fire: the next point of its grid, which is
    /// never a disarm (`TimerKey.moveOnGrid`).
    private func timerMovedOnGrid(_ timer: RunLoopTimer) {
        timerKeys[Int(timer.item.slot)].moveOnGrid(to: timer.fireNanoseconds, tolerance: timer.toleranceNanoseconds)
        timerKeyChanged(timer)
    }

    /// The timer's place in each heap, after its key changed.
    @inline(__always)
    private func timerKeyChanged(_ timer: RunLoopTimer) {
        var i = 0
        while i < usedModes {
            let ms = modeStates[i]
            if timer.item.modeMask & ms.bit != 0 { ms.timers.update(timer.item.slot, keys: timerKeys) }
            i += 1
        }
        timersChanged()
    }

    /// After any change to a timer key or a mode's timer heap: the modes'
    /// remembered next timer deadlines are out of date.
    @inline(__always)
    func timersChanged() { timerEpoch &+= 1 }

    // MARK: Step 9: timers

    /// When the loop must wake for the mode's timers. Tolerance is a window
    /// for coalescing, not a delay: the loop must wake by the earliest
    /// `fire + tolerance` of all timers (the latest it may), and it wakes at
    /// the latest fire date that is not after that — so a lone timer fires at
    /// its fire date, and a timer whose window holds another timer's fire
    /// date waits for it and fires with it. Children in the heap fire no
    /// earlier than their parent, so both walks skip subtrees that cannot
    /// matter.
    ///
    /// A pass asks twice (for the sleep and for the due timers) and the
    /// answer changes only when a timer does: each mode remembers it until
    /// `timersChanged()`.
    @inline(__always)
    func nextTimerDeadline(_ ms: ModeState) -> UInt64 {
        if ms.timers.count == 0 { return .max }
        if ms.timerDeadlineEpoch == timerEpoch { return ms.timerDeadline }
        var interval: UInt64 = 0
        let d = computeNextTimerDeadline(ms, interval: &interval)
        ms.timerDeadline = d
        ms.timerDeadlineInterval = interval
        ms.timerDeadlineEpoch = timerEpoch
        return d
    }

    /// The repeat interval the timerfd may keep for a sleep until `until`:
    /// the interval of the repeating timer whose fire date `until` is (the
    /// timer fires then, and on time its next fire is one interval later),
    /// else 0. Valid right after `nextTimerDeadline(ms)` in the same pass.
    @inline(__always)
    func periodicInterval(_ ms: ModeState, until: UInt64) -> UInt64 {
        ms.timers.count > 0 && ms.timerDeadlineEpoch == timerEpoch && ms.timerDeadline == until
            ? ms.timerDeadlineInterval : 0
    }

    @inline(never)  // (the cache's miss: kept out of the passes that inline the hit)
    private func computeNextTimerDeadline(_ ms: ModeState, interval: inout UInt64) -> UInt64 {
        // The common case, without the walks: the first timer has no
        // tolerance and is not firing. No timer can fire before it, so the
        // latest the loop may wake is its fire date, and it wakes then.
        let first = timerKeys[Int(ms.timers[0])]
        if !first.firing && first.latest == first.fire {
            interval = first.interval
            return first.fire
        }
        // The first disarmed (its `latest` is never: `TimerKey.move`), so
        // all are: none will fire, and the mode has no timer deadline.
        if first.fire >= MonotonicInstant.distantFuture.nanoseconds { return .max }
        let count = ms.timers.count
        var latest = UInt64.max
        visitLatest(ms, 0, count, &latest)
        if latest == .max { return .max }
        var wake: UInt64 = 0
        visitWake(ms, 0, count, latest, &wake, &interval)
        return wake
    }

    /// min(fire + tolerance) over the timers not firing now.
    private func visitLatest(_ ms: ModeState, _ i: Int, _ count: Int, _ best: inout UInt64) {
        let key = timerKeys[Int(ms.timers[i])]
        if key.fire >= best { return }
        if !key.firing && key.latest < best { best = key.latest }
        let left = 2 * i + 1
        if left < count { visitLatest(ms, left, count, &best) }
        if left + 1 < count { visitLatest(ms, left + 1, count, &best) }
    }

    /// max(fire) over the timers not firing now whose fire is at most
    /// `latest`, and the shortest repeat interval of the timers with that
    /// fire date (on time, the first of them to fire again does so one
    /// such interval later).
    private func visitWake(
        _ ms: ModeState, _ i: Int, _ count: Int, _ latest: UInt64, _ wake: inout UInt64, _ interval: inout UInt64
    ) {
        let key = timerKeys[Int(ms.timers[i])]
        if key.fire > latest { return }
        if !key.firing {
            if key.fire > wake {
                wake = key.fire
                interval = key.interval
            } else if key.fire == wake && key.interval != 0 && (interval == 0 || key.interval < interval) {
                interval = key.interval
            }
        }
        let left = 2 * i + 1
        if left < count { visitWake(ms, left, count, latest, &wake, &interval) }
        if left + 1 < count { visitWake(ms, left + 1, count, latest, &wake, &interval) }
    }

    /// Fires every timer of the mode whose fire time has come by `now` (the
    /// clock read that found one due), in (fire time, order, insertion) order.
    func fireTimers(_ ms: ModeState, now: UInt64) {
        let capacity = ms.timers.count
        var due = 0
        withSnapshot(capacity, fill: { buffer in
            collectDue(ms, 0, now, buffer, &due)
            sortStably(buffer, count: due) { timerKeys[Int($0)] < timerKeys[Int($1)] }
        }) { buffer in
            // The first handler is called at `now`; later ones after the
            // handlers before them, so the clock is read again for them.
            var calledAt = now
            for i in 0..<due {
                // No reference is taken: the timer table's keeps the timer
                // alive, and a timer that leaves the loop during its fire is
                // kept alive until the fire ends (`fireDepth`).
                guard let u = timers.unretained(buffer[i]) else { continue }
                let release = u._withUnsafeGuaranteedRef { t -> RunLoopTimer? in
                    guard t.item.modeMask & ms.bit != 0, !t.isFiring, t.fireNanoseconds <= now,
                          !t.remote.invalidationRequested
                    else { return nil }
                    t.fireDepth += 1
                    fire(t, now: calledAt)
                    calledAt = 0
                    t.fireDepth -= 1
                    guard t.fireDepth == 0, t.keptAlive != nil else { return nil }
                    // Invalidated while it fired: `invalidateAndWait()` may return now.
                    t.settleIfPending()
                    defer { t.keptAlive = nil }
                    return t.keptAlive
                }
                // A timer that left the loop while it fired is released here.
                _ = release
            }
        }
    }

    private func collectDue(_ ms: ModeState, _ i: Int, _ now: UInt64, _ out: UnsafeMutablePointer<Int32>, _ n: inout Int) {
        guard i < ms.timers.count else { return }
        let slot = ms.timers[i]
        guard timerKeys[Int(slot)].fire <= now else { return }
        out[n] = slot
        n += 1
        collectDue(ms, 2 * i + 1, now, out, &n)
        collectDue(ms, 2 * i + 2, now, out, &n)
    }

    /// Fires `t`; `now` is the time (0: read the clock).
    private func fire(_ t: RunLoopTimer, now: UInt64) {
        let scheduled = t.fireNanoseconds
        let actual = max(now != 0 ? now : nowNanoseconds, scheduled)
        let interval = t.intervalNanoseconds
        let merged = interval > 0 ? (actual - scheduled) / interval : 0
        let skipped = merged &+ t.pendingSkipped
        t.pendingSkipped = 0
        let lateness = actual - scheduled
        t.lastFire = TimerFire(
            scheduled: MonotonicInstant(nanoseconds: scheduled), actual: MonotonicInstant(nanoseconds: actual),
            skippedPeriods: skipped)
        t.fires &+= 1
        t.skippedPeriods &+= skipped
        t.totalLatenessNanoseconds &+= lateness
        if lateness > t.maxLatenessNanoseconds { t.maxLatenessNanoseconds = lateness }

        workCount &+= 1
        t.isFiring = true
        timerKeys[Int(t.item.slot)].firing = true
        timersChanged()
        t.movedDuringFire = false
        __BOARDLOOP_IS_CALLING_OUT_TO_A_TIMER__(t)
        t.isFiring = false
        // Still on this loop, it still has its slot (a timer that left it
        // during the handler gave its slot up, and a new owner's key was
        // made fresh).
        if t.item.isOn(self) {
            timerKeys[Int(t.item.slot)].firing = false
            timersChanged()
        }
        guard t.item.isOn(self), !t.item.invalidated else { return }
        // A one-shot timer fires once, even if its handler set a new fire
        // date (as CF: a non-repeating timer is invalidated after it fires).
        // A re-armable one is disarmed instead, unless its handler armed it.
        if interval == 0 {
            if !t.isRearmable {
                invalidateItem(t)
            } else if !t.movedDuringFire {
                t.fireNanoseconds = MonotonicInstant.distantFuture.nanoseconds
                timerMoved(t)
            }
            return
        }
        if t.movedDuringFire { return }
        // Next grid point after the one fired for; grid points that passed
        // while the handler ran are skipped and reported with the next fire.
        var next = scheduled &+ (merged &+ 1) &* interval
        let after = nowNanoseconds
        if next <= after {
            let extra = (after - next) / interval + 1
            t.pendingSkipped = extra
            next &+= extra &* interval
        }
        t.fireNanoseconds = next
        timerMovedOnGrid(t)
    }
}
