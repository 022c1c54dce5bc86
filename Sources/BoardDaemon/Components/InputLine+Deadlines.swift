import Boardloop
import BoardloopGPIO
import Glibc

/// An input line's deadlines on its one timer: the filters', the triggers',
/// the gesture group's and a held hold's repeats, fired in time order
/// before any later edge; and the drain of a held line's kernel events.
extension InputLine {
    var nextDeadline: UInt64 {
        var d = filters.deadline
        if hasGesture { d = min(d, gesture.unsafelyUnwrapped.deadline) }
        var k = 0
        while k < triggers.count {
            d = min(d, triggers[k].deadline)
            k += 1
        }
        if gestureRepeats {
            k = 0
            while k < gestureReactions.count {
                d = min(d, gestureReactions[k].deadline)
                k += 1
            }
        }
        return d
    }

    /// How many deadlines one `advance` fires at most. Each deadline moves
    /// on or clears, so the loop ends; the bound keeps one call from
    /// holding the loop for long (a short hold repeat on a line that was
    /// held back for hours). Past it the line's timer, armed at the next
    /// (past) deadline, fires the rest in the next pass (an edge that asked
    /// for the advance is processed first), and the log says so.
    static let deadlinesPerAdvance = 100_000

    /// Fires every deadline up to `t`, earliest first (a line without
    /// deadlines checks one flag, inline on each edge).
    @inline(__always) func advance(to t: UInt64) {
        if tracksDeadlines { fireDeadlines(upTo: t) }
    }

    private func fireDeadlines(upTo t: UInt64) {
        var handled = 0
        while true {
            let d = nextDeadline
            if d == never || d > t { return }
            if handled == Self.deadlinesPerAdvance {
                events.deadlinesDeferred(line: id, handled: handled)
                return
            }
            handled += 1
            if filters.deadline == d {
                if let l = filters.deadlinePassed(at: d, reported: level) { report(l, at: d) }
            } else if hasGesture && gesture.unsafelyUnwrapped.deadline == d {
                if let g = gesture!.deadlinePassed() { fireGesture(g, at: d) }
            } else {
                var k = 0
                var found = false
                while k < triggers.count {
                    if triggers[k].deadline == d {
                        if triggers[k].deadlinePassed() {
                            rt.fire(reaction: triggers[k].reaction, line: self, rising: true, at: d, repeat: triggers[k].repeatCount)
                        }
                        found = true
                        break
                    }
                    k += 1
                }
                k = 0
                while !found && k < gestureReactions.count {
                    if gestureReactions[k].deadline == d {
                        let count = gestureReactions[k].repeatDue()
                        rt.fire(reaction: gestureReactions[k].reaction, line: self, rising: true, at: d, repeat: count)
                        break
                    }
                    k += 1
                }
            }
            if !rt.admits(config.priority) { return }  // a reaction started a mode that holds the line
        }
    }

    func arm() {
        guard let timer else { return }
        let d = nextDeadline
        if d == armedAt { return }
        armedAt = d
        if d == never { timer.disarm() } else { timer.arm(at: MonotonicInstant(nanoseconds: d)) }
    }

    func rearmSoon() {
        guard let timer else { return }
        armedAt = rt.nowNanoseconds &+ 1_000_000
        timer.arm(at: MonotonicInstant(nanoseconds: armedAt))
    }

    /// The drain timer. It fires in a pass another timer (a task's) woke the
    /// loop for, usually before that timer: it fell due earlier, within its
    /// tolerance. The read itself is posted as a work item, which the loop
    /// runs after the pass's timers, so the task's work comes first and the
    /// drain's batch (up to 1.5 periods of a flood) does not delay it.
    func drainTimerFired() {
        guard drainToken == nil else { return }
        if let item = drainItem, let token = try? rt.loop.perform(item) {
            drainToken = token
        } else {
            drain()  // the perform queue is full: read now
        }
    }

    /// Whatever the kernel holds for the line goes into the ring (through
    /// `handle`, which stashes while the line is held).
    func drain() {
        drainToken = nil
        guard drainTimer != nil else { return }
        if request.readPendingEvents() > 0 { drainReads &+= 1 }
    }

    func timerFired() {
        armedAt = never
        guard rt.admits(config.priority) else { return }
        let tr = rt.tracer
        let t0 = tr == nil ? 0 : rt.nowNanoseconds
        deliverHeldThenAdvance()
        if let tr { tr.slice(.lineTimer, id, from: t0, to: rt.nowNanoseconds) }
    }

    /// Whether events wait in the kernel for this line (a zero-timeout poll).
    func kernelHasEvents() -> Bool {
        request.eventSource != nil && request.hasPendingEvents
    }
}
