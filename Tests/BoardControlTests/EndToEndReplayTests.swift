import BoardControl
import Foundation
import Glibc
import Testing

/// Record on the "board", replay on the "laptop": the built `boardd` runs a
/// config on mock chips, `boardctl record` records two clicks driven
/// through the socket, and `boardd replay` runs the recording against the
/// same config (no difference) and against one whose debounce is longer
/// than the clicks (exactly the writes, the reactions and the runs the
/// board made and that config does not).
@Suite(.serialized) struct EndToEndReplayTests {
    static let config = """
        board: raspberry-pi-4
        lines:
          button: { pin: GPIO17, input: { edge: both, bias: pull-up, active_low: true, debounce: 20ms } }
          led: { pin: GPIO27, output: { safe: off } }
          lamp: { pin: GPIO22, output: { initial: off, safe: off } }
        commands:
          note: { argv: ["/bin/true"] }
        reactions:
          - { name: flip, on: { line: button, press: true }, do: [ toggle: led, pulse: { lamp: 300ms }, run: note ] }
        """

    /// The built boardd beside boardctl.
    static func boardd(_ args: [String]) throws -> Outcome {
        let boardd = URL(fileURLWithPath: BoardctlBinary.path).deletingLastPathComponent().appendingPathComponent("boardd").path
        return try BoardctlBinary.run(args, program: boardd)
    }

    @Test func aRecordingOfTwoClicksReplaysWithNoDifferenceAndAChangedConfigWithExactlyItsOwn() throws {
        let dir = try TempDir.make()
        let path = dir + "/button.yaml"
        try Self.config.write(toFile: path, atomically: true, encoding: .utf8)
        let d = try EndToEndTests.Daemon(config: path, dir: dir)
        defer { _ = d.stop() }
        try #require(d.wait { d.log.contains("ready: every loop is running") && (try? d.ctl(["ping"]).status) == 0 }, Comment(rawValue: d.log))
        let file = dir + "/clicks.jsonl"
        let recorder = Process()
        recorder.executableURL = URL(fileURLWithPath: BoardctlBinary.path)
        recorder.arguments = ["record", "--seconds", "3", "--out", file, "--socket", d.socket]
        recorder.standardOutput = FileHandle.nullDevice
        recorder.standardError = FileHandle.nullDevice
        try recorder.run()
        #expect(d.wait { d.log.contains("control: recording every line") }, "\(d.log)")
        // A click is a press now and a release 100 ms later: the second
        // once the first's lamp pulse (300 ms from the press) is over.
        #expect(try d.ctl(["click", "button"]).status == 0)
        #expect(d.wait { (try? d.ctl(["get", "led"]).stdout) == "led: on\n" }, "\(d.log)")
        #expect(d.wait { (try? d.ctl(["get", "lamp"]).stdout) == "lamp: off\n" }, "\(d.log)")
        #expect(try d.ctl(["click", "button"]).status == 0)
        recorder.waitUntilExit()
        #expect(recorder.terminationStatus == 0)
        let text = try String(contentsOfFile: file, encoding: .utf8)
        #expect(text.components(separatedBy: "\"kind\":\"command\"").count - 1 == 4, "two starts, two exits: \(text)\n\(d.log)")

        // The same config: what the board did, to within the board's own
        // latency (a loaded machine's timers may be late by a few ms).
        var outputs: [String] = []
        for _ in 0..<3 {
            let same = try Self.boardd(["replay", file, "--tolerance", "100ms"])
            #expect(same.status == 0, "\(same.stdout)\(same.stderr)\n\(text)")
            #expect(same.stdout.contains("the config it was recorded with"))
            #expect(same.stdout.contains("  reactions: flip 2\n"))
            #expect(same.stdout.components(separatedBy: "  led -> ").count - 1 == 2, "\(same.stdout)")
            #expect(same.stdout.components(separatedBy: "  lamp -> ").count - 1 == 4, "\(same.stdout)")
            #expect(same.stdout.hasSuffix("  none: the config did what the board did\n0 difference(s)\n"), "\(same.stdout)")
            outputs.append(same.stdout)
        }
        #expect(Set(outputs).count == 1, "byte-identical run after run")

        // A debounce longer than the clicks' 100 ms: nothing gets through.
        let slow = dir + "/slow.yaml"
        try Self.config.replacingOccurrences(of: "debounce: 20ms", with: "debounce: 300ms").write(toFile: slow, atomically: true, encoding: .utf8)
        let changed = try Self.boardd(["replay", file, "--config", slow, "--tolerance", "100ms"])
        #expect(changed.status == 1, "\(changed.stdout)\(changed.stderr)")
        #expect(changed.stdout.contains("not the config it was recorded with"))
        let diff = changed.stdout.components(separatedBy: "count):\n")[1].split(separator: "\n").map(String.init)
        #expect(diff.count == 9, "\(changed.stdout)")
        #expect(diff.filter { $0.hasPrefix("  led -> ") && $0.hasSuffix(" on the board; the config did not") }.count == 2, "\(diff)")
        #expect(diff.filter { $0.hasPrefix("  lamp -> ") && $0.hasSuffix(" on the board; the config did not") }.count == 4, "\(diff)")
        #expect(diff.contains("  reaction flip: fired 0 time(s), the board 2"))
        #expect(diff.contains("  command note: 0 run(s), the board 2"))
        #expect(diff.last == "8 difference(s)")
    }
}
