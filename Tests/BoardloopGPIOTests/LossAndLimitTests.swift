import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import XCTest

/// Loss counting by sequence gaps of every size (the v2 model: libgpiod 2.x),
/// mock faults on lines that do not exist, and limits that say the limit.
final class LossAndLimitTests: XCTestCase {
    /// One line; `gap` events dropped between two delivered edges. Every
    /// count must be exact: the batch, the request total and the line's own.
    func assertGapIsCountedExactly(_ gap: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        let rig = try ManualRig()
        let req = try rig.gpio.request(17, .input(edges: .both))
        XCTAssertEqual(req.lossCounting, .exact, file: file, line: line)
        let log = EventLog()
        try req.schedule(on: rig.loop) { log.record($0) }
        try rig.chip.setLevel(17, true, at: rig.at(ms: 1))
        try rig.settle()
        XCTAssertEqual(log.lost, 0, "no loss before the gap", file: file, line: line)
        try rig.chip.dropEvents(17, count: gap)
        try rig.chip.setLevel(17, false, at: rig.at(ms: 2))
        try rig.settle()
        XCTAssertEqual(log.events.map(\.globalSequence), [1, UInt64(gap) + 2], file: file, line: line)
        XCTAssertEqual(log.lost, UInt64(gap), "lost in batches", file: file, line: line)
        XCTAssertEqual(req.statistics.lostEvents, UInt64(gap), "request total", file: file, line: line)
        XCTAssertEqual(try req.lostEvents(17), UInt64(gap), "the line's own count", file: file, line: line)
        // Nothing more is counted later.
        try rig.chip.setLevel(17, true, at: rig.at(ms: 3))
        try rig.settle()
        XCTAssertEqual(req.statistics.lostEvents, UInt64(gap), "no loss after the gap", file: file, line: line)
    }

    func testSingleLostEventGapOfOneIsCounted() throws { try assertGapIsCountedExactly(1) }

    func testLostEventsGapOfTwoIsCounted() throws { try assertGapIsCountedExactly(2) }

    func testLostEventsGapOfNIsCountedExactly() throws {
        for n in [3, 15, 16, 17, 1000] { try assertGapIsCountedExactly(n) }
    }

    func testSingleLostEventBeforeTheFirstReadIsCounted() throws {
        // Sequence numbers start at 1: a first event numbered 2 means one was lost.
        let rig = try ManualRig()
        let req = try rig.gpio.request(17, .input(edges: .both))
        let log = EventLog()
        try req.schedule(on: rig.loop) { log.record($0) }
        try rig.chip.dropEvents(17, count: 1)
        try rig.chip.setLevel(17, true)
        try rig.settle()
        XCTAssertEqual(log.lost, 1)
        XCTAssertEqual(try req.lostEvents(17), 1)
    }

    func testLossOnTwoLinesIsAttributedToEachLineAndSummedExactly() throws {
        let rig = try ManualRig()
        let req = try rig.gpio.request([4, 17], .input(edges: .both))
        let log = EventLog()
        try req.schedule(on: rig.loop) { log.record($0) }
        try rig.chip.setLevel(4, true)
        try rig.chip.dropEvents(4, count: 1)
        try rig.chip.dropEvents(17, count: 2)
        try rig.chip.setLevel(17, true)
        try rig.chip.setLevel(4, false)
        try rig.settle()
        XCTAssertEqual(log.offsets, [4, 17, 4])
        XCTAssertEqual(log.lost, 3)
        XCTAssertEqual(req.statistics.lostEvents, 3)
        XCTAssertEqual(try req.lostEvents(4), 1)
        XCTAssertEqual(try req.lostEvents(17), 2)
    }

    func testLossCountsSurviveReconfigureWithoutAFalseGap() throws {
        // The kernel's numbers go on across a 2.x reconfigure: restarting the
        // per-line bookkeeping there would count every earlier event as lost.
        let rig = try ManualRig()
        let req = try rig.gpio.request(17, .input(edges: .both))
        let log = EventLog()
        try req.schedule(on: rig.loop) { log.record($0) }
        for k in 0..<5 { try rig.chip.setLevel(17, k % 2 == 0) }
        try rig.settle()
        try req.reconfigure(17, .input(edges: .both, bias: .pullDown))
        try rig.chip.setLevel(17, false)
        try rig.chip.setLevel(17, true)
        try rig.settle()
        XCTAssertEqual(log.events.count, 7)
        XCTAssertEqual(req.statistics.lostEvents, 0)
        XCTAssertEqual(try req.lostEvents(17), 0)
    }

