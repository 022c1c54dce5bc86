import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import XCTest

/// Software debounce on the run loop (libgpiod 1.6 and the mock): an edge is
/// reported once the line has held its new level for the period. Driven on a
/// manual clock, so every period is exact and nothing sleeps.
final class DebounceTests: XCTestCase {
    let period: Duration = .milliseconds(10)

    func makeButton(_ rig: ManualRig, edges: GPIOEdgeDetection = .both, activeLow: Bool = false) throws
        -> (GPIOLineRequest, EventLog)
    {
        let req = try rig.gpio.request(17, .input(edges: edges, activeLow: activeLow, debounce: period))
        let log = EventLog()
        try req.schedule(on: rig.loop) { log.record($0) }
        return (req, log)
    }

    func testABouncyPressCollapsesToOneEdgeAfterThePeriod() throws {
        let rig = try ManualRig()
        let (req, log) = try makeButton(rig)
        // Contact bounce: 7 edges 300 µs apart, ending high.
        try rig.chip.burst(17, edges: 7, spacing: .microseconds(300), from: rig.at(ms: 0))
        try rig.settle()
        XCTAssertEqual(log.events.count, 0, "nothing before the level has held for the period")
        try rig.advance(ms: 5)
        XCTAssertEqual(log.events.count, 0)
        try rig.advance(ms: 10)
        XCTAssertEqual(log.edges, [.rising], "one edge for the whole burst")
        // Its timestamp is the edge that began the level that then held.
        XCTAssertEqual(log.events[0].timestamp, rig.at(ms: 0) + .microseconds(1800))
        XCTAssertEqual(req.statistics.debounced, 6, "six raw edges were swallowed")
        XCTAssertEqual(req.statistics.read, 7)
        // The release, also bouncy, gives one falling edge.
        try rig.chip.burst(17, edges: 5, spacing: .microseconds(200), from: rig.at(ms: 40))
        try rig.advance(ms: 40)
        XCTAssertEqual(log.edges, [.rising, .falling])
        XCTAssertEqual(log.events[1].timestamp, rig.at(ms: 40) + .microseconds(800))
    }

    func testTheReportComesAtExactlyThePeriod() throws {
        let rig = try ManualRig()
        let (_, log) = try makeButton(rig)
        try rig.chip.setLevel(17, true, at: rig.at(ms: 0))
        try rig.settle()
        try rig.loop.advanceManualClock(by: period - .nanoseconds(1))
        XCTAssertEqual(log.events.count, 0, "1 ns before the period: not yet")
        try rig.loop.advanceManualClock(by: .nanoseconds(1))
        XCTAssertEqual(log.edges, [.rising], "at the period: reported")
        XCTAssertEqual(log.latencies, [period], "latency includes the period")
    }

    func testAGlitchShorterThanThePeriodYieldsNothing() throws {
        let rig = try ManualRig()
        let (req, log) = try makeButton(rig)
        try rig.chip.pulse(17, width: .milliseconds(9), at: rig.at(ms: 0))
        try rig.advance(ms: 100)
        XCTAssertEqual(log.events.count, 0)
        XCTAssertEqual(req.statistics.debounced, 2)
        // Many glitches in a row: still nothing.
        for k in 0..<20 { try rig.chip.pulse(17, width: .milliseconds(3), at: rig.at(ms: 200 + Int64(k) * 5)) }
        try rig.advance(ms: 400)
        XCTAssertEqual(log.events.count, 0)
        XCTAssertEqual(try req.value(17), false)
    }

    func testAPulseJustLongerThanThePeriodGivesBothEdges() throws {
        let rig = try ManualRig()
        let (_, log) = try makeButton(rig)
        try rig.chip.pulse(17, width: .milliseconds(11), at: rig.at(ms: 0))
        try rig.advance(ms: 50)
        XCTAssertEqual(log.edges, [.rising, .falling])
        XCTAssertEqual(log.timestamps, [rig.at(ms: 0), rig.at(ms: 11)].map(\.nanoseconds))
    }

