import BoardSupport
import BoardloopGPIO
import BoardloopGPIOMock
import Logging

/// `boardd --safe-outputs --config FILE`, for systemd's `ExecStopPost=`,
/// which runs after the daemon ended however it ended (a crash or a
/// watchdog kill included): every output that has a `safe:` value is set
/// to it. The safe values come from the first of these that gives them:
///
///   1. the config file, when it loads cleanly;
///   2. the last applied safe table (`SafeTable`), which the running
///      daemon wrote at its start and after every applied reload — so a
///      bad edit, a refused reload and then a crash still leave every
///      output safe;
///   3. `board:` and `lines:` read leniently (`ConfigLoader.safeLines`),
///      ignoring the errors outside them.
///
/// Each config error is logged once, and the source used is said. Only
/// when none of the three gives a table is nothing set (exit 1, with why
/// for each). With `--mock` the values are set on mock chips: nothing on
/// this machine changes, and every output is shown to be settable.
extension Launcher {
    /// Returns the exit status: 0 when every output with a safe value was
    /// set, 1 when one could not be, or when no source gave a safe table.
    /// `safeTable`: `--safe-table FILE` (default: `SafeTable.path`).
    public static func safeOutputs(configPath: String, logLevel: Logger.Level, loadOptions: LoadOptions, safeTable: String? = nil)
        -> Int32
    {
        var logger = Logger(label: "boardd") { label in BoarddLogHandler(label: label, level: logLevel) }
        logger.logLevel = logLevel
        let result = ConfigLoader.load(path: configPath, options: loadOptions)
        let config: DaemonConfig, source: String
        if let c = result.config {
            (config, source) = (c, "the config")
        } else {
            for e in result.errors { writeError("\(e.description)\n") }
            writeError("boardd: \(result.errors.count) error(s) in \(configPath)\n")
            let tablePath = SafeTable.path(override: safeTable)
            guard let fallback = safeFallback(configPath, tablePath: tablePath, loadOptions: loadOptions, logger: logger) else {
                return 1
            }
            (config, source) = fallback
        }
        let backend: (gpio: any GPIOBackend, mock: MockGPIO?)
        do {
            backend = try MockBoard.backend(for: config)
        } catch {
            logger.critical("boardd: cannot make the mock chips: \(error)")
            return 1
        }
        let (set, failed) = Daemon.setSafeOutputs(config, gpio: backend.gpio, logger: logger)
        let mocked =
            backend.mock == nil
            ? "" : loadOptions.mock ? ", mock chips, --mock: no GPIO of this machine changed" : ", mock chips: no GPIO of this machine changed"
        logger.notice("safe outputs: \(set) set, \(failed) failed (\(configPath) on \(config.board.name)\(mocked)); from \(source)")
        return failed == 0 ? 0 : 1
    }

    /// The safe table to use when the config does not load, and what it is
    /// (for the log): the last applied table, else the lenient read. Nil
    /// (reported, with why for each) when neither gives one.
    static func safeFallback(_ configPath: String, tablePath: String, loadOptions: LoadOptions, logger: Logger) -> (DaemonConfig, String)? {
        var why: [String] = []
        switch SafeTable.read(tablePath) {
        case nil:
            why.append("no last applied safe table at \(tablePath)")
        case let .failure(problem)?:
            why.append("the last applied safe table \(tablePath) is not used: \(problem)")
            logger.error("\(why[0])")
        case let .success(table)?:
            let real = ConfigParser.realPath(configPath) ?? configPath
            if table.config != real {
                why.append("the last applied safe table \(tablePath) is not used: it is for another config (\(table.config))")
                logger.error("\(why[0])")
            } else {
                logger.notice(
                    "the config has errors: using the last applied safe table \(tablePath), written \(table.written) by boardd pid \(table.pid) (\(table.entries.count) output(s) with a safe value, board \(table.board))"
                )
                return (table.asConfig(file: configPath, mock: loadOptions.mock), "the last applied safe table \(tablePath) (written \(table.written))")
            }
        }
        let lenient = ConfigLoader.safeLines(path: configPath, options: loadOptions)
        if let config = lenient.config {
            logger.notice(
                "the config has errors and \(why[0]): using board: and lines: read leniently from \(configPath) (the errors above, outside them, are ignored)"
            )
            return (config, "board: and lines: read leniently (the errors outside them ignored)")
        }
        why.append(lenient.why)
        writeError("boardd: no output set: \(why.joined(separator: "; "))\n")
        return nil
    }
}
