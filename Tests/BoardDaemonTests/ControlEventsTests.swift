import Boardloop
@testable import BoardDaemon
import Foundation
import Glibc
import XCTest

/// The control socket's `events`: the kept events, a follower's stream
/// (filtered by line, cancelled, dropped when it does not read), and no
/// edge records at info while nobody follows.
final class ControlEventsTests: XCTestCase {
    var dir = ""

    override func setUpWithError() throws {
        var template = Array("/tmp/boardd-events-XXXXXX".utf8CString)
        guard let p = mkdtemp(&template) else { throw POSIXError(.EIO) }
        dir = String(cString: p)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: dir) }

    var socketPath: String { dir + "/boardd.sock" }

    /// At info, boardd's default level: reactions are traced, edges and writes only for a follower.
    func harness(_ tweak: (inout ControlServer.Options) -> Void = { _ in }) throws -> Harness {
        var o = ControlServer.Options(path: socketPath)
        tweak(&o)
        return try Harness(ControlTests.yaml, level: .info, control: o)
    }

    /// Settles twice: the first pass's records reach the main loop's feed in the second.
    func settle(_ h: Harness) throws {
        try h.daemon.settle()
        try h.daemon.settle()
    }

    func objects(_ c: ControlClient) throws -> [[String: Any]] { try c.lines().map(ControlTests.object) }

    func events(_ lines: [[String: Any]], id: Int) -> [[String: Any]] {
        lines.compactMap { l in
            XCTAssertEqual(l["id"] as? Int, id, "every line of the stream carries the follow's id: \(l)")
            return l["event"] as? [String: Any]
        }
    }

    func testAFollowerSeesAPressEdgesAndReactionInOrderFilteredByLine() throws {
        let h = try harness()
        let button = try ControlClient(socketPath)
        let all = try ControlClient(socketPath)
        let drive = try ControlClient(socketPath)
        let started = try button.request(#"{"v":1,"id":5,"cmd":"events","follow":true,"line":"button"}"#, h)
        XCTAssertEqual(started["ok"] as? Bool, true)
        XCTAssertEqual(started["following"] as? Bool, true)
        XCTAssertEqual(try all.request(#"{"v":1,"id":6,"cmd":"events","follow":true}"#, h)["following"] as? Bool, true)
        XCTAssertTrue(h.daemon.main.events.recordsLines.load(ordering: .relaxed) != 0, "a follower: edges are recorded at info")

        _ = try drive.request(#"{"v":1,"cmd":"press","line":"button"}"#, h)
        try settle(h)
        _ = try drive.request(#"{"v":1,"cmd":"release","line":"button"}"#, h)
        try settle(h)

        let seen = events(try objects(button), id: 5)
        XCTAssertEqual(seen.map { $0["kind"] as? String }, ["edge", "reaction", "edge"], "\(seen)")
        XCTAssertEqual(seen.map { $0["line"] as? String }, ["button", "button", "button"])
        XCTAssertEqual(seen.map { $0["value"] as? Bool }, [true, nil, false])
        XCTAssertEqual(seen[1]["reaction"] as? String, "press lights")
        XCTAssertEqual(seen[1]["text"] as? String, "button: press -> press lights")
        XCTAssertEqual(seen[0]["text"] as? String, "button: on")
        XCTAssertEqual(seen[0]["loop"] as? String, "main")
        XCTAssertNotNil(seen[1]["took_ns"] as? Int)
        let t = seen.compactMap { $0["t_ns"] as? Int }
        XCTAssertEqual(t.count, 3)
        XCTAssertEqual(t, t.sorted(), "in order")

        // Without a filter: the LED's write too, after the reaction that made it.
        let everything = events(try objects(all), id: 6)
        XCTAssertEqual(everything.map { $0["kind"] as? String }, ["edge", "output", "reaction", "edge"], "\(everything)")
        XCTAssertEqual(everything[1]["line"] as? String, "led")
        XCTAssertEqual(everything[1]["text"] as? String, "led = on")
        // The edges were for the follower only: not in the log at info.
        XCTAssertFalse(h.log.contains("button: on"), h.log)
        XCTAssertTrue(h.log.contains("button: press -> press lights"), h.log)
    }

    func testCancelEndsTheStreamWithTheFollowsID() throws {
        let h = try harness()
        let f = try ControlClient(socketPath)
        let drive = try ControlClient(socketPath)
        let notFollowing = try f.request(#"{"v":1,"id":1,"cmd":"cancel"}"#, h)
        XCTAssertEqual(ControlTests.code(notFollowing), "not-following")
        XCTAssertEqual(try f.request(#"{"v":1,"id":9,"cmd":"events","follow":true}"#, h)["following"] as? Bool, true)
        XCTAssertEqual(h.daemon.control?.events.followers, 1)
        let done = try f.request(#"{"v":1,"cmd":"cancel"}"#, h)
        XCTAssertEqual(done["id"] as? Int, 9)
        XCTAssertEqual(done["ok"] as? Bool, true)
        XCTAssertEqual(done["cancelled"] as? Bool, true)
        XCTAssertEqual(h.daemon.control?.events.followers, 0)
        XCTAssertFalse(h.daemon.main.events.recordsLines.load(ordering: .relaxed) != 0, "the last follower gone: no edges at info")

        _ = try drive.request(#"{"v":1,"cmd":"press","line":"button"}"#, h)
        try settle(h)
        XCTAssertEqual(f.lines(), [], "no events after the cancel")
        XCTAssertEqual(try f.request(#"{"v":1,"cmd":"ping"}"#, h)["pong"] as? Bool, true, "the connection serves requests again")
        // A client that hangs up while following is no follower any more.
        var leaver: ControlClient? = try ControlClient(socketPath)
        XCTAssertEqual(try leaver?.request(#"{"v":1,"id":2,"cmd":"events","follow":true}"#, h)["following"] as? Bool, true)
        XCTAssertEqual(h.daemon.control?.events.followers, 1)
        leaver = nil
        try settle(h)
        XCTAssertEqual(h.daemon.control?.events.followers, 0)
        XCTAssertFalse(h.daemon.main.events.recordsLines.load(ordering: .relaxed) != 0)
    }

    func testAFollowerThatDoesNotReadIsDroppedTooSlowWhileOthersAreServed() throws {
        let h = try harness { $0.maxOutput = 4096 }
        let slow = try ControlClient(socketPath)
        let drive = try ControlClient(socketPath)
        XCTAssertEqual(try slow.request(#"{"v":1,"id":3,"cmd":"events","follow":true}"#, h)["following"] as? Bool, true)
        // The daemon's end of the slow client's socket takes little, so its output fills soon.
        let server = try XCTUnwrap(h.daemon.control?.clients.first { $0.follow != nil })
        var small: Int32 = 1024
        XCTAssertEqual(setsockopt(server.fd, SOL_SOCKET, SO_SNDBUF, &small, socklen_t(MemoryLayout<Int32>.size)), 0)

        var presses = 0
        while h.daemon.control?.events.tooSlow == 0 && presses < 2000 {
            XCTAssertEqual(try drive.request(#"{"v":1,"cmd":"press","line":"button"}"#, h)["ok"] as? Bool, true)
            XCTAssertEqual(try drive.request(#"{"v":1,"cmd":"release","line":"button"}"#, h)["ok"] as? Bool, true)
            try settle(h)
            presses += 1
        }
        XCTAssertEqual(h.daemon.control?.events.tooSlow, 1, "after \(presses) presses")
        XCTAssertEqual(h.daemon.control?.counters.errors["too-slow"], 1, "counted with the error replies")
        XCTAssertEqual(h.daemon.control?.events.followers, 0)
        XCTAssertEqual(try drive.request(#"{"v":1,"cmd":"ping"}"#, h)["pong"] as? Bool, true, "the others are served")
        XCTAssertTrue(h.log.contains("dropped an events follower"), h.log)

        // What waited is written as the client reads; its last line says why; then the daemon closes it.
        var got: [String] = []
        for _ in 0..<200 where !slow.sawEOF {
            got += slow.lines()
            try h.daemon.settle()
        }
        XCTAssertTrue(slow.sawEOF, "closed once the last line is written")
        let last = try ControlTests.object(try XCTUnwrap(got.last))
        XCTAssertEqual(last["id"] as? Int, 3)
        XCTAssertEqual(last["ok"] as? Bool, false)
        XCTAssertEqual(ControlTests.code(last), "too-slow")
        XCTAssertGreaterThan(got.count, 10)
        XCTAssertTrue(got.dropLast().allSatisfy { $0.contains(#""event":"#) })
    }

    func testWithoutAFollowerNoEdgeIsRecordedAtInfoAndTheKeptEventsAreGiven() throws {
        let h = try harness()
        let c = try ControlClient(socketPath)
        XCTAssertFalse(h.daemon.main.events.recordsLines.load(ordering: .relaxed) != 0)
        _ = try c.request(#"{"v":1,"cmd":"press","line":"button"}"#, h)
        try settle(h)
        _ = try c.request(#"{"v":1,"cmd":"release","line":"button"}"#, h)
        try settle(h)
        let kept = try c.request(#"{"v":1,"id":4,"cmd":"events"}"#, h)
        XCTAssertEqual(kept["id"] as? Int, 4)
        let list = try XCTUnwrap(kept["events"] as? [[String: Any]])
        XCTAssertEqual(list.map { $0["kind"] as? String }, ["reaction"], "no edge, no write recorded at info: \(list)")
        XCTAssertEqual(list.first?["reaction"] as? String, "press lights")

        // Filtered by a line: the LED had no event of its own.
        let led = try c.request(#"{"v":1,"cmd":"events","line":"led"}"#, h)
        XCTAssertEqual((led["events"] as? [Any])?.count, 0)
        XCTAssertEqual(ControlTests.code(try c.request(#"{"v":1,"cmd":"events","line":"nope"}"#, h)), "unknown-line")
        XCTAssertEqual(ControlTests.code(try c.request(#"{"v":1,"cmd":"events","follow":"yes"}"#, h)), "bad-argument")
    }

    /// Kept events come from the log writer's side: nothing wakes the main
    /// loop for them (a reaction costs it its wait, read and write alone)
    /// until a client follows, and nothing once the last one cancels.
    func testOnlyAFollowerMakesTheFeedWakeTheMainLoop() throws {
        let h = try harness()
        let feed = h.daemon.traceLog.feed
        let c = try ControlClient(socketPath)
        let f = try ControlClient(socketPath)
        XCTAssertEqual(feed.consumerCount, 0, "no follower: no consumer")
        _ = try c.request(#"{"v":1,"cmd":"press","line":"button"}"#, h)
        try settle(h)
        XCTAssertEqual(feed.recentEvents().map(\.kind), ["reaction"], "kept on the writer's side")

        XCTAssertEqual(try f.request(#"{"v":1,"id":3,"cmd":"events","follow":true}"#, h)["following"] as? Bool, true)
        XCTAssertEqual(feed.consumerCount, 1, "a follower: the feed wakes the main loop")
        _ = try c.request(#"{"v":1,"cmd":"release","line":"button"}"#, h)
        try settle(h)
        XCTAssertEqual(events(try objects(f), id: 3).map { $0["kind"] as? String }, ["edge"], "the follower's stream starts at its follow")

        XCTAssertEqual(try f.request(#"{"v":1,"cmd":"cancel"}"#, h)["cancelled"] as? Bool, true)
        XCTAssertEqual(feed.consumerCount, 0, "the last follower gone: no consumer")
        let kept = try XCTUnwrap(try c.request(#"{"v":1,"cmd":"events"}"#, h)["events"] as? [[String: Any]])
        XCTAssertEqual(kept.map { $0["kind"] as? String }, ["reaction", "edge"], "the kept events, the follower's edge among them")
    }
}
