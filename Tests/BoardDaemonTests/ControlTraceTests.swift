import Boardloop
import BoardloopGPIOMock
import BoardloopTestSupport
@testable import BoardDaemon
import Foundation
import Glibc
import XCTest

/// The control protocol's `trace` against an in-process daemon on the mock
/// board, on the manual clock: every loop records, the spans come back as
/// Chrome trace events in chunks, one track per loop thread; one trace at
/// a time; a client that hangs up ends its trace; afterwards nothing
/// records (the sink's switches are back where they were).
final class ControlTraceTests: XCTestCase {
    var dir = ""

    override func setUpWithError() throws {
        var template = Array("/tmp/boardd-trace-XXXXXX".utf8CString)
        guard let p = mkdtemp(&template) else { throw POSIXError(.EIO) }
        dir = String(cString: p)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: dir) }

    var socketPath: String { dir + "/boardd.sock" }

    static let yaml = ControlTests.yaml + """

        tasks:
          poll: { every: 100ms, do: [ toggle: led ] }
        """

    func harness() throws -> Harness {
        try Harness(Self.yaml, level: .info, control: ControlServer.Options(path: socketPath))
    }

    /// Reads the stream until its last line (`done`), driving the daemon between reads.
    func collect(_ c: ControlClient, _ h: Harness, id: Int) throws -> (events: [[String: Any]], done: [String: Any]) {
        var events: [[String: Any]] = []
        for _ in 0..<10_000 {
            try h.daemon.settle()
            for line in c.lines() {
                let o = try ControlTests.object(line)
                XCTAssertEqual(o["id"] as? Int, id, "every line carries the trace's id")
                if let chunk = o["trace_events"] as? [[String: Any]] {
                    XCTAssertLessThanOrEqual(chunk.count, ControlServer.traceChunk)
                    events += chunk
                } else {
                    XCTAssertEqual(o["ok"] as? Bool, true, "\(o)")
                    XCTAssertEqual(o["done"] as? Bool, true, "\(o)")
                    return (events, o)
                }
            }
        }
        XCTFail("the trace never ended")
        return (events, [:])
    }

    func testATraceRecordsEveryLoopsActivityAsChromeEvents() throws {
        let h = try harness()
        let c = try ControlClient(socketPath)
        let started = try c.request(#"{"v":1,"id":9,"cmd":"trace","for":"1s"}"#, h)
        XCTAssertEqual(started["ok"] as? Bool, true, "\(started)")
        XCTAssertEqual(started["tracing"] as? Bool, true)
        XCTAssertEqual(started["for_ns"] as? Int, 1_000_000_000)
        XCTAssertEqual(started["loops"] as? [String], ["main", "w"])
        XCTAssertNotNil(h.daemon.main.tracer)
        XCTAssertEqual(h.daemon.main.events.recordsLines.load(ordering: .relaxed), EventSink.toTracer, "edges go to the tracer only")

        // A click (edges, a reaction, a write), a sequence started from a
        // second client (a control request, its steps), the task's runs on
        // the worker.
        let other = try ControlClient(socketPath)
        try h.press()
        try h.advance(50)
        try h.press(false)
        try h.advance(10)
        XCTAssertEqual(try other.request(#"{"v":1,"cmd":"sequence","name":"blink","action":"start"}"#, h)["ok"] as? Bool, true)
        try h.advance(300)
        XCTAssertEqual(other.lines(), [], "the trace goes to its own client only")
        // A second trace while one runs: refused, the first goes on.
        let busy = try other.request(#"{"v":1,"id":2,"cmd":"trace","for":"1s"}"#, h)
        XCTAssertEqual(ControlTests.code(busy), "busy")
        XCTAssertTrue(((busy["error"] as? [String: Any])?["message"] as? String ?? "").contains("already running"), "\(busy)")
        XCTAssertEqual(c.lines(), [], "nothing is sent before the time is up")
        try h.advance(700)

        let (events, done) = try collect(c, h, id: 9)
        XCTAssertEqual(done["events"] as? Int, events.count, "the last line counts what was sent")
        XCTAssertEqual(done["overwritten"] as? Int, 0)
        XCTAssertEqual(done["loops_missing"] as? [String], [])

        // One track per loop thread, named.
        let names = events.filter { $0["name"] as? String == "thread_name" }
        XCTAssertEqual(names.compactMap { ($0["args"] as? [String: Any])?["name"] as? String }, ["loop main", "loop w"])
        let tids = Set(names.compactMap { $0["tid"] as? Int })
        XCTAssertEqual(tids.count, 2, "a track per loop")
        let work = events.filter { $0["ph"] as? String != "M" }
        XCTAssertEqual(Set(work.compactMap { $0["tid"] as? Int }), tids, "every event is on a loop's track")
        for e in work {
            XCTAssertEqual(e["pid"] as? Int, Int(getpid()))
            let ts = try XCTUnwrap(e["ts"] as? Double, "\(e)")
            XCTAssertGreaterThanOrEqual(ts, 0)
            switch e["ph"] as? String {
            case "X": XCTAssertGreaterThanOrEqual(try XCTUnwrap(e["dur"] as? Double, "\(e)"), 0)
            case "i": XCTAssertEqual(e["s"] as? String, "t")
            default: XCTFail("unexpected phase: \(e)")
            }
        }
        func named(_ n: String, _ ph: String) -> [[String: Any]] { work.filter { $0["name"] as? String == n && $0["ph"] as? String == ph } }
        let mainTID = names.first { ($0["args"] as? [String: Any])?["name"] as? String == "loop main" }?["tid"] as? Int
        let workerTID = names.first { ($0["args"] as? [String: Any])?["name"] as? String == "loop w" }?["tid"] as? Int

        // The loop's own activity: the worker's passes and waits (the
        // main loop here runs zero-timeout passes on the manual clock,
        // which neither wait nor notify; the end-to-end test sees its).
        XCTAssertFalse(work.filter { $0["tid"] as? Int == workerTID && $0["name"] as? String == "wait" }.isEmpty, "the worker's waits")
        XCTAssertFalse(work.filter { $0["tid"] as? Int == workerTID && $0["name"] as? String == "pass" }.isEmpty, "the worker's passes")
        // Handlers with their durations.
        XCTAssertEqual(named("line button", "X").count, 2, "the press's and the release's batches")
        XCTAssertTrue(named("line button", "X").allSatisfy { ($0["args"] as? [String: Any])?["events"] as? Int == 1 })
        XCTAssertFalse(named("control request", "X").isEmpty)
        XCTAssertEqual(named("sequence blink step", "X").count, 2, "the step before the wait and the one after it")
        let polls = named("task poll", "X")
        // Ten periods of a 100ms task in 1s; the tenth falls at the trace's
        // last instant, on either side of its end.
        XCTAssertTrue((9...10).contains(polls.count), "a 100ms task over 1s: \(polls.count)")
        XCTAssertTrue(polls.allSatisfy { $0["tid"] as? Int == mainTID && $0["cat"] as? String == "timer" })
        XCTAssertTrue(polls.allSatisfy { ($0["args"] as? [String: Any])?["lateness_ns"] is Int })
        // What the event sink records, named as the log names it.
        let edges = work.filter { $0["cat"] as? String == "edge" }
        XCTAssertEqual(edges.map { ($0["args"] as? [String: Any])?["value"] as? Bool }, [true, false])
        XCTAssertTrue(edges.allSatisfy { $0["tid"] as? Int == mainTID && ($0["args"] as? [String: Any])?["handled_after_ns"] is Int })
        let reactions = work.filter { $0["cat"] as? String == "reaction" }
        XCTAssertEqual(reactions.compactMap { ($0["args"] as? [String: Any])?["reaction"] as? String }, ["press lights"])
        let writes = work.filter { $0["cat"] as? String == "output" }.compactMap { $0["name"] as? String }
        XCTAssertTrue(writes.contains("led = on"), "\(writes)")
        XCTAssertTrue(writes.contains("fan = on") && writes.contains("fan = off"), "\(writes)")
        XCTAssertFalse(work.filter { $0["cat"] as? String == "sequence" && $0["ph"] as? String == "i" }.isEmpty, "the sequence's steps")

        // Over: nothing records, the switches are as they were.
        XCTAssertNil(h.daemon.main.tracer)
        XCTAssertEqual(h.daemon.main.events.recordsLines.load(ordering: .relaxed), 0)
        guard case let .success(workerTracer) = h.daemon.onWorker(0, timeout: .seconds(5), { UncheckedTracer(tracer: $0.tracer) }) else {
            return XCTFail("the worker did not answer")
        }
        XCTAssertNil(workerTracer.tracer)
        // And a new trace may start.
        XCTAssertEqual(try c.request(#"{"v":1,"id":10,"cmd":"trace","for":"100ms"}"#, h)["ok"] as? Bool, true)
        try h.advance(100)
        XCTAssertGreaterThan(try collect(c, h, id: 10).events.count, 0)
    }

    func testBadRequestsAndAClientThatHangsUpMidTrace() throws {
        let h = try harness()
        let c = try ControlClient(socketPath)
        for (request, code) in [
            (#"{"v":1,"cmd":"trace"}"#, "bad-argument"), (#"{"v":1,"cmd":"trace","for":"0s"}"#, "bad-argument"),
            (#"{"v":1,"cmd":"trace","for":"10min"}"#, "bad-argument"), (#"{"v":1,"cmd":"trace","for":5}"#, "bad-argument"),
        ] {
            XCTAssertEqual(ControlTests.code(try c.request(request, h)), code, request)
        }
        XCTAssertNil(h.daemon.main.tracer, "a refused trace starts nothing")

        var gone: ControlClient? = try ControlClient(socketPath)
        XCTAssertEqual(try gone!.request(#"{"v":1,"cmd":"trace","for":"5s"}"#, h)["ok"] as? Bool, true)
        XCTAssertNotNil(h.daemon.main.tracer)
        gone = nil
        try h.daemon.settle()
        XCTAssertNil(h.daemon.main.tracer, "the client hung up: its trace ended")
        XCTAssertNil(h.daemon.control?.trace)
        XCTAssertEqual(h.daemon.main.events.recordsLines.load(ordering: .relaxed), 0)
        // A new trace before the first one's time would have been up: it
        // runs its own length (the first one's end is not its end).
        try h.advance(1000)
        XCTAssertEqual(try c.request(#"{"v":1,"id":3,"cmd":"trace","for":"6s"}"#, h)["ok"] as? Bool, true)
        try h.advance(4500)  // past the first trace's end (5 s after it began)
        XCTAssertNotNil(h.daemon.main.tracer, "the second trace runs on")
        XCTAssertEqual(c.lines(), [])
        // The trace's client asks again while its trace runs: busy.
        XCTAssertEqual(ControlTests.code(try c.request(#"{"v":1,"id":4,"cmd":"trace","for":"1s"}"#, h)), "busy")
        try h.advance(1500)
        XCTAssertGreaterThan(try collect(c, h, id: 3).events.count, 0)
        XCTAssertNil(h.daemon.main.tracer)
        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"ping"}"#, h)["pong"] as? Bool, true)
    }

    /// A reload during a trace: the spans made before it are named as of
    /// an earlier config, not by the new config's names at their indices.
    func testAReloadDuringATraceKeepsItsSpansApart() throws {
        let dir = self.dir
        let path = dir + "/boardd.yaml"
        let first = Self.yaml
        try first.write(toFile: path, atomically: true, encoding: .utf8)
        // (A harness on a file, so a reload reads it again; it has no
        // control socket: the tracer is started and stopped directly.)
        let h = try Harness(path: path, level: .info)
        let tracer = LoopTracer(threadID: 1, now: h.daemon.main.nowNanoseconds, serial: 7)
        try h.daemon.main.startTracing(tracer)
        try h.advance(150)  // a task run: `task poll` of the first config
        // The second config swaps the task's name.
        try first.replacingOccurrences(of: "poll:", with: "renamed:").write(toFile: path, atomically: true, encoding: .utf8)
        XCTAssertTrue(h.daemon.reload().applied)
        try h.advance(150)
        XCTAssertTrue(h.daemon.main.stopTracing() === tracer)
        var old = 0, new = 0
        for i in max(0, tracer.count - tracer.capacity)..<tracer.count where tracer.span(i).kind == .task {
            if tracer.span(i).generation == h.daemon.main.program.generation { new += 1 } else { old += 1 }
        }
        XCTAssertEqual(old, 1, "the first config's run")
        XCTAssertGreaterThan(new, 0, "the new config's runs")
    }

    /// While a trace runs the loop allocates nothing per event either: its
    /// spans go into the ring made when the trace started, which wraps
    /// (the oldest overwritten) without allocating.
    func testATraceRecordsWithoutAllocating() throws {
        try XCTSkipUnless(AllocationCounter.isActive, "malloc interposer not linked (ThreadSanitizer build)")
        let h = try Harness(
            """
            board: demo
            lines:
              button: { pin: BUTTON, input: { edge: both, active_low: true } }
              led: { pin: LED, output: {} }
              fan: { pin: FAN, output: {} }
            tasks:
              blink: { every: 1ms, do: [ toggle: fan ] }
            reactions:
              - { on: { line: button, press: true }, do: [ set: { led: on } ] }
              - { on: { line: button, release: true }, do: [ set: { led: off } ] }
            """, level: .info)
        let tracer = LoopTracer(capacity: 4096, threadID: 0, now: h.daemon.main.nowNanoseconds)
        try h.daemon.main.startTracing(tracer)
        let loop = h.daemon.loop
        let clock = h.clock
        var level = false
        func round() throws {
            level.toggle()
            try h.chip.setLevel(17, level)
            _ = try loop.run(mode: .default, timeout: .zero)
            AllocationCounter.endCountingOnThisThread()
            clock.advance(by: .microseconds(500))
            AllocationCounter.beginCountingOnThisThread()
            _ = try loop.run(mode: .default, timeout: .zero)
        }
        AllocationCounter.beginCountingOnThisThread()
        for _ in 0..<500 { try round() }
        AllocationCounter.endCountingOnThisThread()
        let before = tracer.count
        let m = try AllocationCounter.measure { () throws in
            for _ in 0..<5_000 { try round() }
        }
        let spans = tracer.count - before
        XCTAssertEqual(m.allocations, 0, "allocations while tracing \(spans) spans: \(m.allocations) (\(m.bytes) bytes)")
        // Per round: the batch's span, its edge, a reaction, a write; a task run (and its write) every other round.
        XCTAssertGreaterThanOrEqual(spans, 5_000 * 4, "spans recorded")
        XCTAssertGreaterThan(tracer.overwritten, 0, "the ring wrapped")
        var kinds = Set<UInt8>()
        var records = Set<UInt8>()
        for i in (tracer.count - tracer.capacity)..<tracer.count {
            let s = tracer.span(i)
            kinds.insert(s.kind.rawValue)
            if s.kind == .record { records.insert(s.record.kind.rawValue) }
        }
        XCTAssertTrue(kinds.isSuperset(of: [LoopTracer.Kind.line.rawValue, LoopTracer.Kind.task.rawValue, LoopTracer.Kind.record.rawValue]))
        XCTAssertTrue(records.isSuperset(of: [TraceRecord.Kind.edge.rawValue, TraceRecord.Kind.reaction.rawValue, TraceRecord.Kind.output.rawValue]))
        XCTAssertTrue(h.daemon.main.stopTracing() === tracer)
        XCTAssertNil(h.daemon.main.tracer)
    }
}
