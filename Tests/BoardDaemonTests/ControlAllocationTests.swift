import Boardloop
@testable import BoardDaemon
import BoardloopTestSupport
import Foundation
import Glibc
import XCTest

/// The control socket at steady state costs a worker loop no allocation: a
/// client polls `status` and `stats` (each reads the worker's figures on
/// its thread) and a follower streams the worker's edges, writes and
/// reactions, while the worker reads a chattering input, reacts and runs a
/// 1 ms task. Counted per thread by the malloc interposer on the worker's
/// thread. The main loop, which builds the JSON replies, does allocate: its
/// figure is printed, not asserted (about 416 allocations a round in a debug
/// build: one status or stats reply, with a worker's figures turned into
/// dictionaries there, and two event lines for the follower). Before the
/// worker's figures were read into tables the main loop made
/// (`LoopFigures`), the worker allocated 17 times per request.
final class ControlAllocationTests: XCTestCase {
    static let yaml = """
        board: demo
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true } }
          chatter: { pin: CHATTER, input: { edge: both } }
          led: { pin: LED, output: { initial: off } }
          valve: { pin: VALVE, output: { initial: off } }
          fan: { pin: FAN, output: { initial: off } }
        workers:
          w: { lines: [chatter, valve, fan] }
        tasks:
          tick: { every: 1ms, worker: w, do: [ toggle: fan ] }
        sequences:
          blink: { worker: w, steps: [ set: { fan: on }, wait: 100ms, set: { fan: off } ] }
        reactions:
          - name: chatter flips
            on: { line: chatter, edge: both }
            do: [ toggle: valve ]
          - name: press lights
            on: { line: button, press: true }
            do: [ set: { led: on } ]
        """

    var dir = ""

