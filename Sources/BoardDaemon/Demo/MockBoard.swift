import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import BoardSupport

/// The one place that chooses a board's GPIO backend and makes mock chips:
/// a board file with `backend: mock` is served by mock chips made from its
/// `chips` (labels, line counts, names, the lines that rest high), a config
/// run with `--mock` by mock chips made from its board (`layout`), any
/// other board by libgpiod.
public enum MockBoard {
    /// The backend that serves `config`'s board, and its mock chips when
    /// they are mock: `given` when the caller made them (tests: a manual
    /// clock), else made from the board file (`--mock`: `layout`) with `clock`.
    public static func backend(for config: DaemonConfig, given: MockGPIO? = nil, clock: RunLoopClock = .monotonic) throws
        -> (gpio: any GPIOBackend, mock: MockGPIO?)
    {
        let board = config.board
        if board.mock {
            if let given { return (given, given) }
            let mock = try chips(layout(config), clock: clock)
            try rest(config, mock)
            return (mock, mock)
        }
        guard board.backend == .mock else { return (LibgpiodBackend.shared, nil) }
        if let given { return (given, given) }
        let mock = try chips(board.chips, clock: clock)
        try rest(config, mock)
        return (mock, mock)
    }

    /// Where an input of `config` rests on mock chips, one rule for
    /// `--mock`, a `backend: mock` board and `boardd test`: at its inactive
    /// level (high for an `active_low` line: a pulled-up button at rest;
    /// low for any other), or high where the board file says the line
    /// rests high (`idle_high`). The level is driven, so a `bias:` does
    /// not move it (a mock pin has no wire to pull): nothing fires at start.
    public static func restLevel(_ l: LineConfig, _ chip: MockChip, _ selector: GPIOLineSelector) throws -> Bool {
        try chip.level(selector) || l.settings.activeLow
    }

    /// Drives every input of `config` to where it rests (`restLevel`), on
    /// chips made just now (before any line is requested).
    static func rest(_ config: DaemonConfig, _ mock: MockGPIO) throws {
        for l in config.lines where l.isInput {
            guard let (chip, selector) = pin(l, in: mock) else { continue }
            try chip.setLevel(selector, try restLevel(l, chip, selector))
        }
    }

    /// The mock chip and line that serve a config's line (nil: none does).
    public static func pin(_ l: LineConfig, in mock: MockGPIO) -> (MockChip, GPIOLineSelector)? {
        switch l.address {
        case let .offset(ref, o):
            return mock.chip(ref.text).map { ($0, .offset(o)) }
        case let .named(ref, n):
            let chip = ref.map { mock.chip($0.text) } ?? mock.chips.first { (try? $0.level(.name(n))) != nil }
            return chip.map { ($0, .name(n)) }
        }
    }

    /// What the start line says serves the board.
    public static func backendName(_ board: BoardChoice, _ gpio: any GPIOBackend) -> String {
        board.mock ? "mock chips, --mock" : gpio.backendName
    }

    /// Mock chips as a board file describes them (`gpiochip0`, `gpiochip1`,
    /// … in file order), each `idle_high` line already high.
    /// `eventBufferSize`, `historyCapacity`: see `MockChip.init`.
    public static func chips(
        _ described: [Board.Chip], clock: RunLoopClock = .monotonic, eventModel: MockChip.EventModel = .v2,
        eventBufferSize: Int? = nil, historyCapacity: Int = 4096
    ) throws -> MockGPIO {
        try chips(
            described.enumerated().map { i, c in
                Layout(name: "gpiochip\(i)", label: c.label, lines: c.lines ?? 32, names: c.names, high: c.idleHigh)
            }, clock: clock, eventModel: eventModel, eventBufferSize: eventBufferSize, historyCapacity: historyCapacity)
    }

    // MARK: --mock

    /// One mock chip `--mock` makes: the name and label it is opened by,
    /// its lines, their names and the offsets that read high at start.
    public struct Layout: Sendable, Equatable {
        public var name: String
        public var label: String
        public var lines: Int
        public var names: [UInt32: String]
        /// Sorted.
        public var high: [UInt32]
    }

    /// A chip of its own for lines a config names with no chip
    /// (`line_name:` on the generic board) that no other mock chip has.
    public static let namedLinesLabel = "boardloop-mock-lines"

