import ArgumentParser
import BoardControl
import BoardDaemon
import BoardSupport
import Glibc
import Logging

/// boardd: the board daemon. `boardd run` (the default: `boardd --config
/// FILE` is `boardd run --config FILE`) runs a config, the built-in demo
/// (`--demo`), checks a config (`--check`) or detects the board; `--mock`
/// runs a config on mock chips made from its board. `boardd test` runs a
/// config's tests, `boardd replay` a recording against a config.
@main
struct Boardd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "boardd",
        abstract: "The board daemon: GPIO reactions, tasks and sequences from one YAML config.",
        discussion: """
            boardd run (the default) runs a config (--config FILE), the built-in demo (--demo), checks a config \
            (--check) or detects the board (--board-detect): `boardd --config FILE` is `boardd run --config FILE`. \
            boardd test runs a config's tests on mock chips and a manual clock; boardd replay runs a recording \
            from a board against a config. The config language is in docs/config.md; running, signals and systemd \
            in docs/daemon.md; tests, recordings and replays in docs/testing-configs.md.
            """,
        version: BoarddVersion.text,
        subcommands: [RunCommand.self, TestCommand.self, ReplayCommand.self, BoardsCommand.self],
        defaultSubcommand: RunCommand.self)
}

/// `boardd run` (and `boardd` with no subcommand): the daemon.
struct RunCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a config (--config FILE) or the demo (--demo); check a config (--check); detect the board (--board-detect).")

    @Option(help: "The config file to run (or check).") var config: String?
    @Flag(help: "Run the built-in demo on the demo board (mock chips, no hardware).") var demo = false
    @Flag(
        help:
            "Run the config on mock chips made from its board (same chip labels, line names and pins; no hardware touched). The board must be named (board: NAME or --board NAME), not auto."
    )
    var mock = false
    @Option(name: .customLong("for"), help: "Stop by itself after this long (e.g. 10s).") var runFor: String?
    @Option(help: "Log level: debug, info, notice, warning, error.") var logLevel: String?
    @Flag(help: "Check the config and print a summary of what it resolves to; exit 1 with every error.") var check = false
    @Flag(help: "With --check: print nothing when the config checks (warnings and errors still go to stderr).")
    var quiet = false
    @Option(help: "Use this board instead of the config's `board` (e.g. to check a config for another machine).")
    var board: String?
    @Flag(help: "Print the summary (or the errors) as JSON.") var json = false
    @Flag(help: "Print what board detection reads on this machine and which board it finds.") var boardDetect = false
    @Option(help: "The root directory detection reads (default /).") var root = "/"
    @Option(name: .customLong("boards"), help: "A directory of board files searched first (may be repeated).")
    var boardDirectories: [String] = []
    @Flag(help: "Accept a config that users other than boardd's own and root may change (refused under systemd, else a warning).")
    var allowInsecureConfig = false
    @Flag(
        help:
            "Set every output that has a safe: value to it, then exit (for systemd's ExecStopPost=): from the config, else (it has errors) the last applied safe table, else board: and lines: read leniently."
    )
    var safeOutputs = false
    @Option(
        help:
            "The last applied safe table: written by the daemon, read by --safe-outputs when the config has errors (default: boardd-safe-outputs beside the control socket)."
    )
    var safeTable: String?
    @Option(help: "How long a stop may take in all (default 10s; keep it below systemd's TimeoutStopSec=).")
    var stopTimeout: String?
    @Option(help: "The control socket's path (default: the config's control: { path }, else as docs/control.md says).")
    var socket: String?

    /// A duration option, in the config's grammar and with its messages.
    static func duration(_ text: String, option: String, atLeast least: Duration) throws -> Duration {
        switch Launcher.parseDuration(text) {
        case let .success(d):
            guard d >= least else { throw ValidationError("\(option) \(text): at least \(DurationText.format(least)) is needed") }
            return d
        case let .failure(problem):
            throw ValidationError("\(option) \(text): \(problem.message(text, suggest: "s"))")
        }
    }

    func run() throws {
        let catalog = BoardCatalog.standard(searchingFirst: boardDirectories)
        var options = LoadOptions(board: board, catalog: catalog, machine: .current(root: root))
        // Under systemd (it sets INVOCATION_ID for a service) a config that
        // others may change is refused, at start and at every reload.
        options.refuseInsecureConfig = getenv("INVOCATION_ID") != nil && !allowInsecureConfig
        if quiet && !check { throw ValidationError("--quiet quiets --check: give --check --config FILE") }
        if mock && config == nil && !demo && !boardDetect {
            throw ValidationError("--mock runs a config on mock chips made from its board: give --config FILE")
        }
        // `--check --mock` checks what `--mock` runs (the board must be
        // named: detection reads this machine); the check touches no GPIO.
        options.mock = mock && !demo  // the demo board is mock chips already
        if boardDetect || check {
            let output: CommandOutput
            if boardDetect {
                output = Check.detect(root: root, catalog: catalog)
            } else {
                guard let config else { throw ValidationError("--check needs --config FILE") }
                output = Check.run(configPath: config, options: options, json: json)
            }
            if !(quiet && output.status == 0) { print(output.stdout, terminator: "") }
            if !output.stderr.isEmpty { writeError(output.stderr) }
            if output.status != 0 { throw ExitCode(output.status) }
            return
        }
        let level = try logLevel.map { l in
            guard let v = Logger.Level(rawValue: l) else { throw ValidationError("--log-level \(l): use debug, info, notice, warning or error") }
            return v
        } ?? .info
        if safeOutputs {
            guard let config else { throw ValidationError("--safe-outputs needs --config FILE") }
            let status = Launcher.safeOutputs(configPath: config, logLevel: level, loadOptions: options, safeTable: safeTable)
            if status != 0 { throw ExitCode(status) }
            return
        }
        guard demo || config != nil else { throw ValidationError("give --config FILE to run a config, or --demo") }
        if demo, let config {
            throw ValidationError(
                "--demo runs the built-in demo config and would ignore --config \(config): give --config \(config) alone to run it, or --demo alone for the demo")
        }
        let duration = try runFor.map { t in try Self.duration(t, option: "--for", atLeast: .zero) }
        var settings = Launcher.Settings(
            configPath: config, demo: demo, runFor: duration, logLevel: level, loadOptions: options, summaryInterval: nil)
        settings.socket = socket
        settings.safeTable = safeTable
        if let t = stopTimeout { settings.stopTimeout = try Self.duration(t, option: "--stop-timeout", atLeast: .milliseconds(100)) }
        let status = Launcher.run(settings)
        if status != 0 { throw ExitCode(status) }
    }
}
