import Boardloop
import BoardloopGPIO

/// Input lines of one loop, chip and priority that share one line request:
/// one fd, one port source, one read for the edges of all of them (events
/// carry their line's offset). The request's handler hands each line the
/// run of its own events, in the order they were read, with the losses found
/// for that line; everything else — filters, triggers, the held-event ring,
/// counters — stays the line's own (`InputLine`).
///
/// Lines share a request only where nothing per line needs its own source:
/// a line with a `rate_limit` (the engine limits a source) or a
/// `drain_every` (a drain timer's read) keeps a request of its own. The
/// lines of a group are held and admitted together (one priority, and all
/// drained as events come or none), so the modes the source is in are each
/// line's (`Daemon.inputGroups`).
///
/// Used only on its loop's thread.
final class InputGroup {
    let request: GPIOLineRequest
    /// Each line's handler (its `edgeHandler`), by index in the request; nil
    /// until the line joins. Fixed storage: swapping one (a trace starts)
    /// makes no uniqueness check.
    private let handlers: UnsafeMutableBufferPointer<Handler>
    /// A line's handler, wrapped: a closure stored in generic storage as it
    /// is would be re-abstracted at each load (a thunk allocated per batch
    /// in unoptimized builds); in a struct it is stored as called.
    private struct Handler {
        var call: ((GPIOEdgeEventBatch) -> Void)?
    }
    /// Each line's loss counts as last handed to it, by index.
    private let reportedLost: UnsafeMutableBufferPointer<UInt64>
    private let reportedFull: UnsafeMutableBufferPointer<UInt64>
    private var scheduled = false

    init(request: GPIOLineRequest) {
        self.request = request
        let n = request.count
        handlers = .allocate(capacity: n)
        handlers.initialize(repeating: Handler(call: nil))
        reportedLost = .allocate(capacity: n)
        reportedLost.initialize(repeating: 0)
        reportedFull = .allocate(capacity: n)
        reportedFull.initialize(repeating: 0)
        for i in 0..<n {
            reportedLost[i] = request.lostEvents(at: i)
            reportedFull[i] = request.fullFIFOReads(at: i)
        }
    }

    deinit {
        handlers.deinitialize().deallocate()
        reportedLost.deallocate()
        reportedFull.deallocate()
    }

    /// A line joins with its handler; the first to join puts the request on
    /// the loop (in `modes`, at `order`, with `eventsPerDispatch`).
    func join(
        index: Int, handler: @escaping (GPIOEdgeEventBatch) -> Void, loop: BoardRunLoop, modes: [RunLoopMode], order: Int,
        eventsPerDispatch: Int?
    ) throws {
        handlers[index].call = handler
        guard !scheduled else { return }
        let group = Unmanaged.passUnretained(self)
        // The handler holds the group unowned: every line that holds the
        // group takes the request off its loop (`unschedule`) before it goes.
        try request.schedule(on: loop, mode: modes[0], order: order) { batch in
            group._withUnsafeGuaranteedRef { $0.handle(batch) }
        }
        scheduled = true
        if let n = eventsPerDispatch { request.eventsPerDispatch = min(request.eventsPerDispatch, n) }
        for m in modes.dropFirst() { try request.add(to: m) }
    }

    /// Swaps one line's handler (a trace or a recording starts or ends).
    func replaceHandler(index: Int, _ handler: @escaping (GPIOEdgeEventBatch) -> Void) {
        if handlers[index].call != nil { handlers[index].call = handler }
    }

    /// Takes the request off its loop (it stays requested). Idempotent.
    func unschedule() {
        request.unschedule()
        scheduled = false
        for i in 0..<handlers.count { handlers[i].call = nil }
    }

    /// A batch of the request: each line gets the runs of its own events in
    /// turn, in the order read (so edges of two lines reach their reactions
    /// in the order they happened), and a line whose losses grew gets them
    /// with its first run, or alone when it has no event in the batch.
    private func handle(_ batch: GPIOEdgeEventBatch) {
        if let _ = batch.fault {
            for i in 0..<handlers.count { handlers[i].call?(batch) }
            return
        }
        let checkLoss = batch.lostEvents > 0 || batch.overflowSuspected
        var s = 0
        while s < batch.count {
            let offset = batch[s].offset
            var e = s + 1
            while e < batch.count && batch[e].offset == offset { e += 1 }
            if let i = request.index(ofOffset: offset), let h = handlers[i].call {
                var lost: UInt64 = 0
                var full = false
                if checkLoss { (lost, full) = takeLoss(i) }
                h(batch.part(s..<e, lostEvents: lost, overflowSuspected: full))
            }
            s = e
        }
        guard checkLoss else { return }
        for i in 0..<handlers.count {
            guard let h = handlers[i].call else { continue }
            let (lost, full) = takeLoss(i)
            if lost > 0 || full { h(batch.part(0..<0, lostEvents: lost, overflowSuspected: full)) }
        }
    }

    /// The losses found for line `i` since it was last told.
    private func takeLoss(_ i: Int) -> (UInt64, Bool) {
        let lost = request.lostEvents(at: i)
        let full = request.fullFIFOReads(at: i)
        defer {
            reportedLost[i] = lost
            reportedFull[i] = full
        }
        return (lost &- reportedLost[i], full != reportedFull[i])
    }
}
