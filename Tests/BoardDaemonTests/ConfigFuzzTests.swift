import BoardSupport
import Foundation
import Testing

@testable import BoardDaemon

/// Random and mutated versions of the good fixtures, the bad fixtures and
/// the examples, through `ConfigLoader.load(text:)`: bounded (2,000 inputs)
/// and deterministic (a fixed seed), so a failure is found again by running
/// the test again. Every input must end in a config or in errors that each
/// say where (a line and column), and none may take long.
@Suite struct ConfigFuzzTests {
    /// SplitMix64: small, seedable, the same on every platform (the control
    /// fuzz test draws from it too).
    struct Random: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func below(_ n: Int) -> Int { n <= 1 ? 0 : Int(next() % UInt64(n)) }
    }

    static func seeds() throws -> [String] {
        var files: [String] = []
        for dir in [Fixtures.directory + "/good", Fixtures.directory + "/bad", Fixtures.examples] {
            for name in try FileManager.default.contentsOfDirectory(atPath: dir).sorted() where name.hasSuffix(".yaml") {
                files.append(dir + "/" + name)
            }
        }
        return try files.map { try String(contentsOfFile: $0, encoding: .utf8) }
    }

    /// YAML's punctuation and a little text: what breaks parsers.
    static let alphabet = Array(":-[]{},&*!|>'\"#?%@` \n\n\t  abcxyz019_.~\u{FEFF}é\u{0}\u{85}".unicodeScalars)

    static func mutate(_ text: String, _ rng: inout Random, others: [String]) -> String {
        var s = Array(text.unicodeScalars)
        for _ in 0...rng.below(4) {
            let at = rng.below(s.count + 1)
            switch rng.below(9) {
            case 0:  // delete a range
                let n = min(rng.below(40) + 1, s.count - at)
                if n > 0 { s.removeSubrange(at..<(at + n)) }
            case 1:  // insert punctuation
                for _ in 0...rng.below(6) { s.insert(alphabet[rng.below(alphabet.count)], at: min(at, s.count)) }
            case 2:  // duplicate a range (repeated keys, repeated lines)
                let n = min(rng.below(80) + 1, s.count - at)
                if n > 0 { s.insert(contentsOf: s[at..<(at + n)], at: at) }
            case 3:  // truncate
                s = Array(s.prefix(at))
            case 4:  // a line of another file
                let other = others[rng.below(others.count)].split(separator: "\n", omittingEmptySubsequences: false)
                let line = other[rng.below(other.count)]
                s.insert(contentsOf: Array((line + "\n").unicodeScalars), at: at)
            case 5:  // re-indent
                if at < s.count, s[at] == " " { s.remove(at: at) } else { s.insert(" ", at: at) }
            case 6:  // an anchor and aliases of it
                let name = "a\(rng.below(3))"
                s.insert(contentsOf: Array((rng.below(2) == 0 ? "&\(name) " : "*\(name)").unicodeScalars), at: at)
            case 7:  // a tag
                s.insert(contentsOf: Array(["!x ", "!!str ", "!!int ", "!!map ", "! "][rng.below(5)].unicodeScalars), at: at)
            default:  // swap two lines
                var lines = String(String.UnicodeScalarView(s)).split(separator: "\n", omittingEmptySubsequences: false)
                if lines.count > 1 {
                    lines.swapAt(rng.below(lines.count), rng.below(lines.count))
                    s = Array(lines.joined(separator: "\n").unicodeScalars)
                }
            }
        }
        return String(String.UnicodeScalarView(s))
    }

    static func random(_ rng: inout Random) -> String {
        var s = String.UnicodeScalarView()
        for _ in 0..<rng.below(300) { s.append(alphabet[rng.below(alphabet.count)]) }
        return String(s)
    }

    @Test func twoThousandMutatedConfigs() throws {
        let seeds = try Self.seeds()
        #expect(seeds.count > 50)
        var rng = Random(state: 0x626F_6172_6464)  // fixed: the same inputs every run
        let options = Fixtures.options()
        var slowest = (0.0, "")
        var configs = 0
        for i in 0..<2_000 {
            let text =
                i % 10 == 9
                ? Self.random(&rng)
                : Self.mutate(seeds[rng.below(seeds.count)], &rng, others: seeds)
            let start = Date()
            let result = ConfigLoader.load(text: text, file: "fuzz.yaml", options: options)
            let seconds = Date().timeIntervalSince(start)
            if seconds > slowest.0 { slowest = (seconds, text) }
            if result.config != nil {
                configs += 1
                #expect(result.errors.isEmpty)
            } else {
                #expect(!result.errors.isEmpty, "no config and no error for input \(i):\n\(text)")
            }
            for e in result.errors where e.line <= 0 || e.column <= 0 {
                Issue.record("an error without a position for input \(i): \(e)\n\(text)")
            }
        }
        // A bound against a blow-up (an input whose cost grows without
        // limit takes far longer), not a speed figure: it holds on a loaded
        // 2-core machine, where the slowest input has taken over 2 s.
        #expect(slowest.0 < 5, "the slowest input took \(slowest.0) s:\n\(slowest.1)")
        // The mutations keep some configs good (the walk goes past the YAML).
        #expect(configs > 5)
    }
}
