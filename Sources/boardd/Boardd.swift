import ArgumentParser
import BoardDaemon
import BoardSupport
import Glibc

/// boardd: the board daemon. This build checks configs and detects the
/// board; running a config is not in it yet.
@main
struct Boardd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "boardd",
        abstract: "The board daemon: GPIO reactions, tasks and sequences from one YAML config.",
        discussion: "The config language is described in docs/config.md.")

    @Flag(help: "Check the config and print a summary of what it resolves to; exit 1 with every error.")
    var check = false

    @Option(help: "The config file.")
    var config: String?

    @Option(help: "Use this board instead of the config's `board` (e.g. to check a config for another machine).")
    var board: String?

    @Flag(help: "Print the summary (or the errors) as JSON.")
    var json = false

    @Flag(help: "Print what board detection reads on this machine and which board it finds.")
    var boardDetect = false

    @Option(help: "The root directory detection reads (default /).")
    var root = "/"

    @Option(name: .customLong("boards"), help: "A directory of board files searched first (may be repeated).")
    var boardDirectories: [String] = []

    func run() throws {
        let catalog = BoardCatalog(directories: boardDirectories + BoardCatalog.standardDirectories())
        let output: CommandOutput
        if boardDetect {
            output = Check.detect(root: root, catalog: catalog)
        } else if check {
            guard let config else { throw ValidationError("--check needs --config FILE") }
            output = Check.run(
                configPath: config, options: LoadOptions(board: board, catalog: catalog, machine: .current(root: root)),
                json: json)
        } else {
            output = CommandOutput(
                stdout: "",
                stderr:
                    "boardd: this build checks configs and detects boards only: use --check --config FILE or --board-detect (running a config is not available yet)\n",
                status: 2)
        }
        print(output.stdout, terminator: "")
        if !output.stderr.isEmpty {
            var text = output.stderr
            text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
        }
        if output.status != 0 { throw ExitCode(output.status) }
    }
}
