import BoardControl
import BoardSupport

/// The `log:` block: how boardd's log is written (docs/config.md, "log").
public struct LogConfig: Sendable, Equatable {
    /// The rate limit per source, as journald's `RateLimitBurst=` and
    /// `RateLimitIntervalSec=`: at most `burst` lines of one source per
    /// `interval` (nil: off, every line is written).
    public var rateLimit: LogWriter.RateLimit? = LogWriter.RateLimit()

    public init() {}
}

extension ConfigParser {
    static let logKeys = ["rate_limit"]
    /// The most lines a rate limit's burst may allow.
    static let maxLogBurst = 1_000_000

    func parseLog(_ e: YAMLReader.Entry) -> LogConfig {
        var c = LogConfig()
        for le in r.mapping(e.value, e.path, allowed: Self.logKeys, what: "a mapping of rate_limit") ?? [] {
            if case let .scalar(sc) = le.value, sc.string == "off" || sc.string == "false" {
                c.rateLimit = nil
                continue
            }
            let example = "rate_limit: { lines: 200, per: 5s }, or rate_limit: off"
            guard let entries = r.mapping(le.value, le.path, allowed: ["lines", "per"], what: "\(example)") else { continue }
            var limit = LogWriter.RateLimit()
            var ok = true
            for x in entries {
                if x.key == "lines" {
                    if let n = r.int(x.value, x.path, in: 1...Self.maxLogBurst, what: "a number of lines") { limit.burst = n } else { ok = false }
                } else if let d = positiveDuration(x.value, x.path, suggest: "s") {
                    if d > .seconds(3600) {
                        r.error(x.value, x.path, "a rate limit's interval is at most 1h; found \(DurationText.format(d))")
                        ok = false
                    } else {
                        limit.interval = d
                    }
                } else {
                    ok = false
                }
            }
            for k in ["lines", "per"] where !entries.contains(where: { $0.key == k }) {
                r.error(le.keyNode, le.path, "rate_limit needs \(k) (\(example))")
                ok = false
            }
            if ok { c.rateLimit = limit }
        }
        return c
    }
}
