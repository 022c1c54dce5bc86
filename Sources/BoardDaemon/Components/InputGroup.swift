import Boardloop
import BoardloopGPIO

/// Input lines of one loop, chip and priority that share one line request:
/// one fd, one port source, one read for the edges of all of them (events
/// carry their line's offset). The request's handler hands each line the
/// run of its own events, in the order they were read, with the losses
/// found for that line (`InputLine.handleRun`); everything else — filters,
/// triggers, the held-event ring, counters — stays the line's own.
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
    /// Each line, by its index in the request; nil until it joins. Held
    /// unowned without the run-time check (as a line's own handler holds
    /// it): the runtime owns the lines, and each takes the request off its
    /// loop (`unschedule`) before it goes.
    private let lines: UnsafeMutableBufferPointer<Unmanaged<InputLine>?>
    /// Each line's loss counts as last handed to it, by index.
    private let reportedLost: UnsafeMutableBufferPointer<UInt64>
    private let reportedFull: UnsafeMutableBufferPointer<UInt64>
    /// The request's `lineLossChangeCount()` when the lines were last told.
    @exclusivity(unchecked) private var reportedChanges: UInt64 = 0
    private var scheduled = false

    init(request: GPIOLineRequest) {
        self.request = request
        let n = request.count
        lines = .allocate(capacity: n)
        lines.initialize(repeating: nil)
        reportedLost = .allocate(capacity: n)
        reportedLost.initialize(repeating: 0)
        reportedFull = .allocate(capacity: n)
        reportedFull.initialize(repeating: 0)
        for i in 0..<n {
            reportedLost[i] = request.lostEvents(at: i)
            reportedFull[i] = request.fullFIFOReads(at: i)
        }
        reportedChanges = request.lineLossChangeCount()
    }

    deinit {
        lines.deallocate()
        reportedLost.deallocate()
        reportedFull.deallocate()
    }

    /// A line joins; the first to join puts the request on the loop (in
    /// `modes`, at `order`, with `eventsPerDispatch`).
    func join(_ line: InputLine, loop: BoardRunLoop, modes: [RunLoopMode], order: Int, eventsPerDispatch: Int?) throws {
        lines[line.index] = Unmanaged.passUnretained(line)
        guard !scheduled else { return }
        let group = Unmanaged.passUnretained(self)
        // The handler holds the group unowned: every line holds the group,
        // and takes the request off its loop (`unschedule`) before it goes.
        try request.schedule(on: loop, mode: modes[0], order: order) { batch in
            group._withUnsafeGuaranteedRef { $0.handle(batch) }
        }
        scheduled = true
        if let n = eventsPerDispatch { request.eventsPerDispatch = min(request.eventsPerDispatch, n) }
        for m in modes.dropFirst() { try request.add(to: m) }
    }

    /// Takes the request off its loop (it stays requested). Idempotent.
    func unschedule() {
        request.unschedule()
        scheduled = false
        for i in 0..<lines.count { lines[i] = nil }
    }

    /// A batch of the request: each line gets the runs of its own events in
    /// turn, in the order read (so edges of two lines reach their reactions
    /// in the order they happened), and a line whose losses grew gets them
    /// with its first run, or alone when it has no event in the batch. The
    /// lines' own loss figures are the request's per line, looked at when
    /// they moved (`lineLossChangeCount()`): a line's gap shows with its own next
    /// event, whatever the batch's request-wide count says.
    @inline(__always)
    private func handle(_ batch: GPIOEdgeEventBatch) {
        let changes = request.lineLossChangeCount()
        let checkLoss = changes != reportedChanges
        reportedChanges = changes
        if batch.count == 1 && !checkLoss {
            // One edge (what a line that is not flooded delivers): its line.
            if let i = request.index(ofOffset: batch[0].offset), let line = lines[i] {
                line._withUnsafeGuaranteedRef { $0.handleRun(batch, from: 0, to: 1, lost: 0, overflow: false) }
            }
            return
        }
        if batch.count == 0 && !checkLoss {
            // A fault (the chip went: a request delivers an empty batch
            // only with one): every line hears of it.
            for i in 0..<lines.count { lines[i]?._withUnsafeGuaranteedRef { $0.handleRun(batch, from: 0, to: 0, lost: 0, overflow: false) } }
            return
        }
        var s = 0
        while s < batch.count {
            let offset = batch[s].offset
            var e = s + 1
            while e < batch.count && batch[e].offset == offset { e += 1 }
            if let i = request.index(ofOffset: offset), let line = lines[i] {
                var lost: UInt64 = 0
                var full = false
                if checkLoss { (lost, full) = takeLoss(i) }
                line._withUnsafeGuaranteedRef { $0.handleRun(batch, from: s, to: e, lost: lost, overflow: full) }
            }
            s = e
        }
        guard checkLoss else { return }
        for i in 0..<lines.count {
            guard let line = lines[i] else { continue }
            let (lost, full) = takeLoss(i)
            if lost > 0 || full { line._withUnsafeGuaranteedRef { $0.handleRun(batch, from: 0, to: 0, lost: lost, overflow: full) } }
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
