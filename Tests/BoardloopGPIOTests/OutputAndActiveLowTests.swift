import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import BoardloopXCTestSupport
import XCTest

/// Outputs, their recorded history, wiring output → input, and active-low on
/// reads, writes and edges.
final class OutputAndActiveLowTests: XCTestCase {
    func testOutputChangesAreRecordedWithTimestamps() throws {
        let rig = try ManualRig()
        let led = try rig.gpio.request("LED", .output(false))
        rig.clock.advance(by: .milliseconds(5))
        try led.setValue(true)
        rig.clock.advance(by: .milliseconds(5))
        try led.setValue(true) // no change: not a new entry
        try led.setValue(false)
        let history = try rig.chip.outputHistory("LED")
        XCTAssertEqual(history.map(\.value), [false, true, false])
        XCTAssertEqual(history.map(\.timestamp), [rig.at(ms: 0), rig.at(ms: 5), rig.at(ms: 10)])
        XCTAssertEqual(history.map(\.offset), [27, 27, 27])
        XCTAssertEqual(try rig.chip.level(27), false)
        XCTAssertEqual(try led.value(), false, "an output reads back its value")
    }

    func testSeveralOutputsAtOnce() throws {
        let rig = try ManualRig()
        let req = try rig.gpio.request([5, 6, 7], .output(false))
        try req.setValues([(5, true), (7, true)])
        XCTAssertEqual(try req.readValues(), [true, false, true])
        XCTAssertEqual([try rig.chip.level(5), try rig.chip.level(6), try rig.chip.level(7)], [true, false, true])
        var buffer = [Bool](repeating: false, count: 3)
        try buffer.withUnsafeMutableBufferPointer { p in try req.readValues(into: p) }
        XCTAssertEqual(buffer, [true, false, true])
    }

    /// Writes by index, staged and committed: one kernel call for all, a
    /// line staged twice written once with its last value, nothing written
    /// before the commit, and an empty commit makes no call.
    func testStagedWritesAreOneCall() throws {
        let rig = try ManualRig()
        let req = try rig.gpio.request([5, 6, 7], .output(false))
        XCTAssertEqual(req.count, 3)
        XCTAssertEqual(req.index(ofOffset: 7), 2)
        XCTAssertNil(req.index(ofOffset: 8))
        let before = rig.chip.calls.setValues
        try req.stage(true, at: 0)
        try req.stage(true, at: 2)
        try req.stage(false, at: 0)
        try req.stage(true, at: 0)
        XCTAssertEqual(req.stagedCount, 2)
        XCTAssertEqual(try rig.chip.level(5), false, "nothing reaches a line before the commit")
        try req.commitStaged()
        XCTAssertEqual(rig.chip.calls.setValues - before, 1)
        XCTAssertEqual(req.stagedCount, 0)
        XCTAssertEqual(try req.readValues(), [true, false, true])
        XCTAssertEqual(try rig.chip.outputHistory(5).map(\.value), [false, true], "written once")
        try req.commitStaged()
        XCTAssertEqual(rig.chip.calls.setValues - before, 1, "an empty commit makes no call")
        try req.setValue(false, at: 2)
        XCTAssertEqual(try rig.chip.level(7), false)
        assertGPIOError(try req.setValue(true, at: 3)) {
            if case .invalidConfiguration = $0 { return true }
            return false
        }
        assertGPIOError(try req.stage(true, at: -1)) {
            if case .invalidConfiguration = $0 { return true }
            return false
        }
    }

    /// Reconfiguring one output of a request leaves the others at the
    /// values they have now, not the ones they were requested with.
    func testReconfiguringOneLineKeepsTheOthersValues() throws {
        let rig = try ManualRig()
        let req = try rig.gpio.request([5, 6, 7], .output(false))
        try req.setValues([(5, true), (7, true)])
        try req.reconfigure(6, .output(true, activeLow: true))
        XCTAssertEqual(try req.readValues(), [true, true, true])
        XCTAssertEqual(try rig.chip.outputHistory(5).map(\.value), [false, true], "line 5 not written again")
        XCTAssertEqual(try rig.chip.outputHistory(7).map(\.value), [false, true])
        XCTAssertEqual(try rig.chip.level(6), false, "active low: on is low")
    }

    func testActiveLowInvertsReadsWritesAndEdges() throws {
        let rig = try ManualRig()
        // Input: wire high reads 0, wire low reads 1; a high→low wire is a rising edge.
        try rig.chip.setLevel(4, true)
        let door = try rig.gpio.request("DOOR", .input(edges: .both, activeLow: true))
        XCTAssertEqual(try door.value(), false)
        let log = EventLog()
        try door.schedule(on: rig.loop) { log.record($0) }
        try rig.chip.setLevel(4, false, at: rig.at(ms: 1))
        try rig.chip.setLevel(4, true, at: rig.at(ms: 2))
        try rig.settle()
        XCTAssertEqual(log.edges, [.rising, .falling])
        try rig.chip.setLevel(4, false)
        XCTAssertEqual(try door.value(), true)

        // Output: writing 1 drives the wire low.
        let led = try rig.gpio.request(27, .output(false, activeLow: true))
        XCTAssertEqual(try rig.chip.level(27), true, "logical 0 on an active-low output: wire high")
        try led.setValue(true)
        XCTAssertEqual(try rig.chip.level(27), false)
        let last = try XCTUnwrap(rig.chip.outputHistory(27).last)
        XCTAssertEqual(last.value, true)
        XCTAssertEqual(last.level, false)
        XCTAssertEqual(try led.value(), true)
    }

