import ArgumentParser
import BoardControl
import Glibc

struct EventsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events",
        abstract: "What happened on the board, one line each: the events boardd kept, or (--follow) each as it happens until Ctrl-C.")
    @Option(help: ArgumentHelp("Only this line's events.", valueName: "line")) var line: String?
    @Flag(help: "Keep reading: each event as it happens (edges and writes included), until Ctrl-C.") var follow = false
    @OptionGroup var common: Common

    func run() throws {
        let path = try Common.socketPath(common.socket)
        if follow { EventStream.catchInterrupt() }
        let status = EventStream.run(
            socket: path, line: line, follow: follow, json: common.json,
            out: { text in
                let bytes = Array(text.utf8)
                _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
            },
            err: Common.note)
        if status != 0 { throw ExitCode(status) }
    }
}
