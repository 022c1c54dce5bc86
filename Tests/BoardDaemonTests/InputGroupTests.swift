import Boardloop
import BoardloopGPIOMock
import BoardloopTestSupport
import Foundation
import XCTest

@testable import BoardDaemon

/// Inputs of one loop, chip and priority share one line request: a flood
/// over several of them is read as a flood on one line is, while each line
/// keeps its own settings, held events, loss counts and filters; a line
/// with a rate limit or of another priority keeps a request of its own; a
/// reload keeps an unchanged group and requests a changed one again.
final class InputGroupTests: XCTestCase {
    static let config = """
        board: demo
        priorities: [low, high]
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true, debounce: 0ms }, priority: low }
          door: { pin: MOCK0_1, input: { edge: both, debounce: 0ms }, priority: low }
          contact: { pin: CHATTER, input: { edge: both, debounce: 0ms }, priority: low }
          estop: { pin: ESTOP, input: { edge: falling, debounce: 0ms }, priority: high }
          limited: { pin: MOCK0_2, input: { edge: both, debounce: 0ms }, priority: low, rate_limit: { events: 100, per: 1s } }
          led: { pin: LED, output: {} }
          valve: { pin: VALVE, output: { initial: on, safe: off } }
          fan: { pin: FAN, output: {} }
        modes:
          critical: { admits: [high] }
        sequences:
          pour: { mode: critical, steps: [ wait: 100ms ] }
        reactions:
          - { name: b, on: { line: button, press: true }, do: [ set: { led: off } ] }
          - { name: c, on: { line: contact, edge: rising }, do: [ set: { led: on } ] }
          - { name: d, on: { line: door, edge: both }, do: [ toggle: fan ] }
          - { name: e, on: { line: estop, edge: falling }, do: [ set: { valve: off }, sequence: pour ] }
          - { name: l, on: { line: limited, edge: both }, do: [ toggle: fan ] }

        """

    private func input(_ h: Harness, _ name: String) throws -> InputLine {
        let i = try XCTUnwrap(h.daemon.config.lines.firstIndex { $0.name == name })
        return try XCTUnwrap(h.daemon.main.inputs[i], name)
    }

    private func offset(_ pin: String) -> UInt32 { Harness.offset(pin) }

    /// Button, door and contact (one chip, low priority) share a request;
    /// the e-stop (high) and the rate-limited line have their own.
    func testInputsOfOneChipAndPriorityShareOneRequest() throws {
        let h = try Harness(Self.config)
        XCTAssertEqual(h.chip.calls.requests, 4, "the low group, the e-stop, the limited line, the outputs")
        let button = try input(h, "button"), door = try input(h, "door"), contact = try input(h, "contact")
        XCTAssertTrue(button.request === door.request && door.request === contact.request)
        XCTAssertNotNil(button.group)
        XCTAssertEqual(Set([button.index, door.index, contact.index]), [0, 1, 2])
        XCTAssertNil(try input(h, "estop").group)
        XCTAssertNil(try input(h, "limited").group)
        XCTAssertFalse(try input(h, "estop").request === button.request)
        XCTAssertFalse(try input(h, "limited").request === button.request)
    }

    /// 24 edges spread over three lines of the group take as many reads as
    /// 24 edges on one line; each line sees its own, in the order they
    /// happened (a contact's rise then a press leaves the led off, the
    /// other way round on).
    func testAFloodOverTheGroupIsReadAsAFloodOnOneLine() throws {
        let h = try Harness(Self.config)
        // Order across lines: the contact rises (led on), then the button
        // is pressed (led off), in one read.
        try h.chip.setLevel(.offset(offset("CHATTER")), true)
        try h.chip.setLevel(.offset(offset("BUTTON")), false)
        try h.daemon.settle()
        XCTAssertEqual(try h.writes("LED"), [true, false], "the contact's reaction, then the button's")
        try h.chip.setLevel(.offset(offset("CHATTER")), false)
        try h.chip.setLevel(.offset(offset("BUTTON")), true)
        try h.daemon.settle()

        var reads = h.chip.calls.eventReads
        var door = false, contact = false
        for k in 0..<24 {
            switch k % 3 {
            case 0: try h.chip.setLevel(.offset(offset("BUTTON")), k % 2 == 1)
            case 1:
                door.toggle()
                try h.chip.setLevel(.offset(offset("MOCK0_1")), door)
            default:
                contact.toggle()
                try h.chip.setLevel(.offset(offset("CHATTER")), contact)
            }
        }
        try h.daemon.settle()
        let spread = h.chip.calls.eventReads - reads
        XCTAssertEqual(h.counters.lines["button"]?.events, 10)
        XCTAssertEqual(h.counters.lines["door"]?.events, 8)
        XCTAssertEqual(h.counters.lines["contact"]?.events, 10)
        XCTAssertEqual(h.fires("d"), 8)
        XCTAssertEqual(h.fires("c"), 5)
        XCTAssertEqual(h.fires("b"), 5)

        reads = h.chip.calls.eventReads
        for _ in 0..<24 {
            door.toggle()
            try h.chip.setLevel(.offset(offset("MOCK0_1")), door)
        }
        try h.daemon.settle()
        let one = h.chip.calls.eventReads - reads
        XCTAssertEqual(h.counters.lines["door"]?.events, 32)
        XCTAssertEqual(spread, one, "a flood over three lines costs the reads of a flood on one")

    }

