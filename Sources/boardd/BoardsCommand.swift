import ArgumentParser
import BoardDaemon
import BoardSupport

/// `boardd boards`: every board boardd knows, where each comes from (a
/// file in a board directory, or built in) and what it overrides.
struct BoardsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "boards",
        abstract: "List every board boardd knows and where each comes from (a board file, or built in).",
        discussion: """
            Board files are searched in --boards DIR (in the order given), /etc/boardd/boards, \
            /usr/share/boardd/boards and the boards/ of the checkout the executable was built in, then among the \
            boards built into boardd; the first place that has a name wins. Exit status 1 when a board that \
            would be used does not load (its problems on stderr). See docs/deploy.md.
            """)

    @Option(name: .customLong("boards"), help: "A directory of board files searched first (may be repeated).")
    var boardDirectories: [String] = []

    func run() throws {
        let catalog = BoardCatalog.standard(searchingFirst: boardDirectories)
        let entries = catalog.sources()
        let (boards, problems) = catalog.loadAll()
        let width = entries.map(\.name.count).max() ?? 0
        for (name, sources) in entries {
            var line = name.padding(width) + "  " + sources[0].description
            if sources.count > 1 { line += " (over " + sources.dropFirst().map(\.description).joined(separator: ", ") + ")" }
            if let title = boards.first(where: { $0.name == name })?.title, !title.isEmpty { line += " — " + title }
            print(line)
        }
        if !problems.isEmpty {
            writeError(problems.map(\.description).joined(separator: "\n") + "\n")
            throw ExitCode(1)
        }
    }
}

extension String {
    fileprivate func padding(_ width: Int) -> String { self + String(repeating: " ", count: max(0, width - count)) }
}
