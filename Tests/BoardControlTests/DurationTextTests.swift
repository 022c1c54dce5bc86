import BoardControl
import Testing

/// The one duration grammar and formatter every part of boardd and
/// boardctl uses: what a person reads, and the exact text the grammar
/// reads back.
@Suite struct DurationTextTests {
    @Test func roundedReadsAsAPersonWritesThem() {
        #expect(DurationText.rounded(nanoseconds: 0) == "0s")
        #expect(DurationText.rounded(nanoseconds: 850) == "850ns")
        #expect(DurationText.rounded(nanoseconds: 85000) == "85us")
        #expect(DurationText.rounded(nanoseconds: 12_345) == "12.3us")
        #expect(DurationText.rounded(nanoseconds: 12_355) == "12.4us")
        #expect(DurationText.rounded(nanoseconds: 1_200_000) == "1.2ms")
        #expect(DurationText.rounded(nanoseconds: 999_960) == "1000us")
        #expect(DurationText.rounded(nanoseconds: 3_000_000_000) == "3s")
        #expect(DurationText.rounded(nanoseconds: -1_500_000) == "-1.5ms")
        #expect(DurationText.rounded(nanoseconds: Int.max).hasSuffix("s"))
    }

    @Test func roundedKeepsTheDecimalsItIsAskedFor() {
        #expect(DurationText.rounded(nanoseconds: 499_500_000, decimals: 2) == "499.5ms")
        #expect(DurationText.rounded(nanoseconds: 499_456_000, decimals: 2) == "499.46ms")
        #expect(DurationText.rounded(nanoseconds: 2_000_000_000, decimals: 2) == "2s")
        #expect(DurationText.rounded(nanoseconds: 40_000, decimals: 2) == "40us")
        #expect(DurationText.rounded(nanoseconds: 1_234_567, decimals: 0) == "1ms")
        #expect(DurationText.rounded(nanoseconds: 1_234_567, decimals: 6) == "1.234567ms")
        #expect(DurationText.rounded(nanoseconds: 1_234_567, decimals: 99) == "1.234567ms")
    }

    /// `format` is exact: every text it writes, the grammar reads back to
    /// the same nanosecond.
    @Test func formatIsReadBackExactly() {
        let samples: [Int64] = [
            1, 999, 1_000, 1_500, 20_000_000, 1_250_000, 1_500_000_000, 60_000_000_000, 90_000_000_000,
            3_600_000_000_000, 1_234_567_891, 86_400_000_000_001, Int64.max,
        ]
        for ns in samples {
            let text = DurationText.format(.nanoseconds(ns))
            #expect(DurationText.parse(text) == .success(.nanoseconds(ns)), "\(ns) -> \(text)")
        }
        #expect(DurationText.format(.zero) == "0s")
        #expect(DurationText.format(.milliseconds(20)) == "20ms")
        #expect(DurationText.format(.milliseconds(1500)) == "1.5s")
        #expect(DurationText.format(.microseconds(500)) == "500us")
        #expect(DurationText.format(.nanoseconds(250)) == "0.25us")
        #expect(DurationText.format(.seconds(120)) == "2min")
    }

    @Test func offsetIsExactFromAStart() {
        #expect(DurationText.offset(.milliseconds(150)) == "150 ms")
        #expect(DurationText.offset(.nanoseconds(42_458_997)) == "42.458997 ms")
        #expect(DurationText.offset(.seconds(12)) == "12 s")
        #expect(DurationText.offset(.nanoseconds(12_000_250_000)) == "12.00025 s")
        #expect(DurationText.offset(.zero - .milliseconds(2)) == "-2 ms")
    }

    @Test func uptimeShowsTheTwoLargestUnits() {
        #expect(DurationText.uptime(seconds: 42) == "42s")
        #expect(DurationText.uptime(seconds: 303) == "5m 03s")
        #expect(DurationText.uptime(seconds: 7384) == "2h 03m")
        #expect(DurationText.uptime(seconds: 273_600) == "3d 4h")
        #expect(DurationText.uptime(seconds: -5) == "0s")
    }

    @Test func theGrammarSaysWhatIsWrong() {
        #expect(DurationText.parse(" 1.5 s ") == .success(.milliseconds(1500)))
        #expect(DurationText.parse("0.1s") == .success(.milliseconds(100)))
        #expect(DurationText.parse("20") == .failure(.noUnit))
        #expect(DurationText.parse("20sec") == .failure(.unknownUnit("sec")))
        #expect(DurationText.parse("-1s") == .failure(.negative))
        #expect(DurationText.parse("1.2.3s") == .failure(.notANumber))
        #expect(DurationText.parse("1.0000000001ms") == .failure(.tooPrecise))
        #expect(DurationText.parse("99999999999h") == .failure(.tooLarge))
    }
}
