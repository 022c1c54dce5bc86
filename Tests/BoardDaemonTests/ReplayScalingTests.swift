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

    /// Reading a recording 4 times as long takes about 4 times as long,
    /// not 16 (each record copied the records read before it). The
    /// fastest of three reads of each, so a busy machine cannot flip it.
    @Test func readingARecordingFourTimesAsLongTakesAboutFourTimesAsLong() throws {
        let dir = try TempDir("replay-scaling")
        func fastest(_ edges: Int) throws -> Double {
            let file = dir.path + "/r\(edges).jsonl"
            try Self.recording(edges: edges).write(toFile: file, atomically: true, encoding: .utf8)
            var best = Double.infinity
            for _ in 0..<3 {
                let start = Date()
                guard case let .success(r) = Replay.read(file) else { Issue.record("\(file) was not read"); return best }
                best = min(best, Date().timeIntervalSince(start))
                #expect(r.edges.count == edges && r.writes.count == edges)
            }
            return best
        }
        let small = try fastest(4_000)
        let large = try fastest(16_000)
        #expect(large / small < 8, "4,000 edges: \(small) s; 16,000 edges: \(large) s")
    }
}
