/// A fixed-capacity table of items addressed by slot, reserved at creation.
/// Each slot carries a generation that changes whenever the slot is freed, so
/// a reference (slot, generation) taken earlier is recognised as stale after
/// the item was removed and the slot reused (SwiftNIO's registration ids).
struct SlotTable<Item: AnyObject>: ~Copyable {
    let capacity: Int
    private let items: UnsafeMutablePointer<Item?>
    private let generations: UnsafeMutablePointer<UInt32>
    private let free: UnsafeMutablePointer<Int32>
    private var freeCount: Int

    init(capacity: Int) {
        self.capacity = capacity
        items = .allocate(capacity: max(capacity, 1))
        items.initialize(repeating: nil, count: max(capacity, 1))
        generations = .allocate(capacity: max(capacity, 1))
        generations.initialize(repeating: 1, count: max(capacity, 1))
        free = .allocate(capacity: max(capacity, 1))
        // Hand out low slots first.
        for i in 0..<capacity { free[i] = Int32(capacity - 1 - i) }
        freeCount = capacity
    }

    deinit {
        items.deinitialize(count: max(capacity, 1))
        items.deallocate()
        generations.deallocate()
        free.deallocate()
    }

    var count: Int { capacity - freeCount }

    /// Stores `item` in a free slot; nil when the table is full.
    mutating func insert(_ item: Item) -> (slot: Int32, generation: UInt32)? {
        guard freeCount > 0 else { return nil }
        freeCount -= 1
        let slot = free[freeCount]
        items[Int(slot)] = item
        return (slot, generations[Int(slot)])
    }

    /// Frees `slot`; its generation moves on so stale references miss.
    mutating func remove(_ slot: Int32) {
        _ = take(slot)
    }

    /// Frees `slot` like `remove`, handing the table's reference to the
    /// caller instead of releasing it.
    mutating func take(_ slot: Int32) -> Item? {
        let i = Int(slot)
        let taken = (items + i).move()
        (items + i).initialize(to: nil)
        guard let item = taken else { return nil }
        generations[i] = (generations[i] &+ 1) & 0x3FFF_FFFF
        if generations[i] == 0 { generations[i] = 1 }
        free[freeCount] = slot
        freeCount += 1
        return item
    }

    @inline(__always) subscript(slot: Int32) -> Item? { items[Int(slot)] }

    /// The item in `slot` if it is still the one `generation` named, without
    /// taking a reference: the table's own keeps it alive until its slot is
    /// freed, so the caller must make sure that cannot happen while it uses
    /// the item (see `PortSource.dispatchDepth`).
    @inline(__always) func unretained(_ slot: Int32, _ generation: UInt32) -> Unmanaged<Item>? {
        guard slot >= 0, Int(slot) < capacity, generations[Int(slot)] == generation else { return nil }
        return UnsafeRawPointer(items + Int(slot)).load(as: Unmanaged<Item>?.self)
    }

    /// The item in `slot`, without taking a reference (see the other
    /// `unretained`), for a slot known to be current.
    @inline(__always) func unretained(_ slot: Int32) -> Unmanaged<Item>? {
        UnsafeRawPointer(items + Int(slot)).load(as: Unmanaged<Item>?.self)
    }

    /// Calls `body` for every occupied slot (owner-only bookkeeping, not the run path).
    func forEach(_ body: (Item) -> Void) {
        for i in 0..<capacity { if let item = items[i] { body(item) } }
    }
}

/// Slots kept in a fixed buffer sorted by a caller-given order (sources and
/// observers of one mode, sorted by their order and then by insertion).
struct OrderedSlots {
    private(set) var buffer: UnsafeMutablePointer<Int32>
    let capacity: Int
    private(set) var count = 0

    init(buffer: UnsafeMutablePointer<Int32>, capacity: Int) {
        self.buffer = buffer
        self.capacity = capacity
    }

    /// Inserts `slot` before the first element `goesAfter` says it precedes.
    /// The caller has checked capacity (the mode can hold every item of the loop).
    mutating func insert(_ slot: Int32, precedes: (Int32) -> Bool) {
        precondition(count < capacity, "boardloop: ordered slot list overflow")
        var i = count
        while i > 0 && precedes(buffer[i - 1]) {
            buffer[i] = buffer[i - 1]
            i -= 1
        }
        buffer[i] = slot
        count += 1
    }

    mutating func remove(_ slot: Int32) {
        var i = 0
        while i < count && buffer[i] != slot { i += 1 }
        guard i < count else { return }
        while i + 1 < count {
            buffer[i] = buffer[i + 1]
            i += 1
        }
        count -= 1
    }

    @inline(__always) subscript(i: Int) -> Int32 { buffer[i] }
}
