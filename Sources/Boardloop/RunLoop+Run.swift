import CLinux
import Glibc

extension RunLoop {
    // MARK: Run calls

    /// Runs the default mode until `stop()` is called or the mode has no
    /// sources or timers left (CF's `CFRunLoopRun`). Owner thread only.
    public func run() throws(RunLoopError) {
        while true {
            let r = try run(mode: .default, timeout: .seconds(10_000_000_000), returnAfterSourceHandled: false)
            if r == .stopped || r == .finished { return }
        }
    }

    /// Runs the default mode until `deadline` passes, `stop()` is called or the
    /// mode is empty; returns why it ended. Owner thread only.
    @discardableResult
    public func run(until deadline: MonotonicInstant) throws(RunLoopError) -> RunLoopRunResult {
        while true {
            let remaining = deadline - now
            let r = try run(mode: .default, timeout: remaining, returnAfterSourceHandled: false)
            if r != .timedOut || now >= deadline { return r }
        }
    }

    /// Runs the loop once in `mode` (CF's `CFRunLoopRunInMode`): passes until
    /// the timeout passes (`.timedOut`), `stop()` is called (`.stopped`), the
    /// mode has no sources or timers (`.finished`, at once and without any
    /// observer call if it has none to begin with), or — with
    /// `returnAfterSourceHandled` — a source was handled (`.handledSource`).
    /// A timeout of zero or less makes exactly one pass without sleeping.
    /// Timer fires never end a run. Calls may nest, in any mode. Owner thread only.
    public func run(mode: RunLoopMode, timeout: Duration, returnAfterSourceHandled: Bool = false) throws(RunLoopError) -> RunLoopRunResult {
        try checkOwner("RunLoop.run(mode:timeout:returnAfterSourceHandled:)")
        // A mode nothing was ever added to exists once a perform request
        // names it (as in CF, which creates the mode when the request is made).
        var found = modeState(named: mode)
        if found == nil && mode != .common && performs.hasPending(named: mode) {
            found = try modeState(creating: mode)
        }
        guard let ms = found, !isEmpty(ms) else { return .finished }
        let start = nowNanoseconds
        let ns = timeout.nanosecondsClamped
        // 0: poll (one pass); .max: no deadline.
        let deadline: UInt64
        if ns <= 0 {
            deadline = 0
        } else if UInt64(ns) >= Self.forever || UInt64(ns) >= MonotonicInstant.distantFuture.nanoseconds &- start {
            // No deadline to check after every pass.
            deadline = .max
        } else {
            deadline = start + UInt64(ns)
        }
        let previous = runningMode
        // Each run has its own stop flag, as CF's per-run data: a stop() made
        // while no run is active is forgotten, and a stop of a nested run does
        // not leak into the run it is nested in.
        let outerStop = stopRequested.exchange(false, ordering: .acquiringAndReleasing)
        runningMode = ms
        runDepth += 1
        notify(ms, .entry)
        let result = runPasses(ms, deadline: deadline, stopAfterHandle: returnAfterSourceHandled)
        // The ready list lives for one run call: between calls the program
        // may read the fds itself, and the kernel reports what is still ready.
        dropReadyList()
        notify(ms, .exit)
        runDepth -= 1
        runningMode = previous
        stopRequested.store(outerStop, ordering: .releasing)
        return result
    }

    /// Timeouts this long (about 31 years; `run()` uses CF's 1e10 s) have no deadline.
    static let forever: UInt64 = 1_000_000_000 * 1_000_000_000

    /// A mode with no sources, no timers and no perform requests it would run.
    func isEmpty(_ ms: ModeState) -> Bool {
        ms.hasNoSourcesOrTimers && !performs.hasPending(for: ms)
    }

    // MARK: The pass

