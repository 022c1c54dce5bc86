import CLinux
import Glibc

extension BoardRunLoop {
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
    public func run(until deadline: MonotonicInstant) throws(RunLoopError) -> RunResult {
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
    public func run(mode: RunLoopMode, timeout: Duration, returnAfterSourceHandled: Bool = false) throws(RunLoopError) -> RunResult {
        try checkOwner("BoardRunLoop.run(mode:timeout:returnAfterSourceHandled:)")
        // What other threads asked for comes first: a mode whose last item
        // another thread invalidated is empty, and a run of it returns
        // `.finished` without any observer call, as in CF (whose
        // invalidation removes the item at once). One atomic load when
        // nothing was asked.
        applyRemoteRequests()
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
        unowned(unsafe) let previous = runningMode
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

    /// The guide's sequence, pass after pass until a run result is reached
    /// (steps 1 and 10, `entry` and `exit`, are notified by the caller):
    private func runPasses(_ ms: ModeState, deadline: UInt64, stopAfterHandle: Bool) -> RunResult {
        if stopRequested.exchange(false, ordering: .acquiringAndReleasing) { return .stopped }
        let pollOnly = deadline == 0
        while true {
            if readyNext != readyCount, let result = runShortPasses(ms, deadline: deadline, stopAfterHandle: stopAfterHandle) {
                return result
            }
            openWakeUpWindow()
            let postsAtStart = ownerPosts
            if applyRemoteRequests() && isEmpty(ms) { return .finished }
            notify(ms, .beforeTimers)                                                   // 2
            notify(ms, .beforeSources)                                                  // 3
            var performWake = runPerforms(ms)
            var handled = fireSignalledCustomSources(ms, stopAfterHandle: stopAfterHandle)  // 4
            if handled { performWake = min(performWake, runPerforms(ms)) }
            // CF's `poll`: a pass that handled a custom source, or a run
            // with a zero timeout, does not wait and notifies neither
            // beforeWaiting nor afterWaiting. Any other pass notifies them,
            // even when it will not sleep: a perform request the owner
            // posted (which wrote no wake-up) or a stop pending (a stop
            // that came while the loop was awake wrote none either; the
            // window's exchange made it visible here) turn the wait into a
            // zero-timeout poll, as CF's wait returns at once for the
            // wake-up those write, but the observers are still called.
            let waits = !handled && !pollOnly
            let sleeps = waits && ownerPosts == postsAtStart && !stopRequested.load(ordering: .relaxed)
            var wake = WakeReasons()
            if !hasReadyPort(ms, probing: sleeps, wake: &wake) {                        // 5
                if waits { notify(ms, .beforeWaiting) }                                 // 6
                // (A beforeWaiting observer may have posted a request.)
                let until = sleeps && ownerPosts == postsAtStart ? nextWakeDeadline(ms, runDeadline: deadline, performWake: performWake) : 0
                wake.merge(waitForWork(ms, until: until))                               // 7
                if waits { notify(ms, .afterWaiting) }                                  // 8
            }
            handled = handleWake(ms, wake) || handled                                   // 9
            if let result = exitReason(ms, handled: handled, stopAfterHandle: stopAfterHandle, deadline: deadline) {
                return result
            }
        }
    }

    /// Passes that do nothing but dispatch the next port on the ready list
    /// (see `nextPassOnlyDispatches`), as long as the next one would; the
    /// run's result if one of them ends it, nil when the next pass is a full
    /// one. Not inlined: the full pass keeps its own code as it was.
    @inline(never)
    private func runShortPasses(_ ms: ModeState, deadline: UInt64, stopAfterHandle: Bool) -> RunResult? {
        while nextPassOnlyDispatches(ms) {
            let handled = dispatchReadyPort(ms)                                         // 9
            _ = runPerforms(ms)
            if let result = exitReason(ms, handled: handled, stopAfterHandle: stopAfterHandle, deadline: deadline) {
                return result
            }
        }
        return nil
    }

    /// Whether the next pass would do nothing but dispatch the next port on
    /// the ready list, so it can skip the checks that would find nothing:
    /// a port the last wait in this mode reported is left (so steps 5 to 8
    /// are skipped, as by any pass that finds a ready port), and steps 2 to
    /// 4 and the first half of 9 have nothing to do — no observer of
    /// `beforeTimers` or `beforeSources`, no request from another thread,
    /// no perform request queued, no custom source that may be signalled,
    /// no timer due and no rate-limit hold to end. What such a pass does
    /// then is the rest of the full pass: the dispatch, the perform requests
    /// it made, the end-of-pass checks.
    ///
    /// The wake-up window stays closed meanwhile: a poster on another thread
    /// queues its request without writing a wake-up, the check here sees it,
    /// and the full pass that runs it opens the window before it may sleep.
    @inline(__always)
    private func nextPassOnlyDispatches(_ ms: ModeState) -> Bool {
        let passObservers = RunLoopActivity.beforeTimers.rawValue | RunLoopActivity.beforeSources.rawValue
        guard readyListHasPort(ms), ms.observerMask & passObservers == 0,
              heldPortCount == 0, nextCustomRelease == .max,
              !remotePending.load(ordering: .relaxed), !performs.mayHavePending
        else { return false }
        if ms.customs.count > 0 && customsMayBeSignalled(ms, epoch: customSignalEpoch.load(ordering: .relaxed)) { return false }
        let timerDue = nextTimerDeadline(ms)
        return timerDue == .max || timerDue > nowNanoseconds
    }

    /// Wake-ups count from here until the loop wakes (CF's ignoreWakeUps):
    /// outside that window the loop is awake and checks everything before
    /// it sleeps again.
    ///
    /// An exchange, not a store: a poster queues its request, then exchanges
    /// the flag to true and writes a wake-up only if it was false; the pass
    /// opens the window, then checks the queues. With a plain store the
    /// checks could read the queues before the store was visible (a store
    /// followed by a load to another address may be reordered, on x86 by
    /// the store buffer), while the poster still read the flag as true: the
    /// request unseen, no wake-up written, the loop asleep. Both sides
    /// exchanging the one flag puts them in one order: either the poster's
    /// exchange comes after this one and writes the wake-up, or it comes
    /// before, and this one's acquire makes the request visible.
    @inline(__always)
    private func openWakeUpWindow() {
        _ = wakePending.exchange(false, ordering: .acquiringAndReleasing)
    }

    /// Step 5: whether a port is ready, so the pass skips the sleep and its
    /// notifications. Ports left on the ready list by the last wait are
    /// ready; otherwise checking costs a system call, so it is made only
    /// when someone could tell the difference (`probing`: the pass would
    /// sleep, and the mode has ports and before/afterWaiting observers).
    @inline(__always)
    private func hasReadyPort(_ ms: ModeState, probing: Bool, wake: inout WakeReasons) -> Bool {
        if readyListHasPort(ms) { return true }
        let waitObservers = RunLoopActivity.beforeWaiting.rawValue | RunLoopActivity.afterWaiting.rawValue
        guard probing && ms.portCount > 0 && ms.observerMask & waitObservers != 0 else { return false }
        wake = collectReadyPorts(ms, timeoutMilliseconds: 0)
        return readyListHasPort(ms)
    }

    /// When the sleep of step 7 must end: the run's deadline, the mode's
    /// next timer, the next delayed perform request, the end of a
    /// rate-limit hold, whichever comes first.
    @inline(__always)
    private func nextWakeDeadline(_ ms: ModeState, runDeadline: UInt64, performWake: UInt64) -> UInt64 {
        // Pairwise: the variadic `min` makes an array in unoptimised builds.
        min(min(runDeadline, nextTimerDeadline(ms)), min(min(performWake, nextPortRelease), nextCustomRelease))
    }

    /// Step 7: sleeps until a port is ready, `until` passes (the timerfd is
    /// armed to it) or the loop is woken; polls if `until` has come already
    /// (0: a pass that does not sleep).
    @inline(__always)
    private func waitForWork(_ ms: ModeState, until: UInt64) -> WakeReasons {
        if until == 0 || until <= nowNanoseconds { return collectReadyPorts(ms, timeoutMilliseconds: 0) }
        // On a manual clock only a wake-up or a port ends the sleep.
        if manualClock == nil {
            let deadline = until == .max ? 0 : until
            // (A periodic timerfd's next expiry is often the deadline already.)
            if deadline != poller.timerArmed { poller.armTimer(deadline, interval: periodicInterval(ms, until: until)) }
        }
        isWaitingFlag.store(true, ordering: .releasing)
        let wake = collectReadyPorts(ms, timeoutMilliseconds: -1)
        isWaitingFlag.store(false, ordering: .releasing)
        return wake
    }

    /// Step 9: what woke the loop. Due timers first (a flood of ready ports
    /// cannot starve them); otherwise one ready port. Ports not dispatched
    /// stay on the ready list (or ready in the kernel) for the next pass.
    /// Then the perform requests that became due, and the timer fd is
    /// drained: after the work it announced, off the latency path. (The
    /// wake-up eventfd is edge-triggered and never read.)
    /// Returns whether a source was handled.
    @inline(__always)
    private func handleWake(_ ms: ModeState, _ wake: WakeReasons) -> Bool {
        // From here on, wake-ups are not written (see `openWakeUpWindow`).
        wakePending.store(true, ordering: .releasing)
        var handled = false
        if !fireDueTimers(ms) && readyNext < readyCount {
            handled = dispatchReadyPort(ms)
        }
        _ = runPerforms(ms)
        if wake.timer { poller.timerFired() }
        return handled
    }

    /// Ends the rate-limit holds that are over and fires the mode's due
    /// timers; whether any timer was due. The clock is read only when
    /// something here depends on it.
    @inline(__always)
    private func fireDueTimers(_ ms: ModeState) -> Bool {
        let timerDue = nextTimerDeadline(ms)
        guard timerDue != .max || heldPortCount > 0 || nextCustomRelease != .max else { return false }
        let now = nowNanoseconds
        if heldPortCount > 0 { releaseHeldPorts(now: now) }
        if nextCustomRelease <= now { nextCustomRelease = .max }
        guard timerDue <= now else { return false }
        fireTimers(ms, now: now)
        return true
    }

    /// Why the run ends after this pass, checked in CF's order, or nil to
    /// go on with another pass.
    @inline(__always)
    private func exitReason(_ ms: ModeState, handled: Bool, stopAfterHandle: Bool, deadline: UInt64) -> RunResult? {
        if handled && stopAfterHandle { return .handledSource }
        if deadline == 0 || (deadline != .max && nowNanoseconds >= deadline) { return .timedOut }
        // A load first: the exchange is a locked read-modify-write of a
        // line other threads write, on every pass.
        if stopRequested.load(ordering: .relaxed) && stopRequested.exchange(false, ordering: .acquiringAndReleasing) { return .stopped }
        if isEmpty(ms) { return .finished }
        return nil
    }

    // MARK: Step 7: the ready list

    /// What one `epoll_wait` reported besides ports (those go on the ready list).
    struct WakeReasons {
        var wakeUp = false
        var timer = false

        mutating func merge(_ other: WakeReasons) {
            wakeUp = wakeUp || other.wakeUp
            timer = timer || other.timer
        }
    }

    /// A port on the ready list: its token as epoll returned it (slot and
    /// generation, checked when it is dispatched) and what was reported.
    typealias ReadyPort = bl_ready_port

    /// Waits on the mode's epoll set. The ports it returns become the ready
    /// list, replacing what was left of the last one, in the kernel's order,
    /// sorted by order only if the mode's ports have more than one. Each is
    /// checked when it is dispatched (a source that is gone by then, or
    /// already was, has a stale generation and is dropped), not here: most
    /// ready lists are dispatched whole, and this loop stays a few
    /// instructions a port.
    private func collectReadyPorts(_ ms: ModeState, timeoutMilliseconds: Int32) -> WakeReasons {
        // A handler that read a port's fd after the program closed it got
        // EBADF; the loop's duplicate keeps the file, so the port would be
        // reported ready for ever. The fast path: errno is left as the
        // failed read set it (calls that succeed do not change it), one
        // load per wait. Only a fast path: a handler's later failing call
        // changes errno, so the ends do not depend on it — a handler can
        // report it (`reportClosedFD()`), and `dispatch` checks a port's fd
        // itself every `closedFDCheckInterval` dispatches.
        if Kernel.lastErrorIsBadFD { endSourcesWithClosedFDs() }
        var r = WakeReasons()
        readyCount = 0
        readyNext = 0
        let n = poller.waitForKernelEvents(on: ms.epfd, timeoutMilliseconds: timeoutMilliseconds)
        var tags: UInt64 = 0
        let count = Int(bl_epoll_collect_ports(poller.eventBuffer, Int32(truncatingIfNeeded: n), readyList, Poller.tagMask, &tags))
        if tags != 0 {
            r.wakeUp = Poller.hasWakeUpTag(tags)
            r.timer = Poller.hasTimerTag(tags)
        }
        if count > 1 && ms.portOrdersVary { sortReadyList(count) }
        readyCount = count
        readyModeBit = ms.bit
        return r
    }

    /// Sorts the first `count` entries of the ready list by their ports'
    /// orders, stably.
    private func sortReadyList(_ count: Int) {
        func order(_ e: ReadyPort) -> Int {
            let slot = Int(e.slot)
            return slot >= 0 && slot < capacities.sources ? portOrders[slot] : .max
        }
        sortStably(readyList, count: count) { order($0) < order($1) }
    }

    /// Whether the ready list holds a port for `ms`. A list left by a wait
    /// in another mode is dropped (its fds are still ready in the kernel).
    @inline(__always)
    func readyListHasPort(_ ms: ModeState) -> Bool {
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
    ///
    /// The list is `ms`'s: every pass calls `readyListHasPort` before it
    /// gets here, which drops a list another mode's wait left, and a run
    /// call nested in a handler drops its own list when it ends.
    private func dispatchReadyPort(_ ms: ModeState) -> Bool {
        assert(readyNext == readyCount || readyModeBit == ms.bit, "a ready list of another mode")
        while readyNext < readyCount {
            let e = readyList[readyNext]
            readyNext &+= 1
            // No reference is taken: the port table's keeps the source
            // alive, and a source that leaves the loop while its dispatch
            // runs is kept alive until the dispatch ends (`dispatchDepth`).
            guard let u = ports.unretained(e.slot, e.generation) else { continue }
            let (dispatched, release, releaseOwner) = u._withUnsafeGuaranteedRef { p -> (Bool?, PortSource?, AnyObject?) in
                guard p.item.modeMask & ms.bit != 0, !p.heldInKernel, !p.remote.invalidationRequested else { return (nil, nil, nil) }
                p.dispatchDepth &+= 1
                let handled = dispatch(p, ms, events: e.events)
                p.dispatchDepth &-= 1
                // (A source leaving its loop always frees its slot, so
                // `keptOwner` is set only with `keptAlive`.)
                guard p.dispatchDepth == 0, p.keptAlive != nil else { return (handled, nil, nil) }
                // Invalidated while it ran: `invalidateAndWait()` may return now.
                p.settleIfPending()
                defer {
                    p.keptAlive = nil
                    p.keptOwner = nil
                }
                return (handled, p.keptAlive, p.keptOwner)
            }
            // A source that left the loop during its dispatch (and what it
            // belongs to) is released here.
            _ = (release, releaseOwner)
            if let dispatched { return dispatched }
        }
        return false
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
                __BOARDLOOP_IS_CALLING_OUT_TO_AN_OBSERVER__(o, activity)
                o.isFiring = false
                o.settleIfPending()
                if !o.repeats && o.item.isOn(self) { invalidateItem(o) }
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
    /// sources of equal order in the order they were signalled, as in CF. A
    /// mode without custom sources costs one comparison here, and a mode
    /// whose sources cannot be signalled (no signal since its last walk,
    /// which left none signalled) one atomic load.
    @inline(__always)
    private func fireSignalledCustomSources(_ ms: ModeState, stopAfterHandle: Bool) -> Bool {
        guard ms.customs.count > 0 else { return false }
        let epoch = customSignalEpoch.load(ordering: .acquiring)
        guard customsMayBeSignalled(ms, epoch: epoch) else { return false }
        ms.customScanEpoch = epoch
        ms.customsLeftSignalled = false
        return performSignalledCustomSources(ms, stopAfterHandle: stopAfterHandle)
    }

    /// Whether any of the mode's custom sources may be signalled: a signal
    /// came since its last walk (`epoch`, the current `customSignalEpoch`,
    /// moved on), or that walk left some signalled.
    @inline(__always)
    private func customsMayBeSignalled(_ ms: ModeState, epoch: UInt64) -> Bool {
        epoch != ms.customScanEpoch || ms.customsLeftSignalled
    }

    /// The signal stamp of the custom source in `slot` of a mode's list
    /// (0: not signalled). Read without taking a reference: no user code
    /// runs while the pass collects and sorts, so nothing can free it.
    @inline(__always)
    private func signalStamp(_ slot: Int32) -> UInt64 {
        customs.unretained(slot)!._withUnsafeGuaranteedRef { $0.signalStamp.load(ordering: .acquiring) }
    }

    private func performSignalledCustomSources(_ ms: ModeState, stopAfterHandle: Bool) -> Bool {
        let count = ms.customs.count
        var any = false
        for i in 0..<count where signalStamp(ms.customs[i]) != 0 {
            any = true
            break
        }
        if !any { return false }
        var handled = false
        var ready = 0
        withSnapshot(count, fill: { buffer in
            // The signalled ones, sorted by (order, stamp); the mode's list is
            // already sorted by order, so this only reorders equal orders.
            // (Stamps of collected sources do not change meanwhile: only the
            // owner clears them.)
            for i in 0..<count {
                let slot = ms.customs[i]
                guard signalStamp(slot) != 0 else { continue }
                buffer[ready] = slot
                ready += 1
            }
            sortStably(buffer, count: ready) { a, b in
                let x = customs.unretained(a)!, y = customs.unretained(b)!
                // (Closures, not key paths: a key path is an object, made at run time in debug builds.)
                let (xo, yo) = (x._withUnsafeGuaranteedRef { $0.order }, y._withUnsafeGuaranteedRef { $0.order })
                return xo < yo || (xo == yo && signalStamp(a) < signalStamp(b))
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
                        ms.customsLeftSignalled = true
                        continue
                    }
                }
                s.signalStamp.store(0, ordering: .releasing)
                s.performCount &+= 1
                workCount &+= 1
                s.performDepth &+= 1
                __BOARDLOOP_IS_CALLING_OUT_TO_A_CUSTOM_SOURCE__(s)
                s.performDepth &-= 1
                s.settleIfPending()
                handled = true
                if stopAfterHandle {
                    if i + 1 < ready { ms.customsLeftSignalled = true }
                    break
                }
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
        __BOARDLOOP_IS_CALLING_OUT_TO_A_PORT_SOURCE__(p, events)
        if portEvents & (BL_EPOLLHUP | BL_EPOLLERR) != 0 { endAfterHangup(p, events) }
        // Every `closedFDCheckInterval`-th dispatch of a port checks that
        // its fd is still the file the loop watches, and if not makes this
        // dispatch its last: a handler that keeps failing on a closed fd,
        // without reporting it or leaving EBADF in errno, cannot make the
        // loop dispatch it for ever. A power of two, 256: the test reads
        // only the low byte of the count the dispatch keeps anyway.
        if p.dispatchCount & PortSource.closedFDCheckMask == 0 { endIfFDClosed(p) }
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
        guard p.item.isOn(self), !p.item.invalidated else { return }
        p.endedByHangup = true
        invalidateItem(p)
    }
}

extension BoardRunLoop {
    /// Ends every port source whose `fd` the program closed while the
    /// source was scheduled (see `collectReadyPorts`), as a hangup does,
    /// and clears errno. Off the per-event path: only after an EBADF.
    @inline(never)
    func endSourcesWithClosedFDs() {
        var slot: Int32 = 0
        while Int(slot) < ports.capacity {
            if let p = ports[slot], p.registeredFD >= 0, !p.item.invalidated, p.fdIsNoLongerItsFile {
                endSourceWithClosedFD(p)
            }
            slot += 1
        }
        Kernel.clearLastError()
    }

    /// After every `closedFDCheckInterval`-th dispatch of `p` (see
    /// `dispatch`): ends it if its fd no longer refers to the file the
    /// loop watches. Off the per-event path.
    @inline(never)
    func endIfFDClosed(_ p: PortSource) {
        // (Its handler may have ended it, or taken it off the loop.)
        guard p.item.isOn(self), !p.item.invalidated else { return }
        // errno as the handler left it: a closed fd's fstat fails with
        // EBADF, which would otherwise reach the program after the run
        // returns (or look, at the next wait, like another handler's).
        if Kernel.preservingLastError({ p.fdIsNoLongerItsFile }) { endSourceWithClosedFD(p) }
    }

    /// Ends `p` because its `fd` was closed while it was scheduled
    /// (`endedByClosedFD`). Owner thread only.
    func endSourceWithClosedFD(_ p: PortSource) {
        guard p.item.isOn(self), !p.item.invalidated else { return }
        p.endedByClosedFD = true
        invalidateItem(p)
    }
}

extension bl_ready_port {
    @inline(__always) var slot: Int32 { Poller.slot(ofPortToken: token) }
    @inline(__always) var generation: UInt32 { Poller.generation(ofPortToken: token) }
}
