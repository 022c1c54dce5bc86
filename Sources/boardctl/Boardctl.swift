import ArgumentParser
import BoardControl
import Glibc

/// boardctl: the command-line client of boardd's control socket. Each
/// subcommand sends one request (BoardControl does the talking and the
/// printing) and exits with the status docs/boardctl.md lists.
@main
enum BoardctlMain {
    static func main() {
        BoardctlCommand.main(Common.movingLeadingOptions(Array(CommandLine.arguments.dropFirst())))
    }
}

struct BoardctlCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "boardctl",
        abstract: "Ask a running boardd how the board is, and drive its lines, sequences and modes.",
        discussion: """
            Talks to boardd's control socket: --socket PATH (before or after the subcommand), else the first \
            that exists of $RUNTIME_DIRECTORY/boardd.sock, /run/boardd/boardd.sock, $XDG_RUNTIME_DIR/boardd.sock, \
            /tmp/boardd-$UID.sock.
            Exit status: 0 done, 1 boardd answered an error (or refused a reload), 3 no boardd at the socket, \
            4 permission denied on the socket, 5 protocol version mismatch, 6 the connection failed otherwise, 64 usage. \
            See docs/boardctl.md.
            """,
        version: "boardctl \(Release.version) (control protocol v\(ControlError.protocolVersion))\ncommit \(Release.commit)\nbuilt against libgpiod \(Release.libgpiod) (boardd links it; boardctl does not)",
        subcommands: [
            Status.self, Lines.self, Get.self, Set.self, Toggle.self, Pulse.self, Sequence.self, Mode.self, Reload.self,
            Press.self, ReleaseButton.self, Click.self, Input.self, Ping.self, StatsCommand.self, EventsCommand.self, FloodCommand.self,
            TraceCommand.self, RecordCommand.self,
        ])
}

/// The options every subcommand takes.
struct Common: ParsableArguments {
    /// `boardctl --socket PATH status` as `boardctl status --socket PATH`
    /// (and `--json`): the options every subcommand takes may come before
    /// the subcommand too, as `systemctl -H HOST status` reads.
    static func movingLeadingOptions(_ args: [String]) -> [String] {
        var leading: [String] = []
        var i = 0
        while i < args.count {
            let a = args[i]
            if a == "--json" || a.hasPrefix("--socket=") {
                leading.append(a)
                i += 1
            } else if a == "--socket", i + 1 < args.count {
                leading += [a, args[i + 1]]
                i += 2
            } else {
                break
            }
        }
        guard !leading.isEmpty, i < args.count else { return args }
        return [args[i]] + leading + args[(i + 1)...]
    }

    @Flag(help: "Print the reply's result as JSON on one line.") var json = false
    @Option(help: ArgumentHelp("The control socket (default: see boardctl --help).", valueName: "path"), completion: .file())
    var socket: String?

    /// Writes `text` to stderr.
    static func note(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }

    /// The socket to use (`SocketPath.locate`); a socket directory this
    /// user may not enter is reported and exits 4.
    static func socketPath(_ explicit: String?) throws -> String {
        switch SocketPath.locate(explicit: explicit, environment: SocketPath.currentEnvironment()) {
        case let .success(path): return path
        case let .failure(error):
            note(error.stderrText)
            throw ExitCode(error.exitStatus)
        }
    }

    /// Runs `command` and exits as BoardControl says.
    func perform(_ command: Command) throws {
        let path = try Self.socketPath(socket)
        let alternative = socket == nil ? SocketPath.systemSocket(insteadOf: path) : nil
        let outcome = Boardctl.execute(command, socket: path, json: json, alternative: alternative)
        if !outcome.stdout.isEmpty { print(outcome.stdout, terminator: "") }
        if !outcome.stderr.isEmpty { Common.note(outcome.stderr) }
        if outcome.status != 0 { throw ExitCode(outcome.status) }
    }
}