    /// The guide's sequence, repeated until a run result is reached:
    ///  1. notify entry (done by the caller)
    ///  2. notify beforeTimers
    ///  3. notify beforeSources (and run perform requests)
    ///  4. fire ready custom sources
    ///  5. if a port source is ready, go to 9
    ///  6. notify beforeWaiting
    ///  7. sleep until a port is ready, a timer is due, the timeout passes or
    ///     the loop is woken
    ///  8. notify afterWaiting
    ///  9. process what woke the loop: due timers, or one ready port
    /// 10. notify exit (done by the caller)
    private func runPasses(_ ms: ModeState, deadline: UInt64, stopAfterHandle: Bool) -> RunLoopRunResult {
        if stopRequested.exchange(false, ordering: .acquiringAndReleasing) { return .stopped }
        let pollOnly = deadline == 0
        let waitObservers = RunLoopActivity.beforeWaiting.rawValue | RunLoopActivity.afterWaiting.rawValue
        while true {
            // Wake-ups count from here until the loop wakes (CF's ignoreWakeUps):
            // outside that window the loop is awake and checks everything
            // before it sleeps again.
            wakePending.store(false, ordering: .releasing)
            // Changes other threads asked for (invalidations, timer moves).
            // If they emptied the mode, nothing is left to wait for.
            if applyRemoteRequests() && isEmpty(ms) { return .finished }
            // 2, 3
            notify(ms, .beforeTimers)
            notify(ms, .beforeSources)
            var performWake = runPerforms(ms)
            // 4
            var handled = ms.customs.count > 0 && performCustomSources(ms, stopAfterHandle: stopAfterHandle)
            if handled { performWake = min(performWake, runPerforms(ms)) }
            let poll = handled || pollOnly

            // 5: a ready port skips the sleep and its notifications. Ports
            // left on the ready list by the last wait are ready; otherwise
            // checking costs a system call, so it is made only when someone
            // could tell the difference: when the mode has before/afterWaiting
            // observers.
            var wake = WakeReasons()
            var portReady = hasReadyPort(ms)
            if !portReady && !poll && ms.portCount > 0 && ms.observerMask & waitObservers != 0 {
                wake = waitForEvents(ms, timeoutMilliseconds: 0)
                portReady = hasReadyPort(ms)
            }

            if !portReady {
                // 6
                if !poll { notify(ms, .beforeWaiting) }
                // 7
                var timeoutMs: Int32 = 0
                if !poll {
                    var until = deadline
                    let t = nextTimerDeadline(ms)
                    if t < until { until = t }
                    if performWake < until { until = performWake }
                    if nextPortRelease < until { until = nextPortRelease }
                    if nextCustomRelease < until { until = nextCustomRelease }
                    let now = nowNanoseconds
                    if until <= now {
                        timeoutMs = 0
                    } else {
                        if manualClock == nil { armTimer(until == .max ? 0 : until) }
                        timeoutMs = -1
                    }
                }
                if timeoutMs != 0 { isWaitingFlag.store(true, ordering: .releasing) }
                wake.merge(waitForEvents(ms, timeoutMilliseconds: timeoutMs))
                if timeoutMs != 0 { isWaitingFlag.store(false, ordering: .releasing) }
                // 8
                if !poll { notify(ms, .afterWaiting) }
            }

            // 9: due timers first (a flood of ready ports cannot starve
            // them); otherwise one ready port. Ports not dispatched stay on
            // the ready list (or ready in the kernel) for the next pass.
            wakePending.store(true, ordering: .releasing)
            // The clock is read only when something here depends on it.
            let timerDue = nextTimerDeadline(ms)
            var timersFired = false
            if timerDue != .max || heldPortCount > 0 || nextCustomRelease != .max {
                let now = nowNanoseconds
                if heldPortCount > 0 { releaseHeldPorts(now: now) }
                if nextCustomRelease <= now { nextCustomRelease = .max }
                if timerDue <= now {
                    fireTimers(ms)
                    timersFired = true
                }
            }
            if !timersFired && readyNext < readyCount {
                handled = dispatchReadyPort(ms) || handled
            }
            _ = runPerforms(ms)
            // The wake-up and timer fds are drained after the work they
            // announced has run: their reads are off the latency path.
            // (Wake-ups made from here on are not written: wakePending.)
            if wake.wakeUp {
                var value: UInt64 = 0
                _ = bl_eventfd_read(wakeFD, &value)
            }
            if wake.timer {
                var expirations: UInt64 = 0
                _ = bl_timerfd_read(timerFD, &expirations)
                timerArmed = 0
            }

            // Exit checks, in CF's order.
            if handled && stopAfterHandle { return .handledSource }
            if pollOnly || (deadline != .max && nowNanoseconds >= deadline) { return .timedOut }
            if stopRequested.exchange(false, ordering: .acquiringAndReleasing) { return .stopped }
            if isEmpty(ms) { return .finished }
        }
    }

