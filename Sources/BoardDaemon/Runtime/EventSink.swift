import Boardloop
import BoardloopGPIO
import Logging

/// Where a loop's components report what happened: an edge, an output
/// write, a reaction fired or skipped, a gesture decided, events held or
/// lost, a sequence's step. One sink per loop, used on its thread; the
/// components neither format nor log.
///
/// The sink hands each event to its consumers:
/// - the loop's trace ring, for the per-event lines (an edge, a write, a
///   reaction, a gesture): a fixed-size record of indices, no allocation,
///   formatted on the log writer's thread (`TraceLog`), and only when the
///   log level shows them;
/// - the log, for the rarer events a person wants to read as they happen
///   (a sequence started or refused, events lost): formatted here.
///
/// A new consumer (a stream of events to a client, a recording) reads the
/// same calls; no component changes for it.
final class EventSink: @unchecked Sendable {
    let ring: TraceRing
    let logger: Logger
    /// The loop's clock, for how late an edge is handled.
    private unowned let loop: BoardRunLoop
    /// `logger`'s level, read once: reading a swift-log level costs an
    /// exclusivity check and an existential copy (about 110 instructions),
    /// which the event path would ask up to three times per edge.
    let level: Logger.Level
    /// The program the records' indices belong to (set at start and at a
    /// reload, before the first event of the new program).
    @exclusivity(unchecked) private(set) var generation: Int32 = 0
    /// The level each reaction's firing is traced at (`Program.traceLevels`).
    @exclusivity(unchecked) private var traceLevels: [Logger.Level] = []

    init(ring: TraceRing, logger: Logger, loop: BoardRunLoop) {
        self.ring = ring
        self.loop = loop
        self.logger = logger
        level = logger.logLevel
    }

    /// The program whose reactions and lines the events name from now on.
    func use(_ program: Program) {
        generation = program.generation
        traceLevels = program.traceLevels()
    }

    // MARK: Lines

    /// A line's filtered level changed at `t` (its kernel timestamp);
    /// traced with how late it is handled.
    @inline(__always) func edge(line: Int, rising: Bool, at t: UInt64) {
        guard level <= .debug else { return }
        let now = loop.now.nanoseconds
        ring.push(TraceRecord(kind: .edge, flag: rising, line: Int32(line), generation: generation, nanoseconds: now > t ? now - t : 0))
    }

    /// An output was written.
    @inline(__always) func output(line: Int, value: Bool) {
        guard level <= .debug else { return }
        ring.push(TraceRecord(kind: .output, flag: value, line: Int32(line), generation: generation))
    }

    /// A line's gesture group decided an interaction (before its reactions fire).
    @inline(__always) func gesture(line: Int, _ kind: GestureKind) {
        guard level <= .debug else { return }
        ring.push(TraceRecord(kind: .gesture, line: Int32(line), index: kind.code, generation: generation))
    }

    func writeFailed(_ name: String, _ e: GPIOError) {
        logger.error("\(name): write failed: \(e)")
    }

    /// Events the kernel dropped: `n` counted from sequence numbers
    /// (`exact`), or on libgpiod 1.6 at least `n` (inferred from two equal
    /// edges in a row, or a level that disagrees after a full FIFO).
    func lost(_ name: String, _ n: UInt64, exact: Bool, fifoFull: Bool) {
        if exact {
            logger.warning("\(name): the kernel dropped \(n) event(s) (its buffer was full; counted from sequence numbers)")
        } else if fifoFull {
            logger.warning(
                "\(name): the kernel's event FIFO was full: at least \(n) event(s) lost (libgpiod 1.6 cannot count; more may be); the line's level was read again")
        } else {
            logger.warning("\(name): at least \(n) event(s) lost (libgpiod 1.6 cannot count; two equal edges in a row)")
        }
    }

    /// A held event found the line's ring full (reported at the first and
    /// every thousandth).
    func ringFull(_ name: String, capacity: Int, lost: UInt64) {
        if lost == 1 || lost % 1000 == 0 {
            logger.warning("\(name): held-event ring full (\(capacity) events); \(lost) lost so far")
        }
    }

    /// The line's mode is back: the events it held are delivered now.
    func heldDelivered(_ name: String, count: Int) {
        logger.info("\(name): delivering \(count) held events, in order")
    }

    /// More deadlines fell due at once than one call handles (a short hold
    /// repeat on a line held back for long): the rest fire in the next pass.
    func deadlinesDeferred(_ name: String, handled: Int) {
        logger.warning("\(name): \(handled) deadlines were due at once; the rest fire in the next pass")
    }

    // MARK: Reactions

    /// A reaction's actions ran (`took`: from its trigger to their synchronous end).
    @inline(__always) func fired(reaction r: Int, line: Int, repeat count: Int32, took: UInt64) {
        guard level <= traceLevels[r] else { return }
        ring.push(
            TraceRecord(kind: .reaction, line: Int32(line), index: Int32(r), repeatCount: count, generation: generation, nanoseconds: took))
    }

    /// A reaction's condition did not hold.
    @inline(__always) func skipped(reaction r: Int, line: Int) {
        guard level <= .debug else { return }
        ring.push(TraceRecord(kind: .skipped, line: Int32(line), index: Int32(r), generation: generation))
    }

    // MARK: Sequences

    /// A step in a sequence's life.
    enum SequenceStep {
        /// Its first run started (and its mode, if it has one, is entered).
        case started
        /// Another run started beside those running (policy parallel).
        case began(running: Int)
        case queued(waiting: Int)
        case restarted
        case stopped
        case refused(Refusal)
        /// A run reached its end (`next`: a queued start runs now).
        case completed(next: Bool)
    }

    /// Why a start was not run.
    enum Refusal {
        case single
        case queueFull(queued: Int, max: Int)
        case parallelFull(max: Int)
    }

    func sequence(_ name: String, _ step: SequenceStep) {
        let (level, text): (Logger.Level, String) =
            switch step {
            case .started: (.info, "started")
            case let .began(n): (.info, "another run started (\(n) running)")
            case let .queued(n): (.info, "start queued (\(n) waiting)")
            case .restarted: (.info, "restarted")
            case .stopped: (.notice, "stopped")
            case .refused(.single): (.notice, "already running; the start is ignored (policy single)")
            case let .refused(.queueFull(q, max)): (.notice, "\(q) starts already queued; the start is refused (policy queued, max \(max))")
            case let .refused(.parallelFull(max)): (.notice, "\(max) runs in progress; the start is refused (policy parallel, max \(max))")
            case let .completed(next): (.info, "done\(next ? "; running the queued start" : "")")
            }
        logger.log(level: level, "sequence \(name): \(text)", source: "sequence \(name)")
    }
}

extension GestureKind {
    /// A trace record's number for the kind (no allocation, unlike `allCases`).
    var code: Int32 {
        switch self {
        case .click: 0
        case .doubleClick: 1
        case .tripleClick: 2
        case .hold: 3
        }
    }

    init?(code: Int32) {
        switch code {
        case 0: self = .click
        case 1: self = .doubleClick
        case 2: self = .tripleClick
        case 3: self = .hold
        default: return nil
        }
    }
}
