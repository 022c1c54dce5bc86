import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import BoardSupport

/// The one place that chooses a board's GPIO backend and makes mock chips:
/// a board file with `backend: mock` is served by mock chips made from its
/// `chips` (labels, line counts, names, the lines that rest high), any other
/// board by libgpiod.
public enum MockBoard {
    /// The backend that serves `board`, and its mock chips on a mock board:
    /// `given` when the caller made them (tests: a manual clock), else made
    /// from the board file with `clock`.
    public static func backend(for board: BoardChoice, given: MockGPIO? = nil, clock: RunLoopClock = .monotonic) throws
        -> (gpio: any GPIOBackend, mock: MockGPIO?)
    {
        guard board.backend == .mock else { return (LibgpiodBackend.shared, nil) }
        let mock = try given ?? chips(board.chips, clock: clock)
        return (mock, mock)
    }

    /// Mock chips as a board file describes them (`gpiochip0`, `gpiochip1`,
    /// … in file order), each `idle_high` line already high.
    /// `eventBufferSize`, `historyCapacity`: see `MockChip.init`.
    public static func chips(
        _ described: [Board.Chip], clock: RunLoopClock = .monotonic, eventModel: MockChip.EventModel = .v2,
        eventBufferSize: Int? = nil, historyCapacity: Int = 4096
    ) throws -> MockGPIO {
        let chips = try described.enumerated().map { i, c in
            try MockChip(
                name: "gpiochip\(i)", label: c.label, lineCount: c.lines ?? 32, lineNames: c.names, eventModel: eventModel,
                eventBufferSize: eventBufferSize, clock: clock, historyCapacity: historyCapacity)
        }
        for (chip, c) in zip(chips, described) {
            for offset in c.idleHigh { try chip.setLevel(.offset(offset), true) }
        }
        return try MockGPIO(chips)
    }
}
