import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import BoardloopTestSupport
import BoardloopXCTestSupport
import Glibc
import XCTest


/// What a handler saw, copied out of the borrowed batches.
final class EventLog {
    var events: [GPIOEdgeEvent] = []
    var batchSizes: [Int] = []
    var lost: UInt64 = 0
    var overflowSuspected = 0
    var faults: [GPIOError] = []
    var latencies: [Duration] = []

    func record(_ batch: GPIOEdgeEventBatch) {
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
    let loop: BoardRunLoop
    let chip: MockChip
    let board: MockGPIO
    let gpio: GPIOChip

    init(eventModel: MockChip.EventModel = .v2, eventBufferSize: Int? = nil, lines: Int = 32) throws {
        loop = try makeLoop(clock: .manual(clock))
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
