/// How `boardd replay` compares one output's writes with the board's.
extension Replay {
    /// One output's writes, the board's against the replay's: the longest
    /// common run of values aligned (an edit script), then each aligned
    /// pair further apart than `tolerance`.
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
        var head = 0
        while head < n && head < m && board[head].1 == replay[head].1 { head += 1 }
        var tail = 0
        while tail < n - head && tail < m - head && board[n - 1 - tail].1 == replay[m - 1 - tail].1 { tail += 1 }
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
        align(board.map(\.1)[head..<(n - tail)], replay.map(\.1)[head..<(m - tail)], cells: &cells, step)
        for k in 0..<tail { step(.pair(n - tail + k, m - tail + k)) }
        return out
    }

    enum Step {
        case pair(Int, Int), replayOnly(Int), boardOnly(Int)
    }

    /// The edit script of two runs of values, by a longest common
    /// subsequence table (indices are the slices' own); in order, equal
    /// values paired, when the table would pass `maximumTable` cells.
    static func align(_ b: ArraySlice<Bool>, _ r: ArraySlice<Bool>, cells: inout Int, _ step: (Step) -> Void) {
        let n = b.count
        let m = r.count
        var i = 0
        var j = 0
        guard n > 0 && m > 0 && n <= maximumTable / m else {
            while i < n || j < m {
                if i < n && j < m && b[b.startIndex + i] == r[r.startIndex + j] {
                    step(.pair(b.startIndex + i, r.startIndex + j))
                    i += 1
                    j += 1
                } else if j < m {
                    step(.replayOnly(r.startIndex + j))
                    j += 1
                } else {
                    step(.boardOnly(b.startIndex + i))
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
                    b[b.startIndex + i] == r[r.startIndex + j] ? table[(i + 1) * w + j + 1] + 1 : max(table[(i + 1) * w + j], table[i * w + j + 1])
            }
        }
        while i < n || j < m {
            if i < n && j < m && b[b.startIndex + i] == r[r.startIndex + j] {
                step(.pair(b.startIndex + i, r.startIndex + j))
                i += 1
                j += 1
            } else if j < m && (i == n || table[i * w + j + 1] >= table[(i + 1) * w + j]) {
                step(.replayOnly(r.startIndex + j))
                j += 1
            } else {
                step(.boardOnly(b.startIndex + i))
                i += 1
            }
        }
    }
}
