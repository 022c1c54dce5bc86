import ArgumentParser
import BoardDaemon
import BoardSupport
import Glibc

/// `boardd replay FILE`: a recording from a board against a config.
struct ReplayCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Replay a recording (boardctl record) against a config on mock chips; show what it did and how that differs from the board.",
        discussion: """
            The recorded edges are fed, at their recorded times, into the config (default: the one the recording \\
            names) on mock chips made from its board, every loop on one manual clock. Prints the config's writes, \\
            the commands it would run (recorded, not run, unless --run-commands) and the reactions that fired, then \\
            every difference from what the board did. The same recording and config give the same output, byte for \\
            byte. Exit status: 0 no difference, 1 differences, 2 the recording or the config cannot be used. \\
            The recording's format is in docs/testing-configs.md.
            """)

    @Argument(help: "The recording (JSON lines, from boardctl record).") var file: String
    @Option(help: "The config to replay against (default: the one the recording names).") var config: String?
    @Flag(help: "As fast as it goes (the default).") var instant = false
    @Option(help: "Pace the replay at this many times real time (e.g. 1 or 10x); the output is the same.") var speed: String?
    @Option(help: "How far a write may be from the board's and still count as the same (default 5ms).") var tolerance: String?
    @Option(help: "How much later than the replay's a board's write that a timer made (a pulse's end, a sequence's step) may be (default 50ms).") var lateTimers: String?
    @Flag(help: "Run the commands reactions start, instead of recording them.") var runCommands = false
    @OptionGroup var boards: BoardOptions

    func run() throws {
        var settings = Replay.Settings(file: file, config: config, loadOptions: boards.loadOptions)
        if let speed {
            if instant { throw ValidationError("give --speed or --instant, not both") }
            let number = speed.hasSuffix("x") ? String(speed.dropLast()) : speed
            guard let v = Double(number), v > 0, v <= 1_000_000 else {
                throw ValidationError("--speed \(speed): a factor above 0, e.g. 1 (real time) or 10x")
            }
            settings.speed = v
        }
        if let t = tolerance { settings.tolerance = try RunCommand.duration(t, option: "--tolerance", atLeast: .zero) }
        if let t = lateTimers { settings.lateTimers = try RunCommand.duration(t, option: "--late-timers", atLeast: .zero) }
        settings.runCommands = runCommands
        let output = Replay.run(settings)
        print(output.stdout, terminator: "")
        if !output.stderr.isEmpty { writeError(output.stderr) }
        if output.status != 0 { throw ExitCode(output.status) }
    }
}
