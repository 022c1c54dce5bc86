import CLinux

extension BoardRunLoop {
    // A port's interest: the events its registrations in every mode ask for.

    func portInterestChanged(_ source: PortSource) {
        guard !source.heldInKernel else { return }
        applyPortEvents(source, source.interestBits)
    }

    func applyPortEvents(_ source: PortSource, _ bits: UInt32) {
        let token = Poller.portToken(slot: source.item.slot, generation: source.item.generation)
        for ms in modeStates.prefix(usedModes) where source.item.modeMask & ms.bit != 0 {
            poller.modify(source.registeredFD, in: ms.epfd, events: bits, token: token)
        }
    }

    // Rate-limit holds of ports: the fd stays registered with no events, so
    // its readiness stays with the kernel until the hold ends.

    func holdPort(_ source: PortSource) {
        source.heldInKernel = true
        applyPortEvents(source, 0)
        heldPorts[heldPortCount] = source.item.slot
        heldPortCount += 1
        if source.limiter.heldUntil < nextPortRelease { nextPortRelease = source.limiter.heldUntil }
    }

    func dropHeld(_ slot: Int32) {
        var i = 0
        while i < heldPortCount && heldPorts[i] != slot { i += 1 }
        guard i < heldPortCount else { return }
        heldPortCount -= 1
        heldPorts[i] = heldPorts[heldPortCount]
    }

    func releaseHeldPort(_ source: PortSource) {
        guard source.heldInKernel else { return }
        dropHeld(source.item.slot)
        source.heldInKernel = false
        applyPortEvents(source, source.interestBits)
    }

    /// Releases every held port whose hold ended by `now`.
    func releaseHeldPorts(now: UInt64) {
        guard nextPortRelease <= now else { return }
        var next = UInt64.max
        var i = 0
        while i < heldPortCount {
            let slot = heldPorts[i]
            let p = ports[slot]!
            if p.limiter.heldUntil <= now {
                heldPortCount -= 1
                heldPorts[i] = heldPorts[heldPortCount]
                p.heldInKernel = false
                applyPortEvents(p, p.interestBits)
            } else {
                if p.limiter.heldUntil < next { next = p.limiter.heldUntil }
                i += 1
            }
        }
        nextPortRelease = next
    }
}
