import BoardControl
import Foundation
import Glibc
import Testing

/// `boardctl trace` against the built `boardd --config examples/doorbell.yaml
/// --mock`: a click while it records shows in the file, which parses as
/// Chrome trace-event JSON with a track per loop thread.
@Suite(.serialized) struct EndToEndTraceTests {
    @Test func aTraceOfAClickOpensAsChromeTraceEvents() throws {
        let d = try EndToEndTests.Daemon()
        defer { _ = d.stop() }
        try #require(d.wait { d.log.contains("ready: every loop is running") && (try? d.ctl(["ping"]).status) == 0 }, Comment(rawValue: d.log))
        let file = d.dir + "/trace.json"

        // The trace runs in a second boardctl while this one clicks.
        let tracer = Process()
        tracer.executableURL = URL(fileURLWithPath: BoardctlBinary.path)
        // (4 s: the click must come within it after two process spawns and
        // the log writer's nap, on a loaded machine too.)
        tracer.arguments = ["trace", "--seconds", "4", "--out", file, "--json", "--socket", d.socket]
        let out = Pipe(), err = Pipe()
        tracer.standardOutput = out
        tracer.standardError = err
        try tracer.run()
        #expect(d.wait { d.log.contains("control: tracing main") }, "\(d.log)")
        #expect(try d.ctl(["click", "bell"]).status == 0)
        let summaryData = out.fileHandleForReading.readDataToEndOfFile()
        let errText = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        tracer.waitUntilExit()
        #expect(tracer.terminationStatus == 0, "\(errText)")

        let summary = try #require(JSON.parse(String(decoding: summaryData, as: UTF8.self)), "--json: \(String(decoding: summaryData, as: UTF8.self))")
        #expect(summary["file"]?.string == file)
        #expect(summary["loops"] == .array([.string("main")]))

        let parsed = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: file)))
        let root = try #require(parsed as? [String: Any])
        let events = try #require(root["traceEvents"] as? [[String: Any]])
        #expect(summary["events"]?.int == events.count)
        let threads = events.filter { $0["name"] as? String == "thread_name" }
        #expect(threads.count == 1, "one loop, one track")
        #expect((threads.first?["args"] as? [String: Any])?["name"] as? String == "loop main")
        let tid = threads.first?["tid"] as? Int
        let work = events.filter { $0["ph"] as? String != "M" }
        #expect(!work.isEmpty && work.allSatisfy { $0["tid"] as? Int == tid })
        let names = Set(work.compactMap { $0["name"] as? String })
        let cats = Set(work.compactMap { $0["cat"] as? String })
        // The loop's passes and waits, the click's batches, edges, reaction
        // and write, the requests.
        for n in ["pass", "wait", "line bell", "control request"] { #expect(names.contains(n), "\(n) in \(names)") }
        for c in ["edge", "reaction", "output"] { #expect(cats.contains(c), "\(c) in \(cats)") }
        #expect(work.contains { $0["name"] as? String == "porch = on" }, "the pulse's write")
        let ring = work.first { $0["cat"] as? String == "reaction" }
        #expect((ring?["args"] as? [String: Any])?["reaction"] as? String == "ring")
    }

    @Test func aTraceWithoutADaemonSaysWhatToDo() throws {
        let dir = try TempDir.make()
        defer { TempDir.remove(dir) }
        let r = try BoardctlBinary.run(["trace", "--seconds", "1", "--out", dir + "/t.json", "--socket", dir + "/none.sock"])
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stderr.contains("no boardd is running"), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/t.json"))
        let bad = try BoardctlBinary.run(["trace", "--seconds", "0", "--socket", dir + "/none.sock"])
        #expect(bad.status == 64, "\(bad.stderr)")
    }
}