    /// The mock chips `--mock` makes for `config`:
    /// - the board's chips, as the board file gives them (labels, line
    ///   counts, names), each line also named as the kernel names it
    ///   (a pin's `line_name:`, else its name: `GPIO17`);
    /// - a chip the config names that the board does not have (the generic
    ///   board: by label, `gpiochipN` or path) with the offsets the config
    ///   uses (at least 32 lines);
    /// - a line for each line name the config uses that no chip has: on
    ///   the chip the config names, else on `namedLinesLabel`'s chip;
    /// - each input at its inactive level (an `active_low` input reads high,
    ///   as a pulled-up button at rest; others low), except the lines the
    ///   board file says rest high (`idle_high`), which do: nothing fires
    ///   at start.
    public static func layout(_ config: DaemonConfig) -> [Layout] {
        let board = config.board
        var chips: [Layout] = board.chips.enumerated().map { i, c in
            let lines = c.lines ?? 32
            var names = c.names
            for p in board.pins {
                guard let (label, offset) = p.chipLine, label == c.label, Int(offset) < lines, names[offset] == nil else { continue }
                names[offset] = p.lineName ?? p.name
            }
            return Layout(name: "gpiochip\(i)", label: c.label, lines: lines, names: names, high: c.idleHigh)
        }
        let boardChips = chips.count

        func matches(_ c: Layout, _ ref: ChipRef) -> Bool {
            switch ref {
            case let .label(l): c.label == l
            case let .name(n): c.name == n
            case let .path(p): c.label == p || "/dev/" + c.name == p
            }
        }
        func freeName() -> String {
            var k = 0
            while chips.contains(where: { $0.name == "gpiochip\(k)" }) { k += 1 }
            return "gpiochip\(k)"
        }
        /// The chip `ref` opens, made when no chip answers to it.
        func chip(_ ref: ChipRef?) -> Int {
            if let ref, let i = chips.firstIndex(where: { matches($0, ref) }) { return i }
            if ref == nil, let i = chips.firstIndex(where: { $0.label == namedLinesLabel }) { return i }
            let c: Layout
            switch ref {
            case let .name(n)?: c = Layout(name: n, label: n, lines: 32, names: [:], high: [])
            case let .label(l)?: c = Layout(name: freeName(), label: l, lines: 32, names: [:], high: [])
            case let .path(p)?:
                // Opened by its path, which is its label; `/dev/gpiochipN` is also named so.
                let n = p.hasPrefix("/dev/gpiochip") ? String(p.dropFirst(5)) : ""
                c = Layout(name: n.isEmpty || chips.contains { $0.name == n } ? freeName() : n, label: p, lines: 32, names: [:], high: [])
            case nil: c = Layout(name: freeName(), label: namedLinesLabel, lines: 32, names: [:], high: [])
            }
            chips.append(c)
            return chips.count - 1
        }

        // Chips named gpiochipN (or opened by /dev/gpiochipN) first: the others take the names left.
        for l in config.lines {
            switch l.address {
            case let .offset(.name(n), _), let .named(.name(n)?, _): _ = chip(.name(n))
            case let .offset(.path(p), _), let .named(.path(p)?, _): _ = chip(.path(p))
            default: break
            }
        }
        // The offsets the config uses, on chips made for it.
        var used: [Int: Set<UInt32>] = [:]
        for l in config.lines {
            guard case let .offset(ref, o) = l.address else { continue }
            let i = chip(ref)
            used[i, default: []].insert(o)
            if i >= boardChips { chips[i].lines = max(chips[i].lines, Int(o) + 1) }
        }
        // A line for each name no chip has (on its chip when the config names one).
        for l in config.lines {
            guard case let .named(ref, n) = l.address else { continue }
            if let ref, let i = chips.firstIndex(where: { matches($0, ref) }), chips[i].names.values.contains(n) { continue }
            if ref == nil, chips.contains(where: { $0.names.values.contains(n) }) { continue }
            let i = chip(ref)
            var o: UInt32 = 0
            while chips[i].names[o] != nil || used[i, default: []].contains(o) { o += 1 }
            guard Int(o) < 1024, i >= boardChips || Int(o) < chips[i].lines else { continue }  // no room: the start reports it
            chips[i].names[o] = n
            chips[i].lines = max(chips[i].lines, Int(o) + 1)
        }
        // Inputs at their inactive level.
        for l in config.lines where l.isInput {
            var at: (Int, UInt32)?
            switch l.address {
            case let .offset(ref, o): at = chips.firstIndex { matches($0, ref) }.map { ($0, o) }
            case let .named(ref, n):
                for (i, c) in chips.enumerated() where ref.map({ matches(c, $0) }) ?? true {
                    if let o = c.names.first(where: { $0.value == n })?.key {
                        at = (i, o)
                        break
                    }
                }
            }
            // (An offset past a board chip's lines is the config's error, reported where the line is requested.)
            guard let (i, o) = at, Int(o) < chips[i].lines, !(i < boardChips && board.chips[i].idleHigh.contains(o)) else { continue }
            chips[i].high.removeAll { $0 == o }
            if l.settings.activeLow { chips[i].high.append(o) }
        }
        for i in chips.indices { chips[i].high.sort() }
        return chips
    }

    /// Mock chips as `layout` gives them, each `high` line already high.
    public static func chips(
        _ layout: [Layout], clock: RunLoopClock = .monotonic, eventModel: MockChip.EventModel = .v2, eventBufferSize: Int? = nil,
        historyCapacity: Int = 4096
    ) throws -> MockGPIO {
        let chips = try layout.map { c in
            try MockChip(
                name: c.name, label: c.label, lineCount: c.lines, lineNames: c.names, eventModel: eventModel,
                eventBufferSize: eventBufferSize, clock: clock, historyCapacity: historyCapacity)
        }
        for (chip, c) in zip(chips, layout) {
            for offset in c.high { try chip.setLevel(.offset(offset), true) }
        }
        return try MockGPIO(chips)
    }
}
