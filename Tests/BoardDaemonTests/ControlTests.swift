import Boardloop
import BoardloopGPIOMock
@testable import BoardDaemon
import Foundation
import Glibc
import XCTest

/// A client of the control socket in the test: a blocking connect, then
/// non-blocking reads and writes, the daemon's loop driven between them
/// (`Harness.daemon.settle()`/`advance`), so nothing waits on the other.
final class ControlClient {
    let fd: Int32
    private var pending: [UInt8] = []
    private(set) var sawEOF = false

    init(_ path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var a = sockaddr_un()
        a.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &a.sun_path) { b in
            for (i, c) in path.utf8.enumerated() { b[i] = c }
            b[path.utf8.count] = 0
        }
        let r = withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard r == 0 else {
            let e = errno
            Glibc.close(fd)
            throw POSIXError(POSIXErrorCode(rawValue: e) ?? .EIO)
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    deinit { Glibc.close(fd) }

    /// Writes all of `bytes`, letting the daemon read between partial writes.
    func send(_ bytes: [UInt8], _ h: Harness) throws {
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 { off += n } else if errno == EAGAIN { try h.daemon.settle() } else { throw POSIXError(.EPIPE) }
        }
        try h.daemon.settle()
    }

    func send(_ text: String, _ h: Harness) throws { try send(Array(text.utf8), h) }

    /// The lines the daemon has written, once there is at least one (the
    /// loop driven until then, up to `within` seconds; none: []).
    func replies(_ h: Harness, within seconds: Double = 30) throws -> [String] {
        let end = Date().addingTimeInterval(seconds)
        var got = lines()
        while got.isEmpty && !sawEOF && Date() < end {
            try h.daemon.settle()
            usleep(1000)
            got = lines()
        }
        return got
    }

    /// Every complete line the daemon has written so far.
    func lines() -> [String] {
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n > 0 { pending += buf[0..<n] } else {
                if n == 0 { sawEOF = true }
                break
            }
        }
        var out: [String] = []
        while let nl = pending.firstIndex(of: 0x0a) {
            out.append(String(decoding: pending[..<nl], as: UTF8.self))
            pending.removeFirst(nl + 1)
        }
        return out
    }

    /// Sends one request and returns its one reply, parsed. A reply that
    /// comes later (a reload, read off the main loop) is waited for, the
    /// daemon's loop driven meanwhile, up to `within` seconds.
    func request(_ text: String, _ h: Harness, within seconds: Double = 30, file: StaticString = #filePath, line: UInt = #line) throws
        -> [String: Any]
    {
        try send(text + "\n", h)
        let got = try replies(h, within: seconds)
        XCTAssertEqual(got.count, 1, "replies to \(text): \(got)", file: file, line: line)
        guard let first = got.first else { return [:] }
        return try ControlTests.object(first)
    }
}

final class ControlTests: XCTestCase {
    static let yaml = """
        board: demo
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true } }
          estop: { pin: ESTOP, input: { edge: both } }
          led: { pin: LED, output: { initial: off } }
          fan: { pin: FAN, output: { initial: off } }
          valve: { pin: VALVE, output: { initial: off } }
        modes:
          quiet: { admits: [high] }
        workers:
          w: { lines: [valve] }
        sequences:
          blink: { steps: [ set: { fan: on }, wait: 100ms, set: { fan: off } ] }
        reactions:
          - name: press lights
            on: { line: button, press: true }
            do: [ set: { led: on } ]
        """

    var dir = ""

