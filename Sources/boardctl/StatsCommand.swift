import ArgumentParser
import BoardControl

struct StatsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Every loop's counters: tasks' lateness, reactions' fires and times, lines' events; --prometheus for node_exporter.")
    @Flag(help: "Print the Prometheus text exposition format (node_exporter's textfile collector; see docs/control.md).")
    var prometheus = false
    @OptionGroup var common: Common
    func validate() throws {
        if prometheus && common.json { throw ValidationError("--prometheus and --json: choose one") }
    }
    func run() throws { try common.perform(.stats(prometheus: prometheus)) }
}