    func testHeldEventsAreJudgedByTheirTimestamps() throws {
        // Edges that waited in the buffer are judged by when they happened,
        // not when they were read: a level held 20 ms between two edges
        // counts even though both are read at once, later.
        let rig = try ManualRig()
        let (_, log) = try makeButton(rig)
        try rig.chip.setLevel(17, true, at: rig.at(ms: 0))
        try rig.chip.setLevel(17, false, at: rig.at(ms: 20))
        try rig.chip.setLevel(17, true, at: rig.at(ms: 22)) // a glitch back up
        try rig.chip.setLevel(17, false, at: rig.at(ms: 23))
        rig.clock.advance(by: .milliseconds(30))
        try rig.settle()
        XCTAssertEqual(log.edges, [.rising], "the first level held; the rest is still within its period")
        try rig.advance(ms: 10)
        XCTAssertEqual(log.edges, [.rising, .falling])
        XCTAssertEqual(log.timestamps.last, rig.at(ms: 23).nanoseconds)
    }

    func testRisingOnlyStillDebouncesOnTheLevel() throws {
        let rig = try ManualRig()
        let (_, log) = try makeButton(rig, edges: .rising)
        try rig.chip.burst(17, edges: 3, spacing: .microseconds(100), from: rig.at(ms: 0)) // ends high
        try rig.advance(ms: 20)
        try rig.chip.burst(17, edges: 3, spacing: .microseconds(100), from: rig.at(ms: 30)) // ends low
        try rig.advance(ms: 20)
        try rig.chip.setLevel(17, true, at: rig.at(ms: 60))
        try rig.advance(ms: 30)
        XCTAssertEqual(log.edges, [.rising, .rising], "falling edges are debounced but not reported")
        XCTAssertEqual(log.timestamps, [rig.at(ms: 0) + .microseconds(200), rig.at(ms: 60)].map(\.nanoseconds))
    }

    func testDebounceWithActiveLowWorksOnLogicalLevels() throws {
        let rig = try ManualRig()
        try rig.chip.setLevel(17, true) // idle high (pull-up), button pulls low
        let (req, log) = try makeButton(rig, activeLow: true)
        XCTAssertEqual(try req.value(17), false, "idle: high wire, logical 0")
        try rig.chip.burst(17, edges: 5, spacing: .microseconds(100), from: rig.at(ms: 0)) // ends low: pressed
        try rig.advance(ms: 20)
        XCTAssertEqual(log.edges, [.rising], "pressing (wire low) is a logical rising edge")
        XCTAssertEqual(try req.value(17), true)
    }

    func testSeveralDebouncedLinesAreIndependent() throws {
        let rig = try ManualRig()
        let req = try rig.gpio.request([4, 17], .input(edges: .both, debounce: period))
        let log = EventLog()
        try req.schedule(on: rig.loop) { log.record($0) }
        try rig.chip.setLevel(4, true, at: rig.at(ms: 0))
        try rig.chip.pulse(17, width: .milliseconds(2), at: rig.at(ms: 1)) // glitch on 17
        try rig.chip.setLevel(17, true, at: rig.at(ms: 5))
        try rig.advance(ms: 50)
        XCTAssertEqual(log.offsets, [4, 17])
        XCTAssertEqual(log.timestamps, [rig.at(ms: 0), rig.at(ms: 5)].map(\.nanoseconds))
    }

    func testDebounceTimersFollowTheRequestsMode() throws {
        let rig = try ManualRig()
        let quiet: RunLoopMode = "test.quiet"
        let req = try rig.gpio.request(17, .input(edges: .both, debounce: period))
        let log = EventLog()
        try req.schedule(on: rig.loop, mode: quiet) { log.record($0) }
        // Something to keep the default mode running.
        try rig.loop.add(RunLoopTimer(fireAt: .distantFuture) { _ in }, mode: .default)
        try rig.chip.setLevel(17, true, at: rig.at(ms: 0))
        try rig.advance(ms: 50, .default)
        XCTAssertEqual(log.events.count, 0, "the request is only in the quiet mode")
        try rig.advance(ms: 0, quiet)
        XCTAssertEqual(log.edges, [.rising], "held edge, long stable by now: reported when its mode runs")
        XCTAssertEqual(log.timestamps, [rig.at(ms: 0).nanoseconds])
    }
}
