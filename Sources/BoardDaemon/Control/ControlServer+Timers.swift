import BoardControl
import Boardloop
import BoardSupport
import CDaemon
import Glibc
import Logging

/// The control server's two timers: a client's idle timeout, and the timed
/// drives of presses (a held press's release, each click's press and
/// release, a flood's edges) and a trace's end.
extension ControlServer {
    func armIdle() {
        guard let t = idleTimer else { return }
        if let first = clients.lazy.map(\.idleAt).min() { t.arm(at: MonotonicInstant(nanoseconds: first)) } else { t.disarm() }
    }

    func idleTick() {
        let now = loop.now.nanoseconds
        for c in clients where c.idleAt <= now {
            counters.idle += 1
            let limit = c.heardFrom ? options.idleTimeout : min(options.idleTimeout, options.firstRequestTimeout)
            reply(
                error(
                    id: .null, "idle",
                    "no complete request for \(DurationText.format(limit))\(c.heardFrom ? "" : " after connecting"); closing the connection"),
                to: c)
            close(c)
        }
        armIdle()
    }

    // MARK: Scheduled drives

    /// Drives in flight at most (a press's or a click's presses and
    /// releases): a request that would pass it is refused with `busy`.
    static let maxScheduled = 1024

    /// Refuses a request that would schedule `n` more drives than there is
    /// room for.
    func roomToSchedule(_ n: Int) throws {
        guard scheduled.count + n <= Self.maxScheduled else {
            throw Failure(
                "busy", "\(scheduled.count) presses and releases are in flight (at most \(Self.maxScheduled)); try again when they end")
        }
    }

    func schedule(_ a: ScheduledAction, at: UInt64) {
        nextScheduleOrder += 1
        let s = Scheduled(at: at, order: nextScheduleOrder, action: a)
        // In order of time, then of scheduling (a binary search: no sort).
        var lo = 0, hi = scheduled.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if (scheduled[mid].at, scheduled[mid].order) <= (s.at, s.order) { lo = mid + 1 } else { hi = mid }
        }
        scheduled.insert(s, at: lo)
        armDrive()
    }

    /// Arms the drive timer for the soonest timed drive or flood edge.
    func armDrive() {
        var next = scheduled.first?.at ?? UInt64.max
        for f in floods { if let d = f.nextDue { next = min(next, d) } }
        if next == UInt64.max { driveTimer?.disarm() } else { driveTimer?.arm(at: MonotonicInstant(nanoseconds: next)) }
    }

    func driveTick() {
        let now = loop.now.nanoseconds
        while let first = scheduled.first, first.at <= now {
            scheduled.removeFirst()
            perform(first.action)
        }
        floodTick(now)
        armDrive()
    }
}
