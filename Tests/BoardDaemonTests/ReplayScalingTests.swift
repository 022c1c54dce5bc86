import Foundation
import Testing

@testable import BoardDaemon

/// A long replay's comparison with the board costs in proportion to its
/// writes when the two mostly agree: the writes they share at the start
/// and the end are paired as they come, and only what lies between is
/// aligned by a table. Counted in table cells, not timed.
@Suite struct ReplayScalingTests {
    /// `n` writes alternating on and off, 10 ms apart, the replay's `shift` later.
    static func writes(_ n: Int, shift: Duration = .zero) -> [(Duration, Bool)] {
        (0..<n).map { (.milliseconds(10 * $0) + shift, $0 % 2 == 0) }
    }

    @Test func aLongReplayThatAgreesWithTheBoardIsComparedInLinearWork() {
        let n = 20_000
        var cells = 0
        let same = Replay.compare("led", board: Self.writes(n), replay: Self.writes(n, shift: .milliseconds(1)), tolerance: .milliseconds(5), cells: &cells)
        #expect(same == [])
        #expect(cells <= 4 * n, "table cells for \(n) writes a side: \(cells)")
    }

    @Test func aDifferenceInTheMiddleIsStillFoundAndTheRestPaired() {
        let n = 20_000
        var board = Self.writes(n)
        var replay = Self.writes(n)
        // The replay misses a write in the middle, and one is late.
        let half = n / 2
        replay.remove(at: half)
        replay[3 * n / 4].0 += .milliseconds(7)
        board.append((.milliseconds(10 * n), true))
        replay.append((.milliseconds(10 * n), true))
        var cells = 0
        let d = Replay.compare("led", board: board, replay: replay, tolerance: .milliseconds(5), cells: &cells)
        func ms(_ i: Int, _ extra: Int = 0) -> String { Replay.ms(.milliseconds(10 * i + extra)) }
        let late = 3 * n / 4 + 1
        #expect(d == [
            "led -> on at \(ms(half)) on the board; the config did not",
            "led -> \(late % 2 == 0 ? "on" : "off") at \(ms(late, 7)); the board at \(ms(late))",
        ])
        #expect(cells <= 4 * n, "table cells for \(n) writes a side: \(cells)")
    }

    /// Writes pair by time as well as value: the same values written a
    /// second and more apart are two writes each side made alone, not one
    /// write 1.1 s late; near ones still pair, within or beyond tolerance.
    @Test func writesFarApartInTimeDoNotPairByTheirValue() {
        let board: [(Duration, Bool)] = [(.milliseconds(0), true), (.milliseconds(500), false), (.milliseconds(3000), true)]
        let replay: [(Duration, Bool)] = [(.milliseconds(1100), true), (.milliseconds(1600), false), (.milliseconds(3020), true)]
        var cells = 0
        let d = Replay.compare("led", board: board, replay: replay, tolerance: .milliseconds(5), cells: &cells)
        let expected = [
            "led -> on at 0 ms on the board; the config did not",
            "led -> off at 500 ms on the board; the config did not",
            "led -> on at 1100 ms; the board did not",
            "led -> off at 1600 ms; the board did not",
            "led -> on at 3020 ms; the board at 3000 ms",
        ]
        #expect(d.sorted() == expected.sorted(), "\(d)")
        // Within the window (and the tolerance's widening of it) they pair.
        let near = Replay.compare("led", board: [(.milliseconds(100), true)], replay: [(.milliseconds(103), true)], tolerance: .milliseconds(5))
        #expect(near == [])
        let wide = Replay.compare("led", board: [(.milliseconds(0), true)], replay: [(.milliseconds(900), true)], tolerance: .seconds(1))
        #expect(wide == [])
    }

    /// Where the two disagree everywhere, the table is bounded and the
    /// rest is paired in order.
    @Test func twoLongRunsThatDisagreeThroughoutAreComparedInBoundedWork() {
        let n = 20_000
        let board = Self.writes(n)
        let replay = (0..<n).map { (Duration.milliseconds(10 * $0), $0 % 3 == 0) }
        var cells = 0
        let d = Replay.compare("led", board: board, replay: replay, tolerance: .milliseconds(5), cells: &cells)
        #expect(!d.isEmpty)
        #expect(cells <= Replay.maximumTable)
    }

    /// A recording of `edges` presses and releases, each with its write.
    static func recording(edges: Int) -> String {
        var s = #"{"boardd_recording":1,"config":"c.yaml","board":"demo","seconds":60,"levels":{"button":1}}"# + "\n"
        for i in 0..<edges {
            let t = (i + 1) * 2_000_000
            s += #"{"t":\#(t),"loop":"main","kind":"edge","line":"button","edge":"\#(i % 2 == 0 ? "falling" : "rising")"}"# + "\n"
            s += #"{"t":\#(t + 50_000),"loop":"main","kind":"write","line":"led","value":\#(i % 2 == 0 ? 1 : 0),"by":"reaction:follow"}"# + "\n"
        }
        return s + #"{"end":true,"dropped":0}"# + "\n"
    }

    /// A long recording is read whole, every record in order. (That
    /// reading it is linear — each record used to copy every record read
    /// before it — is measured in the replay benchmark, not timed here.)
    @Test func aLongRecordingIsReadWholeAndInOrder() throws {
        let dir = try TempDir("replay-scaling")
        let edges = 16_000
        let file = dir.path + "/r\(edges).jsonl"
        try Self.recording(edges: edges).write(toFile: file, atomically: true, encoding: .utf8)
        guard case let .success(r) = Replay.read(file) else {
            Issue.record("\(file) was not read")
            return
        }
        #expect(r.edges.count == edges && r.writes.count == edges)
    }

    /// More writes than a mock chip keeps between two looks: the replay
    /// reads them as it goes, so it finds every one and reports no
    /// difference (it read the chip at its end only, and reported every
    /// write past the chip's last 65,536 as one the config did not make).
    @Test func aReplayWithMoreWritesThanTheChipKeepsFindsEveryOne() throws {
        let dir = try TempDir("replay-history")
        try "board: demo\nlines:\n  button: { pin: BUTTON, input: { edge: both } }\n  led: { pin: LED, output: {} }\nreactions:\n  - { name: follow, on: { line: button, edge: both }, do: [ toggle: led ] }\n"
            .write(toFile: dir.path + "/c.yaml", atomically: true, encoding: .utf8)
        var text = #"{"boardd_recording":1,"config":"c.yaml","board":"demo","seconds":10,"levels":{"button":0}}"# + "\n"
        let edges = 3000
        for i in 0..<edges {
            let t = (i + 1) * 2_000_000
            text += #"{"t":\#(t),"loop":"main","kind":"edge","line":"button","edge":"\#(i % 2 == 0 ? "rising" : "falling")"}"# + "\n"
            text += #"{"t":\#(t + 50_000),"loop":"main","kind":"write","line":"led","value":\#(i % 2 == 0 ? 1 : 0),"by":"reaction:follow"}"# + "\n"
            text += #"{"t":\#(t + 60_000),"loop":"main","kind":"reaction","name":"follow","line":"button"}"# + "\n"
        }
        text += #"{"end":true,"dropped":0}"# + "\n"
        try text.write(toFile: dir.path + "/r.jsonl", atomically: true, encoding: .utf8)
        var settings = Replay.Settings(file: dir.path + "/r.jsonl", config: dir.path + "/c.yaml", loadOptions: Fixtures.options())
        settings.historyCapacity = 1500
        let out = Replay.run(settings)
        #expect(out.status == 0, "\(out.stdout.suffix(600))\n\(out.stderr)")
        #expect(out.stdout.hasSuffix("0 difference(s)\n"), "\(out.stdout.suffix(600))")
        #expect(out.stdout.components(separatedBy: "led -> ").count - 1 == edges, "every write found")
    }

    /// Outputs start where the board's were when it began recording: a
    /// valve on at the start that a press toggles off is off in the replay
    /// too (it started at the config's `initial`, went on, and differed).
    @Test func outputsStartAtTheirRecordedValues() throws {
        let dir = try TempDir("replay-outputs")
        try "board: demo\nlines:\n  button: { pin: BUTTON, input: { edge: both } }\n  valve: { pin: VALVE, output: { initial: off } }\nreactions:\n  - { name: flip, on: { line: button, edge: rising }, do: [ toggle: valve ] }\n"
            .write(toFile: dir.path + "/c.yaml", atomically: true, encoding: .utf8)
        func replay(_ outputs: String) throws -> CommandOutput {
            let text = #"{"boardd_recording":1,"config":"c.yaml","board":"demo","seconds":1,"levels":{"button":0}\#(outputs)}"# + "\n"
                + #"{"t":100000000,"loop":"main","kind":"edge","line":"button","edge":"rising"}"# + "\n"
                + #"{"t":100050000,"loop":"main","kind":"write","line":"valve","value":0,"by":"reaction:flip"}"# + "\n"
                + #"{"t":100060000,"loop":"main","kind":"reaction","name":"flip","line":"button"}"# + "\n" + #"{"end":true,"dropped":0}"# + "\n"
            try text.write(toFile: dir.path + "/r.jsonl", atomically: true, encoding: .utf8)
            return Replay.run(Replay.Settings(file: dir.path + "/r.jsonl", config: dir.path + "/c.yaml", loadOptions: Fixtures.options()))
        }
        let started = try replay(#","outputs":{"valve":1}"#)
        #expect(started.status == 0, "\(started.stdout)\n\(started.stderr)")
        #expect(started.stdout.contains("valve -> off"), "\(started.stdout)")
        // A recording without outputs (an older boardd's): the config's `initial`.
        let older = try replay("")
        #expect(older.status == 1, "\(older.stdout)")
        #expect(older.stdout.contains("valve -> on at 100"), "\(older.stdout)")
    }

    /// A loaded board runs its timers late, the replay's manual clock never
    /// does: a pulse that ended 14 ms late on the board is no difference
    /// (said as late, within --late-timers); one that ended early is, and
    /// so is a reaction's write (no timer) as late.
    @Test func theBoardsLateTimersAreNotDifferences() throws {
        let dir = try TempDir("replay-late")
        try "board: demo\nlines:\n  button: { pin: BUTTON, input: { edge: both } }\n  valve: { pin: VALVE, output: { initial: off } }\nreactions:\n  - { name: pour, on: { line: button, edge: rising }, do: [ pulse: { valve: 500ms } ] }\n"
            .write(toFile: dir.path + "/c.yaml", atomically: true, encoding: .utf8)
        func replay(on: Int, off: Int, offBy: String = "pulse") throws -> CommandOutput {
            let text = #"{"boardd_recording":1,"config":"c.yaml","board":"demo","seconds":1,"levels":{"button":0},"outputs":{"valve":0}}"# + "\n"
                + #"{"t":100000000,"loop":"main","kind":"edge","line":"button","edge":"rising"}"# + "\n"
                + #"{"t":\#(on),"loop":"main","kind":"write","line":"valve","value":1,"by":"reaction:pour"}"# + "\n"
                + #"{"t":100060000,"loop":"main","kind":"reaction","name":"pour","line":"button"}"# + "\n"
                + #"{"t":\#(off),"loop":"main","kind":"write","line":"valve","value":0,"by":"\#(offBy)"}"# + "\n" + #"{"end":true,"dropped":0}"# + "\n"
            try text.write(toFile: dir.path + "/r.jsonl", atomically: true, encoding: .utf8)
            return Replay.run(Replay.Settings(file: dir.path + "/r.jsonl", config: dir.path + "/c.yaml", loadOptions: Fixtures.options()))
        }
        let late = try replay(on: 100_050_000, off: 614_000_000)
        #expect(late.status == 0, "\(late.stdout)")
        #expect(late.stdout.contains("1 of the board's timer writes were up to 14 ms late"), "\(late.stdout)")
        let early = try replay(on: 100_050_000, off: 590_000_000)
        #expect(early.status == 1, "\(early.stdout)")
        let tooLate = try replay(on: 100_050_000, off: 700_000_000)
        #expect(tooLate.status == 1, "past --late-timers: \(tooLate.stdout)")
        let reactionLate = try replay(on: 114_000_000, off: 600_000_000)
        #expect(reactionLate.status == 1, "a reaction's write has no timer to be late: \(reactionLate.stdout)")
    }

    /// The board refused a run (`max_running`: its child still ran); a
    /// replay that records commands has no child running and runs it: the
    /// board's refusal counts as that run, not a difference.
    @Test func aRunTheBoardRefusedForMaxRunningIsNoDifference() throws {
        let dir = try TempDir("replay-refused")
        try "board: demo\nlines:\n  button: { pin: BUTTON, input: { edge: both } }\ncommands:\n  chime: { argv: [\"/bin/true\"], max_running: 1 }\nreactions:\n  - { name: ring, on: { line: button, edge: rising }, do: [ run: chime ] }\n"
            .write(toFile: dir.path + "/c.yaml", atomically: true, encoding: .utf8)
        func replay(refused: Bool) throws -> CommandOutput {
            var text = #"{"boardd_recording":1,"config":"c.yaml","board":"demo","seconds":1,"levels":{"button":0},"outputs":{}}"# + "\n"
            text += #"{"t":100000000,"loop":"main","kind":"edge","line":"button","edge":"rising"}"# + "\n"
            text += #"{"t":100010000,"loop":"main","kind":"command","name":"chime","event":"start","pid":4242}"# + "\n"
            text += #"{"t":100020000,"loop":"main","kind":"reaction","name":"ring","line":"button"}"# + "\n"
            text += #"{"t":200000000,"loop":"main","kind":"edge","line":"button","edge":"falling"}"# + "\n"
            text += #"{"t":300000000,"loop":"main","kind":"edge","line":"button","edge":"rising"}"# + "\n"
            if refused { text += #"{"t":300010000,"loop":"main","kind":"command","name":"chime","event":"refused","running":1}"# + "\n" }
            text += #"{"t":300020000,"loop":"main","kind":"reaction","name":"ring","line":"button"}"# + "\n" + #"{"end":true,"dropped":0}"# + "\n"
            try text.write(toFile: dir.path + "/r.jsonl", atomically: true, encoding: .utf8)
            return Replay.run(Replay.Settings(file: dir.path + "/r.jsonl", config: dir.path + "/c.yaml", loadOptions: Fixtures.options()))
        }
        let out = try replay(refused: true)
        #expect(out.status == 0, "\(out.stdout)")
        let missing = try replay(refused: false)
        #expect(missing.status == 1, "\(missing.stdout)")
        #expect(missing.stdout.contains("command chime: 2 run(s), the board 1"), "\(missing.stdout)")
    }
}
