import Boardloop
@testable import BoardDaemon
import Foundation
import Glibc
import XCTest

/// The control socket with 50 clients at once, most of them misbehaving,
/// against a daemon on mock chips and a manual clock (a second a round,
/// so the idle timeout comes): clients polling status, stats and lines;
/// clients sending garbage (seeded: a failure repeats); lines over 64 KiB;
/// requests one byte a round; clients hanging up mid-request, mid-stream
/// and before reading their reply; clients saying nothing; two over
/// `max_clients`; and one `events` follower of the button, which is
/// pressed and released meanwhile. Every well-behaved request gets its one
/// well-formed reply, in order; the follower sees every edge and reaction,
/// in order; the bad requests change nothing; the server's counters say
/// exactly what was done.
final class ControlLoadTests: XCTestCase {
    static let yaml = ControlTests.yaml + """

        control: { max_clients: 50 }
        """

    var dir = ""

    override func setUpWithError() throws {
        var template = Array("/tmp/boardd-load-XXXXXX".utf8CString)
        guard let p = mkdtemp(&template) else { throw POSIXError(.EIO) }
        dir = String(cString: p)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: dir) }

    enum Role: CaseIterable {
        /// status, stats and lines in turn, one a round.
        case poller
        /// One garbage line a round, each with the error code it must get.
        case garbage
        /// 70,000 bytes without a newline (in 16 KiB pieces), then a ping on the same write as the newline.
        case oversized
        /// A request one byte a round (a slow loris).
        case byteByByte
        /// Connects, sends half a request, hangs up; again.
        case hangUpMidRequest
        /// Follows every event for a few rounds, hangs up without cancelling; again.
        case hangUpMidStream
        /// Sends stats and hangs up before the reply; again.
        case hangUpBeforeReply
        /// Connects and says nothing: closed at the idle timeout.
        case silent
        /// Follows the button's events for the whole run.
        case follower
    }

    /// What a reply must be.
    enum Expect {
        case ok(id: Int, cmd: String)
        case error(code: String, id: Int?)
        case following(id: Int)
    }

    final class Sim {
        let role: Role
        let n: Int
        var client: ControlClient?
        var outbox: [UInt8] = []
        var expect: [Expect] = []
        var nextID = 0
        /// Rounds into its current cycle.
        var phase = 0
        /// Complete, non-empty request lines sent (the server counts each).
        var requests = 0
        var followID: Int?
        /// A byte-by-byte request's reply, expected once its newline is sent.
        var pending: Expect?
        var streamed = 0
        var button: [[String: Any]] = []
        var sawEOF = false
        init(_ role: Role, _ n: Int) {
            self.role = role
            self.n = n
        }
        func id() -> Int {
            nextID += 1
            return n * 1_000_000 + nextID
        }
    }

    static func garbage(_ rng: inout ConfigFuzzTests.Random) -> (line: [UInt8], code: String) {
        switch rng.below(16) {
        case 0:
            var b: [UInt8] = [0x78]  // "x": never JSON, never blank
            for _ in 0..<(1 + rng.below(200)) {
                let byte = UInt8(truncatingIfNeeded: rng.next())
                b.append(byte == 0x0a ? 0x00 : byte)
            }
            return (b, "bad-json")
        case 1: return (Array(#"{"v":1,"cmd":"nope\#(rng.below(1000))"}"#.utf8), "unknown-command")
        case 2: return (Array(#"{"v":2,"cmd":"set","line":"fan","value":true}"#.utf8), "version")
        case 3: return (Array(#"{"cmd":"toggle","line":"fan"}"#.utf8), "version")
        case 4: return (Array(#"{"v":1,"cmd":"set","line":"fan","value":"on"}"#.utf8), "bad-argument")
        case 5: return (Array(#"{"v":1,"cmd":"set","line":"button","value":true}"#.utf8), "not-output")
        case 6: return (Array(#"{"v":1,"cmd":"press","line":"led"}"#.utf8), "not-input")
        case 7: return (Array(#"{"v":1,"cmd":"sequence","action":"start","name":"nope"}"#.utf8), "unknown-sequence")
        case 8: return (Array(#"{"v":1,"cmd":"mode","loop":"main","mode":"nope"}"#.utf8), "unknown-mode")
        case 9: return (Array(#"{"v":1,"cmd":"mode","loop":"nope","mode":"quiet"}"#.utf8), "unknown-loop")
        case 10: return (Array("[1,2,3]".utf8), "bad-json")
        case 11: return (Array((String(repeating: "[", count: 33 + rng.below(100)) + "1").utf8), "bad-json")
        case 12: return (Array(#"{"v":1,"cmd":"pulse","line":"valve","duration":"0ms"}"#.utf8), "bad-argument")
        case 13: return (Array(#"{"v":1,"cmd":"toggle","line":"nope"}"#.utf8), "unknown-line")
        case 14: return (Array(#"{"v":1,"cmd":"cancel"}"#.utf8), "not-following")
        default: return (Array(#"{"v":1,"cmd":"events","follow":"yes"}"#.utf8), "bad-argument")
        }
    }

    func testFiftyClientsMostMisbehavingWhileAFollowerSeesEveryEdge() throws {
        let path = dir + "/boardd.sock"
        let h = try Harness(Self.yaml, level: .info, control: ControlServer.Options(path: path))
        let d = h.daemon
        var rng = ConfigFuzzTests.Random(state: 0x5EED_C0DE)
        let plan: [(Role, Int)] = [
            (.follower, 1), (.poller, 15), (.garbage, 8), (.oversized, 4), (.byteByByte, 6), (.hangUpMidRequest, 6),
            (.hangUpMidStream, 4), (.hangUpBeforeReply, 3), (.silent, 3),
        ]
        var sims: [Sim] = []
        for (role, count) in plan { for _ in 0..<count { sims.append(Sim(role, sims.count + 1)) } }
        XCTAssertEqual(sims.count, 50)
        var accepted = 0, hungUp = 0
        var errors: [String: Int] = [:]
        func connect(_ s: Sim) throws {
            s.client = try ControlClient(path)
            s.sawEOF = false
            accepted += 1
        }
        func hangUp(_ s: Sim) {
            s.client = nil  // closes the socket
            s.outbox = []
            s.expect = []
            s.followID = nil
            hungUp += 1
        }
        func queue(_ s: Sim, _ bytes: [UInt8], _ e: Expect?) {
            s.outbox += bytes
            if let e {
                s.expect.append(e)
                s.requests += 1
                if case let .error(code, _) = e { errors[code, default: 0] += 1 }
            }
        }
        func request(_ s: Sim, _ cmd: String, extra: String = "") -> (bytes: [UInt8], expect: Expect) {
            let i = s.id()
            return (Array(#"{"v":1,"id":\#(i),"cmd":"\#(cmd)"\#(extra)}"#.utf8) + [0x0a], .ok(id: i, cmd: cmd))
        }
        func flush(_ s: Sim) {
            guard let c = s.client, !s.outbox.isEmpty else { return }
            let n = s.outbox.withUnsafeBytes { Glibc.send(c.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 { s.outbox.removeFirst(n) }
        }

        // (One at a time: the listening socket's backlog is 16, and a blocking
        // connect past it would wait for this very thread to accept.)
        for s in sims {
            try connect(s)
            try d.settle()
        }
        try d.settle()
        XCTAssertEqual(d.control?.clients.count, 50)
        // Root and boardd's own user (this test) get the two kept slots past
        // max_clients; they hang up after the busy ones below.
        var kept: [ControlClient] = []
        for _ in 0..<ControlConfig.keptClients {
            kept.append(try ControlClient(path))
            accepted += 1
            try d.settle()
            XCTAssertEqual(kept.last?.lines(), [], "accepted: no busy reply")
        }
        // Two over max_clients and the kept slots: told busy, then closed.
        for _ in 0..<2 {
            let extra = try ControlClient(path)
            accepted += 1
            try d.settle()
            let got = extra.lines()
            XCTAssertEqual(got.count, 1, "\(got)")
            XCTAssertEqual(ControlTests.code(try ControlTests.object(try XCTUnwrap(got.first))), "busy")
            _ = extra.lines()
            XCTAssertTrue(extra.sawEOF, "closed after busy")
        }
        errors["busy"] = 2
        hungUp += kept.count
        kept = []
        try d.settle()

        let follower = sims[0]
        let fid = follower.id()
        queue(follower, Array(#"{"v":1,"id":\#(fid),"cmd":"events","follow":true,"line":"button"}"#.utf8) + [0x0a], .following(id: fid))
        follower.followID = fid
        flush(follower)
        try d.settle()
        try read(sims)
        XCTAssertTrue(follower.expect.isEmpty, "following before the first press")
        for s in sims where s.role == .silent { s.expect = [.error(code: "idle", id: nil)] }

        let rounds = 80
        var presses = 0
        for r in 0..<rounds {
            for s in sims {
                switch s.role {
                case .follower, .silent: break
                case .poller:
                    let q = request(s, ["status", "stats", "lines"][(r + s.n) % 3])
                    queue(s, q.bytes, q.expect)
                case .garbage:
                    let g = Self.garbage(&rng)
                    queue(s, g.line + [0x0a], .error(code: g.code, id: nil))
                case .oversized:
                    // 70,000 bytes: five pieces of 16 KiB (the last shorter), then the newline and a ping in one write.
                    if s.phase < 4 {
                        queue(s, [UInt8](repeating: 0x61, count: 16 * 1024), nil)
                        if s.phase == 3 { errors["too-long", default: 0] += 1; s.expect.append(.error(code: "too-long", id: nil)) }
                        s.phase += 1
                    } else {
                        let q = request(s, "ping")
                        queue(s, [UInt8](repeating: 0x61, count: 70_000 - 4 * 16 * 1024) + [0x0a] + q.bytes, q.expect)
                        s.phase = 0
                    }
                case .byteByByte:
                    if s.outbox.isEmpty && s.expect.isEmpty {
                        let q = request(s, ["ping", "status", "lines"][(r + s.n) % 3])
                        s.outbox = q.bytes
                        s.pending = q.expect
                    }
                    if let c = s.client, let b = s.outbox.first {
                        XCTAssertEqual(withUnsafeBytes(of: b) { Glibc.send(c.fd, $0.baseAddress, 1, Int32(MSG_NOSIGNAL)) }, 1)
                        s.outbox.removeFirst()
                        if s.outbox.isEmpty, let e = s.pending {  // the newline: a request
                            s.expect.append(e)
                            s.requests += 1
                            s.pending = nil
                        }
                    }
                    continue
                case .hangUpMidRequest:
                    switch s.phase {
                    case 0: queue(s, Array(#"{"v":1,"id":1,"cmd":"sta"#.utf8), nil)
                    case 1: hangUp(s)
                    default: try connect(s)
                    }
                    s.phase = (s.phase + 1) % 3
                case .hangUpMidStream:
                    switch s.phase {
                    case 0:
                        let i = s.id()
                        queue(s, Array(#"{"v":1,"id":\#(i),"cmd":"events","follow":true}"#.utf8) + [0x0a], .following(id: i))
                        s.followID = i
                    case 1, 2, 3: break
                    case 4: hangUp(s)
                    default: try connect(s)
                    }
                    s.phase = (s.phase + 1) % 6
                case .hangUpBeforeReply:
                    switch s.phase {
                    case 0:
                        let q = request(s, "stats")
                        queue(s, q.bytes, nil)
                        s.requests += 1
                        flush(s)
                        hangUp(s)
                    default: try connect(s)
                    }
                    s.phase = (s.phase + 1) % 2
                }
                flush(s)
            }
            // The button, pressed on even rounds and released on odd ones (active low).
            try h.chip.setLevel(17, r % 2 == 1)
            if r % 2 == 0 { presses += 1 }
            try d.advance(by: .seconds(1), step: .milliseconds(250))
            try d.settle()
            try d.settle()
            try read(sims)
        }
        for _ in 0..<4 { try d.settle() }
        try read(sims)

        // Every well-behaved request answered, in order; nothing left unanswered.
        for s in sims where s.role != .silent {
            XCTAssertEqual(s.expect.count, 0, "client \(s.n) (\(s.role)) still waits for \(s.expect)")
            XCTAssertTrue(s.outbox.isEmpty || s.role == .byteByByte, "client \(s.n) (\(s.role)) could not send everything")
            XCTAssertFalse(s.sawEOF, "client \(s.n) (\(s.role)) was closed")
        }
        for s in sims where s.role == .silent {
            XCTAssertTrue(s.sawEOF, "a silent client is closed at the idle timeout")
            XCTAssertTrue(s.expect.isEmpty, "\(s.expect)")
        }
        errors["idle"] = 3
        XCTAssertGreaterThan(sims.filter { $0.role == .hangUpMidStream }.map(\.streamed).reduce(0, +), 0, "the short followers got events")

        // The follower: every edge and the reaction of each press, in order.
        XCTAssertEqual(follower.button.count, presses * 3, "\(follower.button.map { $0["kind"] as? String ?? "?" })")
        for (k, e) in follower.button.enumerated() {
            let want: (String, Bool?) = [("edge", true), ("reaction", nil), ("edge", false)][k % 3]
            XCTAssertEqual(e["kind"] as? String, want.0, "event \(k)")
            XCTAssertEqual(e["value"] as? Bool, want.1, "event \(k)")
            XCTAssertEqual(e["line"] as? String, "button")
        }
        let t = follower.button.compactMap { $0["t_ns"] as? Int }
        XCTAssertEqual(t, t.sorted(), "in order")

        // The daemon did what the button asked and nothing the bad requests asked.
        let c = h.counters
        XCTAssertEqual(c.reactionFires["press lights"], UInt64(presses))
        XCTAssertEqual(c.lines["button"]?.events, UInt64(2 * presses))
        XCTAssertEqual(c.lines["estop"]?.events, 0)
        XCTAssertEqual(c.sequence["blink"]?.started, 0)
        XCTAssertEqual(try h.writes("FAN"), [])
        XCTAssertEqual(try h.writes("VALVE"), [])
        XCTAssertEqual(Set(try h.writes("LED")), [true], "the reaction's writes only")
        XCTAssertEqual(d.mainMode, "default")
        XCTAssertEqual(d.generation, 1)
        XCTAssertEqual(d.reloads.applied + d.reloads.refused, 0)

        // The server's counters: exactly what the clients did.
        let k = try XCTUnwrap(d.control?.counters)
        XCTAssertEqual(k.accepted, UInt64(accepted))
        XCTAssertEqual(k.busy, 2)
        XCTAssertEqual(k.idle, 3)
        XCTAssertEqual(k.slow, 0)
        XCTAssertEqual(k.hungUp, UInt64(hungUp))
        XCTAssertEqual(k.requests, UInt64(sims.map(\.requests).reduce(0, +)))
        XCTAssertEqual(k.errors, errors.mapValues { UInt64($0) })
        XCTAssertEqual(d.control?.clients.count, 50 - 3 - sims.filter { $0.client == nil }.count)
        XCTAssertEqual(d.control?.events.followers, 1 + sims.filter { $0.role == .hangUpMidStream && $0.followID != nil }.count)
        XCTAssertEqual(d.control?.events.tooSlow, 0)
        print(
            "control under load: \(accepted) connections, \(k.requests) requests (\(k.errors.values.reduce(0, +)) error replies), \(hungUp) hang-ups, \(follower.button.count) events followed"
        )
    }

    /// Reads what each client got and checks it against what it waits for.
    func read(_ sims: [Sim], file: StaticString = #filePath, line: UInt = #line) throws {
        for s in sims {
            guard let c = s.client, !s.sawEOF else { continue }
            for text in c.lines() {
                let o: [String: Any]
                do { o = try ControlTests.object(text) } catch {
                    XCTFail("client \(s.n) (\(s.role)): not JSON: \(text.prefix(200))", file: file, line: line)
                    continue
                }
                XCTAssertEqual(o["v"] as? Int, 1, text, file: file, line: line)
                if let event = o["event"] as? [String: Any] {
                    XCTAssertEqual(o["id"] as? Int, s.followID, "an event line carries the follow's id", file: file, line: line)
                    XCTAssertNotNil(event["kind"] as? String, text, file: file, line: line)
                    if s.role == .follower { s.button.append(event) } else { s.streamed += 1 }
                    continue
                }
                guard !s.expect.isEmpty else {
                    XCTFail("client \(s.n) (\(s.role)): a reply nobody asked for: \(text.prefix(200))", file: file, line: line)
                    continue
                }
                switch s.expect.removeFirst() {
                case let .ok(id, cmd):
                    XCTAssertEqual(o["ok"] as? Bool, true, "\(cmd): \(text.prefix(300))", file: file, line: line)
                    XCTAssertEqual(o["id"] as? Int, id, "in order", file: file, line: line)
                    switch cmd {
                    case "ping": XCTAssertEqual(o["pong"] as? Bool, true, file: file, line: line)
                    case "status": XCTAssertEqual((o["board"] as? [String: Any])?["name"] as? String, "demo", file: file, line: line)
                    case "lines": XCTAssertEqual((o["lines"] as? [Any])?.count, 5, file: file, line: line)
                    case "stats":
                        let loops = try ControlStatsTests.loops(o)
                        XCTAssertEqual(loops.map { $0["answered"] as? Bool }, [true, true], file: file, line: line)
                    default: break
                    }
                case let .error(code, id):
                    XCTAssertEqual(o["ok"] as? Bool, false, text, file: file, line: line)
                    XCTAssertEqual(ControlTests.code(o), code, "client \(s.n) (\(s.role)): \(text.prefix(300))", file: file, line: line)
                    XCTAssertNotNil((o["error"] as? [String: Any])?["message"] as? String, file: file, line: line)
                    if let id { XCTAssertEqual(o["id"] as? Int, id, file: file, line: line) }
                case let .following(id):
                    XCTAssertEqual(o["following"] as? Bool, true, text, file: file, line: line)
                    XCTAssertEqual(o["id"] as? Int, id, file: file, line: line)
                }
            }
            if c.sawEOF { s.sawEOF = true }
        }
    }
}