    /// While a sequence's mode holds the low priority, edges on three lines
    /// of the group wait, each in its line's ring, and are delivered, each
    /// line's in order, when the sequence ends; none is lost.
    func testHeldEdgesOfTheGroupAreDeliveredInOrderAfterTheSequence() throws {
        let h = try Harness(Self.config)
        try h.setLevel("ESTOP", false)
        XCTAssertEqual(h.daemon.mainMode, "critical")
        let fan = try h.writes("FAN").count
        try h.setLevel("CHATTER", true)
        try h.advance(5)
        try h.setLevel("MOCK0_1", true)
        try h.advance(5)
        try h.press()
        try h.advance(5)
        try h.setLevel("MOCK0_1", false)
        XCTAssertEqual(h.fires("c") + h.fires("d") + h.fires("b"), 0, "held while the sequence runs")
        try h.advance(100)
        XCTAssertEqual(h.daemon.mainMode, "default")
        try h.advance(1)
        XCTAssertEqual(h.fires("c"), 1)
        XCTAssertEqual(h.fires("b"), 1)
        XCTAssertEqual(h.fires("d"), 2)
        XCTAssertEqual(Array(try h.writes("FAN").dropFirst(fan)), [true, false], "the door's two edges, in order")
        for name in ["button", "door", "contact"] { XCTAssertEqual(h.counters.lines[name]?.lost, 0, name) }
    }

    /// Losses the kernel numbers are counted on the line they happened on,
    /// not on the other lines of the group.
    func testALossIsCountedOnItsLineOnly() throws {
        let h = try Harness(Self.config)
        try h.chip.dropEvents(.offset(offset("MOCK0_1")), count: 3)
        try h.chip.setLevel(.offset(offset("MOCK0_1")), true)
        try h.chip.setLevel(.offset(offset("CHATTER")), true)
        try h.daemon.settle()
        XCTAssertEqual(h.counters.lines["door"]?.lost, 3)
        XCTAssertEqual(h.counters.lines["contact"]?.lost, 0)
        XCTAssertEqual(h.counters.lines["button"]?.lost, 0)
        XCTAssertEqual(h.counters.lines["contact"]?.events, 1)
    }

    /// libgpiod 1.6: a full FIFO on one line of the group shows on that
    /// line, whose level is read again; the other line's edges all arrive.
    func testAFullFIFOOnOneLineOfTheGroupIsThatLinesAlone() throws {
        let h = try Harness(Self.config, eventModel: .v1)
        try h.setLevel("MOCK0_1", true)
        try h.setLevel("CHATTER", true)
        try h.chip.burst(.offset(offset("CHATTER")), edges: 17, spacing: .microseconds(10))
        try h.daemon.settle()
        XCTAssertEqual(h.counters.lines["contact"]?.suspectedOverflows, 1)
        XCTAssertEqual(h.counters.lines["door"]?.suspectedOverflows, 0)
        XCTAssertEqual(h.counters.lines["door"]?.events, 1)
        XCTAssertEqual(h.counters.lines["door"]?.lost, 0)
        XCTAssertFalse(try h.chip.level(.offset(offset("CHATTER"))), "the pin ended low")
        XCTAssertFalse(try input(h, "contact").level, "the contact's level is read again after its full FIFO")
        XCTAssertTrue(try input(h, "door").level)
    }

