/// One mode of a loop: its items and its own epoll instance. All buffers are
/// reserved when the loop is made (a mode can hold every item of the loop), so
/// adding an item to a mode never allocates and never overruns.
final class ModeState {
    let index: Int
    /// nil while the mode slot is unused.
    @exclusivity(unchecked) var mode: RunLoopMode?
    /// The mode's epoll set (owned by the loop's `Poller`): the loop's
    /// wake-up eventfd, its timerfd and the fds of the mode's port sources.
    /// -1 until the mode is first used.
    @exclusivity(unchecked) var epfd: Int32 = -1
    /// In the loop's common-modes set.
    @exclusivity(unchecked) var isCommon = false
    /// Custom sources, sorted by (order, insertion).
    @exclusivity(unchecked) var customs: OrderedSlots
    /// `customSignalEpoch` as of the last walk of the custom sources, and
    /// whether a walk since then left any of them signalled (held by a rate
    /// limit, or after a handled source ended the run), or a source joined.
    @exclusivity(unchecked) var customScanEpoch: UInt64 = .max
    @exclusivity(unchecked) var customsLeftSignalled = false
    /// Observers, sorted by (order, insertion).
    @exclusivity(unchecked) var observers: OrderedSlots
    /// Union of the activities the mode's observers ask for.
    @exclusivity(unchecked) var observerMask: UInt32 = 0
    @exclusivity(unchecked) var timers: TimerHeap
    /// The mode's next timer deadline as of the loop's `timerEpoch`
    /// `timerDeadlineEpoch` (see `nextTimerDeadline`).
    @exclusivity(unchecked) var timerDeadline: UInt64 = .max
    /// The repeat interval of the timer `timerDeadline` is the fire date of
    /// (0: a one-shot timer's, or a tolerance window's end).
    @exclusivity(unchecked) var timerDeadlineInterval: UInt64 = 0
    @exclusivity(unchecked) var timerDeadlineEpoch: UInt64 = .max
    @exclusivity(unchecked) var portCount = 0
    /// The lowest and highest order of the ports that joined the mode since
    /// it last had none: the ready list is sorted only when they differ.
    @exclusivity(unchecked) var portOrderLow = Int.max
    @exclusivity(unchecked) var portOrderHigh = Int.min
    var portOrdersVary: Bool { portOrderLow < portOrderHigh }

    private let customBuffer: UnsafeMutablePointer<Int32>
    private let observerBuffer: UnsafeMutablePointer<Int32>
    private let heapBuffer: UnsafeMutablePointer<Int32>
    private let positionBuffer: UnsafeMutablePointer<Int32>

    init(index: Int, sources: Int, observers observerCapacity: Int, timers timerCapacity: Int) {
        self.index = index
        bit = 1 &<< UInt64(index)
        customBuffer = .allocate(capacity: max(sources, 1))
        observerBuffer = .allocate(capacity: max(observerCapacity, 1))
        heapBuffer = .allocate(capacity: max(timerCapacity, 1))
        positionBuffer = .allocate(capacity: max(timerCapacity, 1))
        customs = OrderedSlots(buffer: customBuffer, capacity: sources)
        observers = OrderedSlots(buffer: observerBuffer, capacity: observerCapacity)
        timers = TimerHeap(heap: heapBuffer, positions: positionBuffer, capacity: timerCapacity)
    }

    deinit {
        customBuffer.deallocate()
        observerBuffer.deallocate()
        heapBuffer.deallocate()
        positionBuffer.deallocate()
    }

    /// The mode's bit in item mode masks (kept, not computed: a pass tests it
    /// several times).
    let bit: UInt64

    /// No sources and no timers: nothing could ever wake a run in this mode.
    var hasNoSourcesOrTimers: Bool { portCount == 0 && timers.count == 0 && customs.count == 0 }
}

/// A stack of scratch space for the snapshots a pass takes (the observers to
/// call, the sources and timers to fire, the performs to run), reserved when
/// the loop is made. A handler may add or remove items, or run the loop again
/// (a nested run), while a snapshot is walked, so each walk works on its own
/// copy; nested runs push further down the stack.
struct ScratchStack: ~Copyable {
    private let base: UnsafeMutablePointer<Int32>
    let capacity: Int
    private(set) var top = 0

    init(capacity: Int) {
        self.capacity = capacity
        base = .allocate(capacity: max(capacity, 1))
    }

    deinit { base.deallocate() }

    /// Reserves `count` entries, or nil when the stack is exhausted (only with
    /// runs nested deeper than the loop was sized for).
    @inline(__always)
    mutating func push(_ count: Int) -> UnsafeMutablePointer<Int32>? {
        guard top + count <= capacity else { return nil }
        let p = base + top
        top += count
        return p
    }

    @inline(__always)
    mutating func pop(_ count: Int) { top -= count }
}

/// Sorts `count` entries in place, stably, by `precedes`: an insertion sort,
/// for the short lists a pass orders (the due timers, the signalled custom
/// sources, a ready list of ports of several orders); no allocation.
@inline(__always)
func sortStably<Entry>(_ buffer: UnsafeMutablePointer<Entry>, count: Int, by precedes: (Entry, Entry) -> Bool) {
    var i = 1
    while i < count {
        let s = buffer[i]
        var j = i
        while j > 0 && precedes(s, buffer[j - 1]) {
            buffer[j] = buffer[j - 1]
            j -= 1
        }
        buffer[j] = s
        i += 1
    }
}
