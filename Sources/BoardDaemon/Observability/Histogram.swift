import BoardControl
import Boardloop

/// A fixed-size latency histogram: log-linear buckets (8 per power of two)
/// over nanoseconds, so a percentile is within 12.5 % of the true value.
/// Recording allocates nothing: the counts live in a buffer reserved once.
public final class LatencyHistogram: @unchecked Sendable {
    static let subBuckets = 8
    static let bucketCount = 64 * subBuckets
    private let counts: UnsafeMutablePointer<UInt64>
    @exclusivity(unchecked) public private(set) var count: UInt64 = 0
    @exclusivity(unchecked) public private(set) var maxNanoseconds: UInt64 = 0

    public init() {
        counts = .allocate(capacity: Self.bucketCount)
        counts.initialize(repeating: 0, count: Self.bucketCount)
    }

    deinit { counts.deallocate() }

    /// (Inline, with wrapping arithmetic: `exp` is 3 to 63, so nothing
    /// overflows; a reaction records its time on every fire.)
    @inline(__always) static func bucket(_ ns: UInt64) -> Int {
        if ns < UInt64(subBuckets) { return Int(truncatingIfNeeded: ns) }
        let exp = 63 &- ns.leadingZeroBitCount  // >= 3
        let sub = Int(truncatingIfNeeded: (ns &>> UInt64(truncatingIfNeeded: exp &- 3)) & 7)
        return (exp &- 2) &* subBuckets &+ sub
    }

    /// The upper bound of a bucket's values.
    static func upperBound(_ b: Int) -> UInt64 {
        if b < subBuckets { return UInt64(b) }
        let exp = b / subBuckets + 2
        let sub = UInt64(b % subBuckets)
        return ((8 + sub + 1) << UInt64(exp - 3)) - 1
    }

    public func record(_ d: Duration) { record(nanoseconds: UInt64(Swift.max(0, d.nanosecondsClamped))) }

    @inline(__always) public func record(nanoseconds ns: UInt64) {
        counts[Self.bucket(ns)] &+= 1
        count &+= 1
        if ns > maxNanoseconds { maxNanoseconds = ns }
    }

    /// The value at or below which `fraction` of the recorded values lie
    /// (a bucket's upper bound, never above the maximum).
    public func percentile(_ fraction: Double) -> Duration {
        guard count > 0 else { return .zero }
        let rank = UInt64((Double(count) * fraction).rounded(.up))
        var seen: UInt64 = 0
        for b in 0..<Self.bucketCount {
            seen &+= counts[b]
            if seen >= Swift.max(rank, 1) { return .nanoseconds(Int64(Swift.min(Self.upperBound(b), maxNanoseconds))) }
        }
        return .nanoseconds(Int64(maxNanoseconds))
    }

    public var max: Duration { .nanoseconds(Int64(maxNanoseconds)) }

    public func reset() {
        counts.update(repeating: 0, count: Self.bucketCount)
        count = 0
        maxNanoseconds = 0
    }
}

extension Duration {
    /// The rounded form a person reads in the log: `850ns`, `12.3us`,
    /// `4.6ms`, `1.2s` (`DurationText.rounded`).
    var short: String { DurationText.rounded(nanoseconds: Int(nanosecondsClamped)) }
}
