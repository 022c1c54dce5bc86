import Boardloop

// `Options.inlineWorkers`: every loop on the daemon's thread and one
// manual clock. Time moves only here: each loop is settled in turn (main
// first, then the workers in config order) until a whole round does no
// work, then the clock moves to the earliest deadline of any loop. A
// message one loop posts to another is handled in the same round, before
// the clock moves, so the same inputs give the same run, every time.

extension Daemon {
    /// Each loop's runtime and loop, main first.
    private var inlineLoops: [(BoardRunLoop, LoopRuntime)] {
        boxes.compactMap { b in
            guard let loop = b.loop, let rt = b.rt else { return nil }
            return (loop, rt)
        }
    }

    /// Settles every loop until none does any work (bounded: a loop that
    /// is always ready cannot hang the caller).
    func settleAll() throws {
        for _ in 0..<1_000 {
            var worked = false
            for (loop, rt) in inlineLoops {
                if try loop.settleManualClock(mode: rt.runModes[rt.effectiveMode]) { worked = true }
            }
            flushEvents()
            if !worked { return }
        }
    }

    /// Moves the shared manual clock forward by `d`, stopping at every
    /// deadline of any loop in between and settling all the loops there.
    func advanceAll(by d: Duration) throws {
        guard case let .manual(clock) = options.clock else {
            throw DaemonError.setup("advance needs a manual clock")
        }
        guard d >= .zero else { throw DaemonError.setup("advance: \(d) is negative") }
        let target = (clock.now + d).nanoseconds
        while true {
            try settleAll()
            var next = target
            for (loop, rt) in inlineLoops {
                next = min(next, loop.nextDeadline(mode: rt.runModes[rt.effectiveMode]).nanoseconds)
            }
            let now = clock.now.nanoseconds
            if next <= now {
                // Due now, yet the settle did not run it (a timer still
                // firing in an outer run): step past it, as the engine's
                // own manual advance does.
                if now >= target { break }
                clock.advance(to: MonotonicInstant(nanoseconds: now + 1))
                continue
            }
            clock.advance(to: MonotonicInstant(nanoseconds: next))
            if next >= target {
                try settleAll()
                break
            }
        }
    }
}
