import Boardloop
import BoardloopGPIOMock
import BoardloopTestSupport
@testable import BoardDaemon
import Foundation
import Glibc
import XCTest

/// The control protocol's `record` against an in-process daemon on the mock
/// board, on the manual clock: the header, each kind of record with its
/// fields and its time from the start, `lines` filtering, the refusals,
/// and afterwards nothing records (the sink's switches are back).
final class ControlRecordTests: XCTestCase {
    var dir = ""

    override func setUpWithError() throws {
        var template = Array("/tmp/boardd-record-XXXXXX".utf8CString)
        guard let p = mkdtemp(&template) else { throw POSIXError(.EIO) }
        dir = String(cString: p)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: dir) }

    var socketPath: String { dir + "/boardd.sock" }

    static let yaml = """
        board: demo
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true }, priority: low }
          estop: { pin: ESTOP, input: { edge: both, active_low: true }, priority: high, gestures: { one_of: [click, double_click] } }
          chatter: { pin: CHATTER, input: { edge: both }, priority: low }
          led: { pin: LED, output: { safe: off } }
          valve: { pin: VALVE, output: { safe: off } }
          fan: { pin: FAN, output: {} }
        modes:
          critical: { admits: [high] }
        workers:
          w: { lines: [fan] }
        tasks:
          spin: { every: 400ms, do: [ toggle: fan ] }
        sequences:
          pour:
            mode: critical
            steps: [ set: { valve: on }, wait: 150ms, set: { valve: off } ]
        reactions:
          - { name: start, on: { line: button, press: true }, do: [ sequence: pour ] }
          - { name: count, on: { line: chatter, edge: both }, do: [ toggle: led ] }
          - { name: tap, on: { line: estop, gesture: click }, do: [ log: "tap" ] }
        """

    func harness() throws -> Harness {
        try Harness(Self.yaml, level: .info, control: ControlServer.Options(path: socketPath))
    }

    /// Reads the stream until its last line (`done`), driving the daemon
    /// between reads: the records (unwrapped) and the footer.
    func collect(_ c: ControlClient, _ h: Harness, id: Int) throws -> (records: [[String: Any]], end: [String: Any]) {
        var records: [[String: Any]] = []
        for _ in 0..<10_000 {
            try h.daemon.settle()
            for line in c.lines() {
                let o = try ControlTests.object(line)
                XCTAssertEqual(o["id"] as? Int, id, "every line carries the recording's id")
                if let r = o["record"] as? [String: Any] {
                    records.append(r)
                } else {
                    XCTAssertEqual(o["ok"] as? Bool, true, "\(o)")
                    XCTAssertEqual(o["done"] as? Bool, true, "\(o)")
                    return (records, try XCTUnwrap(o["end"] as? [String: Any], "\(o)"))
                }
            }
        }
        XCTFail("the recording never ended")
        return (records, [:])
    }

    func testARecordingCarriesEdgesHeldAndDeliveredWritesByOriginReactionsGesturesModesAndSequences() throws {
        let h = try harness()
        let d = h.daemon
        let c = try ControlClient(socketPath)
        let start = d.main.nowNanoseconds
        let started = try c.request(#"{"v":1,"id":7,"cmd":"record","for":"1s"}"#, h)
        XCTAssertEqual(started["ok"] as? Bool, true, "\(started)")
        XCTAssertEqual(started["recording"] as? Bool, true)
        XCTAssertEqual(started["for_ns"] as? Int, 1_000_000_000)
        let header = try XCTUnwrap(started["header"] as? [String: Any])
        XCTAssertEqual(header["boardd_recording"] as? Int, 1)
        XCTAssertEqual(header["config"] as? String, "test.yaml")
        XCTAssertTrue(header["config_sha256"] is NSNull, "a config given as text has no file to digest")
        XCTAssertEqual(header["board"] as? String, "demo")
        XCTAssertEqual(header["gpio"] as? String, "mock")
        XCTAssertEqual(header["start_ns"] as? Int, Int(start))
        XCTAssertEqual(header["seconds"] as? Int, 1)
        XCTAssertEqual(header["lines"] as? [String], ["button", "estop", "chatter", "led", "valve", "fan"])
        XCTAssertEqual(header["loops"] as? [String], ["main", "w"])
        // Physical levels: BUTTON and ESTOP idle high (active-low, released), CHATTER low.
        XCTAssertEqual(header["levels"] as? [String: Int], ["button": 1, "estop": 1, "chatter": 0])
        XCTAssertEqual(header["outputs"] as? [String: Int], ["led": 0, "valve": 0, "fan": 0], "each output's value, for a replay to start from")
        XCTAssertNotNil(d.main.events.recorder)
        XCTAssertEqual(d.main.events.recordsLines.load(ordering: .relaxed), EventSink.toRecorder, "writes go to the recorder only")

        let other = try ControlClient(socketPath)
        try h.advance(100)
        try h.press()  // t = 100 ms: the sequence starts, the loop goes critical
        try h.advance(10)
        try h.setLevel("CHATTER", true)  // held: critical admits high only
        try h.advance(10)
        try h.press(false)  // held too
        try h.advance(10)
        try h.setLevel("ESTOP", false)  // a click on the high-priority line: not held
        try h.advance(50)
        try h.setLevel("ESTOP", true)
        try h.advance(100)  // past the sequence's end: the held events are delivered
        XCTAssertEqual(try other.request(#"{"v":1,"cmd":"set","line":"valve","value":true}"#, h)["ok"] as? Bool, true)
        XCTAssertEqual(try other.request(#"{"v":1,"cmd":"mode","loop":"main","mode":"critical"}"#, h)["ok"] as? Bool, true)
        XCTAssertEqual(try other.request(#"{"v":1,"cmd":"mode","loop":"main","mode":"default"}"#, h)["ok"] as? Bool, true)
        XCTAssertEqual(other.lines(), [], "the records go to their own client only")
        let busy = try other.request(#"{"v":1,"id":2,"cmd":"record","for":"1s"}"#, h)
        XCTAssertEqual(ControlTests.code(busy), "busy")
        try h.advance(800)

        let (records, end) = try collect(c, h, id: 7)
        XCTAssertEqual(end["end"] as? Bool, true)
        XCTAssertEqual(end["records"] as? Int, records.count, "the footer counts what was sent")
        XCTAssertEqual(end["dropped"] as? Int, 0)
        for r in records {
            XCTAssertNotNil(r["t"] as? Int, "\(r)")
            XCTAssertNotNil(r["kind"] as? String, "\(r)")
            XCTAssertTrue(["main", "w"].contains(r["loop"] as? String), "\(r)")
            // (The harness's worker loops run on the real clock, the main one on the manual clock.)
            if r["loop"] as? String == "main" { XCTAssertTrue((0...1_000_000_000).contains(r["t"] as? Int ?? -1), "\(r)") }
        }
        let ts = records.map { $0["t"] as? Int ?? 0 }
        XCTAssertEqual(ts, ts.sorted(), "time-ordered, the loops merged")
        func kind(_ k: String) -> [[String: Any]] { records.filter { $0["kind"] as? String == k } }
        func brief(_ r: [String: Any], _ keys: [String]) -> String { keys.map { "\(r[$0] ?? "-")" }.joined(separator: " ") }

        // Edges as the wire changed, at their kernel timestamps from the start, with sequence numbers.
        let edges = kind("edge")
        XCTAssertEqual(
            edges.map { brief($0, ["t", "line", "edge", "held"]) },
            [
                "100000000 button falling 0", "110000000 chatter rising 1", "120000000 button rising 1",
                "130000000 estop falling 0", "180000000 estop rising 0",
            ])
        XCTAssertTrue(edges.allSatisfy { $0["seq"] is Int && $0["line_seq"] is Int && $0["loop"] as? String == "main" }, "\(edges)")
        XCTAssertEqual(edges.filter { $0["line"] as? String == "estop" }.map { $0["line_seq"] as? Int }, [1, 2])
        // Held events delivered once the sequence's mode ended.
        XCTAssertEqual(
            kind("delivered").map { brief($0, ["t", "line", "count"]) }.sorted(), ["250000000 button 1", "250000000 chatter 1"])
        XCTAssertTrue(kind("lost").isEmpty)
        // Reactions, a gesture.
        // Reactions when their actions ended; the click is decided once a double click can no longer come.
        XCTAssertEqual(
            kind("reaction").map { brief($0, ["t", "name", "line"]) },
            ["100000000 start button", "250000000 count chatter", "430000000 tap estop"])
        XCTAssertEqual(kind("gesture").map { brief($0, ["t", "line", "gesture"]) }, ["430000000 estop click"])
        // Mode switches with why.
        XCTAssertEqual(
            kind("mode").map { brief($0, ["from", "to", "why"]) },
            ["default critical sequence:pour", "critical default sequence-end:pour", "default critical control", "critical default control"])
        XCTAssertEqual(kind("mode").first?["t"] as? Int, 100_000_000)
        XCTAssertEqual(kind("sequence").map { brief($0, ["t", "name", "step"]) }, ["100000000 pour start", "250000000 pour end"])
        // Writes and who made them.
        let writes = kind("write").map { brief($0, ["loop", "line", "value", "by"]) }
        XCTAssertEqual(writes.filter { $0.contains("valve") }, ["main valve 1 sequence:pour", "main valve 0 sequence:pour", "main valve 1 control"])
        XCTAssertEqual(writes.filter { $0.contains("led") }, ["main led 1 reaction:count"])
        // The main loop's task writes the worker's fan: posted, written there, by the task.
        // (At 400 ms and 800 ms; the second may reach the worker, on its own thread, after the end.)
        let fan = writes.filter { $0.contains("fan") }
        XCTAssertEqual(fan.first, "w fan 1 task:spin")
        XCTAssertTrue((1...2).contains(fan.count) && fan.allSatisfy { $0.hasPrefix("w fan ") && $0.hasSuffix(" task:spin") }, "\(fan)")

        // Over: nothing records, the switches are as they were.
        XCTAssertNil(d.main.events.recorder)
        XCTAssertNil(d.control?.recording)
        XCTAssertEqual(d.main.events.recordsLines.load(ordering: .relaxed), 0)
        guard case let .success(still) = d.onWorker(0, timeout: .seconds(5), { $0.events.recorder != nil }) else {
            return XCTFail("the worker did not answer")
        }
        XCTAssertFalse(still)
        // The unrecorded path as before: a press starts the sequence, nothing is sent.
        try h.press()
        try h.advance(10)
        XCTAssertEqual(d.mainMode, "critical")
        try h.press(false)
        try h.advance(200)
        XCTAssertEqual(c.lines(), [])
        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"ping"}"#, h)["pong"] as? Bool, true)
    }

    func testLinesLimitWhatIsRecordedAndAnUnknownLineIsRefusedWithAHint() throws {
        let h = try harness()
        let c = try ControlClient(socketPath)
        let unknown = try c.request(#"{"v":1,"cmd":"record","for":"1s","lines":["button","chater"]}"#, h)
        XCTAssertEqual(ControlTests.code(unknown), "unknown-line")
        let message = (unknown["error"] as? [String: Any])?["message"] as? String ?? ""
        XCTAssertTrue(message.contains("'chater'") && message.contains("did you mean 'chatter'"), message)
        XCTAssertNil(h.daemon.main.events.recorder, "a refused recording starts nothing")
        for (request, code) in [
            (#"{"v":1,"cmd":"record"}"#, "bad-argument"), (#"{"v":1,"cmd":"record","for":"2h"}"#, "bad-argument"),
            (#"{"v":1,"cmd":"record","for":"1s","lines":"button"}"#, "bad-argument"),
        ] {
            XCTAssertEqual(ControlTests.code(try c.request(request, h)), code, request)
        }

        let started = try c.request(#"{"v":1,"id":3,"cmd":"record","for":"500ms","lines":["chatter"]}"#, h)
        let header = try XCTUnwrap(started["header"] as? [String: Any], "\(started)")
        XCTAssertEqual(header["lines"] as? [String], ["chatter"])
        XCTAssertEqual(header["levels"] as? [String: Int], ["chatter": 0])
        XCTAssertEqual(header["outputs"] as? [String: Int], [:], "no output among the lines recorded")
        try h.press()
        try h.advance(10)
        try h.setLevel("CHATTER", true)
        try h.advance(500)
        let (records, _) = try collect(c, h, id: 3)
        let lined = records.filter { $0["kind"] as? String != "reaction" && $0["line"] != nil }
        XCTAssertFalse(lined.isEmpty)
        XCTAssertTrue(lined.allSatisfy { $0["line"] as? String == "chatter" }, "only chatter's edges and writes: \(lined)")
        XCTAssertTrue(records.contains { $0["kind"] as? String == "reaction" && $0["name"] as? String == "start" }, "reactions whatever their line")
    }

    func testAClientThatHangsUpEndsItsRecording() throws {
        let h = try harness()
        var gone: ControlClient? = try ControlClient(socketPath)
        XCTAssertEqual(try gone!.request(#"{"v":1,"cmd":"record","for":"5s"}"#, h)["ok"] as? Bool, true)
        XCTAssertNotNil(h.daemon.main.events.recorder)
        gone = nil
        try h.daemon.settle()
        XCTAssertNil(h.daemon.main.events.recorder, "the client hung up: its recording ended")
        XCTAssertNil(h.daemon.control?.recording)
        XCTAssertEqual(h.daemon.main.events.recordsLines.load(ordering: .relaxed), 0)
        let c = try ControlClient(socketPath)
        XCTAssertEqual(try c.request(#"{"v":1,"id":4,"cmd":"record","for":"100ms"}"#, h)["ok"] as? Bool, true, "a new one may start")
        try h.advance(100)
        XCTAssertEqual(try collect(c, h, id: 4).end["dropped"] as? Int, 0)
    }

    /// A recording's loop thread allocates nothing per event: the worker
    /// reads a chattering input, reacts, writes and runs a 1 ms task while
    /// every one of those goes to its recorder, and the main loop drains
    /// and streams them.
    func testAWorkerAllocatesNothingWhileRecorded() throws {
        try XCTSkipUnless(AllocationCounter.isActive, "malloc interposer not linked (ThreadSanitizer build)")
        let h = try Harness(ControlAllocationTests.yaml, level: .info, control: ControlServer.Options(path: socketPath))
        let d = h.daemon
        let c = try ControlClient(socketPath)
        XCTAssertEqual(try c.request(#"{"v":1,"id":1,"cmd":"record","for":"1h"}"#, h)["recording"] as? Bool, true)
        var level = false
        var driven = 0
        /// Chatter edges recorded, and those the kernel dropped (recorded as lost).
        var accounted = 0
        func take() throws {
            for l in c.lines() {
                let r = try XCTUnwrap(try ControlTests.object(l)["record"] as? [String: Any], l)
                guard r["line"] as? String == "chatter" else { continue }
                if r["kind"] as? String == "edge" { accounted += 1 }
                if r["kind"] as? String == "lost" { accounted += r["count"] as? Int ?? 0 }
            }
        }
        func round() throws {
            level.toggle()
            try h.chip.setLevel(23, level)
            driven += 1
            try d.advance(by: .milliseconds(1))
            try d.settle()
            try d.settle()
            try take()
        }
        for _ in 0..<200 { try round() }  // warm-up
        _ = d.onWorker(0, timeout: .seconds(10)) { _ in
            AllocationCounter.resetThisThread()
            AllocationCounter.beginCountingOnThisThread()
        }
        for _ in 0..<1_000 { try round() }
        let counted = d.onWorker(0, timeout: .seconds(10)) { _ in
            AllocationCounter.endCountingOnThisThread()
            return AllocationCounter.countOnThisThread
        }
        XCTAssertEqual(try counted.get(), 0, "the worker allocated while recorded")
        // Every edge driven is in the recording: as an edge, or counted in
        // a loss (the test drives faster than the worker may read); the
        // last ones come with later drains.
        for _ in 0..<100 where accounted < driven {
            try d.advance(by: .milliseconds(50))
            try d.settle()
            try take()
        }
        XCTAssertEqual(accounted, driven, "every chatter edge recorded or counted lost")
    }

    /// A reload that drops an output sets it to its safe value: recorded as `safe`.
    func testAReloadsSafeValueIsRecordedAsSafe() throws {
        let path = dir + "/boardd.yaml"
        let first = """
            board: demo
            lines:
              button: { pin: BUTTON, input: { edge: both, active_low: true } }
              valve: { pin: VALVE, output: { safe: off } }
            reactions:
              - { name: open, on: { line: button, press: true }, do: [ set: { valve: on } ] }
            """
        try first.write(toFile: path, atomically: true, encoding: .utf8)
        let h = try Harness(path: path, level: .info)
        let rec = LoopRecorder(serial: 1)
        _ = h.daemon.main.startRecording(rec)
        try h.press()
        try h.advance(10)
        try "board: demo\nlines:\n  button: { pin: BUTTON, input: { edge: both, active_low: true } }\n".write(
            toFile: path, atomically: true, encoding: .utf8)
        XCTAssertTrue(h.daemon.reload().applied)
        try h.advance(10)
        h.daemon.main.stopRecording()
        var writes: [String] = []
        rec.consume { e in
            if e.record.kind == .output { writes.append("\(e.record.flag) \(EventSink.WriteBy(rawValue: e.record.step).map { "\($0)" } ?? "?")") }
        }
        XCTAssertEqual(writes, ["true reaction", "false safe"])
        XCTAssertEqual(try h.writes("VALVE"), [true, false])
    }

    /// A run that `max_running` refuses is recorded (a replay counts it as
    /// the run it will make: it runs no child).
    func testARunRefusedForMaxRunningIsRecorded() throws {
        let yaml = """
            board: demo
            lines:
              button: { pin: BUTTON, input: { edge: both, active_low: true } }
            commands:
              slow: { argv: ["/bin/sleep", "5"], max_running: 1 }
            reactions:
              - { name: go, on: { line: button, press: true }, do: [ run: slow ] }
            """
        let h = try Harness(yaml, level: .info)
        defer { h.daemon.shutdown() }
        let rec = LoopRecorder(serial: 1)
        _ = h.daemon.main.startRecording(rec)
        try h.press()
        try h.advance(10)
        try h.press(false)
        try h.advance(10)
        try h.press()
        try h.advance(10)
        h.daemon.main.stopRecording()
        var steps: [UInt8] = []
        rec.consume { e in if e.record.kind == .command { steps.append(e.record.step) } }
        XCTAssertEqual(steps, [0, 4], "a start, then the refusal")
    }

    /// A recording client that stops reading is dropped as a slow events
    /// follower is: a last line says why, the recording ends, others are served.
    func testARecordingClientThatDoesNotReadIsDroppedTooSlow() throws {
        var o = ControlServer.Options(path: socketPath)
        o.maxOutput = 4096
        let h = try Harness(Self.yaml, level: .info, control: o)
        let slow = try ControlClient(socketPath)
        XCTAssertEqual(try slow.request(#"{"v":1,"id":5,"cmd":"record","for":"1h"}"#, h)["recording"] as? Bool, true)
        let server = try XCTUnwrap(h.daemon.control?.recording?.client)
        var small: Int32 = 1024
        XCTAssertEqual(setsockopt(server.fd, SOL_SOCKET, SO_SNDBUF, &small, socklen_t(MemoryLayout<Int32>.size)), 0)
        var rounds = 0
        while h.daemon.control?.recording != nil && rounds < 2000 {
            try h.setLevel("CHATTER", rounds % 2 == 0)
            try h.advance(50)
            rounds += 1
        }
        XCTAssertNil(h.daemon.control?.recording, "ended after \(rounds) rounds")
        XCTAssertNil(h.daemon.main.events.recorder)
        XCTAssertEqual(h.daemon.control?.counters.errors["too-slow"], 1)
        let other = try ControlClient(socketPath)
        XCTAssertEqual(try other.request(#"{"v":1,"cmd":"ping"}"#, h)["pong"] as? Bool, true, "the others are served")
        var got: [String] = []
        for _ in 0..<200 where !slow.sawEOF {
            got += slow.lines()
            try h.daemon.settle()
        }
        XCTAssertTrue(slow.sawEOF, "closed once the last line is written")
        let last = try ControlTests.object(try XCTUnwrap(got.last))
        XCTAssertEqual(last["id"] as? Int, 5)
        XCTAssertEqual(ControlTests.code(last), "too-slow")
        XCTAssertTrue(got.dropLast().allSatisfy { $0.contains(#""record":"#) })
    }

    /// The main loop's side allocates nothing per record either: its own
    /// edges, reactions and writes go to its recorder, and every 50 ms its
    /// drain merges the loops' records and writes them into the client's
    /// output as bytes, in buffers kept from drain to drain. Counted on the
    /// test's thread, which runs the main loop (at warning: no log line is
    /// made): rounds with 8 edges (16 records) against the same rounds
    /// without, the difference is the drain's own few allocations per
    /// drain (about 2 in a debug build), none per record.
    func testTheMainLoopAllocatesNothingPerRecordWhileItDrainsAndStreams() throws {
        try XCTSkipUnless(AllocationCounter.isActive, "malloc interposer not linked (ThreadSanitizer build)")
        let h = try Harness(
            ControlAllocationTests.yaml.replacingOccurrences(of: "every: 1ms", with: "every: 1h"), level: .warning,
            control: ControlServer.Options(path: socketPath))
        let d = h.daemon
        let c = try ControlClient(socketPath)
        XCTAssertEqual(try c.request(#"{"v":1,"id":1,"cmd":"record","for":"1h"}"#, h)["recording"] as? Bool, true)
        var pressed = false
        func rounds(_ n: Int, edges: Bool) throws -> (allocations: Int, records: Int) {
            var allocations = 0
            var records = 0
            func counted(_ body: () throws -> Void) rethrows {
                AllocationCounter.beginCountingOnThisThread()
                let before = AllocationCounter.countOnThisThread
                defer {
                    allocations += AllocationCounter.countOnThisThread - before
                    AllocationCounter.endCountingOnThisThread()
                }
                try body()
            }
            for _ in 0..<n {
                for _ in 0..<8 {
                    if edges {
                        pressed.toggle()
                        try h.press(pressed)
                    }
                    try counted { try d.advance(by: .milliseconds(2), step: .milliseconds(2)) }
                }
                try counted { try d.advance(by: .milliseconds(50), step: .milliseconds(50)) }  // a drain
                records += c.lines().count
            }
            return (allocations, records)
        }
        _ = try rounds(100, edges: true)  // warm-up: the buffers grow
        let quiet = try rounds(100, edges: false)
        let busy = try rounds(100, edges: true)
        XCTAssertEqual(quiet.records, 0)
        XCTAssertEqual(busy.records, 100 * 16, "each round: 8 edges, 4 reactions, 4 writes")
        print("main loop: \(quiet.allocations) allocations in 100 quiet rounds, \(busy.allocations) in 100 rounds of 16 records")
        XCTAssertLessThanOrEqual(busy.allocations - quiet.allocations, 3 * 100, "at most a few per drain, none per record")
    }

    /// Held events that find the line's ring full are lost: a recording
    /// counts each (besides the kernel's own losses).
    func testHeldEventsThatFindTheRingFullAreRecordedAsLost() throws {
        let yaml = Self.yaml.replacingOccurrences(
            of: "chatter: { pin: CHATTER, input: { edge: both }, priority: low }",
            with: "chatter: { pin: CHATTER, input: { edge: both, drain: 4 }, priority: low }")
        let h = try Harness(yaml, level: .info, control: ControlServer.Options(path: socketPath))
        let c = try ControlClient(socketPath)
        XCTAssertEqual(try c.request(#"{"v":1,"id":6,"cmd":"record","for":"1s"}"#, h)["recording"] as? Bool, true)
        try h.press()  // the sequence's mode holds chatter for 150 ms
        for i in 0..<100 {
            try h.setLevel("CHATTER", i % 2 == 0)
            try h.advance(1)
        }
        try h.advance(1000)
        let (records, _) = try collect(c, h, id: 6)
        let chatter = records.filter { $0["line"] as? String == "chatter" }
        let edges = chatter.filter { $0["kind"] as? String == "edge" }
        let lost = chatter.filter { $0["kind"] as? String == "lost" }.reduce(0) { $0 + ($1["count"] as? Int ?? 0) }
        let delivered = chatter.filter { $0["kind"] as? String == "delivered" }.reduce(0) { $0 + ($1["count"] as? Int ?? 0) }
        let ring = try XCTUnwrap(h.daemon.main.inputs.compactMap { $0 }.first { $0.config.name == "chatter" }).ringCapacity
        XCTAssertLessThan(ring, 100)
        XCTAssertEqual(edges.count, 100, "every edge as read (the drain reads them while the line is held)")
        XCTAssertTrue(edges.allSatisfy { $0["held"] as? Bool == true })
        XCTAssertEqual(delivered, ring, "the ring held \(ring)")
        XCTAssertEqual(lost, 100 - ring, "the rest lost in the ring, one record each")
    }

    /// A trace and a recording at once: each gets the edges; ending one
    /// leaves the other's handler and switches in place.
    func testATraceAndARecordingAtOnce() throws {
        let h = try harness()
        let d = h.daemon
        let tracing = try ControlClient(socketPath)
        let recording = try ControlClient(socketPath)
        XCTAssertEqual(try recording.request(#"{"v":1,"id":1,"cmd":"record","for":"1s"}"#, h)["recording"] as? Bool, true)
        XCTAssertEqual(try tracing.request(#"{"v":1,"id":2,"cmd":"trace","for":"200ms"}"#, h)["tracing"] as? Bool, true)
        XCTAssertEqual(d.main.events.recordsLines.load(ordering: .relaxed), EventSink.toTracer | EventSink.toRecorder)
        try h.setLevel("CHATTER", true)
        try h.advance(200)  // the trace ends, the recording goes on
        var traced: [[String: Any]] = []
        for _ in 0..<100 {
            try d.settle()
            var done = false
            for l in tracing.lines() {
                let o = try ControlTests.object(l)
                if let chunk = o["trace_events"] as? [[String: Any]] { traced += chunk } else { done = o["done"] as? Bool == true }
            }
            if done { break }
        }
        XCTAssertEqual(traced.filter { $0["cat"] as? String == "edge" }.count, 1, "the trace has the edge")
        XCTAssertNil(d.main.tracer)
        XCTAssertEqual(d.main.events.recordsLines.load(ordering: .relaxed), EventSink.toRecorder)
        try h.setLevel("CHATTER", false)
        try h.advance(800)
        let (records, _) = try collect(recording, h, id: 1)
        XCTAssertEqual(
            records.filter { $0["kind"] as? String == "edge" }.map { "\($0["t"] ?? "-") \($0["edge"] ?? "-")" }, ["0 rising", "200000000 falling"],
            "the recording has both edges, before and after the trace's end")
        XCTAssertEqual(d.main.events.recordsLines.load(ordering: .relaxed), 0)
    }

    /// A raw edge's sequence numbers fit the record's existing fields: it
    /// stays 48 bytes (a recorder's slot 56: the record and its time), and
    /// 64-bit sequence numbers come back whole.
    func testARawEdgeKeepsTheRecordsSizeAndItsSequenceNumbers() {
        XCTAssertEqual(MemoryLayout<TraceRecord>.size, 48)
        XCTAssertEqual(MemoryLayout<LoopRecorder.Entry>.stride, 56)
        let r = TraceRecord.rawEdge(
            line: 3, rising: true, at: 77, held: true, sequence: 0x1_2345_6789, lineSequence: 0xffff_ffff_ffff, generation: 2)
        XCTAssertEqual(r.sequence, 0x1_2345_6789)
        XCTAssertEqual(r.nanoseconds, 0xffff_ffff_ffff)
        XCTAssertEqual(r.step & 1, 1)
        XCTAssertTrue(r.flag)
        XCTAssertEqual(r.at, 77)
    }

    /// The header's digest: FIPS 180-4's examples, and a message across two blocks.
    func testSHA256() {
        XCTAssertEqual(SHA256.hex([]), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        XCTAssertEqual(SHA256.hex(Array("abc".utf8)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(
            SHA256.hex(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }
}
