import CLinux
import Glibc

extension BoardRunLoop {
    // MARK: Changes from other threads

    /// Queues `x` for the owner; `itemBindingLock` is held by the caller.
    func enqueueRemoteLocked(_ x: any LoopItem) {
        // Cannot overflow: every item of the loop is queued at most once
        // (only the request that found no bits set enqueues), and the queue
        // holds as many entries as the loop holds items.
        remoteQueue[(remoteHead + remoteCount) % remoteCapacity] = x
        remoteCount += 1
        remotePending.store(true, ordering: .releasing)
        wakeUp()
    }

    /// Applies what other threads asked for since the last pass; one atomic
    /// load when nothing was asked. Returns whether anything was applied.
    @inline(__always)
    @discardableResult
    func applyRemoteRequests() -> Bool {
        guard remotePending.load(ordering: .acquiring) else { return false }
        drainRemoteRequests()
        return true
    }

    private func drainRemoteRequests() {
        while true {
            // One item at a time, applied outside the lock: applying may call
            // user code (a custom source's cancel callback), which may
            // invalidate other items.
            let next = itemBindingLock.withLock { () -> (item: any LoopItem, ops: UInt32)? in
                guard remoteCount > 0 else {
                    remotePending.store(false, ordering: .releasing)
                    return nil
                }
                let x = remoteQueue[remoteHead]!
                remoteQueue[remoteHead] = nil
                remoteHead = (remoteHead + 1) % remoteCapacity
                remoteCount -= 1
                let ops = x.remote.ops.exchange(0, ordering: .acquiringAndReleasing)
                if !x.item.isOn(self) {
                    // Removed by the owner meanwhile: on another loop now, the
                    // request goes there; on none, it applies to the item itself.
                    if let other = x.item.loop {
                        let before = x.remote.ops.bitwiseOr(ops, ordering: .acquiringAndReleasing).oldValue
                        if before == 0 { other.enqueueRemoteLocked(x) }
                    } else {
                        x.applyUnscheduled(ops)
                        // (Its callouts ran on this thread, the owner's.)
                        if ops & RemoteRequests.invalidate != 0 { x.settleOrDefer() }
                    }
                    return (x, 0)
                }
                return (x, ops)
            }
            guard let next else { return }
            if next.ops != 0 { next.item.applyRemote(next.ops, on: self) }
        }
    }

    // MARK: The end of a loop

    /// Ends the loop: every item still scheduled is invalidated — custom
    /// sources get their cancel callbacks, port sources leave the epoll sets
    /// — so the loop releases them and whatever their handlers hold (a GPIO
    /// request holding its lines, a message port, the loop itself when a
    /// handler refers to it); queued perform requests are dropped, their
    /// waiters released with `.loopEnded`; later `perform`s and `add`s throw
    /// `.loopEnded`. Idempotent.
    ///
    /// A loop ends by itself when its thread exits (the main thread's never
    /// does). Call this for a loop you are done with while its thread goes
    /// on — a standalone loop whose handlers refer to it would otherwise
    /// keep itself alive. Owner thread only; not from inside a run call.
    public func end() throws(RunLoopError) {
        try checkOwner("BoardRunLoop.end")
        if runDepth > 0 { throw .invalidArgument("BoardRunLoop.end() inside a run call of the same loop; end it after the run returns") }
        endOnOwnerThread()
    }

    /// `end()` without the checks, for the thread-exit path.
    func endOnOwnerThread() {
        guard !endedFlag.exchange(true, ordering: .acquiringAndReleasing) else { return }
        performs.close()
        applyRemoteRequests()
        var slot: Int32 = 0
        while Int(slot) < ports.capacity {
            if let p = ports[slot] { invalidateItem(p) }
            if let c = customs[slot] { invalidateItem(c) }
            slot += 1
        }
        slot = 0
        while Int(slot) < timers.capacity {
            if let t = timers[slot] { invalidateItem(t) }
            slot += 1
        }
        slot = 0
        while Int(slot) < observers.capacity {
            if let o = observers[slot] { invalidateItem(o) }
            slot += 1
        }
    }
}

extension CustomSource: LoopItem {
    var isInCallout: Bool { performDepth > 0 }

    func applyRemote(_ ops: UInt32, on loop: BoardRunLoop) {
        if ops & RemoteRequests.invalidate != 0 { loop.invalidateItem(self) }
    }

    func applyUnscheduled(_ ops: UInt32) {
        if ops & RemoteRequests.invalidate != 0 { item.invalidated = true }
    }
}

extension PortSource: LoopItem {
    var isInCallout: Bool { dispatchDepth > 0 }

    func applyRemote(_ ops: UInt32, on loop: BoardRunLoop) {
        if ops & RemoteRequests.closedFD != 0 {
            loop.endSourceWithClosedFD(self)
            return
        }
        if ops & RemoteRequests.invalidate != 0 {
            loop.invalidateItem(self)
            return
        }
        if ops & RemoteRequests.changeInterest != 0 {
            interestBits = remote.interest.load(ordering: .acquiring)
            loop.portInterestChanged(self)
        }
    }

    func applyUnscheduled(_ ops: UInt32) {
        if ops & RemoteRequests.invalidate != 0 { item.invalidated = true }
        if ops & RemoteRequests.changeInterest != 0 { interestBits = remote.interest.load(ordering: .acquiring) }
    }
}

extension RunLoopTimer: LoopItem {
    var isInCallout: Bool { fireDepth > 0 }

    func applyRemote(_ ops: UInt32, on loop: BoardRunLoop) {
        if ops & RemoteRequests.invalidate != 0 {
            loop.invalidateItem(self)
            return
        }
        if ops & RemoteRequests.moveFireDate != 0 {
            setFireDate(remote.fireDate.load(ordering: .acquiring), on: loop)
        }
    }

    func applyUnscheduled(_ ops: UInt32) {
        if ops & RemoteRequests.invalidate != 0 { item.invalidated = true }
        if ops & RemoteRequests.moveFireDate != 0 {
            fireNanoseconds = remote.fireDate.load(ordering: .acquiring)
            pendingSkipped = 0
        }
    }
}

extension RunLoopObserver: LoopItem {
    var isInCallout: Bool { isFiring }

    func applyRemote(_ ops: UInt32, on loop: BoardRunLoop) {
        if ops & RemoteRequests.invalidate != 0 { loop.invalidateItem(self) }
    }

    func applyUnscheduled(_ ops: UInt32) {
        if ops & RemoteRequests.invalidate != 0 { item.invalidated = true }
    }
}
