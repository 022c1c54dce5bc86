import BoardSupport
import Testing

@testable import BoardDaemon

/// Checking a config is linear in its size. Timing would be flaky, so this
/// counts the steps name lookups take (`ConfigParser.lookupSteps`): a
/// lookup that scans a list for each reference grows with the square.
@Suite struct CheckScalingTests {
    /// A config of about `lines` lines on the generic board: inputs and
    /// outputs, sequences that hold a mode, tasks, commands, and reactions
    /// that refer to all of them.
    static func config(lines target: Int) -> String {
        let n = target / 16
        var out = ["board: generic", "priorities: [low, normal, high]", "modes:", "  quiet: { admits: [high] }", "lines:"]
        for i in 0..<n {
            out += ["  in\(i): { chip: gpiochip\(i / 32), offset: \((i % 32) * 2), input: { edge: both } }"]
            out += ["  out\(i): { chip: gpiochip\(i / 32), offset: \((i % 32) * 2 + 1), output: {} }"]
        }
        out.append("sequences:")
        for i in 0..<n { out += ["  s\(i): { mode: quiet, steps: [ toggle: out\(i), wait: 1s ] }"] }
        out.append("tasks:")
        for i in 0..<n { out += ["  t\(i): { every: 1s, in_modes: [quiet], do: [ toggle: out\(i) ] }"] }
        out.append("commands:")
        for i in 0..<n { out += ["  c\(i): { argv: [/bin/true], timeout: 5s }"] }
        out.append("reactions:")
        var k = 0
        while out.count < target {
            let i = k % n
            out += [
                "  - on: { line: in\(i), press: true }",
                "    do: [ toggle: out\(i), sequence: s\(i), run: c\(i), run: [\"/bin/prog\(i)\"], mode: quiet ]",
            ]
            k += 1
        }
        return out.joined(separator: "\n") + "\n"
    }

    static func steps(lines: Int) -> (steps: Int, errors: [String]) {
        let parser = ConfigParser(file: "scale.yaml", options: Fixtures.options())
        _ = parser.parse(config(lines: lines))
        return (parser.lookupSteps, parser.log.errors.map(\.description))
    }

    @Test func lookupsGrowLinearlyWithTheConfig() {
        let small = Self.steps(lines: 2_000)
        let large = Self.steps(lines: 8_000)
        #expect(small.errors == [])
        #expect(large.errors == [])
        // Four times the lines: four times the steps (with room), not sixteen.
        #expect(large.steps <= small.steps * 5, "2k lines: \(small.steps) steps, 8k lines: \(large.steps)")
    }
}
