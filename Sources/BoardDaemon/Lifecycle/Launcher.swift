import BoardControl
import Boardloop
import BoardloopGPIO
import BoardSupport
import Glibc
import Logging

/// What `boardd --config FILE` and `boardd --demo` do, kept out of the
/// executable: block the signals (before any thread starts), load the
/// config, build the daemon, run it until SIGTERM/SIGINT, and exit 0 after
/// a clean shutdown.
public enum Launcher {
    /// The exit status of a config that does not load (sysexits.h's
    /// EX_CONFIG): distinct from a daemon that cannot start or stopped
    /// badly (1), so that the unit's `RestartPreventExitStatus=` keeps
    /// systemd from restarting a config that will fail again.
    public static let configErrorStatus: Int32 = 78

    public struct Settings {
        public var configPath: String?
        public var demo: Bool
        public var runFor: Duration?
        public var logLevel: Logger.Level
        public var loadOptions: LoadOptions
        public var summaryInterval: Duration?
        /// The stop's budget (`Daemon.Options.stopTimeout`).
        public var stopTimeout: Duration = .seconds(10)
        /// `--socket PATH`: the control socket's path (docs/control.md).
        public var socket: String?
        /// `--safe-table FILE`: where the running config's safe table is
        /// written (default: `SafeTable.path`, beside the control socket).
        public var safeTable: String?

        public init(
            configPath: String?, demo: Bool, runFor: Duration?, logLevel: Logger.Level, loadOptions: LoadOptions,
            summaryInterval: Duration?
        ) {
            self.configPath = configPath
            self.demo = demo
            self.runFor = runFor
            self.logLevel = logLevel
            self.loadOptions = loadOptions
            self.summaryInterval = summaryInterval
        }
    }

    /// Runs the daemon; returns the exit status.
    public static func run(_ s: Settings) -> Int32 {
        do {
            try SignalMask.block(Daemon.handledSignals + [SIGPIPE])
        } catch {
            writeError("boardd: \(error)\n")
            return 1
        }
        // What is queued is written before boardd exits (bounded: a stderr
        // nobody reads does not hold the exit).
        defer { LogWriter.shared.flush(timeout: .seconds(2)) }
        let level = s.logLevel
        var logger = Logger(label: "boardd") { label in BoarddLogHandler(label: label, level: level) }
        logger.logLevel = level
        let result: LoadResult
        if s.demo {
            // The built-in examples/demo.yaml on the built-in demo board.
            var options = s.loadOptions
            options.board = nil
            options.catalog = Demo.catalog
            options.mock = false  // the demo board is mock chips already
            result = ConfigLoader.load(text: Demo.configText, file: Demo.configFile, options: options)
        } else if let path = s.configPath {
            result = ConfigLoader.load(path: path, options: s.loadOptions)
        } else {
            writeError("boardd: give --config FILE (or --demo)\n")
            return 64
        }
        for w in result.warnings { logger.warning("\(w.description)") }
        guard let config = result.config else {
            for e in result.errors { writeError("\(e.description)\n") }
            writeError("boardd: \(result.errors.count) error(s); not started (exit status \(configErrorStatus))\n")
            return configErrorStatus
        }
        do {
            let steps = s.demo ? try Demo.ScriptFile.builtIn() : nil
            let options = Daemon.Options(
                logger: logger, summaryInterval: s.summaryInterval ?? (s.demo ? .seconds(4) : .seconds(60)),
                notifier: SystemdNotifier.fromEnvironment(), watchdog: SystemdNotifier.watchdogInterval(),
                loadOptions: s.loadOptions, handleSignals: true)
            var o = options
            o.demo = s.demo
            o.stopTimeout = s.stopTimeout
            var control = ControlServer.Options(path: s.socket)
            if s.demo { control.defaultName = "boardd-demo.sock" }
            // The demo's table would take the place of a daemon's.
            o.safeTable = s.demo ? nil : SafeTable.path(override: s.safeTable)
            if config.board.mock, let beside = ControlServer.besideAnother(control, config.control) {
                // A second run on mock chips: its own socket, and no safe
                // table (it would take the first's place).
                control = beside.options
                o.safeTable = nil
                let path = ControlServer.resolvePath(flag: nil, config: nil, name: control.defaultName)
                logger.notice(
                    "control socket: another boardd of yours answers on \(beside.taken): this one listens on \(path) (boardctl --socket \(path))")
            }
            o.control = control
            try ControlServer.refuseLive(control, config.control)
            let daemon = try Daemon(config: config, options: o)
            if config.board.mock, let mock = daemon.mock {
                logger.info(
                    "mock chips (--mock): \(mock.chips.map { "\($0.name) [\($0.label)] \($0.lineCount) lines" }.joined(separator: ", ")); no GPIO of this machine is touched"
                )
            }
            var script: Demo.Script?
            if let steps, let mock = daemon.mock {
                logger.notice(
                    "demo: the demo board (mock chips, no hardware); a scripted person clicks, holds and floods; Ctrl-C stops")
                let sc = Demo.Script(steps, gpio: mock, loop: daemon.loop, logger: logger)
                try sc.start()
                script = sc
            }
            let clean = try daemon.run(for: s.runFor)
            script?.stop()
            return clean ? 0 : 1
        } catch {
            logger.critical("boardd: cannot start: \(error)")
            return 1
        }
    }

    /// Parses a duration as the config does (`10s`, `500ms`, `2min`, `1.5s`,
    /// `250us`): the same grammar, units and bounds, the same messages.
    public static func parseDuration(_ text: String) -> Result<Duration, DurationText.Problem> {
        DurationText.parse(text)
    }
}

/// Writes `text` to stderr (fd 2) unbuffered.
/// Under systemd (`JOURNAL_STREAM` set) each line gets the error priority
/// (`<3>`), as the daemon's log lines carry theirs, and its control
/// characters are escaped. On a terminal, what a config's text may bring
/// into a message (an ESC, a newline inside a key, a bidi override) is
/// written as `\u{…}`, so it can neither move the cursor nor reorder the
/// line; the line breaks between messages stay.
public func writeError(_ text: String) {
    var t = text
    if getenv("JOURNAL_STREAM") != nil {
        t = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast(text.hasSuffix("\n") ? 1 : 0)
            .map { "<3>" + BoarddLogHandler.escapingControls(String($0)) + "\n" }.joined()
    } else if text.unicodeScalars.contains(where: { $0 != "\n" && Echo.isEscaped($0) }) {
        t = text.split(separator: "\n", omittingEmptySubsequences: false).map { Echo.escaped(String($0)) }.joined(separator: "\n")
    }
    t.withUTF8 { p in _ = write(2, p.baseAddress, p.count) }
}