    /// What one `epoll_wait` reported besides ports (those go on the ready list).
    struct WakeReasons {
        var wakeUp = false
        var timer = false

        mutating func merge(_ other: WakeReasons) {
            wakeUp = wakeUp || other.wakeUp
            timer = timer || other.timer
        }
    }

    /// Waits on the mode's epoll set. The ports it returns become the ready
    /// list, replacing what was left of the last one.
    private func waitForEvents(_ ms: ModeState, timeoutMilliseconds: Int32) -> WakeReasons {
        var r = WakeReasons()
        readyCount = 0
        readyNext = 0
        waitCount &+= 1
        let n = bl_epoll_wait(ms.epfd, events.raw, Int32(events.capacity), timeoutMilliseconds)
        if n < 0 {
            let e = errno
            if e == EINTR { return r }
            fatalError("boardloop: epoll_wait failed: \(String(cString: strerror(e))); this is a bug in boardloop")
        }
        var count = 0
        var i = 0
        while i < Int(n) {
            let data = events.data(at: i)
            switch data & Tag.mask {
            case Tag.wakeUp:
                r.wakeUp = true
            case Tag.timer:
                r.timer = true
            default:
                let slot = Int32(bitPattern: UInt32(truncatingIfNeeded: data))
                let generation = UInt32(truncatingIfNeeded: data >> 32)
                if let p = ports.lookup(slot, generation) {
                    // Insertion sort by order, stable: the list is short.
                    let entry = ReadyPort(slot: slot, generation: generation, events: events.events(at: i), order: p.order)
                    var j = count
                    while j > 0 && readyList[j - 1].order > entry.order {
                        readyList[j] = readyList[j - 1]
                        j -= 1
                    }
                    readyList[j] = entry
                    count += 1
                }
            }
            i += 1
        }
        readyCount = count
        readyModeBit = ms.bit
        return r
    }

    /// Whether the ready list holds a port for `ms`. A list left by a wait
    /// in another mode is dropped (its fds are still ready in the kernel).
    @inline(__always)
    func hasReadyPort(_ ms: ModeState) -> Bool {
        if readyNext == readyCount { return false }
        if readyModeBit != ms.bit {
            dropReadyList()
            return false
        }
        return true
    }

    /// Forgets the ready list; the kernel reports those fds again (level-triggered).
    @inline(__always)
    func dropReadyList() {
        readyCount = 0
        readyNext = 0
    }

    /// Takes the next port off the ready list and dispatches it. Entries
    /// whose source was removed, left the mode or is held are dropped on
    /// the way.
    private func dispatchReadyPort(_ ms: ModeState) -> Bool {
        guard readyModeBit == ms.bit else {
            dropReadyList()
            return false
        }
        while readyNext < readyCount {
            let e = readyList[readyNext]
            readyNext += 1
            if readyNext == readyCount { dropReadyList() }
            if let p = ports.lookup(e.slot, e.generation), p.item.modeMask & ms.bit != 0, !p.heldInKernel,
               !p.remote.invalidationRequested {
                return dispatch(p, ms, events: e.events)
            }
        }
        return false
    }

    private func armTimer(_ deadline: UInt64) {
        if deadline == timerArmed { return }
        _ = bl_timerfd_arm_abs(timerFD, deadline)
        timerArmed = deadline
        timerArmCount &+= 1
    }

    // MARK: Step 3 and 9: observers

    @inline(__always)
    func notify(_ ms: ModeState, _ activity: RunLoopActivity) {
        guard ms.observerMask & activity.rawValue != 0 else { return }
        notifyObservers(ms, activity)
    }

