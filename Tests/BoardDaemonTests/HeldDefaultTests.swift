import Boardloop
import BoardDaemon
import BoardSupport
import Foundation
import XCTest

/// Held must not mean lost by default: a line a sequence holds gets a
/// drain ring sized for the hold at its `max_rate` (read on the holding
/// modes' task's period when one runs there), `--check` shows the plan, and
/// a config whose own numbers say a buffer will overflow is warned about.
final class HeldDefaultTests: XCTestCase {
    /// A low-priority contact chattering at up to 4 kHz, held through a
    /// 150 ms pour. No `drain` anywhere; `extra` adds keys to its input.
    static func config(task: Bool = false, extra: String = "") -> String {
        """
        board: demo
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true }, priority: low }
          chatter: { pin: CHATTER, input: { edge: both, max_rate: 4kHz\(extra) }, priority: low }
          led: { pin: LED, output: { safe: off } }
          valve: { pin: VALVE, output: { safe: off } }
          fan: { pin: FAN, output: {} }
        modes:
          critical: { admits: [high] }
        \(task ? "tasks:\n  tick: { every: 10ms, in_modes: [critical], do: [ toggle: fan ] }" : "")
        sequences:
          pour:
            mode: critical
            steps: [ set: { valve: on }, wait: 150ms, set: { valve: off } ]
        reactions:
          - { name: start, on: { line: button, press: true }, do: [ sequence: pour ] }
          - { name: count, on: { line: chatter, edge: both }, do: [ toggle: led ] }
        """
    }

    /// 600 edges at 4 kHz while the pour holds the contact; returns the harness after the pour.
    func flood(_ yaml: String) throws -> Harness {
        let h = try Harness(yaml)
        try h.press()
        XCTAssertEqual(h.daemon.mainMode, "critical")
        var level = false
        for i in 0..<600 {
            level.toggle()
            try h.chip.setLevel(.offset(23), level)
            // The last edge comes 149.75 ms into the pour; 250 µs later it ends.
            if i == 599 { XCTAssertEqual(h.fires("count"), 0, "held: nothing dispatched during the pour") }
            try h.daemon.advance(by: .microseconds(250), step: .microseconds(250))
        }
        try h.advance(2)
        XCTAssertEqual(h.daemon.mainMode, "default")
        try h.advance(1)
        return h
    }

    func testAFloodHeldThroughASequenceIsDeliveredWholeWithNoDrainSet() throws {
        let h = try flood(Self.config())
        // Each edge changes the level, so a fire per edge means all 600 came in order.
        XCTAssertEqual(h.fires("count"), 600, "every held edge delivered after the pour, in order")
        XCTAssertEqual(try h.writes("LED").count, 600)
        XCTAssertEqual(h.counters.lines["chatter"]?.lost, 0)
        XCTAssertEqual(h.counters.lines["chatter"]?.heldInRing, 600)
    }

    func testWithATaskInTheHoldingModeTheDefaultDrainReadsOnItsPeriod() throws {
        let h = try flood(Self.config(task: true))
        XCTAssertEqual(h.fires("count"), 600, "every held edge delivered after the pour, in order")
        XCTAssertEqual(h.counters.lines["chatter"]?.lost, 0)
        let reads = try XCTUnwrap(h.counters.lines["chatter"]?.drainReads)
        XCTAssertTrue((10...16).contains(reads), "read by the drain timer on the task's 10 ms period: \(reads) reads")
    }

    func testDrainZeroOptsOut() throws {
        let h = try flood(Self.config(extra: ", drain: 0"))
        XCTAssertEqual(h.fires("count"), 64, "only the kernel buffer's 64")
        XCTAssertEqual(h.counters.lines["chatter"]?.lost, 536)
    }

