import CLinux
import Glibc

/// The loop's side of the kernel: one epoll set per mode, the wake-up
/// eventfd and the timerfd every set holds, the buffer `epoll_wait` fills,
/// and the encoding of the token each registration carries. Bookkeeping
/// (which source a token names, ready lists, modes) lives in the loop; this
/// type only talks to the kernel. Owner thread only, except `wake.signal()`.
final class Poller {
    /// Written by any thread to wake the owner out of `epoll_wait`.
    let wake: EventFD
    /// Armed (absolute, CLOCK_MONOTONIC) to the loop's next deadline.
    let timer: TimerFD
    let events: EventBuffer
    /// The epoll set of mode i, or -1 while the mode is unused.
    private let sets: UnsafeMutablePointer<Int32>
    private let setCapacity: Int
    /// The timerfd's next expiry (0: disarmed), as the last arm and the
    /// expirations read since then say.
    @exclusivity(unchecked) private(set) var timerArmed: UInt64 = 0
    /// The timerfd's period (0: it fires once).
    @exclusivity(unchecked) private var timerInterval: UInt64 = 0
    /// How many times the timerfd was re-armed.
    @exclusivity(unchecked) private(set) var armCount: UInt64 = 0
    /// How many times `epoll_wait` was called.
    @exclusivity(unchecked) private(set) var waitCount: UInt64 = 0

    init(modes: Int, eventsPerWait: Int) throws(SystemError) {
        let wake = try EventFD()
        let timer: TimerFD
        do { timer = try TimerFD() } catch {
            wake.close()
            throw error
        }
        self.wake = wake
        self.timer = timer
        events = EventBuffer(capacity: eventsPerWait)
        setCapacity = modes
        sets = .allocate(capacity: modes)
        sets.initialize(repeating: -1, count: modes)
    }

    deinit {
        for i in 0..<setCapacity { Kernel.close(sets[i]) }
        sets.deallocate()
        wake.close()
        timer.close()
    }

    // MARK: Tokens

    // What an epoll event is about: the token registered with its fd. A
    // port's token carries its slot (low word) and the slot's generation
    // (high word, below the tag bits), so an event for a registration that
    // has since gone (its slot reused) is recognised as stale.
    private static let wakeUpTag: UInt64 = 1 << 62
    private static let timerTag: UInt64 = 2 << 62
    static let tagMask: UInt64 = 3 << 62

    @inline(__always)
    static func portToken(slot: Int32, generation: UInt32) -> UInt64 {
        (UInt64(generation & 0x3FFF_FFFF) << 32) | UInt64(UInt32(bitPattern: slot))
    }

    @inline(__always)
    static func slot(ofPortToken token: UInt64) -> Int32 { Int32(bitPattern: UInt32(truncatingIfNeeded: token)) }

    @inline(__always)
    static func generation(ofPortToken token: UInt64) -> UInt32 { UInt32(truncatingIfNeeded: token >> 32) }

    /// Whether tags ORed together (see `bl_epoll_collect_ports`) hold the
    /// wake-up's or the timer's.
    @inline(__always)
    static func hasWakeUpTag(_ tags: UInt64) -> Bool { tags & wakeUpTag != 0 }
    @inline(__always)
    static func hasTimerTag(_ tags: UInt64) -> Bool { tags & timerTag != 0 }

    /// The buffer the last wait filled.
    @inline(__always)
    var eventBuffer: UnsafeMutableRawPointer { events.raw }

    // MARK: Sets and registrations

    /// Makes the epoll set of mode `index`, holding the wake-up eventfd and
    /// the timerfd; returns its descriptor.
    func makeSet(forMode index: Int) throws(SystemError) -> Int32 {
        let ep = try Epoll.create()
        do {
            // Edge-triggered: every write reports the wake-up once, so the
            // loop never reads the counter back (a system call per wake-up
            // saved). A mode's set not waited on meanwhile keeps one
            // report, which costs that mode one extra pass when it runs.
            try Epoll.add(ep, wake.fd, events: BL_EPOLLIN | BL_EPOLLET, data: Self.wakeUpTag)
            try Epoll.add(ep, timer.fd, events: BL_EPOLLIN, data: Self.timerTag)
        } catch {
            Kernel.close(ep)
            throw error
        }
        sets[index] = ep
        return ep
    }

    /// Adds `fd` (a descriptor the loop owns) to `set` with `token`. A bad
    /// descriptor is thrown, not trapped: it came from the user (`userFD`,
    /// which the error names).
    func register(_ fd: Int32, in set: Int32, events: UInt32, token: UInt64, userFD: Int32) throws(SystemError) {
        _ = try Kernel.call("epoll_ctl(ADD)", fd: userFD, trapOnBadFD: false) {
            bl_epoll_ctl(set, BL_EPOLL_CTL_ADD, fd, events, token)
        }
    }

    /// Changes the events of a registered fd. With valid arguments this
    /// cannot fail unless the fd was closed, which removed it from the set
    /// already: the result is ignored.
    @inline(__always)
    func modify(_ fd: Int32, in set: Int32, events: UInt32, token: UInt64) {
        _ = bl_epoll_ctl(set, BL_EPOLL_CTL_MOD, fd, events, token)
    }

    /// Removes `fd` from `set` (see `Epoll.remove`).
    @inline(__always)
    func unregister(_ fd: Int32, from set: Int32) {
        Epoll.remove(set, fd)
    }

    // MARK: Waiting

    /// Blocks in `epoll_wait` on `set` (`timeoutMilliseconds` -1: until an
    /// event; 0: poll) and returns how many events it reported (0 after
    /// EINTR). Never inlined, so profiles and backtraces show a sleeping loop
    /// here, under one name.
    @inline(never)
    func waitForKernelEvents(on set: Int32, timeoutMilliseconds: Int32) -> Int {
        waitCount &+= 1
        do {
            return try Epoll.wait(set, into: events, timeoutMilliseconds: timeoutMilliseconds)
        } catch {
            fatalError("boardloop: epoll_wait failed: \(String(cString: strerror(error.errno))); this is a bug in boardloop")
        }
    }

    /// Arms the timerfd to `deadline` (0: disarms), then every `interval`
    /// after it (0: once). The caller skips the call (a system call) when
    /// the next expiry is `deadline` already: a periodic timerfd whose next
    /// expiry is what the loop wants is kept even when the loop asks for one
    /// fire, as a later sleep re-arms it if it wants another deadline and a
    /// fire nobody wanted cannot come before that sleep.
    @inline(__always)
    func armTimer(_ deadline: UInt64, interval: UInt64) {
        timer.arm(absolute: deadline, interval: interval)
        timerArmed = deadline
        timerInterval = deadline == 0 ? 0 : interval
        armCount &+= 1
    }

    /// After the timerfd fired: reads it back. A one-shot timerfd is
    /// disarmed now; a periodic one's next expiry is as many periods on as
    /// expirations were read (the kernel keeps it on its grid), so a sleep
    /// until then needs no re-arm: a periodic fire costs two system calls,
    /// the wait and this read.
    @inline(__always)
    func timerFired() {
        let expirations = timer.drain()
        if timerInterval == 0 {
            timerArmed = 0
        } else {
            timerArmed &+= expirations &* timerInterval
        }
    }
}
