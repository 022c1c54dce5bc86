import BoardDaemon
import BoardSupport
import Boardloop
import BoardloopGPIOMock
import Glibc
import Logging

// A post between loops: an edge on the main loop's button toggles an
// output a worker owns, so the action goes to the worker's port as a
// message and the worker writes the output. Every loop runs on this thread
// (the daemon's inline workers, the manual clock), so the count is exact;
// the reference is the same reaction with the output on the main loop
// (no post). Each edge is one pass of the main loop, and with a worker
// one pass of the worker's: the difference is what the post costs — the
// send, the worker's pass that receives it, the message's decoding.
func postScenario(_ n: Int, crossLoop: Bool) throws {
    let yaml = """
        board: demo
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true } }
          valve: { pin: VALVE, output: { initial: off } }
        \(crossLoop ? "workers:\n  w: { lines: [valve] }\n" : "")reactions:
          - name: toggle
            on: { line: button, edge: both }
            do: [ toggle: valve ]
        """
    let config = loadConfig(yaml, file: "post.yaml")
    let clock = ManualClock()
    let mock = try Demo.makeChips(clock: .manual(clock))
    var o = Daemon.Options(logger: instrLogger(), clock: .manual(clock), modeDriver: .external, summaryInterval: nil, mock: mock)
    o.inlineWorkers = true
    let daemon = try Daemon(config: config, options: o)
    let worker = crossLoop ? daemon.workerLoop("w") : nil
    precondition(!crossLoop || worker != nil, "post: no worker loop")
    try postEdges(daemon.loop, worker, mock.chips[0], n)
    let writes = mock.chips[0].allOutputChanges().filter { $0.offset == 5 }.count
    precondition(writes >= min(n, 2048), "post: \(writes) valve writes for \(n) edges")
    daemon.shutdown()
}

/// `n` edges on the button; after each, one pass of the main loop (the
/// reaction: the write, or the post) and, with a worker, one pass of the
/// worker's loop (the post received, the write).
@inline(never)
func postEdges(_ main: BoardRunLoop, _ worker: BoardRunLoop?, _ chip: MockChip, _ n: Int) throws {
    var level = true  // released (active low)
    for _ in 0..<n {
        level.toggle()
        try chip.setLevel(.offset(17), level)
        _ = try main.run(mode: .default, timeout: .zero, returnAfterSourceHandled: true)
        if let worker { _ = try worker.run(mode: .default, timeout: .zero, returnAfterSourceHandled: true) }
    }
}
