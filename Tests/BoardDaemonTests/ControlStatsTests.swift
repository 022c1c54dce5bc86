import Boardloop
@testable import BoardDaemon
import Foundation
import Glibc
import XCTest

/// The control socket's `stats` command against a daemon on mock chips and
/// a manual clock: what a click and a task's periods leave in the figures.
final class ControlStatsTests: XCTestCase {
    static let yaml = ControlTests.yaml + """

        tasks:
          beat: { every: 100ms, do: [ toggle: led ] }
        """

    var dir = ""

    override func setUpWithError() throws {
        var template = Array("/tmp/boardd-stats-XXXXXX".utf8CString)
        guard let p = mkdtemp(&template) else { throw POSIXError(.EIO) }
        dir = String(cString: p)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: dir) }

    func testStatsAfterAClickShowsTheFireTheEventsAndATasksRuns() throws {
        let h = try Harness(Self.yaml, control: ControlServer.Options(path: dir + "/boardd.sock"))
        let c = try ControlClient(dir + "/boardd.sock")
        let before = try c.request(#"{"v":1,"id":4,"cmd":"stats"}"#, h)
        XCTAssertEqual(before["ok"] as? Bool, true, "\(before)")
        XCTAssertEqual(before["id"] as? Int, 4)
        let reaction0 = try XCTUnwrap(Self.loops(before).first?["reactions"] as? [[String: Any]]).first { $0["name"] as? String == "press lights" }
        XCTAssertEqual(reaction0?["fires"] as? Int, 0)

        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"click","line":"button","hold":"50ms"}"#, h)["ok"] as? Bool, true)
        try h.advance(1000)
        let s = try c.request(#"{"v":1,"cmd":"stats"}"#, h)
        let loops = try Self.loops(s)
        XCTAssertEqual(loops.map { $0["name"] as? String }, ["main", "w"])
        XCTAssertEqual(loops.map { $0["mode"] as? String }, ["default", "default"])
        XCTAssertEqual(loops.map { $0["answered"] as? Bool }, [true, true], "the worker answered on its thread")
        let main = loops[0]

        let reactions = try XCTUnwrap(main["reactions"] as? [[String: Any]])
        let press = try XCTUnwrap(reactions.first { $0["name"] as? String == "press lights" })
        XCTAssertEqual(press["fires"] as? Int, 1)
        XCTAssertEqual(press["skipped"] as? Int, 0)
        let p50 = try XCTUnwrap(press["trigger_to_done_p50_ns"] as? Int)
        let max = try XCTUnwrap(press["trigger_to_done_max_ns"] as? Int)
        XCTAssertEqual(press["trigger_to_done_p99_ns"] as? Int, max, "one sample: p99 is the sample")
        XCTAssertLessThanOrEqual(p50, max)

        let lines = try XCTUnwrap(main["lines"] as? [[String: Any]])
        let button = try XCTUnwrap(lines.first { $0["name"] as? String == "button" })
        XCTAssertEqual(button["events"] as? Int, 2, "the press and the release (edge: both)")
        XCTAssertEqual(button["held"] as? Int, 0)
        XCTAssertEqual(button["lost"] as? Int, 0)
        XCTAssertEqual(button["rate_limited"] as? Int, 0)
        XCTAssertNil(lines.first { $0["name"] as? String == "led" }, "outputs have no event counters")

        let tasks = try XCTUnwrap(main["tasks"] as? [[String: Any]])
        let beat = try XCTUnwrap(tasks.first { $0["name"] as? String == "beat" })
        let runs = try XCTUnwrap(beat["runs"] as? Int)
        XCTAssertEqual(UInt64(runs), h.counters.tasks["beat"]?.runs)
        XCTAssertGreaterThanOrEqual(runs, 10, "every 100ms for a second")
        XCTAssertEqual(beat["skipped_periods"] as? Int, 0)
        for k in ["lateness_p50_ns", "lateness_p99_ns", "lateness_max_ns"] { XCTAssertNotNil(beat[k] as? Int, k) }

        let commands = try XCTUnwrap(s["commands"] as? [String: Any])
        XCTAssertEqual(commands["running"] as? Int, 0)
        XCTAssertEqual(commands["refused"] as? Int, 0)
        let control = try XCTUnwrap(s["control"] as? [String: Any])
        XCTAssertEqual(control["requests"] as? Int, 3)
        XCTAssertEqual(control["accepted"] as? Int, 1)
        XCTAssertEqual((s["boardd"] as? [String: Any])?["board"] as? String, "demo")
    }

    /// An error reply is counted by its code in the next stats.
    func testErrorRepliesAreCountedByCode() throws {
        let h = try Harness(ControlTests.yaml, control: ControlServer.Options(path: dir + "/boardd.sock"))
        let c = try ControlClient(dir + "/boardd.sock")
        _ = try c.request("{nope", h)
        _ = try c.request(#"{"v":1,"cmd":"get","line":"nope"}"#, h)
        let s = try c.request(#"{"v":1,"cmd":"stats"}"#, h)
        let errors = try XCTUnwrap((s["control"] as? [String: Any])?["errors"] as? [String: Any])
        XCTAssertEqual(errors["bad-json"] as? Int, 1)
        XCTAssertEqual(errors["unknown-line"] as? Int, 1)
    }

    static func loops(_ r: [String: Any]) throws -> [[String: Any]] { try XCTUnwrap(r["loops"] as? [[String: Any]], "\(r)") }
}
