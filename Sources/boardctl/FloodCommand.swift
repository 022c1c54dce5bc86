import ArgumentParser
import BoardControl

struct FloodCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "flood",
        abstract: "Drive many edges on an input of a mock or gpio-sim chip at a fixed rate (--stop ends it).",
        discussion: """
            Alternating levels, from the opposite of the line's level now, paced by boardd without holding its loop. \
            At most \(Flood.maxEdges) edges and 100kHz; one flood per line at a time. Prints at once how long it will take.
            """)
    @Argument(help: "The input's name.") var line: String
    @Option(help: ArgumentHelp("How many edges (1 to \(Flood.maxEdges)).", valueName: "n")) var edges: Int?
    @Option(help: ArgumentHelp("Edges per second: 2kHz, 500Hz, 100/s (at most 100kHz).", valueName: "rate")) var rate: String?
    @Flag(help: "End the line's flood.") var stop = false
    @OptionGroup var common: Common

    func validate() throws {
        if stop {
            guard edges == nil, rate == nil else { throw ValidationError("--stop takes no --edges or --rate") }
            return
        }
        guard let edges, let rate else { throw ValidationError("give --edges N and --rate R (or --stop)") }
        guard (1...Flood.maxEdges).contains(edges) else { throw ValidationError("--edges \(edges): from 1 to \(Flood.maxEdges)") }
        if case let .failure(why) = Flood.parseRate(rate) { throw ValidationError("--rate \(why.message)") }
    }

    func run() throws {
        try common.perform(stop ? .floodStop(line: line) : .flood(line: line, edges: edges ?? 0, rate: rate ?? ""))
    }
}
