import ArgumentParser
import BoardControl
import Glibc

struct TraceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trace",
        abstract: "Record what every loop does for a few seconds into a trace file that ui.perfetto.dev and chrome://tracing open.",
        discussion: """
            Each loop records its passes and waits, each handler with its duration (a line's events, a task with its \
            lateness, a sequence's step, a control request), and each edge, write, reaction, mode switch and held or \
            delivered batch; the file has one track per loop thread. See docs/control.md (trace).
            """)
    @Option(help: ArgumentHelp("How long to record, in seconds (at most 300).", valueName: "n")) var seconds: Double = 5
    @Option(help: ArgumentHelp("The trace file to write (Chrome trace-event JSON).", valueName: "file"), completion: .file(extensions: ["json"]))
    var out: String = "boardd-trace.json"
    @OptionGroup var common: Common

    func validate() throws {
        guard seconds > 0, seconds <= 300 else { throw ValidationError("--seconds: more than 0 and at most 300") }
    }

    func run() throws {
        let path = try Common.socketPath(common.socket)
        let ms = Int((seconds * 1000).rounded())
        let json = common.json
        do {
            let summary = try TraceRecorder.record(socket: path, duration: "\(ms)ms", seconds: Int(seconds.rounded(.up)), file: out) { loops in
                if !json { Common.note("tracing loop(s) \(loops.joined(separator: ", ")) for \(seconds)s...\n") }
            }
            print(json ? summary.json.serialized : summary.text)
        } catch {
            Common.note(error.stderrText)
            throw ExitCode(error.exitStatus)
        }
    }
}
