import BoardSupport
import BoardloopGPIO
import Glibc

extension SafeTable {
    /// The safe table of `config` as `gpio` serves it: every output with a
    /// `safe:` value, each line located as the daemon requests it (a line
    /// found by its name is written with the chip and offset it was found
    /// at). Throws when a line cannot be located.
    init(config: DaemonConfig, gpio: any GPIOBackend, mock: Bool) throws {
        let chips = Daemon.ChipCache(gpio)
        defer { chips.close() }
        var entries: [Entry] = []
        for line in config.lines where line.isOutput {
            guard let v = line.safeValue else { continue }
            let chip: ChipRef, offset: UInt32
            switch line.address {
            case let .offset(ref, o): (chip, offset) = (ref, o)
            case let .named(ref, _):
                let found = try Daemon.locate(line, chips: chips)
                (chip, offset) = (ref ?? .path(found.chip.path), found.offset)
            }
            let s = line.settings
            entries.append(
                Entry(name: line.name, chip: chip, offset: offset, activeLow: s.activeLow, drive: s.drive, bias: s.bias, value: v))
        }
        self.init(
            board: config.board.name, mock: mock, config: ConfigParser.realPath(config.file) ?? config.file, written: Self.now(),
            pid: getpid(), entries: entries)
    }

    /// The table as a config of its outputs alone, for
    /// `Daemon.setSafeOutputs` (on mock chips made from its lines when it
    /// was written on mock chips, or `mock`).
    func asConfig(file: String, mock: Bool) -> DaemonConfig {
        let lines = entries.map { e in
            LineConfig(
                name: e.name, pin: nil, boardPin: nil, physical: nil, address: .offset(chip: e.chip, offset: e.offset),
                settings: .output(e.value, drive: e.drive, bias: e.bias, activeLow: e.activeLow), filters: InputFilters(),
                safeValue: e.value, priority: PriorityID(0), rateLimit: nil, gestures: nil, loop: .main)
        }
        let board = BoardChoice(
            name: self.board, title: "", file: "", backend: .kernel, chips: [], detected: false, mock: self.mock || mock)
        return DaemonConfig(
            file: file, board: board, priorities: ["normal"], lines: lines, modes: [ModeConfig(name: "default", admits: [])],
            tasks: [], reactions: [], sequences: [], commands: [], loops: [], warnings: [])
    }
}

extension Daemon {
    /// Writes the running config's safe table (`Options.safeTable`), at
    /// the start and after every applied reload; a table that cannot be
    /// written is a warning (the daemon runs on; `--safe-outputs` then
    /// has only the config file).
    func writeSafeTable() {
        guard let path = options.safeTable else { return }
        do {
            let table = try SafeTable(config: config, gpio: gpio, mock: mock != nil)
            try table.write(to: path)
            logger.info("safe table: \(table.entries.count) output(s) with a safe value, in \(path)")
        } catch {
            logger.warning("safe table: cannot write \(path): \(error) (boardd --safe-outputs then has only the config file)")
        }
    }
}