    /// A reload that changes none of the group's lines keeps its request
    /// (no kernel call); one that changes a line requests the group again,
    /// and the unchanged lines go on: a `delayed_on` in flight on the
    /// button keeps its deadline, and an edge that waited in the old
    /// request is not lost (the level is read again).
    func testReloadKeepsAnUnchangedGroupAndRequestsAChangedOneAgain() throws {
        let delayed = Self.config.replacingOccurrences(
            of: "button: { pin: BUTTON, input: { edge: both, active_low: true, debounce: 0ms }, priority: low }",
            with: "button: { pin: BUTTON, input: { edge: both, active_low: true, debounce: 0ms, delayed_on: 100ms }, priority: low }")
        let file = try ConfigFile(delayed)
        let h = try Harness(path: file.path)
        let group = try input(h, "button").request
        var before = h.chip.calls
        let changed = delayed.replacingOccurrences(of: "do: [ toggle: fan ] }\n  - { name: e", with: "do: [ set: { fan: on } ] }\n  - { name: e")
        XCTAssertNotEqual(changed, delayed)
        try file.write(changed)
        h.daemon.reload()
        XCTAssertEqual(h.daemon.reloads.applied, 1, h.log)
        XCTAssertEqual(h.chip.calls.requests, before.requests, "nothing requested again")
        XCTAssertEqual(h.chip.calls.releases, before.releases, "nothing released")
        XCTAssertTrue(try input(h, "door").request === group)

        try h.press()
        try h.advance(50)
        try h.chip.setLevel(.offset(offset("MOCK0_1")), true)  // waits in the kernel
        before = h.chip.calls
        try file.write(
            changed.replacingOccurrences(
                    of: "contact: { pin: CHATTER, input: { edge: both, debounce: 0ms }, priority: low }",
                    with: "contact: { pin: CHATTER, input: { edge: both, debounce: 0ms, bias: pull-down }, priority: low }"))
        h.daemon.reload()
        XCTAssertEqual(h.daemon.reloads.applied, 2, h.log)
        XCTAssertEqual(h.chip.calls.releases - before.releases, 1, "the group's request")
        XCTAssertEqual(h.chip.calls.requests - before.requests, 1, "made again, with the contact's new bias")
        let button = try input(h, "button")
        XCTAssertFalse(button.request === group)
        XCTAssertTrue(button.request === (try input(h, "contact")).request)
        try h.daemon.settle()
        XCTAssertEqual(h.fires("d"), 1, "the door's edge that waited in the old request")
        XCTAssertTrue(try input(h, "door").level)
        try h.advance(45)
        XCTAssertEqual(h.fires("b"), 0, "the delayed_on goes on from the press, 95 ms ago")
        try h.advance(10)
        XCTAssertEqual(h.fires("b"), 1, "100 ms after the press, not 100 ms after the reload")
    }