    func testWiringAnOutputToAnInputDrivesItsEdges() throws {
        let rig = try ManualRig()
        try rig.chip.wire(27, to: 4)
        let input = try rig.gpio.request(4, .input(edges: .both))
        let log = EventLog()
        try input.schedule(on: rig.loop) { log.record($0) }
        let output = try rig.gpio.request(27, .output(false))
        rig.clock.advance(by: .milliseconds(1))
        try output.setValue(true)
        rig.clock.advance(by: .milliseconds(1))
        try output.setValue(false)
        try rig.settle()
        XCTAssertEqual(log.edges, [.rising, .falling])
        XCTAssertEqual(log.timestamps, [rig.at(ms: 1), rig.at(ms: 2)].map(\.nanoseconds))
        XCTAssertEqual(try input.value(), false)
    }

    func testWiringAcrossChipsAndInverted() throws {
        let clock = ManualClock()
        let loop = try makeLoop(clock: .manual(clock))
        let a = try MockChip(name: "gpiochip0", label: "a", lineCount: 8, clock: .manual(clock))
        let b = try MockChip(name: "gpiochip1", label: "b", lineCount: 8, clock: .manual(clock))
        try a.wire(1, to: 2, on: b, inverted: true)
        let board = try MockGPIO([a, b])
        let input = try GPIOChip("b", backend: board).request(2, .input(edges: .both))
        let log = EventLog()
        try input.schedule(on: loop) { log.record($0) }
        let out = try GPIOChip("a", backend: board).request(1, .output(false))
        // Requesting the output low drives b's line 2 high through the inverter.
        try loop.advanceManualClock(by: .zero)
        XCTAssertEqual(log.edges, [.rising])
        try out.setValue(true)
        try loop.advanceManualClock(by: .zero)
        XCTAssertEqual(log.edges, [.rising, .falling])
    }

    func testADaemonsOwnOutputDrivesItsInputOnTheLoop() throws {
        // Button toggles LED; LED wired back to a sense input: the loop sees
        // its own output's edges, in order, within the same run.
        let rig = try ManualRig()
        try rig.chip.wire(27, to: 5)
        let button = try rig.gpio.request(17, .input(edges: .rising))
        let led = try rig.gpio.request(27, .output(false))
        let sense = try rig.gpio.request(5, .input(edges: .both))
        let senseLog = EventLog()
        var on = false
        try button.schedule(on: rig.loop) { batch in
            for _ in batch {
                on.toggle()
                try? led.setValue(on)
            }
        }
        try sense.schedule(on: rig.loop) { senseLog.record($0) }
        for k in 0..<3 { try rig.chip.pulse(17, width: .milliseconds(1), at: rig.at(ms: Int64(k) * 10)) }
        try rig.settle()
        XCTAssertEqual(senseLog.edges, [.rising, .falling, .rising])
        XCTAssertEqual(try rig.chip.outputHistory(27).map(\.value), [false, true, false, true])
    }

    func testReconfigureInputToOutputAndBack() throws {
        let rig = try ManualRig()
        try rig.chip.setLevel(9, true)
        let req = try rig.gpio.request(9, .input())
        XCTAssertEqual(try req.value(), true)
        assertGPIOError(try req.setValue(false)) {
            if case .notAnOutput(let line) = $0 { return line.offset == 9 }
            return false
        }
        try req.reconfigure(9, .output(false))
        XCTAssertEqual(try rig.chip.level(9), false)
        try req.setValue(true)
        XCTAssertEqual(try rig.chip.outputHistory(9).map(\.value), [false, true])
        try req.reconfigure(9, .input(edges: .both))
        XCTAssertEqual(try req.value(), true, "back to an input: it reads the external level again")
        XCTAssertEqual(req.settings[0].direction, .input)
        let info = try rig.gpio.lineInfo(9)
        XCTAssertEqual(info.direction, .input)
        XCTAssertEqual(info.edgeDetection, .both)
    }

    func testBiasGivesTheLevelOfAnUndrivenInput() throws {
        let rig = try ManualRig()
        let up = try rig.gpio.request(10, .input(bias: .pullUp))
        let down = try rig.gpio.request(11, .input(bias: .pullDown))
        XCTAssertEqual(try up.value(), true)
        XCTAssertEqual(try down.value(), false)
        try rig.chip.setLevel(10, false)
        XCTAssertEqual(try up.value(), false, "driven from outside: the drive wins over the pull")
    }
}
