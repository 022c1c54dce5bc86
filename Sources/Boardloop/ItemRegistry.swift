/// An item kind as the loop's registry sees it: where its slots are, and
/// what it does when it joins or leaves a mode. Everything else — binding
/// to a loop, the common modes, removing, invalidating, asking — is written
/// once, below, for every kind.
protocol RegisteredItem: LoopItem {
    /// The kind's name in errors ("PortSource").
    static var kindName: String { get }
    /// The capacity a full table reports.
    static var capacity: RunLoopCapacity { get }
    /// Takes a slot in `loop`'s table of this kind; nil when it is full.
    func takeSlot(in loop: BoardRunLoop) -> (slot: Int32, generation: UInt32)?
    /// Frees the item's slot in `loop`'s table.
    func freeSlot(in loop: BoardRunLoop)
    /// After the item took a slot: what the kind needs before it enters a mode.
    func joined(_ loop: BoardRunLoop) throws(RunLoopError)
    /// Joins mode `ms` of `loop` (the item is not in it) and sets its bit in
    /// the item's mode mask.
    func enter(_ ms: ModeState, of loop: BoardRunLoop) throws(RunLoopError)
    /// Leaves mode `ms` of `loop` (the item was in it; its bit is cleared).
    func leave(_ ms: ModeState, of loop: BoardRunLoop)
    /// Before the item's slot is freed; returns what must stay alive until
    /// the item has left the loop.
    func leaving(_ loop: BoardRunLoop) -> AnyObject?
    /// After the item was invalidated on `loop`.
    func invalidated(on loop: BoardRunLoop)
}

extension RegisteredItem {
    func joined(_ loop: BoardRunLoop) throws(RunLoopError) {}
    func leaving(_ loop: BoardRunLoop) -> AnyObject? { nil }
    func invalidated(on loop: BoardRunLoop) {}
}

extension BoardRunLoop {
    /// Adds `x` to `mode` (or every common mode). Nothing changes if it fails.
    func addItem<T: RegisteredItem>(_ x: T, mode: RunLoopMode, operation: @autoclosure () -> String) throws(RunLoopError) {
        try checkOwner(operation())
        let ms = try targets(mode, creating: true)
        let fresh = try bind(x)
        if fresh {
            do throws(RunLoopError) { try x.joined(self) } catch {
                freeSlot(of: x)
                throw error
            }
        }
        let wasInCommonModes = x.item.inCommonModes
        if mode == .common { x.item.inCommonModes = true }
        var entered: UInt64 = 0
        do throws(RunLoopError) {
            for m in ms where x.item.modeMask & m.bit == 0 {
                try x.enter(m, of: self)
                entered |= m.bit
            }
        } catch {
            for m in ms where entered & m.bit != 0 { leave(x, m) }
            x.item.inCommonModes = wasInCommonModes
            if fresh { unbind(x) }
            throw error
        }
    }

    /// Removes `x` from `mode` (or every common mode); it leaves the loop
    /// when it is in no mode left.
    func removeItem<T: RegisteredItem>(_ x: T, mode: RunLoopMode, operation: @autoclosure () -> String) throws(RunLoopError) {
        try checkOwner(operation())
        guard x.item.isOn(self) else { return }
        if mode == .common { x.item.inCommonModes = false }
        for m in try targets(mode, creating: false) { leave(x, m) }
        if x.item.modeMask == 0 && !x.item.inCommonModes { unbind(x) }
    }

    /// Invalidates `x`: it leaves every mode and the loop. Owner thread only
    /// (public `invalidate()`s route here through `routeChange`).
    func invalidateItem<T: RegisteredItem>(_ x: T) {
        guard x.item.isOn(self) else { return }
        itemBindingLock.withLock { x.item.invalidated = true }
        x.item.inCommonModes = false
        for m in modeStates.prefix(usedModes) { leave(x, m) }
        // What the item kept alive (a port's owner) outlives the hook that tells it.
        let keptAlive = x.leaving(self)
        freeSlot(of: x)
        x.invalidated(on: self)
        // For `invalidateAndWait()`: the handler is not called again; if it
        // is running (this came from it, or from a run nested in it), once it returns.
        x.settleOrDefer()
        withExtendedLifetime(keptAlive) {}
    }

    func containsItem<T: RegisteredItem>(_ x: T, mode: RunLoopMode) -> Bool {
        guard x.item.isOn(self) else { return false }
        if mode == .common { return x.item.inCommonModes }
        guard let ms = modeState(named: mode) else { return false }
        return x.item.modeMask & ms.bit != 0
    }

    /// Makes `x` join mode `ms` if it is not in it (a mode added to the common set).
    func enter<T: RegisteredItem>(_ x: T, _ ms: ModeState) throws(RunLoopError) {
        guard x.item.modeMask & ms.bit == 0 else { return }
        try x.enter(ms, of: self)
    }

    private func leave<T: RegisteredItem>(_ x: T, _ ms: ModeState) {
        guard x.item.modeMask & ms.bit != 0 else { return }
        x.item.modeMask &= ~ms.bit
        x.leave(ms, of: self)
    }

    // MARK: Binding

    /// Gives `x` a slot on this loop; false if it has one already.
    private func bind<T: RegisteredItem>(_ x: T) throws(RunLoopError) -> Bool {
        if hasEnded { throw .loopEnded(thread: ownerThread) }
        return try itemBindingLock.withLock { () throws(RunLoopError) -> Bool in
            if x.item.invalidated || x.remote.invalidationRequested { throw .invalidated(item: T.kindName) }
            if let loop = x.item.loop {
                if loop !== self { throw .belongsToAnotherLoop(item: T.kindName) }
                return false
            }
            guard let (slot, generation) = x.takeSlot(in: self) else {
                throw .capacityExceeded(T.capacity, limit: limit(of: T.capacity))
            }
            x.item.loop = self
            x.item.slot = slot
            x.item.generation = generation
            x.item.seq = nextSeq
            nextSeq += 1
            x.item.modeMask = 0
            x.item.inCommonModes = false
            return true
        }
    }

    /// Takes `x` off the loop: what it holds is let go, its slot is freed.
    private func unbind<T: RegisteredItem>(_ x: T) {
        let keptAlive = x.leaving(self)
        freeSlot(of: x)
        _ = keptAlive  // released here, after the item left the loop
    }

    private func freeSlot<T: RegisteredItem>(of x: T) {
        itemBindingLock.withLock {
            x.freeSlot(in: self)
            x.item.detach()
        }
    }

    private func limit(of capacity: RunLoopCapacity) -> Int {
        switch capacity {
        case .sources: capacities.sources
        case .timers: capacities.timers
        case .observers: capacities.observers
        case .modes: capacities.modes
        case .pendingPerforms: capacities.pendingPerforms
        case .eventsPerWait: capacities.eventsPerWait
        }
    }

    var sourceCount: Int { customs.count + ports.count }
}
