import Foundation
import Testing
import BoardDaemon
import BoardSupport

/// `boardd test` and `boardd replay`, as a user runs them: the built
/// binary on the example configs and their test files.
@Suite struct ConfigTestingTests {
    static let examples = ["demo", "doorbell", "fan-controller", "pump-valve", "sim-button"]

    static func temporaryDirectory() throws -> String {
        var template = Array("/tmp/boardd-config-tests-XXXXXX".utf8CString)
        guard let p = mkdtemp(&template) else { throw CocoaError(.fileWriteUnknown) }
        return String(cString: p)
    }

    @Test(arguments: examples)
    func eachExampleShipsATestFileThatPasses(_ name: String) throws {
        let r = try Boardd.run(["test", "examples/\(name).test.yaml"])
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.hasPrefix("examples/\(name).test.yaml: "))
        #expect(!r.stdout.contains("FAIL"))
        #expect(r.stdout.hasSuffix(" passed, 0 failed\n"))
        let passed = r.stdout.split(separator: "\n").filter { $0.hasPrefix("PASS  ") }.count
        #expect(passed >= 3, "\(r.stdout)")
    }

    /// A fill that leaves the valve open: the test says which expectation,
    /// at what time, and what the valve did instead.
    @Test func aBrokenConfigFailsItsTestSayingWhatHappened() throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let good = try String(contentsOfFile: Fixtures.packageRoot + "/examples/pump-valve.yaml", encoding: .utf8)
        let broken = good.replacingOccurrences(of: "      - set: { valve: off, ready_led: on }", with: "      - set: { ready_led: on }")
        #expect(broken != good)
        try broken.write(toFile: dir + "/pump-valve.yaml", atomically: true, encoding: .utf8)
        let r = try Boardd.run(["test", "examples/pump-valve.test.yaml", "--config", dir + "/pump-valve.yaml"])
        #expect(r.status == 1, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.contains("FAIL  a click on start runs the whole fill\n"))
        #expect(
            r.stdout.contains(
                "examples/pump-valve.test.yaml:19:9: at 11 s: expected valve off: valve is on (initially off, then on at 120 ms)"),
            "\(r.stdout)")
        #expect(r.stdout.contains("expected valve written [on, off]: valve was written on at 120 ms"))
        #expect(r.stdout.hasSuffix(" failed\n") && !r.stdout.hasSuffix(" 0 failed\n"))
    }

    @Test func aTestFileWithMistakesGetsEveryErrorAtOnceWithPlaceAndNearestName() throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let text = """
            config: \(Fixtures.packageRoot)/examples/pump-valve.yaml
            tests:
              - name: x
                steps:
                  - click: strat
                  - at: 10ms
                    expect: { vlave: on }
                    expect_wrtes: { pump: [on] }
                  - flood: { line: estop, edges: 10, rate: 2kHx }
                  - expect_run: notify
                    at: 5
                  - sequence: fill
            """
        try text.write(toFile: dir + "/t.yaml", atomically: true, encoding: .utf8)
        let r = try Boardd.run(["test", dir + "/t.yaml"])
        #expect(r.status == 2)
        #expect(r.stdout.isEmpty)
        let f = dir + "/t.yaml"
        let expected = [
            "\(f):5:16: error: tests[0].steps[0].click: no input named 'strat'; did you mean 'start'?",
            "\(f):7:19: error: tests[0].steps[1].expect.vlave: no line named 'vlave'; did you mean 'valve'?",
            "\(f):8:9: error: tests[0].steps[1].expect_wrtes: unknown key 'expect_wrtes'; did you mean 'expect_writes'",
            "\(f):9:48: error: tests[0].steps[2].flood.rate: '2kHx' is not a rate from 1Hz to 10MHz",
            "\(f):10:21: error: tests[0].steps[3].expect_run: no command named 'notify' (the config has none)",
            "\(f):11:13: error: tests[0].steps[3].at: '5' has no unit; write 5ms",
            "\(f):12:9: error: tests[0].steps[4].sequence: unknown key 'sequence'",
        ]
        for e in expected { #expect(r.stderr.contains(e), "missing: \(e)\n\(r.stderr)") }
        #expect(r.stderr.hasSuffix("\(f): 7 error(s); no test ran\n"), "\(r.stderr)")
    }

    /// A reload during the fill, in a test: a replacement config that
    /// changes the fill stops it with its outputs safe; a broken one is
    /// refused and the fill runs on to its end.
    @Test func aReloadMidSequenceWithAReplacementConfig() throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let good = try String(contentsOfFile: Fixtures.packageRoot + "/examples/pump-valve.yaml", encoding: .utf8)
        try good.write(toFile: dir + "/pump-valve.yaml", atomically: true, encoding: .utf8)
        try good.replacingOccurrences(of: "      - wait: 8s", with: "      - wait: 4s")
            .write(toFile: dir + "/changed.yaml", atomically: true, encoding: .utf8)
        try good.replacingOccurrences(of: "policy: single ", with: "policy: singel ")
            .write(toFile: dir + "/broken.yaml", atomically: true, encoding: .utf8)
        let tests = """
            config: pump-valve.yaml
            tests:
              - name: a reload that changes the fill mid-run stops it, its outputs safe
                steps:
                  - click: start
                  - at: 1s
                    signal: HUP
                    config: changed.yaml
                    expect: { pump: off, valve: off }
                    expect_log: "sequence fill: stopped by the reload (its definition changed)"
                    expect_no: { mode: filling }
                  - time: 10s
                    expect_writes: { pump: [on, off], valve: [on, off] }
              - name: a broken replacement config is refused and the fill runs on
                steps:
                  - click: start
                  - at: 1s
                    signal: HUP
                    config: broken.yaml
                    expect_log: "reload refused: 1 error(s) in"
                    expect: { pump: on }
                  - at: 11s
                    expect: { valve: off }
                    expect_writes: { pump: [on, off], valve: [on, off] }
              - name: the same test expecting the fill to survive the changed config fails
                steps:
                  - click: start
                  - at: 1s
                    signal: HUP
                    config: changed.yaml
                    expect: { pump: on }
            """
        try tests.write(toFile: dir + "/t.yaml", atomically: true, encoding: .utf8)
        let r = try Boardd.run(["test", dir + "/t.yaml"])
        #expect(r.status == 1, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.contains("PASS  a reload that changes the fill mid-run stops it, its outputs safe\n"), "\(r.stdout)")
        #expect(r.stdout.contains("PASS  a broken replacement config is refused and the fill runs on\n"))
        #expect(r.stdout.contains("FAIL  the same test expecting the fill to survive the changed config fails\n"))
        #expect(r.stdout.contains("at 1000 ms: expected pump on: pump is off (initially off, then on at 420 ms, off at 1000 ms)"), "\(r.stdout)")
        #expect(r.stdout.hasSuffix("2 passed, 1 failed\n"))
    }

    /// The pump story (a start, a flood on the contact during the pour, the
    /// e-stop 40 ms in) runs on the manual clock: the whole file takes
    /// well under a second of wall time, and prints the same every time.
    @Test func thePumpStoryRunsInUnderASecondAndTheSameEveryTime() throws {
        var outputs: [String] = []
        for _ in 0..<3 {
            let start = ContinuousClock.now
            let r = try Boardd.run(["test", "examples/demo.test.yaml"])
            let took = ContinuousClock.now - start
            #expect(r.status == 0, "\(r.stdout)")
            #expect(r.stdout.contains("PASS  the pump story"))
            #expect(took < .seconds(1), "took \(took)")
            outputs.append(r.stdout)
        }
        #expect(Set(outputs).count == 1)
    }

    /// A recording of the doorbell (written here as boardctl record writes
    /// it), replayed: against the config it was made with, no difference;
    /// against one with a 300 ms debounce (the 100 ms press never gets
    /// through), exactly the writes and the run the board made and the
    /// new config does not. Byte-identical output run after run.
    @Test func aRecordingReplaysAgainstItsConfigAndAChangedOne() throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let config = Fixtures.packageRoot + "/examples/doorbell.yaml"
        let sha = SHA256Digest.file(config)
        let recording = """
            {"boardd_recording":1,"config":"\(config)","config_sha256":"\(sha)","board":"raspberry-pi-4","gpio":"mock","start_ns":5000,"seconds":5,"lines":["bell","porch"],"loops":["main"],"levels":{"bell":1}}
            {"t":1000000000,"loop":"main","kind":"edge","line":"bell","edge":"falling","seq":1,"line_seq":1,"held":false}
            {"t":1020100000,"loop":"main","kind":"reaction","name":"ring","line":"bell"}
            {"t":1020150000,"loop":"main","kind":"command","name":"chime","event":"start","pid":42}
            {"t":1020200000,"loop":"main","kind":"write","line":"porch","value":1,"by":"reaction:ring"}
            {"t":1100000000,"loop":"main","kind":"edge","line":"bell","edge":"rising","seq":2,"line_seq":2,"held":false}
            {"t":1300000000,"loop":"main","kind":"command","name":"chime","event":"exit","status":0}
            {"t":3020200000,"loop":"main","kind":"write","line":"porch","value":0,"by":"pulse"}
            {"end":true,"records":7,"dropped":0}

            """
        try recording.write(toFile: dir + "/bell.jsonl", atomically: true, encoding: .utf8)
        var outputs: [String] = []
        for _ in 0..<3 {
            let same = try Boardd.run(["replay", dir + "/bell.jsonl"])
            #expect(same.status == 0, "\(same.stdout)\(same.stderr)")
            #expect(same.stdout.contains("the config it was recorded with"))
            #expect(same.stdout.contains("     1020 ms  porch -> on\n"))
            #expect(same.stdout.contains("     1020 ms  run chime BOARDD_LINE=bell BOARDD_REACTION=ring (recorded, not run)\n"))
            #expect(same.stdout.contains("     3020 ms  porch -> off\n"))
            #expect(same.stdout.hasSuffix("  none: the config did what the board did\n0 difference(s)\n"))
            outputs.append(same.stdout)
        }
        #expect(Set(outputs).count == 1)

        let slow = try String(contentsOfFile: config, encoding: .utf8).replacingOccurrences(of: "debounce: 20ms", with: "debounce: 300ms")
        try slow.write(toFile: dir + "/slow.yaml", atomically: true, encoding: .utf8)
        let changed = try Boardd.run(["replay", dir + "/bell.jsonl", "--config", dir + "/slow.yaml"])
        #expect(changed.status == 1)
        #expect(changed.stdout.contains("not the config it was recorded with"))
        #expect(
            changed.stdout.hasSuffix(
                """
                differences from the board (writes more than 5 ms apart count):
                  porch -> on at 1020.2 ms on the board; the config did not
                  porch -> off at 3020.2 ms on the board; the config did not
                  reaction ring: fired 0 time(s), the board 1
                  command chime: 0 run(s), the board 1
                4 difference(s)

                """), "\(changed.stdout)")

        let newer = recording.replacingOccurrences(of: "\"boardd_recording\":1", with: "\"boardd_recording\":2")
        try newer.write(toFile: dir + "/newer.jsonl", atomically: true, encoding: .utf8)
        let refused = try Boardd.run(["replay", dir + "/newer.jsonl"])
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("newer.jsonl:1: a recording of format version 2; this boardd reads version 1 and older"))
    }
}

/// The SHA-256 of a file, as `sha256sum` prints it.
enum SHA256Digest {
    static func file(_ path: String) -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
        p.arguments = [path]
        let out = Pipe()
        p.standardOutput = out
        try? p.run()
        let d = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(String(decoding: d, as: UTF8.self).prefix(64))
    }
}
