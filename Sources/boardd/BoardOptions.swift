import ArgumentParser
import BoardDaemon
import BoardSupport

/// The board options `boardd test` and `boardd replay` share with `run`.
struct BoardOptions: ParsableArguments {
    @Option(help: "Use this board instead of the config's `board`.") var board: String?
    @Option(name: .customLong("boards"), help: "A directory of board files searched first (may be repeated).")
    var boardDirectories: [String] = []

    var loadOptions: LoadOptions {
        LoadOptions(board: board, catalog: BoardCatalog.standard(searchingFirst: boardDirectories))
    }
}