    override func setUpWithError() throws {
        var template = Array("/tmp/boardd-control-XXXXXX".utf8CString)
        guard let p = mkdtemp(&template) else { throw POSIXError(.EIO) }
        dir = String(cString: p)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: dir) }

    var socketPath: String { dir + "/boardd.sock" }

    func harness(_ yaml: String = ControlTests.yaml, _ tweak: (inout ControlServer.Options) -> Void = { _ in }) throws -> Harness {
        var o = ControlServer.Options(path: socketPath)
        tweak(&o)
        return try Harness(yaml, control: o)
    }

    static func object(_ line: String) throws -> [String: Any] {
        let j = try JSONSerialization.jsonObject(with: Data(line.utf8))
        guard let o = j as? [String: Any] else { throw POSIXError(.EINVAL) }
        return o
    }

    static func code(_ reply: [String: Any]) -> String? { (reply["error"] as? [String: Any])?["code"] as? String }

    // MARK: Commands

    func testPingStatusAndLines() throws {
        let h = try harness()
        let c = try ControlClient(socketPath)
        let pong = try c.request(#"{"v":1,"id":7,"cmd":"ping"}"#, h)
        XCTAssertEqual(pong["ok"] as? Bool, true)
        XCTAssertEqual(pong["id"] as? Int, 7)
        XCTAssertEqual(pong["v"] as? Int, 1)
        XCTAssertEqual(pong["pong"] as? Bool, true)
        let noID = try c.request(#"{"v":1,"cmd":"ping"}"#, h)
        XCTAssertTrue(noID["id"] is NSNull, "an absent id is echoed as null")

        let s = try c.request(#"{"v":1,"id":1,"cmd":"status"}"#, h)
        let board = try XCTUnwrap(s["board"] as? [String: Any])
        XCTAssertEqual(board["name"] as? String, "demo")
        XCTAssertEqual(board["backend"] as? String, "mock")
        XCTAssertEqual(board["found"] as? String, "config")
        XCTAssertEqual((s["config"] as? [String: Any])?["generation"] as? Int, 1)
        XCTAssertEqual(s["pid"] as? Int, Int(getpid()))
        let loops = try XCTUnwrap(s["loops"] as? [[String: Any]])
        XCTAssertEqual(loops.map { $0["name"] as? String }, ["main", "w"])
        XCTAssertEqual(loops.map { $0["mode"] as? String }, ["default", "default"])
        XCTAssertNotNil(loops[1]["thread_tid"] as? Int)
        XCTAssertNotEqual(loops[0]["thread_tid"] as? Int, loops[1]["thread_tid"] as? Int, "a thread per loop")
        XCTAssertEqual(loops.map { $0["answered"] as? Bool }, [true, true])
        for l in loops {
            let thread = try XCTUnwrap(l["thread"] as? [String: Any], "\(l)")
            XCTAssertEqual(thread["policy"] as? String, "other", "no real-time settings in this config")
            XCTAssertEqual(thread["priority_now"] as? Int, 0)
            XCTAssertGreaterThanOrEqual(thread["cpu_now"] as? Int ?? -1, 0)
            XCTAssertNotNil(l["waits"] as? Int)
            XCTAssertGreaterThan(l["handled"] as? Int ?? 0, 0, "the loop has run its start-up work: \(l)")
            XCTAssertTrue(l["slowest_handler"] is NSNull, "no reaction or task ran yet: \(l)")
        }
        // A press: the main loop's slowest handler is its reaction, the
        // button's last edge is known.
        try h.press()
        try h.advance(5)
        let after = try c.request(#"{"v":1,"id":3,"cmd":"status"}"#, h)
        let main = try XCTUnwrap((after["loops"] as? [[String: Any]])?.first)
        let slowest = try XCTUnwrap(main["slowest_handler"] as? [String: Any], "\(main)")
        XCTAssertEqual(slowest["what"] as? String, "reaction press lights")
        XCTAssertEqual(slowest["took_ns"] as? Int, 0, "the manual clock does not move while a handler runs")
        XCTAssertGreaterThan(main["handled"] as? Int ?? 0, loops[0]["handled"] as? Int ?? 0, "more callouts since")
        XCTAssertEqual((s["reloads"] as? [String: Any])?["applied"] as? Int, 0)
        XCTAssertEqual(s["children"] as? Int, 0)

        let l = try c.request(#"{"v":1,"id":2,"cmd":"lines"}"#, h)
        let lines = try XCTUnwrap(l["lines"] as? [[String: Any]])
        XCTAssertEqual(lines.map { $0["name"] as? String }, ["button", "estop", "led", "fan", "valve"])
        let led = try XCTUnwrap(lines.first { $0["name"] as? String == "led" })
        XCTAssertEqual(led["direction"] as? String, "output")
        XCTAssertEqual(led["offset"] as? Int, Int(Harness.offset("LED")))
        XCTAssertEqual(led["value"] as? Bool, true, "the press above lit it")
        XCTAssertEqual(led["priority"] as? String, "normal")
        let button = try XCTUnwrap(lines.first { $0["name"] as? String == "button" })
        XCTAssertEqual(button["direction"] as? String, "input")
        let last = try XCTUnwrap(button["last_edge"] as? [String: Any], "the press above: \(button)")
        XCTAssertEqual(last["edge"] as? String, "rising", "pressed: active (its active-low pin fell; edges are logical, as libgpiod reports them)")
        XCTAssertEqual(last["ago_ns"] as? Int, 5_000_000, "pressed 5ms before, on the manual clock")
        XCTAssertTrue(led["last_edge"] is NSNull, "an output has no edges")
    }

    func testSetToggleGetAndPulseDriveTheOutputs() throws {
        let h = try harness()
        let c = try ControlClient(socketPath)
        let set = try c.request(#"{"v":1,"id":1,"cmd":"set","line":"led","value":true}"#, h)
        XCTAssertEqual(set["ok"] as? Bool, true)
        XCTAssertEqual(set["line"] as? String, "led")
        XCTAssertEqual(set["value"] as? Bool, true)
        XCTAssertEqual(try h.writes("LED"), [true])
        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"get","line":"led"}"#, h)["value"] as? Bool, true)
        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"toggle","line":"led"}"#, h)["value"] as? Bool, false)
        XCTAssertEqual(try h.writes("LED"), [true, false])

        let p = try c.request(#"{"v":1,"cmd":"pulse","line":"fan","duration":"100ms"}"#, h)
        XCTAssertEqual(p["line"] as? String, "fan")
        XCTAssertEqual(try h.writes("FAN"), [true])
        try h.advance(99)
        XCTAssertEqual(try h.writes("FAN"), [true], "not before its end")
        try h.advance(2)
        XCTAssertEqual(try h.writes("FAN"), [true, false])

        // A line a worker owns: posted to its loop, performed there.
        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"set","line":"valve","value":true}"#, h)["ok"] as? Bool, true)
        let end = Date().addingTimeInterval(20)
        while try h.writes("VALVE").isEmpty && Date() < end {
            try h.daemon.settle()
            usleep(1000)
        }
        XCTAssertEqual(try h.writes("VALVE"), [true])
        XCTAssertTrue(h.log.contains("control: set valve on (uid \(getuid()) gid \(getgid()) pid \(getpid()), origin control)"), h.log)
    }

    func testSequenceAndMode() throws {
        let h = try harness()
        let c = try ControlClient(socketPath)
        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"sequence","action":"start","name":"blink"}"#, h)["name"] as? String, "blink")
        XCTAssertEqual(try h.writes("FAN"), [true])
        try h.advance(101)
        XCTAssertEqual(try h.writes("FAN"), [true, false])
        _ = try c.request(#"{"v":1,"cmd":"sequence","action":"start","name":"blink"}"#, h)
        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"sequence","action":"stop","name":"blink"}"#, h)["ok"] as? Bool, true)
        try h.advance(200)
        XCTAssertEqual(try h.writes("FAN"), [true, false, true], "stopped before its second set")
        XCTAssertEqual(h.counters.sequence["blink"]?.started, 2)

        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"mode","loop":"main"}"#, h)["mode"] as? String, "default")
        let m = try c.request(#"{"v":1,"cmd":"mode","loop":"main","mode":"quiet"}"#, h)
        XCTAssertEqual(m["mode"] as? String, "quiet")
        try h.daemon.settle()
        XCTAssertEqual(h.daemon.mainMode, "quiet")
        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"mode","loop":"main"}"#, h)["mode"] as? String, "quiet")
        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"mode","loop":"w"}"#, h)["mode"] as? String, "default")
        // A worker's mode: posted to its loop, set there.
        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"mode","loop":"w","mode":"quiet"}"#, h)["mode"] as? String, "quiet")
        var mode = ""
        let end = Date().addingTimeInterval(20)
        while mode != "quiet" && Date() < end {
            mode = try c.request(#"{"v":1,"cmd":"mode","loop":"w"}"#, h)["mode"] as? String ?? ""
            usleep(1000)
        }
        XCTAssertEqual(mode, "quiet")
        XCTAssertTrue(h.log.contains("control: mode main quiet ("), h.log)
    }

    func testReloadReturnsAppliedOrTheErrors() throws {
        let file = dir + "/c.yaml"
        try Self.yaml.write(toFile: file, atomically: true, encoding: .utf8)
        let h = try Harness(
            result: ConfigLoader.load(path: file), level: .notice, eventModel: .v2, logger: nil, stopTimeout: .seconds(10),
            control: ControlServer.Options(path: socketPath), file: #filePath, line: #line)
        let c = try ControlClient(socketPath)
        let ok = try c.request(#"{"v":1,"cmd":"reload"}"#, h)
        XCTAssertEqual(ok["applied"] as? Bool, true)
        XCTAssertEqual(ok["errors"] as? [String], [])
        try (Self.yaml + "\n  - name: bad\n    on: { line: nosuch, press: true }\n    do: [ set: { led: on } ]\n").write(
            toFile: file, atomically: true, encoding: .utf8)
        let refused = try c.request(#"{"v":1,"cmd":"reload"}"#, h)
        XCTAssertEqual(refused["ok"] as? Bool, true)
        XCTAssertEqual(refused["applied"] as? Bool, false)
        let errors = try XCTUnwrap(refused["errors"] as? [String])
        XCTAssertFalse(errors.isEmpty)
        for e in errors {
            XCTAssertTrue(e.hasPrefix(file + ":"), e)
            XCTAssertTrue(e.contains(": error: "), e)
            XCTAssertTrue(h.log.contains(e), "logged as SIGHUP logs it: \(e)")
        }
        let s = try c.request(#"{"v":1,"cmd":"status"}"#, h)
        let reloads = try XCTUnwrap(s["reloads"] as? [String: Any])
        XCTAssertEqual(reloads["applied"] as? Int, 1)
        XCTAssertEqual(reloads["refused"] as? Int, 1)
        XCTAssertTrue((reloads["last_error"] as? String)?.hasPrefix("reload refused: ") == true)
    }

    func testMockDrivesPressReleaseClickInput() throws {
        let h = try harness()
        let c = try ControlClient(socketPath)
        let button = Harness.offset("BUTTON")
        // Active low: a press drives the pin low, and the reaction fires.
        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"press","line":"button"}"#, h)["line"] as? String, "button")
        try h.daemon.settle()
        XCTAssertEqual(try h.chip.level(.offset(button)), false)
        XCTAssertEqual(h.fires("press lights"), 1)
        XCTAssertEqual(try h.writes("LED"), [true])
        _ = try c.request(#"{"v":1,"cmd":"release","line":"button"}"#, h)
        XCTAssertEqual(try h.chip.level(.offset(button)), true)

        _ = try c.request(#"{"v":1,"cmd":"click","line":"button","count":2,"hold":"50ms"}"#, h)
        try h.daemon.settle()
        XCTAssertEqual(h.fires("press lights"), 2)
        try h.advance(50)
        XCTAssertEqual(try h.chip.level(.offset(button)), true, "released after its hold")
        try h.advance(50)
        XCTAssertEqual(h.fires("press lights"), 3, "the second click")
        try h.advance(50)
        XCTAssertEqual(try h.chip.level(.offset(button)), true)

        _ = try c.request(#"{"v":1,"cmd":"press","line":"button","hold":"2s"}"#, h)
        try h.advance(1999)
        XCTAssertEqual(try h.chip.level(.offset(button)), false)
        try h.advance(2)
        XCTAssertEqual(try h.chip.level(.offset(button)), true)

        // input: the logical value (estop is active high).
        _ = try c.request(#"{"v":1,"cmd":"input","line":"estop","value":false}"#, h)
        XCTAssertEqual(try h.chip.level(.offset(Harness.offset("ESTOP"))), false)
        _ = try c.request(#"{"v":1,"cmd":"input","line":"estop","value":true}"#, h)
        XCTAssertEqual(try h.chip.level(.offset(Harness.offset("ESTOP"))), true)
        XCTAssertEqual(Self.code(try c.request(#"{"v":1,"cmd":"press","line":"led"}"#, h)), "not-input")
    }

    /// Timed drives in flight are bounded: five 100-click requests hold 995
    /// of the 1024; the sixth is refused `busy` (the connection stays
    /// usable), and once they ran out the room is back.
    func testPulsesAndClicksInFlightAreBounded() throws {
        // Six contacts: one click in flight per line at a time.
        let contacts = (0..<6).map { "  c\($0): { pin: MOCK0_\($0 + 7), input: { edge: both } }" }.joined(separator: "\n")
        let h = try harness(Self.yaml.replacingOccurrences(of: "lines:\n", with: "lines:\n\(contacts)\n"))
        let c = try ControlClient(socketPath)
        func click(_ i: Int) -> String { #"{"v":1,"cmd":"click","line":"c\#(i)","count":100,"hold":"1s"}"# }
        for i in 0..<5 { XCTAssertEqual(try c.request(click(i), h)["ok"] as? Bool, true) }
        let refused = try c.request(click(5), h)
        XCTAssertEqual(Self.code(refused), "busy", "\(refused)")
        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"pulse","line":"led","duration":"1ms"}"#, h)["ok"] as? Bool, true, "29 left")
        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"ping"}"#, h)["pong"] as? Bool, true, "still usable")
        try h.daemon.advance(by: .seconds(201), step: .milliseconds(100))
        // (The first client went idle meanwhile and was closed.)
        let again = try ControlClient(socketPath)
        XCTAssertEqual(try again.request(click(5), h)["ok"] as? Bool, true, "room again once the clicks ran out")
    }

    /// A press with a hold or a click owns its line until it ends: another
    /// press, click or input is refused `busy` (it would cut the hold short
    /// unseen); a release ends it on purpose. The reply says how long the
    /// drive lasts, which boardctl waits for.
    func testAHoldInFlightIsNotCutShortByAnotherDrive() throws {
        let h = try harness()
        let c = try ControlClient(socketPath)
        let button = Harness.offset("BUTTON")
        let held = try c.request(#"{"v":1,"cmd":"press","line":"button","hold":"4500ms"}"#, h)
        XCTAssertEqual(held["ends_in_ns"] as? Int, 4_500_000_000)
        try h.advance(1000)
        let second = try c.request(#"{"v":1,"cmd":"press","line":"button"}"#, h)
        XCTAssertEqual(Self.code(second), "busy")
        XCTAssertEqual(
            (second["error"] as? [String: Any])?["message"] as? String,
            "line 'button' is being driven by an earlier press or click, for 3.5s more; wait for it, or release it first")
        XCTAssertEqual(Self.code(try c.request(#"{"v":1,"cmd":"click","line":"button"}"#, h)), "busy")
        XCTAssertEqual(Self.code(try c.request(#"{"v":1,"cmd":"input","line":"button","value":false}"#, h)), "busy")
        try h.advance(3499)
        XCTAssertEqual(try h.chip.level(.offset(button)), false, "still held: nothing cut it short")
        try h.advance(2)
        XCTAssertEqual(try h.chip.level(.offset(button)), true, "released at 4.5 s")
        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"press","line":"button"}"#, h)["ok"] as? Bool, true, "free again")
        _ = try c.request(#"{"v":1,"cmd":"release","line":"button"}"#, h)

        // A release ends a click in flight: its later presses never come.
        let clicks = try c.request(#"{"v":1,"cmd":"click","line":"button","count":3,"hold":"100ms"}"#, h)
        XCTAssertEqual(clicks["ends_in_ns"] as? Int, 500_000_000)
        let fires = h.fires("press lights")
        _ = try c.request(#"{"v":1,"cmd":"release","line":"button"}"#, h)
        try h.advance(600)
        XCTAssertEqual(h.fires("press lights"), fires, "no press after the release")
        XCTAssertEqual(try h.chip.level(.offset(button)), true)
    }

    /// A control set and a reaction's set write through the same executor
    /// and output: one history, and the control one logged with its origin.
    func testAControlSetAndAReactionsSetTakeTheSamePath() throws {
        let h = try harness()
        let c = try ControlClient(socketPath)
        try h.press()
        XCTAssertEqual(try h.writes("LED"), [true])
        _ = try c.request(#"{"v":1,"cmd":"set","line":"led","value":false}"#, h)
        try h.press(false)
        try h.press()
        XCTAssertEqual(try h.writes("LED"), [true, false, true])
        XCTAssertEqual(h.fires("press lights"), 2)
        XCTAssertTrue(h.log.contains("control: set led off (uid \(getuid()) gid \(getgid()) pid \(getpid()), origin control)"), h.log)
        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"get","line":"led"}"#, h)["value"] as? Bool, true)
    }

    // MARK: Bad requests

    func testBadRequestsGetTheirCodeChangeNothingAndKeepTheConnection() throws {
        let h = try harness()
        let c = try ControlClient(socketPath)
        let cases: [(String, String)] = [
            ("{not json", "bad-json"),
            ("[1,2]", "bad-json"),
            // Which of two values was meant cannot be known: neither is taken.
            (#"{"v":1,"cmd":"set","line":"led","value":false,"value":true}"#, "bad-json"),
            (#"{"id":3,"cmd":"ping"}"#, "version"),
            (#"{"v":2,"id":3,"cmd":"ping"}"#, "version"),
            (#"{"v":1,"cmd":"explode"}"#, "unknown-command"),
            (#"{"v":1,"cmd":"set","line":"led","value":"yes"}"#, "bad-argument"),
            (#"{"v":1,"cmd":"set","line":"led"}"#, "bad-argument"),
            (#"{"v":1,"cmd":"set","line":7,"value":true}"#, "bad-argument"),
            (#"{"v":1,"cmd":"pulse","line":"led","duration":"soon"}"#, "bad-argument"),
            (#"{"v":1,"cmd":"pulse","line":"led"}"#, "bad-argument"),
            (#"{"v":1,"cmd":"click","line":"button","count":0}"#, "bad-argument"),
            (#"{"v":1,"cmd":"set","line":"lde","value":true}"#, "unknown-line"),
            (#"{"v":1,"cmd":"set","line":"button","value":true}"#, "not-output"),
            (#"{"v":1,"cmd":"sequence","action":"start","name":"nope"}"#, "unknown-sequence"),
            (#"{"v":1,"cmd":"sequence","action":"launch","name":"blink"}"#, "bad-argument"),
            (#"{"v":1,"cmd":"mode","loop":"main","mode":"loud"}"#, "unknown-mode"),
            (#"{"v":1,"cmd":"mode","loop":"x"}"#, "unknown-loop"),
        ]
        for (text, code) in cases {
            let r = try c.request(text, h)
            XCTAssertEqual(r["ok"] as? Bool, false, text)
            XCTAssertEqual(Self.code(r), code, text)
            XCTAssertFalse(((r["error"] as? [String: Any])?["message"] as? String ?? "").isEmpty, text)
        }
        let v = try c.request(#"{"v":2,"id":3,"cmd":"ping"}"#, h)
        XCTAssertEqual(v["id"] as? Int, 3, "the id is echoed on errors")
        XCTAssertTrue(((v["error"] as? [String: Any])?["message"] as? String ?? "").contains("version 1"))
        let wrong = try c.request(#"{"v":1,"cmd":"set","line":"led","value":"yes"}"#, h)
        XCTAssertTrue(((wrong["error"] as? [String: Any])?["message"] as? String ?? "").hasPrefix("value:"), "names the field")
        try h.daemon.settle()
        XCTAssertEqual(try h.writes("LED"), [], "no bad request changed an output")
        XCTAssertEqual(try h.writes("FAN"), [])
        XCTAssertEqual(h.daemon.mainMode, "default")
        XCTAssertEqual(h.counters.sequence["blink"]?.started ?? 0, 0)
        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"ping"}"#, h)["pong"] as? Bool, true, "still usable")
        XCTAssertFalse(h.log.contains("control: set"), "refused requests are not logged as mutations")
    }

    func testAnOversizedLineIsRefusedAndTheConnectionStaysUsable() throws {
        let h = try harness()
        let c = try ControlClient(socketPath)
        let long = "{\"v\":1,\"cmd\":\"set\",\"line\":\"led\",\"value\":true,\"pad\":\"" + String(repeating: "x", count: 70 * 1024) + "\"}\n"
        try c.send(long, h)
        var got = c.lines()
        XCTAssertEqual(got.count, 1)
        XCTAssertEqual(Self.code(try Self.object(got[0])), "too-long")
        XCTAssertEqual(try h.writes("LED"), [], "the rest of the long line was discarded, not run")
        got = []
        try c.send(#"{"v":1,"cmd":"ping"}"# + "\n", h)
        got = c.lines()
        XCTAssertEqual(got.count, 1)
        XCTAssertEqual(try Self.object(got[0])["pong"] as? Bool, true)
        XCTAssertFalse(c.sawEOF)
        XCTAssertEqual(h.daemon.control?.counters.errors["too-long"], 1)
    }

    func testARequestSentOneByteAtATimeIsAnswered() throws {
        let h = try harness()
        let slow = try ControlClient(socketPath)
        let other = try ControlClient(socketPath)
        for b in Array(#"{"v":1,"cmd":"ping"}"#.utf8) {
            try slow.send([b], h)
            // Meanwhile another client is served at once.
            XCTAssertEqual(try other.request(#"{"v":1,"cmd":"ping"}"#, h)["pong"] as? Bool, true)
            XCTAssertEqual(slow.lines(), [])
        }
        try slow.send([0x0a], h)
        XCTAssertEqual(slow.lines().count, 1)
    }

    // MARK: Limits

    /// A connection that never sends a request holds its slot 10 s, not
    /// the 60 s a client that has asked something gets.
    func testAClientThatSendsNothingAfterConnectingIsClosedSooner() throws {
        let h = try harness()
        let c = try ControlClient(socketPath)
        try h.daemon.settle()
        try h.daemon.advance(by: .seconds(9), step: .milliseconds(500))
        XCTAssertEqual(c.lines(), [])
        try h.daemon.advance(by: .seconds(2), step: .milliseconds(500))
        let got = c.lines()
        XCTAssertEqual(got.count, 1)
        let reply = try Self.object(try XCTUnwrap(got.first))
        XCTAssertEqual(Self.code(reply), "idle")
        XCTAssertEqual((reply["error"] as? [String: Any])?["message"] as? String, "no complete request for 10s after connecting; closing the connection")
        _ = c.lines()
        XCTAssertTrue(c.sawEOF)
    }

    func testAClientThatSendsNothingIsClosedAtTheIdleTimeout() throws {
        let h = try harness()
        let c = try ControlClient(socketPath)
        try h.daemon.settle()
        try h.daemon.advance(by: .seconds(5), step: .milliseconds(500))
        XCTAssertEqual(c.lines(), [])
        XCTAssertFalse(c.sawEOF)
        // A complete request resets the clock.
        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"ping"}"#, h)["ok"] as? Bool, true)
        try h.daemon.advance(by: .seconds(59), step: .milliseconds(500))
        XCTAssertEqual(c.lines(), [])
        try h.daemon.advance(by: .seconds(2), step: .milliseconds(500))
        let got = c.lines()
        XCTAssertEqual(got.count, 1)
        XCTAssertEqual(Self.code(try Self.object(got[0])), "idle")
        _ = c.lines()
        XCTAssertTrue(c.sawEOF, "closed after the idle reply")
        XCTAssertEqual(h.daemon.control?.counters.idle, 1)
        XCTAssertEqual(h.daemon.control?.clients.count, 0)
    }

    /// Past `max_clients`, root and boardd's own user (this test is both)
    /// still get the two kept slots; past those, `busy`.
    func testMaxClientsPlusOneIsTurnedAwayBusy() throws {
        let h = try harness(Self.yaml + "\ncontrol: { max_clients: 2 }\n")
        let a = try ControlClient(socketPath), b = try ControlClient(socketPath)
        let kept = [try ControlClient(socketPath), try ControlClient(socketPath)]
        try h.daemon.settle()
        for k in kept { XCTAssertEqual(try k.request(#"{"v":1,"cmd":"ping"}"#, h)["pong"] as? Bool, true, "a kept slot") }
        let third = try ControlClient(socketPath)
        try h.daemon.settle()
        let got = third.lines()
        XCTAssertEqual(got.count, 1)
        XCTAssertEqual(Self.code(try Self.object(got[0])), "busy")
        _ = third.lines()
        XCTAssertTrue(third.sawEOF)
        XCTAssertEqual(try a.request(#"{"v":1,"cmd":"ping"}"#, h)["pong"] as? Bool, true)
        XCTAssertEqual(try b.request(#"{"v":1,"cmd":"ping"}"#, h)["pong"] as? Bool, true)
        XCTAssertEqual(h.daemon.control?.counters.busy, 1)
    }

    func testAClientDisconnectingMidRequestChangesNothing() throws {
        let h = try harness()
        var c: ControlClient? = try ControlClient(socketPath)
        try c!.send(#"{"v":1,"cmd":"set","line":"led","value":tr"#, h)
        c = nil  // closed mid-request
        try h.daemon.settle()
        XCTAssertEqual(h.daemon.control?.clients.count, 0)
        XCTAssertEqual(h.daemon.control?.counters.hungUp, 1)
        XCTAssertEqual(try h.writes("LED"), [])
        let d = try ControlClient(socketPath)
        XCTAssertEqual(try d.request(#"{"v":1,"cmd":"ping"}"#, h)["pong"] as? Bool, true)
    }

    func testAClientThatDoesNotReadIsDropped() throws {
        let h = try harness { $0.maxOutput = 16 * 1024 }
        let c = try ControlClient(socketPath)
        var text = ""
        for _ in 0..<200 { text += #"{"v":1,"cmd":"lines"}"# + "\n" }
        for _ in 0..<20 {
            if h.daemon.control?.counters.slow == 1 { break }
            try? c.send(text, h)
        }
        XCTAssertEqual(h.daemon.control?.counters.slow, 1)
        XCTAssertEqual(h.daemon.control?.clients.count, 0)
        XCTAssertTrue(h.log.contains("does not read its replies"), h.log)
    }

    // MARK: The socket file

    func testAStaleSocketIsReplacedALiveOneRefusedAndTheFileRemovedAtStop() throws {
        // A socket file nobody listens on (a daemon that was killed).
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var a = sockaddr_un()
        a.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &a.sun_path) { b in
            for (i, ch) in socketPath.utf8.enumerated() { b[i] = ch }
        }
        let bound = withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        XCTAssertEqual(bound, 0)
        Glibc.close(fd)
        XCTAssertTrue(FileManager.default.fileExists(atPath: socketPath))

        var h: Harness? = try harness()
        let c = try ControlClient(socketPath)
        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"ping"}"#, h!)["pong"] as? Bool, true)
        var st = stat()
        XCTAssertEqual(stat(socketPath, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o660, "the default mode")

        // A second daemon on the same path: refused, naming the path and the pid that answers.
        XCTAssertThrowsError(try harness()) { e in
            let text = "\(e)"
            XCTAssertTrue(text.contains(socketPath), text)
            XCTAssertTrue(text.contains("another boardd (pid \(getpid()))"), text)
        }
        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"ping"}"#, h!)["pong"] as? Bool, true, "the first one is untouched")
        h!.daemon.shutdown()
        XCTAssertFalse(FileManager.default.fileExists(atPath: socketPath), "removed at stop")
        h = nil
    }

    /// `boardd` on a path where a daemon answers: refused before it
    /// requests a line, naming the path and the daemon; the socket is left.
    func testBoarddRefusesToStartOnALiveSocket() throws {
        let h = try harness()
        let r = try Boardd.run(["--demo", "--socket", socketPath, "--for", "1s"])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue((r.stdout + r.stderr).contains("the control socket \(socketPath) is in use: another boardd (pid \(getpid()))"), r.stderr)
        let c = try ControlClient(socketPath)
        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"ping"}"#, h)["pong"] as? Bool, true)
    }

    /// A socket file another user made where boardd would listen (in /tmp
    /// anyone may): neither asked nor replaced, and the start names its owner.
    func testASocketFileOfAnotherUserIsNeitherUsedNorReplaced() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to give the socket file to another user") }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var a = sockaddr_un()
        a.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &a.sun_path) { b in
            for (i, c) in socketPath.utf8.enumerated() { b[i] = c }
        }
        let bound = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        XCTAssertEqual(bound, 0)
        Glibc.close(fd)  // a stale file: nothing listens
        XCTAssertEqual(chown(socketPath, 65534, 65534), 0)
        XCTAssertThrowsError(try harness()) { e in
            XCTAssertEqual(
                "\(e)",
                "the control socket path \(self.socketPath) is a socket of another user (uid 65534 (nobody)); boardd will not use or replace it: give this one another path (--socket PATH or control: { path: ... }), or set XDG_RUNTIME_DIR")
        }
        var st = stat()
        XCTAssertEqual(lstat(socketPath, &st), 0, "left where it was")
        XCTAssertEqual(st.st_uid, 65534)
    }

    func testEnabledFalseListensNowhere() throws {
        let h = try harness(Self.yaml + "\ncontrol: { enabled: false }\n")
        XCTAssertNil(h.daemon.control)
        XCTAssertFalse(FileManager.default.fileExists(atPath: socketPath))
    }

    func testTheControlBlockIsCheckedWithPositions() throws {
        let r = ConfigLoader.load(
            text: Self.yaml + "\ncontrol: { max_clients: 0, mode: rwx, path: relative.sock, colour: blue }\n", file: "c.yaml",
            options: LoadOptions())
        let errors = r.errors.map(\.description)
        XCTAssertNil(r.config)
        XCTAssertTrue(errors.contains { $0.hasPrefix("c.yaml:18:") && $0.contains("control") && $0.contains("colour") }, "\(errors)")
        XCTAssertTrue(errors.contains { $0.contains("control.max_clients") }, "\(errors)")
        XCTAssertTrue(errors.contains { $0.contains("control.mode") && $0.contains("octal") }, "\(errors)")
        XCTAssertTrue(errors.contains { $0.contains("control.path") && $0.contains("absolute") }, "\(errors)")
        let ok = ConfigLoader.load(
            text: Self.yaml + "\ncontrol: { path: /run/x.sock, mode: \"0600\", group: gpio, max_clients: 4 }\n", file: "c.yaml",
            options: LoadOptions())
        let c = try XCTUnwrap(ok.config, "\(ok.errors)").control
        XCTAssertEqual(c.path, "/run/x.sock")
        XCTAssertEqual(c.mode, 0o600)
        XCTAssertEqual(c.group, "gpio")
        XCTAssertEqual(c.maxClients, 4)
        XCTAssertTrue(c.enabled)
    }

    func testThePathIsResolvedInTheContractsOrder() {
        func path(_ flag: String?, _ config: String?, _ env: [String: String], runWritable: Bool) -> String {
            ControlServer.resolvePath(flag: flag, config: config, environment: env, writable: { _ in runWritable }, uid: 1000)
        }
        XCTAssertEqual(path("/a.sock", "/b.sock", ["RUNTIME_DIRECTORY": "/r"], runWritable: true), "/a.sock")
        XCTAssertEqual(path(nil, "/b.sock", ["RUNTIME_DIRECTORY": "/r"], runWritable: true), "/b.sock")
        XCTAssertEqual(path(nil, nil, ["RUNTIME_DIRECTORY": "/r:/s", "XDG_RUNTIME_DIR": "/x"], runWritable: true), "/r/boardd.sock")
        XCTAssertEqual(path(nil, nil, ["XDG_RUNTIME_DIR": "/x"], runWritable: true), "/run/boardd/boardd.sock")
        XCTAssertEqual(path(nil, nil, ["XDG_RUNTIME_DIR": "/x"], runWritable: false), "/x/boardd.sock")
        XCTAssertEqual(path(nil, nil, [:], runWritable: false), "/tmp/boardd-1000.sock")
    }
}
