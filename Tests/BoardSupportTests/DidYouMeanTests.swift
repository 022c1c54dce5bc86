import Testing

@testable import BoardSupport

/// The suggestion's distance, bounded, against the whole table it replaced;
/// its work on long names; and how refusals echo what they refuse.
@Suite struct DidYouMeanTests {
    /// The whole-table restricted Damerau-Levenshtein distance, as a reference.
    static func reference(_ a: String, _ b: String) -> Int {
        let x = Array(a.lowercased().unicodeScalars)
        let y = Array(b.lowercased().unicodeScalars)
        if x.isEmpty || y.isEmpty { return max(x.count, y.count) }
        var d = [[Int]](repeating: [Int](repeating: 0, count: y.count + 1), count: x.count + 1)
        for i in 0...x.count { d[i][0] = i }
        for j in 0...y.count { d[0][j] = j }
        for i in 1...x.count {
            for j in 1...y.count {
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (x[i - 1] == y[j - 1] ? 0 : 1))
                if i > 1 && j > 1 && x[i - 1] == y[j - 2] && x[i - 2] == y[j - 1] { d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1) }
            }
        }
        return d[x.count][y.count]
    }

    @Test func theDistanceOfShortNamesIsTheWholeTables() {
        #expect(DidYouMean.distance("titel", "title") == 1)
        #expect(DidYouMean.distance("LED", "led") == 0)
        #expect(DidYouMean.distance("", "fan") == 3)
        #expect(DidYouMean.distance("kitten", "sitting") == 3)
        var rng = SystemRandomNumberGenerator()
        let letters = Array("abcAB")
        for _ in 0..<2_000 {
            let a = String((0..<Int.random(in: 0...12, using: &rng)).map { _ in letters.randomElement(using: &rng)! })
            let b = String((0..<Int.random(in: 0...12, using: &rng)).map { _ in letters.randomElement(using: &rng)! })
            let full = Self.reference(a, b)
            #expect(DidYouMean.distance(a, b) == full, "\(a) \(b)")
            for k in 1...3 {
                let banded = DidYouMean.withFolded(a) { x in
                    DidYouMean.withFolded(b) { y in
                        var work = 0
                        return DidYouMean.bounded(x!, y!, limit: k, work: &work)
                    }
                }
                #expect(banded == min(full, k + 1), "\(a) \(b) within \(k)")
            }
        }
    }

    @Test func aNameLongerThanTheLimitGetsNoSuggestionAndCostsNoCells() {
        let long = String(repeating: "A", count: 65_000)
        #expect(DidYouMean.nearest(long, in: ["led", "AAAA", "fan"]) == [])
        #expect(DidYouMean.hint(long, in: ["led"]) == "")
        #expect(DidYouMean.distance(long, "led") == .max)
    }

    @Test func aBandedComparisonComputesAtMostSevenCellsARow() {
        let a = String(repeating: "ab", count: 32)
        let b = String(repeating: "ba", count: 32)
        var work = 0
        _ = DidYouMean.withFolded(a) { x in DidYouMean.withFolded(b) { y in DidYouMean.bounded(x!, y!, limit: 3, work: &work) } }
        #expect(work <= 64 * 7)
        // Names whose lengths differ by more than the bound are not compared.
        work = 0
        _ = DidYouMean.withFolded("abcdefgh") { x in DidYouMean.withFolded("ab") { y in DidYouMean.bounded(x!, y!, limit: 3, work: &work) } }
        #expect(work == 0)
    }

    @Test func suggestionsStillFindNearNamesAndPrefixes() {
        #expect(DidYouMean.nearest("lde", in: ["led", "fan", "valve"]) == ["led"])
        #expect(DidYouMean.nearest("butt", in: ["button", "led"]) == ["button"], "a prefix, two edits away")
        #expect(DidYouMean.nearest("emergency_stop_button_x", in: ["emergency_stop_button", "led"]) == ["emergency_stop_button"])
        #expect(DidYouMean.hint("rleay", in: ["relay", "lamp"]) == "; did you mean 'relay'?")
    }

    @Test func anEchoIsQuotedShortenedAndEscaped() {
        #expect(Echo("led").description == "'led'")
        #expect(Echo(String(repeating: "A", count: 64)).description == "'" + String(repeating: "A", count: 64) + "'")
        #expect(Echo(String(repeating: "A", count: 65_000)).description == "'" + String(repeating: "A", count: 64) + "…' (65000 characters)")
        #expect(Echo(String(repeating: "A", count: 65)).bare == String(repeating: "A", count: 64) + "… (65 characters)")
        #expect(Echo("a\u{202E}b\u{1B}[2J\u{7F}\u{85}\u{2066}\u{200F}\n").description == #"'a\u{202E}b\u{1B}[2J\u{7F}\u{85}\u{2066}\u{200F}\u{A}'"#)
        #expect(Echo("café ✓").description == "'café ✓'", "printable text is kept")
        // A name of combining marks is cut by scalars: still bounded.
        let marks = "a" + String(repeating: "\u{301}", count: 10_000)
        #expect(Echo(marks).description.unicodeScalars.count < 100)
    }
}
