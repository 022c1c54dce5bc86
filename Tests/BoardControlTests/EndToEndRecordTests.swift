import BoardControl
import Foundation
import Glibc
import Testing

/// `boardctl record` against the built `boardd --config examples/doorbell.yaml
/// --mock`: a click and a flood while it records show in the file (a header,
/// the edges, the reaction's write, a footer); without a daemon it exits 3
/// and writes no file.
@Suite(.serialized) struct EndToEndRecordTests {
    @Test func aRecordingOfAClickHasItsHeaderEdgesWriteAndFooter() throws {
        let d = try EndToEndTests.Daemon()
        defer { _ = d.stop() }
        try #require(d.wait { d.log.contains("ready: every loop is running") && (try? d.ctl(["ping"]).status) == 0 }, Comment(rawValue: d.log))
        let file = d.dir + "/rec.jsonl"

        let recorder = Process()
        recorder.executableURL = URL(fileURLWithPath: BoardctlBinary.path)
        // (4 s: the drives must come within it after process spawns, on a loaded machine too.)
        recorder.arguments = ["record", "--seconds", "4", "--out", file, "--json", "--socket", d.socket]
        let out = Pipe(), err = Pipe()
        recorder.standardOutput = out
        recorder.standardError = err
        try recorder.run()
        #expect(d.wait { d.log.contains("control: recording every line") }, "\(d.log)")
        #expect(try d.ctl(["click", "bell"]).status == 0)
        // The flood once the click's release (100 ms after its press) is
        // through the button's 20 ms debounce: both edges counted. (Flooding
        // at the press's reaction alone raced the release on a loaded
        // machine: the drives interleaved and edges went missing.)
        #expect(d.wait { d.log.contains("doorbell rang") }, "\(d.log)")
        func bellEvents() -> Int? {
            guard let r = try? d.ctl(["lines", "--json"]) else { return nil }
            return JSON.parse(r.stdout)?["lines"]?.array?.first { $0["name"]?.string == "bell" }?["events"]?.int
        }
        #expect(d.wait { bellEvents() == 2 }, "the click's two edges: \(String(describing: bellEvents()))")
        #expect(try d.ctl(["flood", "bell", "--edges", "10", "--rate", "20Hz"]).status == 0)
        #expect(d.wait { d.log.contains("control: flood bell done (10 edges)") }, "\(d.log)")
        #expect(!FileManager.default.fileExists(atPath: file), "the file appears only once complete")
        let summaryData = out.fileHandleForReading.readDataToEndOfFile()
        let errText = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        recorder.waitUntilExit()
        #expect(recorder.terminationStatus == 0, "\(errText)")
        let summary = try #require(JSON.parse(String(decoding: summaryData, as: UTF8.self)), "--json: \(String(decoding: summaryData, as: UTF8.self))")
        #expect(summary["file"]?.string == file)
        #expect(summary["lines"] == .array([.string("bell"), .string("porch")]))

        let text = try String(contentsOfFile: file, encoding: .utf8)
        #expect(text.hasSuffix("\n"))
        let lines = text.split(separator: "\n").map(String.init)
        let parsed = lines.compactMap { JSON.parse($0) }
        try #require(parsed.count == lines.count && lines.count >= 3, "every line is JSON: \(text)")
        let header = parsed[0]
        #expect(header["boardd_recording"]?.int == 1)
        #expect(header["config"]?.string == "examples/doorbell.yaml" || header["config"]?.string?.hasSuffix("examples/doorbell.yaml") == true)
        #expect(header["config_sha256"]?.string?.count == 64)
        #expect(header["board"]?.string == "raspberry-pi-4")
        #expect(header["gpio"]?.string == "mock")
        #expect(header["start_ns"]?.int ?? 0 > 0)
        #expect(header["seconds"]?.int == 4)
        #expect(header["loops"] == .array([.string("main")]))
        #expect(header["levels"]?["bell"]?.int == 1, "the button's pull-up holds the wire high")

        let footer = parsed[parsed.count - 1]
        #expect(footer["end"]?.bool == true)
        #expect(footer["dropped"]?.int == 0)
        let records = Array(parsed[1..<(parsed.count - 1)])
        #expect(footer["records"]?.int == records.count)
        #expect(summary["records"]?.int == records.count)
        for r in records {
            #expect(r["loop"]?.string == "main", "\(r)")
            #expect((r["t"]?.int ?? -1) >= 0 && (r["t"]?.int ?? .max) <= 4_000_000_000, "within the recording: \(r)")
        }
        let ts = records.compactMap { $0["t"]?.int }
        #expect(ts == ts.sorted(), "time-ordered")
        let edges = records.filter { $0["kind"]?.string == "edge" }
        // The click (press: the wire falls) and the flood's edges, numbered
        // by the kernel: every edge the daemon counted (a flood's first
        // drive after the click's release may find the wire already there).
        let listed = try d.ctl(["lines", "--json"])
        let bell = JSON.parse(listed.stdout)?["lines"]?.array?.first { $0["name"]?.string == "bell" }
        #expect(edges.count >= 2 + 9 && edges.count == bell?["events"]?.int, "\(edges.count) edges, the daemon counted \(listed.stdout)")
        #expect(edges.first?["edge"]?.string == "falling")
        #expect(edges.allSatisfy { $0["line"]?.string == "bell" && $0["held"]?.bool == false && ($0["seq"]?.int ?? 0) > 0 })
        let lineSeqs = edges.compactMap { $0["line_seq"]?.int }
        #expect(lineSeqs.count == edges.count && lineSeqs == lineSeqs.sorted())
        let writes = records.filter { $0["kind"]?.string == "write" }
        #expect(writes.first?["line"]?.string == "porch" && writes.first?["value"]?.int == 1, "\(writes)")
        #expect(writes.first?["by"]?.string == "reaction:ring", "\(writes)")
        #expect(records.contains { $0["kind"]?.string == "reaction" && $0["name"]?.string == "ring" && $0["line"]?.string == "bell" })
    }

    @Test func aRecordingWithoutADaemonExits3AndWritesNoFile() throws {
        let dir = try TempDir.make()
        defer { TempDir.remove(dir) }
        let r = try BoardctlBinary.run(["record", "--seconds", "1", "--out", dir + "/r.jsonl", "--socket", dir + "/none.sock"])
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stderr.contains("no boardd is running"), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/r.jsonl"))
        #expect(!FileManager.default.fileExists(atPath: dir + "/r.jsonl.part"))
        let bad = try BoardctlBinary.run(["record", "--seconds", "0", "--socket", dir + "/none.sock"])
        #expect(bad.status == 64, "\(bad.stderr)")
    }

    @Test func anUnknownLineIsRefusedWithAHintAndNoFile() throws {
        let d = try EndToEndTests.Daemon()
        defer { _ = d.stop() }
        try #require(d.wait { d.log.contains("ready: every loop is running") && (try? d.ctl(["ping"]).status) == 0 }, Comment(rawValue: d.log))
        let file = d.dir + "/rec.jsonl"
        let r = try d.ctl(["record", "--seconds", "1", "--line", "bel", "--out", file])
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("no line named 'bel'") && r.stderr.contains("did you mean 'bell'"), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: file))
        let ok = try d.ctl(["record", "--seconds", "0.2", "--line", "porch", "--out", file])
        #expect(ok.status == 0, "\(ok.stderr)")
        #expect(ok.stderr.contains("records of line(s) porch") && ok.stderr.contains("0 dropped"), "\(ok.stderr)")
        let header = try #require(JSON.parse(String(try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n")[0])))
        #expect(header["lines"] == .array([.string("porch")]))
    }
}