    func testOn16StyleChipsLossIsALowerBound() throws {
        let rig = try ManualRig(eventModel: .v1)
        let req = try rig.gpio.request(17, .input(edges: .both))
        XCTAssertEqual(req.lossCounting, .lowerBound)
        XCTAssertEqual(req.capabilities.debouncing, .runLoop)
        let log = EventLog()
        try req.schedule(on: rig.loop) { log.record($0) }
        // A drop leaves no trace under v1: nothing can be counted.
        try rig.chip.setLevel(17, true)
        try rig.chip.dropEvents(17, count: 1)
        try rig.chip.setLevel(17, false)
        try rig.settle()
        XCTAssertEqual(log.events.count, 2)
        XCTAssertEqual(req.statistics.lostEvents, 0, "v1 cannot see a dropped event between two opposite edges")
    }

    // MARK: Mock lines that do not exist

    func testMockLineThatDoesNotExistIsATypedErrorNotATrap() throws {
        let rig = try ManualRig()
        func isOutOfRange(_ e: GPIOError) -> Bool {
            guard case .offsetOutOfRange(chip: "gpiochip7 [test-chip]", offset: 99, lineCount: 32) = e else { return false }
            return e.description.contains("0...31")
        }
        func isUnknownName(_ e: GPIOError) -> Bool {
            guard case .lineNotFound(name: "NOPE", chip: "gpiochip7 [test-chip]") = e else { return false }
            return e.description.contains("no line named 'NOPE'")
        }
        assertGPIOError(try rig.chip.offset(99), isOutOfRange)
        assertGPIOError(try rig.chip.offset("NOPE"), isUnknownName)
        assertGPIOError(try rig.chip.setLevel(99, true), isOutOfRange)
        assertGPIOError(try rig.chip.setLevel("NOPE", true), isUnknownName)
        assertGPIOError(try rig.chip.injectEdge(99, .rising), isOutOfRange)
        assertGPIOError(try rig.chip.pulse("NOPE", width: .milliseconds(1)), isUnknownName)
        assertGPIOError(try rig.chip.burst(99, edges: 3, spacing: .milliseconds(1)), isOutOfRange)
        assertGPIOError(try rig.chip.level(99), isOutOfRange)
        assertGPIOError(try rig.chip.outputHistory("NOPE"), isUnknownName)
        assertGPIOError(try rig.chip.wire(27, to: 99), isOutOfRange)
        assertGPIOError(try rig.chip.wire("NOPE", to: 4), isUnknownName)
        assertGPIOError(try rig.chip.hold(99, consumer: "x"), isOutOfRange)
        assertGPIOError(try rig.chip.unhold("NOPE"), isUnknownName)
        assertGPIOError(try rig.chip.dropEvents(99, count: 1), isOutOfRange)
        assertGPIOError(try rig.chip.consumer("NOPE"), isUnknownName)
        // The chip still works.
        try rig.chip.setLevel("BUTTON", true)
        XCTAssertEqual(try rig.chip.level(17), true)
    }

    func testMockChipWithImpossibleSizesIsATypedErrorNotATrap() throws {
        for count in [0, -1, 1025] {
            assertGPIOError(try MockChip(label: "bad", lineCount: count)) { e in
                guard case .invalidConfiguration(nil, let reason) = e else { return false }
                return reason.contains("lineCount \(count)") && reason.contains("1...1024")
            }
        }
        assertGPIOError(try MockChip(label: "bad", lineCount: 8, eventBufferSize: 0)) { e in
            guard case .invalidConfiguration(nil, let reason) = e else { return false }
            return reason.contains("eventBufferSize 0")
        }
        assertGPIOError(try MockChip(label: "bad", lineCount: 8, lineNames: [8: "PAST-THE-END"])) { e in
            if case .offsetOutOfRange(_, offset: 8, lineCount: 8) = e { return true }
            return false
        }
        assertGPIOError(try MockGPIO([])) { e in
            guard case .invalidConfiguration(nil, let reason) = e else { return false }
            return reason.contains("at least one chip")
        }
    }

    // MARK: Limits

    func testDebounceAboveTheLimitSaysTheLimit() throws {
        let rig = try ManualRig()
        let tooLong = GPIOLineSettings.maximumDebounce + .seconds(1)
        assertGPIOError(try rig.gpio.request(17, .input(edges: .both, debounce: tooLong))) { e in
            guard case .invalidConfiguration(let line?, let reason) = e, line.offset == 17 else { return false }
            return reason.contains("\(tooLong)") && reason.contains("limit of 4000.0 seconds")
                && reason.contains("GPIOLineSettings.maximumDebounce")
        }
        // The limit itself is accepted.
        XCTAssertNoThrow(try rig.gpio.request(17, .input(edges: .both, debounce: GPIOLineSettings.maximumDebounce)))
    }
}
