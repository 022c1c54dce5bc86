import ArgumentParser
import BoardControl
import Glibc

struct RecordCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Record what boardd sees and does for some seconds into a recording file (JSON lines) that boardd replay reads.",
        discussion: """
            Every loop records each edge as read from the kernel (with its timestamp and sequence numbers), held events \
            delivered, losses, each write with who made it, reactions, gestures, mode switches and sequence steps; the \
            records stream to boardctl as they come, so a long recording needs no large buffer. The file is written \
            through FILE.part and a rename. See docs/testing-configs.md.
            """)
    @Option(help: ArgumentHelp("How long to record, in seconds (at most 3600).", valueName: "n")) var seconds: Double = 10
    @Option(help: ArgumentHelp("The recording file to write (JSON lines).", valueName: "file"), completion: .file(extensions: ["jsonl"]))
    var out: String = "boardd-recording.jsonl"
    @Option(name: .customLong("line"), help: ArgumentHelp("Record only this line's edges and writes (repeat for more; default: every line).", valueName: "name"))
    var lines: [String] = []
    @OptionGroup var common: Common

    func validate() throws {
        guard seconds > 0, seconds <= 3600 else { throw ValidationError("--seconds: more than 0 and at most 3600") }
    }

    func run() throws {
        let path = try Common.socketPath(common.socket)
        let ms = Int((seconds * 1000).rounded())
        let json = common.json
        do {
            let summary = try Recording.record(
                socket: path, duration: "\(ms)ms", seconds: Int(seconds.rounded(.up)), lines: lines, file: out
            ) { recorded in
                if !json { Common.note("recording line(s) \(recorded.joined(separator: ", ")) for \(seconds)s...\n") }
            }
            if json { print(summary.json.serialized) } else { Common.note(summary.text + "\n") }
        } catch {
            Common.note(error.stderrText)
            throw ExitCode(error.exitStatus)
        }
    }
}
