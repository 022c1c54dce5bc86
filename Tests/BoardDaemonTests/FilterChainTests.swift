@testable import BoardDaemon
import Testing

/// The input filters as values, edge by edge, with exact times (ms here):
/// what each passes on, and when.
@Suite struct FilterChainTests {
    static let ms: UInt64 = 1_000_000

    /// Feeds `edges` (level, at ms) through `chain`, firing its deadlines
    /// in time order first, as the input line does, and returns what it
    /// reports (level, at ms), starting from a reported level of `start`.
    static func run(_ chain: inout FilterChain, start: Bool = false, _ edges: [(Bool, UInt64)], until end: UInt64) -> [(Bool, UInt64)] {
        var reported = start
        var out: [(Bool, UInt64)] = []
        func advance(to t: UInt64) {
            while chain.deadline != never && chain.deadline <= t {
                let d = chain.deadline
                if let l = chain.deadlinePassed(at: d, reported: reported), l != reported {
                    reported = l
                    out.append((l, d / ms))
                }
            }
        }
        for (level, at) in edges {
            advance(to: at * ms)
            if let l = chain.edge(level, at: at * ms, reported: reported), l != reported {
                reported = l
                out.append((l, at))
            }
        }
        advance(to: end * ms)
        return out
    }

    static func chain(on: Int = 0, off: Int = 0, settle: Int = 0, level: Bool = false) -> FilterChain {
        FilterChain(
            InputFilters(delayedOn: .milliseconds(on), delayedOff: .milliseconds(off), settle: .milliseconds(settle)), level: level)
    }

    static func same(_ a: [(Bool, UInt64)], _ b: [(Bool, UInt64)]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
    }

    @Test func noFiltersPassEveryChange() {
        var c = Self.chain()
        let out = Self.run(&c, [(true, 10), (false, 11), (true, 12)], until: 100)
        #expect(Self.same(out, [(true, 10), (false, 11), (true, 12)]))
        #expect(c.deadline == never)
    }

    @Test func delayedOnPassesOnlyAChangeThatStays() {
        var c = Self.chain(on: 50)
        // A 20 ms blip is dropped; a press held past 50 ms passes at +50.
        let out = Self.run(&c, [(true, 0), (false, 20), (true, 100), (false, 400)], until: 1000)
        #expect(Self.same(out, [(true, 150), (false, 400)]))
    }

    @Test func delayedOffHoldsTheReleaseNotThePress() {
        var c = Self.chain(off: 30)
        let out = Self.run(&c, [(true, 0), (false, 10), (true, 25), (false, 100)], until: 1000)
        // The release at 10 is cancelled by the press at 25; the one at 100 passes at 130.
        #expect(Self.same(out, [(true, 0), (false, 130)]))
    }

    @Test func settleReportsTheFirstChangeThenTheLevelItEndsAt() {
        var c = Self.chain(settle: 40)
        // Bounces inside the window are not reported; at its end (40) the
        // line is off again, so off is reported then and a new window starts.
        let out = Self.run(&c, [(true, 0), (false, 5), (true, 8), (false, 12)], until: 1000)
        #expect(Self.same(out, [(true, 0), (false, 40)]))
    }

    @Test func settleReportsNothingWhenTheLineEndsWhereItWas() {
        var c = Self.chain(settle: 40)
        let out = Self.run(&c, [(true, 0), (false, 5), (true, 8)], until: 1000)
        #expect(Self.same(out, [(true, 0)]))
        #expect(c.deadline == never)
    }

    @Test func theDelaysFeedSettle() {
        var c = Self.chain(on: 10, off: 10, settle: 100)
        // On passes at 10 (starts settle's window to 110); off at 40 passes
        // the delay at 50 but is inside the window: reported at 110.
        let out = Self.run(&c, [(true, 0), (false, 40)], until: 1000)
        #expect(Self.same(out, [(true, 10), (false, 110)]))
    }

    @Test func aZeroDelayDirectionPassesAtOnce() {
        var c = Self.chain(on: 0, off: 25)
        let out = Self.run(&c, [(true, 5), (false, 10), (true, 20)], until: 1000)
        // The release at 10 waits; the press at 20 is the level the chain
        // already has, so the pending release is cancelled.
        #expect(Self.same(out, [(true, 5)]))
        #expect(c.delay.deadline == never)
    }

    @Test func resetDropsWhatIsPending() {
        var c = Self.chain(on: 50, settle: 20)
        _ = c.edge(true, at: 0, reported: false)
        #expect(c.deadline == 50 * Self.ms)
        c.reset(to: true)
        #expect(c.deadline == never)
        #expect(c.stage && c.delay.pending)
    }
}