enum OnOff: String, ExpressibleByArgument, CaseIterable {
    case on, off
    var bool: Bool { self == .on }
}

enum StartStop: String, ExpressibleByArgument, CaseIterable {
    case start, stop
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "The board, config, loops, running sequences, held and lost events.")
    @OptionGroup var common: Common
    func run() throws { try common.perform(.status) }
}

struct Lines: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Every line: pin, chip, direction, value and its event counters.")
    @OptionGroup var common: Common
    func run() throws { try common.perform(.lines) }
}

struct Get: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "A line's value.")
    @Argument(help: "The line's name (as in the config).") var line: String
    @OptionGroup var common: Common
    func run() throws { try common.perform(.get(line: line)) }
}

struct Set: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Set an output on or off.")
    @Argument(help: "The output's name.") var line: String
    @Argument(help: "on or off.") var value: OnOff
    @OptionGroup var common: Common
    func run() throws { try common.perform(.set(line: line, value: value.bool)) }
}

struct Toggle: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Flip an output.")
    @Argument(help: "The output's name.") var line: String
    @OptionGroup var common: Common
    func run() throws { try common.perform(.toggle(line: line)) }
}

struct Pulse: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Turn an output on for a while, then off.")
    @Argument(help: "The output's name.") var line: String
    @Argument(help: "How long, in the config's grammar (e.g. 100ms, 2s).") var duration: String
    @OptionGroup var common: Common
    func run() throws { try common.perform(.pulse(line: line, duration: duration)) }
}

struct Sequence: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Start or stop a sequence.")
    @Argument(help: "start or stop.") var action: StartStop
    @Argument(help: "The sequence's name.") var name: String
    @OptionGroup var common: Common
    func run() throws { try common.perform(.sequence(start: action == .start, name: name)) }
}

struct Mode: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "A loop's mode; with MODE, switch the loop to it.")
    @Argument(help: "The loop's name.") var loop: String
    @Argument(help: "The mode to switch to (leave out to read the current one).") var mode: String?
    @OptionGroup var common: Common
    func run() throws { try common.perform(.mode(loop: loop, mode: mode)) }
}

struct Reload: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Reload the config file (as SIGHUP does); exit 1 with its errors when boardd refuses it.")
    @OptionGroup var common: Common
    func run() throws { try common.perform(.reload) }
}

struct Press: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Press a button on a mock or gpio-sim chip (its active level).")
    @Argument(help: "The input's name.") var line: String
    @Option(help: ArgumentHelp("Release it again after this long (e.g. 2s).", valueName: "duration")) var hold: String?
    @OptionGroup var common: Common
    func run() throws { try common.perform(.press(line: line, hold: hold)) }
}

struct ReleaseButton: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "release", abstract: "Release a button on a mock or gpio-sim chip.")
    @Argument(help: "The input's name.") var line: String
    @OptionGroup var common: Common
    func run() throws { try common.perform(.release(line: line)) }
}

struct Click: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Click a button on a mock or gpio-sim chip: press and release, COUNT times.")
    @Argument(help: "The input's name.") var line: String
    @Option(help: "How many clicks (2 is a double click).") var count: Int?
    @Option(help: ArgumentHelp("How long each press lasts (e.g. 100ms).", valueName: "duration")) var hold: String?
    @OptionGroup var common: Common
    func validate() throws {
        if let count, count < 1 { throw ValidationError("--count \(count): at least 1") }
    }
    func run() throws { try common.perform(.click(line: line, count: count, hold: hold)) }
}

struct Input: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Drive an input of a mock or gpio-sim chip on or off (its logical value).")
    @Argument(help: "The input's name.") var line: String
    @Argument(help: "on or off.") var value: OnOff
    @OptionGroup var common: Common
    func run() throws { try common.perform(.input(line: line, value: value.bool)) }
}

struct Ping: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Check that boardd answers.")
    @OptionGroup var common: Common
    func run() throws { try common.perform(.ping) }
}
