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
}
