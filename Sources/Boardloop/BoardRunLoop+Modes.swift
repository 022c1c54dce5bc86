import CLinux

extension BoardRunLoop {
    // MARK: Modes

    func modeState(named mode: RunLoopMode) -> ModeState? {
        var i = 0
        while i < usedModes {
            let ms = modeStates[i]
            if ms.mode == mode { return ms }
            i += 1
        }
        return nil
    }

    func modeState(creating mode: RunLoopMode) throws(RunLoopError) -> ModeState {
        if let ms = modeState(named: mode) { return ms }
        guard mode != .common else { throw .invalidArgument("the common-modes pseudo-mode is not a mode of its own") }
        guard usedModes < modeStates.count else { throw .capacityExceeded(.modes, limit: capacities.modes) }
        let ms = modeStates[usedModes]
        do { ms.epfd = try poller.makeSet(forMode: ms.index) } catch { throw .system(error) }
        ms.mode = mode
        usedModes += 1
        return ms
    }

    /// Adds `mode` to the loop's common set: every item added to `.common`
    /// joins it (CF's `CFRunLoopAddCommonMode`). Owner thread only.
    public func addCommonMode(_ mode: RunLoopMode) throws(RunLoopError) {
        try checkOwner("BoardRunLoop.addCommonMode")
        let ms = try modeState(creating: mode)
        if ms.isCommon { return }
        ms.isCommon = true
        var c: [CustomSource] = [], p: [PortSource] = [], t: [RunLoopTimer] = [], o: [RunLoopObserver] = []
        customs.forEach { if $0.item.inCommonModes { c.append($0) } }
        ports.forEach { if $0.item.inCommonModes { p.append($0) } }
        timers.forEach { if $0.item.inCommonModes { t.append($0) } }
        observers.forEach { if $0.item.inCommonModes { o.append($0) } }
        c.sort { $0.item.seq < $1.item.seq }
        o.sort { $0.item.seq < $1.item.seq }
        for s in c { try enter(s, ms) }
        for s in p { try enter(s, ms) }
        for s in t { try enter(s, ms) }
        for s in o { try enter(s, ms) }
    }

    /// The mode states an add/remove names: the mode itself, or every common mode.
    func targets(_ mode: RunLoopMode, creating: Bool) throws(RunLoopError) -> [ModeState] {
        if mode == .common { return modeStates.prefix(usedModes).filter(\.isCommon) }
        if creating { return [try modeState(creating: mode)] }
        return modeState(named: mode).map { [$0] } ?? []
    }
}
