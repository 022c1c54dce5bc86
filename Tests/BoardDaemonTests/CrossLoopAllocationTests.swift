import Boardloop
@testable import BoardDaemon
import BoardloopTestSupport
import XCTest

/// Posts between loops allocate nothing: a reaction on the main loop
/// toggles an output a worker owns (a message to the worker's port), and a
/// reaction on the worker toggles an output of the main loop (a message
/// back). Counted on both threads after warm-up, over 2,000 edges on each
/// side; every post arrived (each round waits for both outputs to flip, so
/// a lost post stops the test).
final class CrossLoopAllocationTests: XCTestCase {
    func testPostsBetweenTheMainLoopAndAWorkerAllocateNothing() throws {
        try XCTSkipUnless(AllocationCounter.isActive, "malloc interposer not linked (ThreadSanitizer build)")
        let h = try Harness(
            """
            board: demo
            lines:
              button: { pin: BUTTON, input: { edge: both, active_low: true } }
              chatter: { pin: CHATTER, input: { edge: both } }
              valve: { pin: VALVE, output: { initial: off } }
              led: { pin: LED, output: { initial: off } }
            workers:
              w: { lines: [chatter, valve] }
            reactions:
              - { name: to worker, on: { line: button, edge: both }, do: [ toggle: valve ] }
              - { name: to main, on: { line: chatter, edge: both }, do: [ toggle: led ] }
            """, level: .info)
        let d = h.daemon
        let loop = d.loop
        let valve = Harness.offset("VALVE"), led = Harness.offset("LED")
        var level = false
        var writes = 0
        /// One edge on each side; then the main loop's passes until both
        /// posts have been handled (the worker's write, then the main
        /// loop's write of the worker's post).
        func round() throws {
            level.toggle()
            writes += 1
            try h.chip.setLevel(17, !level)  // (the button rests high)
            try h.chip.setLevel(23, level)
            let want = writes % 2 == 1
            let deadline = MonotonicInstant.now + .seconds(20)
            while try h.chip.level(.offset(valve)) != want || h.chip.level(.offset(led)) != want {
                _ = try loop.run(mode: .default, timeout: .zero)
                if MonotonicInstant.now > deadline { throw DaemonError.setup("round \(writes): the posts did not arrive") }
            }
        }
        for _ in 0..<200 { try round() }  // warm-up
        _ = d.onWorker(0, timeout: .seconds(10)) { _ in
            AllocationCounter.resetThisThread()
            AllocationCounter.beginCountingOnThisThread()
        }
        let before = h.counters
        let rounds = 2_000
        let main = try AllocationCounter.measure { () throws in
            for _ in 0..<rounds { try round() }
        }
        let worker = try d.onWorker(0, timeout: .seconds(10)) { _ in
            AllocationCounter.endCountingOnThisThread()
            return AllocationCounter.countOnThisThread
        }.get()
        let after = h.counters
        let workerFires = try d.onWorker(0, timeout: .seconds(10)) { rt in rt.counters(nil).reactionFires["to main"] ?? 0 }.get()
        XCTAssertEqual(after.reactionFires["to worker"]! - before.reactionFires["to worker"]!, UInt64(rounds))
        XCTAssertEqual(workerFires, UInt64(rounds + 200), "the worker's reaction fired once per edge")
        XCTAssertEqual(main.allocations, 0, "the main loop's thread allocated over \(rounds) posts each way (\(main.bytes) bytes)")
        XCTAssertEqual(worker, 0, "the worker's thread allocated over \(rounds) posts each way")
        print("posts between loops: \(main.allocations) allocations on the main loop's thread, \(worker) on the worker's, for \(rounds) posts each way")
        h.daemon.shutdown()
    }
}
