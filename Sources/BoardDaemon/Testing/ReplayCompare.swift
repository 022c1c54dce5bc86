/// How `boardd replay` compares one output's writes with the board's.
extension Replay {
    /// One output's writes, the board's against the replay's: the longest
    /// common run of writes aligned (an edit script; two writes pair when
    /// they set the same value at most `pairWindow` apart), then each
    /// aligned pair further apart than `tolerance`.
    static func compare(
        _ line: String, board: [(Duration, Bool)], replay: [(Duration, Bool)], tolerance: Duration
    ) -> [String] {
        var cells = 0
        return compare(line, board: board, replay: replay, tolerance: tolerance, cells: &cells)
    }

    /// The board's timer writes found late, within what is allowed.
    struct Lateness {
        var count = 0
        var most: Duration = .zero
    }

    /// `compare`, counting the alignment table's cells in `cells`. The
    /// writes the two share at the start and at the end (the values, in
    /// order) are paired as they come; only what lies between is aligned
    /// by a table, so two long runs that mostly agree cost their length,
    /// not its square. A middle whose table would pass `maximumTable`
    /// cells is paired in order instead.
    static func compare(
        _ line: String, board: [(Duration, Bool)], replay: [(Duration, Bool)], tolerance: Duration, cells: inout Int
    ) -> [String] {
        var lateness = Lateness()
        return compare(line, board: board, replay: replay, tolerance: tolerance, cells: &cells, late: .zero, timers: [], lateness: &lateness)
    }

    /// `compare`, where the board's writes a timer made (`timers`) may be
    /// up to `late` (beyond `tolerance`) later than the replay's: counted
    /// in `lateness`, not differences. Earlier is a difference as ever.
    static func compare(
        _ line: String, board: [(Duration, Bool)], replay: [(Duration, Bool)], tolerance: Duration, cells: inout Int, late: Duration,
        timers: [Bool], lateness: inout Lateness
    ) -> [String] {
        let n = board.count
        let m = replay.count
        // Two writes pair when they set the same value close enough in
        // time to be the same write: a value the replay writes long after
        // the board did is two writes, each made by one side only.
        let window = max(pairWindow, tolerance + late)
        func matches(_ i: Int, _ j: Int) -> Bool {
            board[i].1 == replay[j].1 && (board[i].0 > replay[j].0 ? board[i].0 - replay[j].0 : replay[j].0 - board[i].0) <= window
        }
        var head = 0
        while head < n && head < m && matches(head, head) { head += 1 }
        var tail = 0
        while tail < n - head && tail < m - head && matches(n - 1 - tail, m - 1 - tail) { tail += 1 }
        var out: [String] = []
        func v(_ b: Bool) -> String { b ? "on" : "off" }
        func step(_ s: Step) {
            switch s {
            case let .pair(i, j):
                let gap = board[i].0 > replay[j].0 ? board[i].0 - replay[j].0 : replay[j].0 - board[i].0
                if gap > tolerance && board[i].0 > replay[j].0 && i < timers.count && timers[i] && gap <= tolerance + late {
                    lateness.count += 1
                    lateness.most = max(lateness.most, gap)
                } else if gap > tolerance {
                    out.append("\(line) -> \(v(replay[j].1)) at \(ms(replay[j].0)); the board at \(ms(board[i].0))")
                }
            case let .replayOnly(j): out.append("\(line) -> \(v(replay[j].1)) at \(ms(replay[j].0)); the board did not")
            case let .boardOnly(i): out.append("\(line) -> \(v(board[i].1)) at \(ms(board[i].0)) on the board; the config did not")
            }
        }
        for k in 0..<head { step(.pair(k, k)) }
        align(head..<(n - tail), head..<(m - tail), matches, cells: &cells, step)
        for k in 0..<tail { step(.pair(n - tail + k, m - tail + k)) }
        return out
    }

    enum Step {
        case pair(Int, Int), replayOnly(Int), boardOnly(Int)
    }

    /// The edit script of two runs of writes (index ranges of the board's
    /// and the replay's), pairing those that `matches`, by a longest common
    /// subsequence table; in order when the table would pass `maximumTable`
    /// cells.
    static func align(
        _ b: Range<Int>, _ r: Range<Int>, _ matches: (Int, Int) -> Bool, cells: inout Int, _ step: (Step) -> Void
    ) {
        let n = b.count
        let m = r.count
        var i = 0
        var j = 0
        guard n > 0 && m > 0 && n <= maximumTable / m else {
            while i < n || j < m {
                if i < n && j < m && matches(b.lowerBound + i, r.lowerBound + j) {
                    step(.pair(b.lowerBound + i, r.lowerBound + j))
                    i += 1
                    j += 1
                } else if j < m {
                    step(.replayOnly(r.lowerBound + j))
                    j += 1
                } else {
                    step(.boardOnly(b.lowerBound + i))
                    i += 1
                }
            }
            return
        }
        cells += n * m
        let w = m + 1
        var table = [Int32](repeating: 0, count: (n + 1) * w)
        for i in stride(from: n - 1, through: 0, by: -1) {
            for j in stride(from: m - 1, through: 0, by: -1) {
                table[i * w + j] =
                    matches(b.lowerBound + i, r.lowerBound + j)
                    ? table[(i + 1) * w + j + 1] + 1 : max(table[(i + 1) * w + j], table[i * w + j + 1])
            }
        }
        while i < n || j < m {
            if i < n && j < m && matches(b.lowerBound + i, r.lowerBound + j) {
                step(.pair(b.lowerBound + i, r.lowerBound + j))
                i += 1
                j += 1
            } else if j < m && (i == n || table[i * w + j + 1] >= table[(i + 1) * w + j]) {
                step(.replayOnly(r.lowerBound + j))
                j += 1
            } else {
                step(.boardOnly(b.lowerBound + i))
                i += 1
            }
        }
    }
}
