import ArgumentParser
import BoardDaemon
import BoardSupport
import Glibc
import Logging

/// `boardd test FILE`: a config's tests, on mock chips and a manual clock.
struct TestCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "test",
        abstract: "Run a config's tests (inputs at times, expected outputs) on mock chips and a manual clock.",
        discussion: """
            Each test runs on a fresh copy of the config on mock chips made from its board, with every loop on one \\
            manual clock: nothing sleeps, and a run is the same every time. Commands are recorded, not run, unless \\
            --run-commands. Exit status: 0 every test passed, 1 a test failed, 2 the test file or the config has errors. \\
            The test file's format is in docs/testing-configs.md.
            """)

    @Argument(help: "The test file (YAML).") var file: String
    @Option(help: "The config to test (default: the test file's `config:`, relative to the test file).") var config: String?
    @Option(help: "Run only the tests whose name contains this.") var filter: String?
    @Flag(help: "Run the commands reactions start, instead of recording them.") var runCommands = false
    @Flag(help: "Print each test's log after its result.") var showLog = false
    @Option(help: "The log's level with --show-log: debug, info, notice, warning, error.") var logLevel: String = "info"
    @Option(help: "Use this board instead of the config's `board`.") var board: String?
    @Option(name: .customLong("boards"), help: "A directory of board files searched first (may be repeated).")
    var boardDirectories: [String] = []

    func run() throws {
        let catalog = BoardCatalog.standard(searchingFirst: boardDirectories)
        var settings = ConfigTestRunner.Settings(file: file, config: config, loadOptions: LoadOptions(board: board, catalog: catalog))
        settings.filter = filter
        settings.runCommands = runCommands
        settings.showLog = showLog
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw ValidationError("--log-level \(logLevel): use debug, info, notice, warning or error")
        }
        settings.logLevel = level
        let output = ConfigTestRunner.run(settings)
        print(output.stdout, terminator: "")
        if !output.stderr.isEmpty { writeError(output.stderr) }
        if output.status != 0 { throw ExitCode(output.status) }
    }
}
