import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import BoardloopTestSupport
import Glibc
import XCTest

/// XCTest brings Foundation, whose RunLoop would shadow ours.
typealias RunLoop = Boardloop.RunLoop

/// What a handler saw, copied out of the borrowed batches.
final class EventLog {
    var events: [EdgeEvent] = []
    var batchSizes: [Int] = []
    var lost: UInt64 = 0
    var overflowSuspected = 0
    var faults: [GPIOError] = []
    var latencies: [Duration] = []

    func record(_ batch: EdgeEventBatch) {
        batchSizes.append(batch.count)
        lost += batch.lostEvents
        if batch.overflowSuspected { overflowSuspected += 1 }
        if let f = batch.fault { faults.append(f) }
        for (i, e) in batch.enumerated() {
            events.append(e)
            latencies.append(batch.latency(at: i))
        }
    }

    var edges: [GPIOEdge] { events.map(\.edge) }
    var offsets: [UInt32] { events.map(\.offset) }
    var timestamps: [UInt64] { events.map(\.timestamp.nanoseconds) }
}

/// A deterministic rig: a loop on a manual clock and a mock chip on the same
/// clock (so debounce periods and timestamps are exact, no sleeping).
struct ManualRig {
    let clock = ManualClock()
    let loop: RunLoop
    let chip: MockChip
    let board: MockGPIO
    let gpio: GPIOChip

    init(eventModel: MockChip.EventModel = .v2, eventBufferSize: Int? = nil, lines: Int = 32) throws {
        loop = try RunLoop(clock: .manual(clock))
        chip = try MockChip(
            name: "gpiochip7", label: "test-chip", lineCount: lines, lineNames: [17: "BUTTON", 27: "LED", 4: "DOOR"],
            eventModel: eventModel, eventBufferSize: eventBufferSize, clock: .manual(clock))
        board = try MockGPIO([chip])
        gpio = try GPIOChip("test-chip", backend: board)
    }

    /// `t0 + ms` on the rig's clock.
    func at(ms: Int64) -> MonotonicInstant { start + .milliseconds(ms) }
    var start: MonotonicInstant { MonotonicInstant(nanoseconds: 1_000_000_000) }

    /// Runs passes without moving the clock until nothing more happens.
    func settle(_ mode: RunLoopMode = .default) throws {
        try loop.advanceManualClock(by: .zero, mode: mode)
    }

    /// Moves the clock forward, firing every timer on the way.
    func advance(ms: Int64, _ mode: RunLoopMode = .default) throws {
        try loop.advanceManualClock(by: .milliseconds(ms), mode: mode)
    }
}

/// Asserts that `body` throws a GPIOError matching `check`.
func assertGPIOError<T>(
    _ body: @autoclosure () throws(GPIOError) -> T, file: StaticString = #filePath, line: UInt = #line,
    _ check: (GPIOError) -> Bool
) {
    do {
        _ = try body()
        XCTFail("expected a GPIOError", file: file, line: line)
    } catch {
        XCTAssertTrue(check(error), "unexpected error: \(error)", file: file, line: line)
    }
}


/// A thread whose end is awaited with a deadline: a body that hangs (a
/// deadlocked mock, a loop that never returns) fails the test in seconds
/// instead of hanging the suite. Its flag is guarded by a pthread mutex, as
/// the project's Lock (visible to ThreadSanitizer).
final class BoundedThread: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var finished = false
    private var thread: JoinableThread?

    init(_ body: @escaping @Sendable () -> Void) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        thread = JoinableThread { [self] in
            body()
            pthread_mutex_lock(mutex)
            finished = true
            pthread_mutex_unlock(mutex)
        }
    }

    deinit {
        // A thread left running (its test failed) keeps `self` alive through its closure.
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    var isFinished: Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return finished
    }

    /// Joins the thread if it ends within `limit`; otherwise fails the test
    /// and leaves it running (it cannot be joined).
    @discardableResult
    func join(within limit: Duration, file: StaticString = #filePath, line: UInt = #line) -> Bool {
        guard waitUntil(timeout: limit, { isFinished }) else {
            XCTFail("the thread was still running after \(limit)", file: file, line: line)
            return false
        }
        thread?.join()
        return true
    }
}
