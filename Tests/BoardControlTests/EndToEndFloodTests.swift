import BoardControl
import Foundation
import Glibc
import Testing

extension EndToEndTests {
    /// `boardctl flood` against a spawned `boardd --mock` on the doorbell:
    /// the reply at once, every edge counted by the bell (slow enough for
    /// its 20 ms debounce), the rings; `--stop`, `busy`, usage errors.
    @Test func aFloodOfTheBellIsCountedAndStops() throws {
        let d = try Daemon()
        defer { _ = d.stop() }
        try #require(d.wait { d.log.contains("ready: every loop is running") && (try? d.ctl(["ping"]).status) == 0 }, Comment(rawValue: d.log))

        func bellEvents() -> Int? {
            guard let out = try? d.ctl(["lines", "--json"]).stdout,
                let o = (try? JSONSerialization.jsonObject(with: Data(out.utf8))) as? [String: Any],
                let lines = o["lines"] as? [[String: Any]]
            else { return nil }
            return lines.first { $0["name"] as? String == "bell" }?["events"] as? Int
        }
        #expect(bellEvents() == 0)

        let flood = try d.ctl(["flood", "bell", "--edges", "10", "--rate", "20Hz"])
        #expect(flood.status == 0, "\(flood.stderr)")
        #expect(flood.stdout == "bell: flooding 10 edges at 20Hz, done in 450ms\n", "\(flood.stdout)")
        #expect(d.wait { bellEvents() == 10 }, "bell events: \(bellEvents() ?? -1)\n\(d.log)")
        #expect(d.wait { d.log.components(separatedBy: "doorbell rang").count - 1 == 5 }, "five presses ring five times: \(d.log)")
        #expect(d.log.contains("control: flood bell 10 edges at 20Hz (450ms) (uid \(getuid())"), "\(d.log)")
        #expect(d.wait { d.log.contains("control: flood bell done (10 edges)") }, "\(d.log)")

        // A long one: busy for a second, then stopped.
        let json = try d.ctl(["flood", "bell", "--edges", "1000", "--rate", "10/s", "--json"])
        #expect(json.status == 0, "\(json.stderr)")
        let reply = (try? JSONSerialization.jsonObject(with: Data(json.stdout.utf8))) as? [String: Any]
        #expect(reply?["edges"] as? Int == 1000 && reply?["rate_hz"] as? Int == 10 && reply?["duration_ns"] as? Int == 99_900_000_000, "\(json.stdout)")
        let busy = try d.ctl(["flood", "bell", "--edges", "2", "--rate", "1kHz"])
        #expect(busy.status == 1 && busy.stderr.contains("flooded already"), "\(busy.stderr)")
        let stop = try d.ctl(["flood", "bell", "--stop"])
        #expect(stop.status == 0, "\(stop.stderr)")
        #expect(stop.stdout.hasPrefix("bell: flood stopped after ") && stop.stdout.hasSuffix(" of 1000 edges\n"), "\(stop.stdout)")
        let again = try d.ctl(["flood", "bell", "--stop"])
        #expect(again.status == 1 && again.stderr.contains("no flood"), "\(again.stderr)")

        // Refused by the server (an output) and by boardctl's own checks (usage, 64).
        #expect(try d.ctl(["flood", "porch", "--edges", "2", "--rate", "1kHz"]).status == 1)
        for args in [["--edges", "0", "--rate", "1kHz"], ["--edges", "2", "--rate", "200kHz"], ["--edges", "2"], ["--stop", "--edges", "2"]] {
            let r = try d.ctl(["flood", "bell"] + args)
            #expect(r.status == 64, "\(args): \(r.stderr)")
        }
    }
}