    override func setUpWithError() throws {
        var template = Array("/tmp/boardd-calloc-XXXXXX".utf8CString)
        guard let p = mkdtemp(&template) else { throw POSIXError(.EIO) }
        dir = String(cString: p)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: dir) }

    func testAWorkerAllocatesNothingWhileClientsPollStatusAndStatsAndFollowItsEvents() throws {
        try XCTSkipUnless(AllocationCounter.isActive, "malloc interposer not linked (ThreadSanitizer build)")
        let path = dir + "/boardd.sock"
        let h = try Harness(Self.yaml, level: .info, control: ControlServer.Options(path: path))
        let d = h.daemon
        let poller = try ControlClient(path)
        let follower = try ControlClient(path)
        XCTAssertEqual(try follower.request(#"{"v":1,"id":1,"cmd":"events","follow":true,"line":"chatter"}"#, h)["following"] as? Bool, true)

        var level = false
        var edges = 0
        var replies = 0
        var streamed = 0
        var mainAllocations = 0
        /// Runs the main loop's passes with the test thread's count on (its
        /// figure is the main loop's: the test's own parsing is outside it).
        func mainLoop(_ body: () throws -> Void) rethrows {
            AllocationCounter.beginCountingOnThisThread()
            defer { AllocationCounter.endCountingOnThisThread() }
            let before = AllocationCounter.countOnThisThread
            try body()
            mainAllocations += AllocationCounter.countOnThisThread - before
        }
        /// One round: a chatter edge for the worker, a millisecond for its
        /// task, a status or stats request answered, the follower's lines read.
        func round(_ i: Int) throws {
            level.toggle()
            try h.chip.setLevel(23, level)
            edges += 1
            let request = i % 2 == 0 ? #"{"v":1,"id":\#(i),"cmd":"status"}"# : #"{"v":1,"id":\#(i),"cmd":"stats"}"#
            let bytes = Array((request + "\n").utf8)
            XCTAssertEqual(bytes.withUnsafeBytes { Glibc.send(poller.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }, bytes.count)
            try mainLoop {
                try d.advance(by: .milliseconds(1))
                try d.settle()
                try d.settle()
            }
            let got = poller.lines()
            XCTAssertEqual(got.count, 1, "one reply to \(request): \(got)")
            for l in got {
                let o = try ControlTests.object(l)
                XCTAssertEqual(o["ok"] as? Bool, true, l)
                XCTAssertEqual(o["id"] as? Int, i)
                if i % 2 == 1 { XCTAssertEqual(try ControlStatsTests.loops(o).map { $0["answered"] as? Bool }, [true, true]) }
                replies += 1
            }
            streamed += follower.lines().count
        }

        for i in 0..<100 { try round(i) }  // warm-up: the buffers and the histograms' first samples
        // The worker counts its own thread from here.
        _ = d.onWorker(0, timeout: .seconds(10)) { _ in
            AllocationCounter.resetThisThread()
            AllocationCounter.beginCountingOnThisThread()
        }
        let before = try XCTUnwrap(worker(d))
        mainAllocations = 0
        let (edges0, replies0, streamed0) = (edges, replies, streamed)
        let rounds = 1_000
        for i in 100..<(100 + rounds) { try round(i) }
        let after = try XCTUnwrap(worker(d))
        let counted = d.onWorker(0, timeout: .seconds(10)) { _ in
            AllocationCounter.endCountingOnThisThread()
            return AllocationCounter.countOnThisThread
        }
        let workerAllocations = try counted.get()

        XCTAssertEqual(replies - replies0, rounds, "every request answered")
        // (The worker's loop keeps real time, not the harness's manual clock: its task runs at 1 kHz as the rounds go.)
        XCTAssertGreaterThan(after.tasks["tick"]!.runs - before.tasks["tick"]!.runs, UInt64(rounds / 4), "the task ran meanwhile")
        let seen = after.lines["chatter"]!.events - before.lines["chatter"]!.events
        XCTAssertGreaterThan(seen, UInt64(rounds / 2), "the worker read the edges (\(seen) of \(edges - edges0))")
        XCTAssertGreaterThan(streamed - streamed0, rounds, "the follower got the worker's edges and reactions")
        XCTAssertEqual(workerAllocations, 0, "the worker's thread allocated over \(rounds) status/stats requests and \(edges - edges0) edges")
        print(
            "control at steady state: worker w \(workerAllocations) allocations; main loop \(mainAllocations) for \(rounds) requests (status and stats alternately) and \(streamed - streamed0) event lines (\(mainAllocations / rounds) a round)"
        )
    }

    /// What `status` and `stats` read of a worker in place is what its
    /// counters say, read the allocating way on its thread.
    func testAWorkersFiguresReadInPlaceAreItsCounters() throws {
        let h = try Harness(Self.yaml)
        let d = h.daemon
        for i in 0..<20 {
            try h.chip.setLevel(23, i % 2 == 0)
            try d.advance(by: .milliseconds(3))
        }
        // Until the worker has read the 20 edges (each check waits for its thread).
        for _ in 0..<10_000 where worker(d)?.lines["chatter"]?.events != 20 { _ = d.onWorker(0, timeout: .seconds(1)) { _ in } }
        // The worker's loop keeps real time: its 1 ms task runs on between
        // two reads, so its runs are checked to lie between them.
        var direct = try d.onWorker(0, timeout: .seconds(10)) { $0.counters(nil) }.get()
        var read = try d.workerCounters(0, timeout: .seconds(10)).get()
        let later = try d.onWorker(0, timeout: .seconds(10)) { $0.counters(nil) }.get()
        XCTAssertTrue((direct.tasks["tick"]!.runs...later.tasks["tick"]!.runs).contains(read.tasks["tick"]!.runs))
        XCTAssertEqual(read.tasks.keys.sorted(), ["tick"])
        XCTAssertGreaterThan(read.tasks["tick"]?.runs ?? 0, 0)
        (direct.tasks, read.tasks) = ([:], [:])
        XCTAssertEqual(read, direct)
        XCTAssertEqual(read.lines["chatter"]?.events, 20)
        XCTAssertEqual(read.reactionFires["chatter flips"], 20)
        XCTAssertNotNil(read.reactionTimes["chatter flips"])
        XCTAssertEqual(read.sequence.keys.sorted(), ["blink"])
        // Read again into the same tables: the figures of now, nothing left of before.
        try h.chip.setLevel(23, true)
        for _ in 0..<10_000 where worker(d)?.lines["chatter"]?.events != 21 { _ = d.onWorker(0, timeout: .seconds(1)) { _ in } }
        var again = try d.workerCounters(0, timeout: .seconds(10)).get()
        var direct2 = try d.onWorker(0, timeout: .seconds(10)) { $0.counters(nil) }.get()
        XCTAssertLessThanOrEqual(again.tasks["tick"]!.runs, direct2.tasks["tick"]!.runs)
        XCTAssertGreaterThanOrEqual(again.tasks["tick"]!.runs, later.tasks["tick"]!.runs)
        (again.tasks, direct2.tasks) = ([:], [:])
        XCTAssertEqual(again, direct2)
        XCTAssertEqual(again.reactionFires["chatter flips"], 21)
    }

    /// The worker's counters, read on its thread outside any count.
    func worker(_ d: Daemon) -> Daemon.Counters? {
        try? d.onWorker(0, timeout: .seconds(10)) { rt in
            AllocationCounter.endCountingOnThisThread()
            defer { AllocationCounter.beginCountingOnThisThread() }
            return rt.counters(nil)
        }.get()
    }
}
