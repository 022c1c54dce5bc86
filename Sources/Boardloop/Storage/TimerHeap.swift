/// The sort key of a timer: its fire time, then its order, then insertion.
struct TimerKey {
    var fire: UInt64
    var order: Int
    var seq: UInt64
    /// fire + tolerance (saturating): the latest the timer may fire. Kept
    /// here, with `firing`, so the deadline walks read keys only, never a
    /// timer object.
    var latest: UInt64
    /// The timer's handler is running (a nested run does not fire it).
    var firing: Bool
    /// The repeat interval (0: fires once), so the loop can keep its
    /// timerfd periodic while this timer is the next to fire.
    var interval: UInt64

    init(fire: UInt64, tolerance: UInt64, order: Int, seq: UInt64, interval: UInt64 = 0) {
        self.fire = fire
        self.order = order
        self.seq = seq
        self.interval = interval
        latest = 0
        firing = false
        move(to: fire, tolerance: tolerance)
    }

    /// A timer at `.distantFuture` or later (disarmed: a re-armable timer
    /// waiting for its `arm`, a timer made for `.distantFuture`) will not
    /// fire, so its latest is never: a mode whose timers are all disarmed
    /// has no timer deadline, as a mode without timers has none, and its
    /// passes neither read the clock for them nor arm the timerfd.
    @inline(__always) mutating func move(to newFire: UInt64, tolerance: UInt64) {
        moveOnGrid(to: newFire, tolerance: tolerance)
        if newFire >= MonotonicInstant.distantFuture.nanoseconds { latest = .max }
    }

    /// `move` to a repeating timer's next grid point, without the disarm
    /// check: a repeat is never a disarm (a point at or past
    /// `.distantFuture`, after an interval of centuries, keeps its date,
    /// which no loop reaches).
    @inline(__always) mutating func moveOnGrid(to newFire: UInt64, tolerance: UInt64) {
        fire = newFire
        let end = newFire &+ tolerance
        latest = end < newFire ? .max : end
    }

    @inline(__always) static func < (a: TimerKey, b: TimerKey) -> Bool {
        if a.fire != b.fire { return a.fire < b.fire }
        if a.order != b.order { return a.order < b.order }
        return a.seq < b.seq
    }
}

/// A binary min-heap of timer slots for one mode, in fixed buffers. Each
/// entry remembers its own position (`positions[slot]`), as sd-event's prioq
/// does: removing or rescheduling a timer needs no search and no allocation.
struct TimerHeap {
    private let heap: UnsafeMutablePointer<Int32>
    private let positions: UnsafeMutablePointer<Int32>
    let capacity: Int
    private(set) var count = 0

    /// `heap` and `positions` each hold `capacity` entries, reserved by the loop.
    init(heap: UnsafeMutablePointer<Int32>, positions: UnsafeMutablePointer<Int32>, capacity: Int) {
        self.heap = heap
        self.positions = positions
        self.capacity = capacity
        positions.initialize(repeating: -1, count: capacity)
    }

    @inline(__always) func contains(_ slot: Int32) -> Bool { positions[Int(slot)] >= 0 }

    /// The slot with the smallest key.
    @inline(__always) var first: Int32? { count > 0 ? heap[0] : nil }

    @inline(__always) subscript(i: Int) -> Int32 { heap[i] }

    mutating func insert(_ slot: Int32, keys: UnsafePointer<TimerKey>) {
        precondition(count < capacity && !contains(slot), "boardloop: timer heap misuse")
        heap[count] = slot
        positions[Int(slot)] = Int32(count)
        count += 1
        siftUp(count - 1, keys)
    }

    mutating func remove(_ slot: Int32, keys: UnsafePointer<TimerKey>) {
        let p = Int(positions[Int(slot)])
        guard p >= 0 else { return }
        count -= 1
        positions[Int(slot)] = -1
        if p == count { return }
        let last = heap[count]
        heap[p] = last
        positions[Int(last)] = Int32(p)
        siftUp(p, keys)
        siftDown(Int(positions[Int(last)]), keys)
    }

    /// Restores heap order after `slot`'s key changed.
    mutating func update(_ slot: Int32, keys: UnsafePointer<TimerKey>) {
        let p = Int(positions[Int(slot)])
        guard p >= 0 else { return }
        siftUp(p, keys)
        siftDown(Int(positions[Int(slot)]), keys)
    }

    private mutating func siftUp(_ start: Int, _ keys: UnsafePointer<TimerKey>) {
        var i = start
        let slot = heap[i]
        while i > 0 {
            let parent = (i - 1) / 2
            let ps = heap[parent]
            guard keys[Int(slot)] < keys[Int(ps)] else { break }
            heap[i] = ps
            positions[Int(ps)] = Int32(i)
            i = parent
        }
        heap[i] = slot
        positions[Int(slot)] = Int32(i)
    }

    private mutating func siftDown(_ start: Int, _ keys: UnsafePointer<TimerKey>) {
        var i = start
        let slot = heap[i]
        while true {
            let left = 2 * i + 1
            guard left < count else { break }
            var child = left
            if left + 1 < count && keys[Int(heap[left + 1])] < keys[Int(heap[left])] { child = left + 1 }
            guard keys[Int(heap[child])] < keys[Int(slot)] else { break }
            heap[i] = heap[child]
            positions[Int(heap[i])] = Int32(i)
            i = child
        }
        heap[i] = slot
        positions[Int(slot)] = Int32(i)
    }
}