    /// A line that leaves the group at a reload makes the group's request
    /// again without it; the line back with a rate limit gets a request of
    /// its own while the group's is kept. Every line still sees its edges,
    /// and the loop holds the sources its budget counts. (The loop is made
    /// with room for every input alone, so neither reload needs a restart.)
    func testReloadThatTakesALineOutOfTheGroupRequestsItAgain() throws {
        let file = try ConfigFile(Self.config)
        let h = try Harness(path: file.path)
        let old = try input(h, "button").request
        var before = h.chip.calls
        let withoutDoor = Self.config
            .replacingOccurrences(of: "  door: { pin: MOCK0_1, input: { edge: both, debounce: 0ms }, priority: low }\n", with: "")
            .replacingOccurrences(of: "  - { name: d, on: { line: door, edge: both }, do: [ toggle: fan ] }\n", with: "")
        XCTAssertNotEqual(withoutDoor, Self.config)
        try file.write(withoutDoor)
        h.daemon.reload()
        XCTAssertEqual(h.daemon.reloads.applied, 1, h.log)
        XCTAssertEqual(h.chip.calls.releases - before.releases, 1, "the group's old request")
        XCTAssertEqual(h.chip.calls.requests - before.requests, 1, "one request for the button and the contact")
        let group = try input(h, "contact").request
        XCTAssertFalse(group === old)
        XCTAssertTrue(group === (try input(h, "button")).request)
        XCTAssertEqual(group.count, 2)
        XCTAssertNil(try h.chip.consumer(.offset(offset("MOCK0_1"))), "the door's line is free")
        try h.setLevel("CHATTER", true)
        XCTAssertEqual(h.fires("c"), 1)

        before = h.chip.calls
        try file.write(
            Self.config.replacingOccurrences(
                of: "door: { pin: MOCK0_1, input: { edge: both, debounce: 0ms }, priority: low }",
                with: "door: { pin: MOCK0_1, input: { edge: both, debounce: 0ms }, priority: low, rate_limit: { events: 50, per: 1s } }"))
        h.daemon.reload()
        XCTAssertEqual(h.daemon.reloads.applied, 2, h.log)
        XCTAssertEqual(h.chip.calls.requests - before.requests, 1, "the door's own")
        XCTAssertEqual(h.chip.calls.releases, before.releases, "the group's request is kept")
        XCTAssertTrue(try input(h, "contact").request === group)
        XCTAssertNil(try input(h, "door").group)
        try h.setLevel("MOCK0_1", true)
        try h.setLevel("CHATTER", false)
        try h.setLevel("CHATTER", true)
        XCTAssertEqual(h.fires("d"), 1, "counted from the reload on")
        XCTAssertEqual(h.fires("c"), 1, "the contact's rise after the reload")
        XCTAssertEqual(h.counters.lines["contact"]?.events, 3, "a line's counts go on across reloads: one edge before the second")
        // The loop holds the sources the new config's budget counts.
        let d = h.daemon
        let plan = LoopBudget.atStart(d.config, loop: .main, capabilities: d.gpio.capabilities, extras: LoopBudget.Extras(d.options))
        XCTAssertEqual(d.loop.usage.sources, plan.sources)
    }

    /// A line's own loss shows with its next event, which may come in a
    /// batch with no request-wide gap (the gap showed earlier, in a batch
    /// of another line): it is still counted on the line.
    func testALossFoundInALaterBatchIsCountedOnItsLine() throws {
        let h = try Harness(Self.config)
        try h.chip.dropEvents(.offset(offset("MOCK0_1")), count: 2)
        try h.setLevel("CHATTER", true)  // the request-wide gap shows here
        XCTAssertEqual(h.counters.lines["door"]?.lost, 0, "not known yet: the door's numbers have not been seen")
        XCTAssertEqual(h.counters.lines["contact"]?.lost, 0)
        try h.setLevel("MOCK0_1", true)  // the door's own gap shows here
        XCTAssertEqual(h.counters.lines["door"]?.lost, 2)
        XCTAssertEqual(h.counters.lines["contact"]?.lost, 0)
        XCTAssertEqual(h.counters.lines["button"]?.lost, 0)
    }

    /// Another line's edge waiting in the shared request does not put a
    /// line's deadline off: when the button's timer fires for its
    /// `delayed_on` with a door edge waiting (a flood on the door would
    /// have one waiting at every fire), the request is read — the door's
    /// edge to the door — and the delayed press fires. (The clock is moved
    /// and the timer's handler called by hand: a manual-clock pass reads
    /// every waiting edge before time moves.)
    func testAnotherLinesWaitingEdgeDoesNotPutADeadlineOff() throws {
        let config = Self.config.replacingOccurrences(
            of: "button: { pin: BUTTON, input: { edge: both, active_low: true, debounce: 0ms }, priority: low }",
            with: "button: { pin: BUTTON, input: { edge: both, active_low: true, debounce: 0ms, delayed_on: 50ms }, priority: low }")
        let h = try Harness(config)
        let button = try input(h, "button")
        XCTAssertTrue(button.request === (try input(h, "door")).request)
        try h.press()
        h.clock.advance(by: .milliseconds(50))
        try h.chip.setLevel(.offset(offset("MOCK0_1")), true)  // waits in the request
        XCTAssertTrue(button.kernelHasEvents())
        button.timerFired()
        XCTAssertEqual(h.fires("b"), 1, "the delayed press fired, not put off")
        XCTAssertEqual(h.fires("d"), 1, "the door's edge went to the door")
        XCTAssertFalse(button.kernelHasEvents())
    }
}
