import BoardDaemon
import BoardSupport
import BoardloopGPIOMock
import Glibc

// A start's cost: examples/doorbell.yaml loaded, checked and planned as
// `boardd --mock --config` loads it, its daemon made (lines requested on
// the mock chips, loops, the command runner) and stopped. `detect`: the
// same, and board detection over every board file besides, which a start
// used to run to decide whether the config is for this machine (the
// figure before that question was asked only when its answer matters).

func startScenario(_ n: Int, detect: Bool) throws {
    guard let text = try? FileSystem.readText("examples/doorbell.yaml").get() else {
        fputs("instr-daemon: examples/doorbell.yaml not found (run from the checkout's root)\n", stderr)
        exit(1)
    }
    let catalog = BoardCatalog(directories: ["boards"] + BoardCatalog.standardDirectories())
    for _ in 0..<n {
        var options = LoadOptions(catalog: catalog)
        options.mock = true
        let loaded = ConfigLoader.load(text: text, file: "doorbell.yaml", options: options)
        guard let config = loaded.config else {
            fputs("instr-daemon: doorbell.yaml does not load: \(loaded.errors.map(\.description))\n", stderr)
            exit(1)
        }
        if detect { _ = BoardDetection.detect(options.machine.facts, boards: catalog.loadAll().boards) }
        let mock = try MockBoard.chips(config.board.chips)
        let daemon = try Daemon(config: config, options: .init(logger: instrLogger(), modeDriver: .external, summaryInterval: nil, mock: mock))
        daemon.shutdown()
    }
}