    private func notifyObservers(_ ms: ModeState, _ activity: RunLoopActivity) {
        let count = ms.observers.count
        withSnapshot(count, fill: { buffer in
            for i in 0..<count { buffer[i] = ms.observers[i] }
        }) { buffer in
            for i in 0..<count {
                guard let o = observers[buffer[i]], o.item.modeMask & ms.bit != 0,
                      o.activities.rawValue & activity.rawValue != 0, !o.isFiring, !o.remote.invalidationRequested
                else { continue }
                o.isFiring = true
                o.handler(o, activity)
                o.isFiring = false
                if !o.repeats && o.item.loop === self { invalidateObserver(o) }
            }
        }
    }

    /// Copies `count` slots into scratch space and walks them; handlers may
    /// change the live lists meanwhile.
    @inline(__always)
    func withSnapshot(_ count: Int, fill: (UnsafeMutablePointer<Int32>) -> Void, _ body: (UnsafeMutablePointer<Int32>) -> Void) {
        if count == 0 { return }
        if let buffer = scratch.push(count) {
            fill(buffer)
            body(buffer)
            scratch.pop(count)
        } else {
            withUnsafeTemporaryAllocation(of: Int32.self, capacity: count) { b in
                fill(b.baseAddress!)
                body(b.baseAddress!)
            }
        }
    }

    // MARK: Step 4: custom sources

    /// Performs the mode's signalled sources in (order, signal time) order —
    /// sources of equal order in the order they were signalled, as in CF.
    private func performCustomSources(_ ms: ModeState, stopAfterHandle: Bool) -> Bool {
        let count = ms.customs.count
        if count == 0 { return false }
        var any = false
        for i in 0..<count where customs[ms.customs[i]]!.signalStamp.load(ordering: .acquiring) != 0 {
            any = true
            break
        }
        if !any { return false }
        var handled = false
        var ready = 0
        withSnapshot(count, fill: { buffer in
            // The signalled ones, sorted by (order, stamp); the mode's list is
            // already sorted by order, so this only reorders equal orders.
            for i in 0..<count {
                let slot = ms.customs[i]
                let c = customs[slot]!
                let stamp = c.signalStamp.load(ordering: .acquiring)
                guard stamp != 0 else { continue }
                var j = ready
                while j > 0 {
                    let prev = customs[buffer[j - 1]]!
                    if prev.order < c.order || prev.signalStamp.load(ordering: .relaxed) < stamp { break }
                    buffer[j] = buffer[j - 1]
                    j -= 1
                }
                buffer[j] = slot
                ready += 1
            }
        }) { buffer in
            for i in 0..<ready {
                guard let s = customs[buffer[i]], s.item.modeMask & ms.bit != 0,
                      s.signalStamp.load(ordering: .acquiring) != 0, !s.remote.invalidationRequested
                else { continue }
                if s.limiter.limit != nil {
                    let now = nowNanoseconds
                    if !s.limiter.admit(now: now) {
                        if s.limiter.heldUntil < nextCustomRelease { nextCustomRelease = s.limiter.heldUntil }
                        continue
                    }
                }
                s.signalStamp.store(0, ordering: .releasing)
                s.performCount &+= 1
                workCount &+= 1
                s.performCallback()
                handled = true
                if stopAfterHandle { break }
            }
        }
        return handled
    }

    // MARK: Step 9: ports

    @inline(__always)
    private func dispatch(_ p: PortSource, _ ms: ModeState, events portEvents: UInt32) -> Bool {
        if p.limiter.limit != nil && !p.limiter.admit(now: nowNanoseconds) {
            holdPort(p)
            return false
        }
        p.dispatchCount &+= 1
        workCount &+= 1
        let events = PortSource.Events(epoll: portEvents)
        p.handler(p, events)
        if portEvents & (BL_EPOLLHUP | BL_EPOLLERR) != 0 { endAfterHangup(p, events) }
        return true
    }

    /// After a dispatch that reported hangup or error: unless the handler
    /// re-armed the source, invalidate it, so the fd cannot make the loop
    /// spin (level-triggered epoll reports EPOLLHUP/EPOLLERR for as long as
    /// the condition lasts, whatever the interest).
    @inline(never)
    private func endAfterHangup(_ p: PortSource, _ events: PortSource.Events) {
        if p.rearmed {
            p.rearmed = false
            return
        }
        guard p.item.loop === self, !p.item.invalidated else { return }
        p.endedByHangup = true
        invalidatePort(p)
    }
}