    func testTheCheckSummaryShowsEachHeldLinesPlan() throws {
        let r = ConfigLoader.load(text: Self.config(task: true), file: "t.yaml")
        let c = try XCTUnwrap(r.config, "\(r.diagnostics)")
        let s = ConfigSummary(c)
        XCTAssertTrue(
            s.text.contains(
                "  chatter: held in critical; longest hold 150ms (sequence 'pour'); max_rate 4kHz: 600 events; kernel buffer 64 (libgpiod 1.6: 16); drain 1200 (default); drain_every 10ms (task tick's period); holds 1200 events (300ms at 4kHz)"
            ), s.text)
        XCTAssertTrue(
            s.text.contains(
                "  button: held in critical; longest hold 150ms (sequence 'pour'); max_rate 1kHz (default): 150 events; kernel buffer 64 (libgpiod 1.6: 16); drain 300 (default); drain_every 10ms (task tick's period); holds 300 events (300ms at 1kHz)"
            ), s.text)
        XCTAssertFalse(s.text.contains("  led: held"), "outputs are not held")
        XCTAssertNil(c.lines.first { $0.name == "led" }?.heldPlan)
        // A line no mode holds keeps no ring and is not in the plan.
        let yaml = Self.config().replacingOccurrences(of: "priority: low }\n  led", with: "priority: high }\n  led")
        let c2 = try XCTUnwrap(ConfigLoader.load(text: yaml, file: "t.yaml").config)
        let free = try XCTUnwrap(c2.lines.first { $0.name == "chatter" })
        XCTAssertNil(free.heldPlan, "a high-priority line the critical mode admits is never held")
        XCTAssertEqual(free.held.drain, 0)
        XCTAssertEqual(ConfigSummary(c2).held.map(\.line), ["button"])

        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(s.json.utf8)) as? [String: Any])
        let held = try XCTUnwrap(json["held"] as? [[String: Any]])
        XCTAssertEqual(held.map { $0["line"] as? String }, ["button", "chatter"])
        let chatter = held[1]
        XCTAssertEqual(chatter["modes"] as? [String], ["critical"])
        XCTAssertEqual(chatter["longestHold"] as? String, "150ms")
        XCTAssertEqual(chatter["holdBy"] as? String, "sequence 'pour'")
        XCTAssertEqual(chatter["maxRate"] as? String, "4kHz")
        XCTAssertEqual(chatter["maxRateDeclared"] as? Bool, true)
        XCTAssertEqual(chatter["kernelBuffer"] as? Int, 64)
        XCTAssertEqual(chatter["drain"] as? Int, 1200)
        XCTAssertEqual(chatter["drainDefaulted"] as? Bool, true)
        XCTAssertEqual(chatter["drainEvery"] as? String, "10ms")
        XCTAssertEqual(chatter["drainEveryTask"] as? String, "tick")
        XCTAssertEqual(chatter["canHold"] as? Int, 1200)
        XCTAssertEqual(chatter["expected"] as? Int, 600)
    }

    func testAChosenDrainTimerIsCountedInTheLoopsCapacities() throws {
        let chosen = try XCTUnwrap(ConfigLoader.load(text: Self.config(task: true), file: "t.yaml").config)
        let optOut = try XCTUnwrap(
            ConfigLoader.load(text: Self.config(task: true).replacingOccurrences(of: "active_low: true }", with: "active_low: true, drain: 0 }").replacingOccurrences(of: "max_rate: 4kHz", with: "max_rate: 4kHz, drain: 0"), file: "t.yaml").config)
        XCTAssertTrue(chosen.lines[1].held.drainsOnTimer)
        XCTAssertEqual(chosen.loops[0].capacities.timers, optOut.loops[0].capacities.timers + 2, "a drain timer for each held line")
        XCTAssertEqual(chosen.loops[0].capacities.pendingPerforms, optOut.loops[0].capacities.pendingPerforms + 2)
        _ = try BoardRunLoop(capacities: chosen.loops[0].capacities)
    }

    func testAnExplicitDrainTooSmallForTheHoldIsWarnedAboutWithItsPosition() throws {
        let yaml = Self.config(extra: ", drain: 200")
        let r = ConfigLoader.load(text: yaml, file: "t.yaml")
        XCTAssertNotNil(r.config, "a warning: the config still loads")
        let w = try XCTUnwrap(r.warnings.first, "\(r.diagnostics)")
        XCTAssertEqual(r.warnings.count, 1, "\(r.warnings)")
        XCTAssertEqual(w.line, 4)
        let line4 = String(yaml.split(separator: "\n", omittingEmptySubsequences: false)[3])
        let at = try XCTUnwrap(line4.range(of: "drain: 200"))
        XCTAssertEqual(w.column, line4.distance(from: line4.startIndex, to: at.lowerBound) + "drain: ".count + 1, "at the value")
        XCTAssertEqual(w.path, "lines.chatter.input.drain")
        XCTAssertTrue(
            w.description.hasPrefix(
                "t.yaml:4:\(w.column): warning: lines.chatter.input.drain: 600 events can come while line 'chatter' is held (150ms, sequence 'pour', at 4kHz); drain: 200 keeps 200"),
            w.description)
        // Enough: no warning.
        XCTAssertEqual(ConfigLoader.load(text: Self.config(extra: ", drain: 600"), file: "t.yaml").warnings, [])
        XCTAssertEqual(ConfigLoader.load(text: Self.config(), file: "t.yaml").warnings, [])
    }

    func testOptingOutWithAFloodLargerThanTheKernelBufferIsWarnedAbout() throws {
        let r = ConfigLoader.load(text: Self.config(extra: ", drain: 0"), file: "t.yaml")
        XCTAssertNotNil(r.config)
        XCTAssertEqual(r.warnings.count, 1, "\(r.diagnostics)")
        XCTAssertTrue(
            r.warnings[0].message.contains("with drain: 0 the kernel keeps 64 (libgpiod 1.6: 16): the rest will be lost"),
            r.warnings[0].message)
        // A drain timer slower than the kernel buffer allows.
        let slow = ConfigLoader.load(text: Self.config(extra: ", drain: 2000, drain_every: 50ms"), file: "t.yaml")
        XCTAssertEqual(slow.warnings.map(\.path), ["lines.chatter.input.drain_every"], "\(slow.diagnostics)")
        XCTAssertTrue(slow.warnings[0].message.hasPrefix("300 events can come between two drain reads"), slow.warnings[0].message)
    }

    func testMaxRateTakesAUnit() throws {
        let bare = ConfigLoader.load(text: Self.config().replacingOccurrences(of: "4kHz", with: "4000"), file: "t.yaml")
        XCTAssertEqual(bare.errors.map(\.message), ["a rate needs a unit: write 4000Hz (or kHz)"])
        let c = try XCTUnwrap(ConfigLoader.load(text: Self.config().replacingOccurrences(of: "4kHz", with: "2.5kHz"), file: "t.yaml").config)
        XCTAssertEqual(c.lines[1].held.maxRate, 2500)
    }
}
