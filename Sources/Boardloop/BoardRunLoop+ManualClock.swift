extension BoardRunLoop {
    // MARK: Manual clock

    /// Moves the loop's manual clock forward by `duration`, stopping at every
    /// deadline in between (timers, delayed performs, rate-limit holds) and
    /// running `mode` there until nothing more is ready, so each timer fires at
    /// exactly its scheduled time and everything it causes happens before the
    /// clock moves on. Deterministic: no sleeping, no real time involved.
    /// Owner thread only; the loop must have been made on a `ManualClock`.
    public func advanceManualClock(by duration: Duration, mode: RunLoopMode = .default) throws(RunLoopError) {
        try checkOwner("BoardRunLoop.advanceManualClock")
        guard let clock = manualClock else {
            throw .invalidArgument("advanceManualClock needs a loop made with RunLoopClock.manual")
        }
        guard duration >= .zero else { throw .invalidArgument("advanceManualClock: duration \(duration) is negative") }
        let target = clock.now + duration
        while true {
            try settle(mode)
            var next = target.nanoseconds
            if let ms = modeState(named: mode) {
                next = min(next, nextTimerDeadline(ms), performs.nextDue(for: ms), nextPortRelease, nextCustomRelease)
            }
            let now = clock.now.nanoseconds
            if next <= now {
                // Something is due now but did not run (e.g. a timer still firing in an outer run).
                if next == target.nanoseconds || now >= target.nanoseconds { break }
                clock.advance(to: MonotonicInstant(nanoseconds: now + 1))
                continue
            }
            clock.advance(to: MonotonicInstant(nanoseconds: next))
            if next >= target.nanoseconds {
                try settle(mode)
                break
            }
        }
    }

    /// Runs zero-timeout passes until a pass does no work (bounded, so a
    /// permanently ready fd cannot hang a test).
    private func settle(_ mode: RunLoopMode) throws(RunLoopError) {
        _ = try settleManualClock(mode: mode)
    }

    // Several loops on one manual clock, driven from one thread (the
    // daemon's `boardd test` and `boardd replay`): the driver settles each
    // loop in turn until none does any work, then moves the shared clock to
    // the earliest deadline of any of them.

    /// Runs zero-timeout passes in `mode` until a pass does no work
    /// (bounded, so a permanently ready fd cannot hang the caller); true
    /// when any pass did some. Owner thread only.
    package func settleManualClock(mode: RunLoopMode) throws(RunLoopError) -> Bool {
        var passes = 0
        let start = workCount
        while passes < 10_000 {
            let before = workCount
            let r = try run(mode: mode, timeout: .zero)
            passes += 1
            if r == .finished || workCount == before { break }
        }
        return workCount != start
    }

    /// The earliest instant something is due in `mode`: a timer, a delayed
    /// perform, a rate-limit hold's release (`.max` nanoseconds: nothing).
    /// Owner thread only.
    package func nextDeadline(mode: RunLoopMode) -> MonotonicInstant {
        guard let ms = modeState(named: mode) else { return MonotonicInstant(nanoseconds: .max) }
        return MonotonicInstant(
            nanoseconds: min(nextTimerDeadline(ms), performs.nextDue(for: ms), nextPortRelease, nextCustomRelease))
    }
}
