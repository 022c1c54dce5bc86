import Boardloop
@testable import BoardDaemon
import Foundation
import Glibc
import XCTest

/// The control server fed thousands of random and mutated request lines
/// over a few connections (a seeded generator: a failure repeats with the
/// same seed): it never crashes or hangs, every reply is one well-formed
/// JSON line with `ok` (and a documented `error.code` when false), and a
/// request that got an error changed nothing (outputs, inputs, modes,
/// sequences).
final class ControlFuzzTests: XCTestCase {
    /// The error codes docs/control.md lists.
    static let documentedCodes: Set<String> = [
        "bad-json", "too-long", "version", "unknown-command", "bad-argument", "unknown-line", "unknown-sequence", "unknown-mode",
        "unknown-loop", "not-output", "not-input", "not-mock", "busy", "idle", "too-slow", "not-following", "not-flooding", "reload-failed",
        "internal", "stopping",
    ]

    /// The list above is docs/control.md's "Error codes" table, no more, no less.
    func testTheCodesAreTheDocumentedOnes() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let page = try String(contentsOf: root.appendingPathComponent("docs/control.md"), encoding: .utf8)
        let start = try XCTUnwrap(page.range(of: "### Error codes")), end = try XCTUnwrap(page.range(of: "## Commands"))
        var codes: Set<String> = []
        for row in page[start.upperBound..<end.lowerBound].split(separator: "\n") where row.hasPrefix("| `") {
            let first = row.dropFirst(2).prefix { $0 != "|" }
            for part in first.split(separator: ",") { codes.insert(part.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "`"))) }
        }
        XCTAssertEqual(codes, Self.documentedCodes)
        // The command service's refusals are codes of the protocol (what the
        // socket permits is everything, so it never sends not-permitted).
        for c in RemoteError.Code.allCases where c != .notPermitted {
            XCTAssertTrue(codes.contains(c.rawValue), "\(c.rawValue) is not in docs/control.md's table")
        }
    }

    /// Valid requests, as key/value texts, the mutations start from.
    static let seeds: [[(String, String)]] = [
        [("cmd", #""ping""#)], [("cmd", #""status""#)], [("cmd", #""lines""#)], [("cmd", #""stats""#)],
        [("cmd", #""get""#), ("line", #""led""#)],
        [("cmd", #""set""#), ("line", #""led""#), ("value", "true")],
        [("cmd", #""toggle""#), ("line", #""fan""#)],
        [("cmd", #""pulse""#), ("line", #""valve""#), ("duration", #""10ms""#)],
        [("cmd", #""sequence""#), ("action", #""start""#), ("name", #""blink""#)],
        [("cmd", #""mode""#), ("loop", #""main""#), ("mode", #""quiet""#)],
        [("cmd", #""mode""#), ("loop", #""w""#)],
        [("cmd", #""press""#), ("line", #""button""#), ("hold", #""50ms""#)],
        [("cmd", #""release""#), ("line", #""button""#)],
        [("cmd", #""click""#), ("line", #""button""#), ("count", "2"), ("hold", #""50ms""#)],
        [("cmd", #""input""#), ("line", #""estop""#), ("value", "false")],
        [("cmd", #""flood""#), ("line", #""estop""#), ("edges", "4"), ("rate", #""1kHz""#)],
        [("cmd", #""flood""#), ("line", #""estop""#), ("stop", "true")],
    ]

    static let oddValues = [
        "true", "false", "null", "[]", "{}", "0", "-0", "1.5", "-1", #""""#, #""x""#, "1e999", "-1e999", "99999999999999999999999999",
        "-9223372036854775809", "9223372036854775807", "123456789012345678901234567890.5e-400", #""\u0000""#, #""\ud800""#,
        #""\ud83d\ude00""#, #""lé\u2028d""#, #""😀""#, "[[[[[[[[]]]]]]]]", #"{"a":{"b":{"c":[1,2,{"d":null}]}}}"#, #""10ms\u0000""#,
        #""led\n""#, "NaN", "Infinity", "0x10", "01", "1.", ".5", "+1", #""\x""#,
    ]

    /// The config fuzz test's seeded generator (SplitMix64).
    typealias RNG = ConfigFuzzTests.Random

    static func text(_ fields: [(String, String)]) -> String {
        "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }

    /// One request line (without its newline).
    static func line(_ rng: inout RNG) -> [UInt8] {
        var fields = [("v", "1"), ("id", String(Int.random(in: 0...1000, using: &rng)))] + seeds.randomElement(using: &rng)!
        let kind = Int.random(in: 0..<100, using: &rng)
        if kind < 10 { return Array(text(fields).utf8) }  // valid as it is
        // Field-level: a wrong type, a missing or duplicated key, an unknown one, nesting.
        let fieldMutations = Int.random(in: 0...3, using: &rng)
        for _ in 0..<fieldMutations where !fields.isEmpty {
            let i = Int.random(in: 0..<fields.count, using: &rng)
            switch Int.random(in: 0..<6, using: &rng) {
            case 0: fields[i].1 = oddValues.randomElement(using: &rng)!
            case 1: fields.remove(at: i)
            case 2: fields.append(fields[i])
            case 3: fields.append(("extra\(i)", oddValues.randomElement(using: &rng)!))
            case 4:
                let n = Int.random(in: 1...64, using: &rng)
                let open = Bool.random(using: &rng)
                fields[i].1 = String(repeating: open ? "[" : "{\"k\":", count: n) + fields[i].1 + String(repeating: open ? "]" : "}", count: n)
            default: fields[i].0 = String(fields[i].0.reversed())
            }
        }
        var bytes = Array(text(fields).utf8)
        if kind >= 40 {
            // Byte-level: flips, truncation, raw NULs, invalid UTF-8, unicode.
            for _ in 0..<Int.random(in: 1...4, using: &rng) where !bytes.isEmpty {
                let at = Int.random(in: 0..<bytes.count, using: &rng)
                switch Int.random(in: 0..<6, using: &rng) {
                case 0: bytes[at] ^= UInt8(1 << Int.random(in: 0..<8, using: &rng))
                case 1: bytes = Array(bytes[..<at])
                case 2: bytes.insert(0, at: at)
                case 3: bytes.insert(contentsOf: [[0xff], [0xc0, 0x80], [0xed, 0xa0, 0x80], [0xe2, 0x82]].randomElement(using: &rng)!, at: at)
                case 4: bytes.insert(contentsOf: Array(["é", "😀", "\u{2028}", "\u{feff}", "ﬀ", "\u{10ffff}"].randomElement(using: &rng)!.utf8), at: at)
                default: bytes[at] = UInt8.random(in: 0...255, using: &rng)
                }
            }
        }
        if kind >= 95 { bytes = (0..<Int.random(in: 1...200, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) } }
        // One request per line: a newline inside would make two.
        return bytes.map { $0 == 0x0a ? 0x20 : $0 }
    }

    /// What an error request must not change.
    struct State: Equatable {
        var outputs: [[Bool]]
        var levels: [Bool]
        var mainMode: String
        var workerMode: String?
        var sequencesStarted: UInt64
        var fires: UInt64
    }

    func state(_ h: Harness) throws -> State {
        let pins = ["BUTTON", "ESTOP", "LED", "FAN", "VALVE"]
        var worker: String?
        if case let .success(m) = h.daemon.onWorker(0, timeout: .seconds(5), { $0.config.modes[$0.effectiveMode].name }) { worker = m }
        let c = h.counters
        return State(
            outputs: try ["LED", "FAN", "VALVE"].map { try h.chip.outputHistory(.offset(Harness.offset($0))).map(\.value) },
            levels: try pins.map { try h.chip.level(.offset(Harness.offset($0))) }, mainMode: h.daemon.mainMode, workerMode: worker,
            sequencesStarted: c.sequence.values.reduce(0) { $0 + $1.started }, fires: c.reactionFires.values.reduce(0, +))
    }

    func testThousandsOfMutatedRequestsGetWellFormedRepliesAndErrorsChangeNothing() throws {
        var dir = Array("/tmp/boardd-fuzz-XXXXXX".utf8CString)
        guard let p = mkdtemp(&dir) else { throw POSIXError(.EIO) }
        let path = String(cString: p)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let h = try Harness(ControlTests.yaml, control: ControlServer.Options(path: path + "/boardd.sock"))
        let clients = try (0..<4).map { _ in try ControlClient(path + "/boardd.sock") }
        var rng = RNG(state: 0x5EED_2026)
        let deadline = Date().addingTimeInterval(240)

        // The hand-picked lines first: deep nesting (10,000 levels), huge and odd lines.
        var lines: [[UInt8]] = [
            Array(String(repeating: "[", count: 10000).utf8), Array((String(repeating: "[", count: 10000) + String(repeating: "]", count: 10000)).utf8),
            Array((#"{"v":1,"cmd":"set","line":"# + String(repeating: "{\"a\":", count: 10000)).utf8),
            Array((#"{"v":1,"cmd":"get","line":"# + String(repeating: "[", count: 10000) + "\"led\"" + String(repeating: "]", count: 10000) + "}").utf8),
            Array(String(repeating: "{\"a\":", count: 10000).utf8), [0], [0, 0, 0], Array(#"{"v":1,"cmd":"ping"}"#.utf8) + [0],
            Array(#"{"v":1e999,"cmd":"ping"}"#.utf8), Array(#"{"v":1,"id":1e400,"cmd":"ping"}"#.utf8),
            Array(#"{"v":1,"id":-99999999999999999999,"cmd":"ping"}"#.utf8), Array(("\"" + String(repeating: "\\u00e9", count: 5000) + "\"").utf8),
            Array(repeating: UInt8(ascii: "x"), count: 70 * 1024), Array(#"{"v":1,"cmd":"set","line":"led","value":true,"#.utf8),
        ]
        let rounds = 4000
        for _ in 0..<rounds { lines.append(Self.line(&rng)) }

        var replies = 0, errors = 0, codes: [String: Int] = [:]
        for (n, line) in lines.enumerated() {
            guard Date() < deadline else {
                XCTFail("the fuzz run passed its deadline after \(n) of \(lines.count) lines: a hang?")
                return
            }
            var trimmed = line[...]
            if trimmed.last == 0x0d { trimmed = trimmed.dropLast() }
            let expectsReply = !trimmed.allSatisfy { $0 == 0x20 || $0 == 0x09 }
            let c = clients[n % clients.count]
            let before = try state(h)
            try c.send(line + [0x0a], h)
            var got = c.lines()
            for _ in 0..<50 where got.isEmpty && expectsReply {
                try h.daemon.settle()
                got += c.lines()
            }
            let shown = String(decoding: line.prefix(300), as: UTF8.self)
            XCTAssertFalse(c.sawEOF, "line \(n) closed the connection: \(shown)")
            XCTAssertEqual(got.count, expectsReply ? 1 : 0, "line \(n): \(shown) -> \(got)")
            guard let reply = got.first else { continue }
            replies += 1
            let object = try? JSONSerialization.jsonObject(with: Data(reply.utf8)) as? [String: Any]
            guard let object else {
                XCTFail("line \(n): the reply is not a JSON object: \(reply)")
                continue
            }
            guard let ok = object["ok"] as? Bool else {
                XCTFail("line \(n): no ok in \(reply)")
                continue
            }
            XCTAssertEqual(object["v"] as? Int, 1, reply)
            if !ok {
                errors += 1
                let code = ControlTests.code(object) ?? "(none)"
                codes[code, default: 0] += 1
                XCTAssertTrue(Self.documentedCodes.contains(code), "line \(n): undocumented code in \(reply)")
                XCTAssertNotEqual(code, "internal", "line \(n): \(shown) -> \(reply)")
                XCTAssertFalse(((object["error"] as? [String: Any])?["message"] as? String ?? "").isEmpty, reply)
                XCTAssertEqual(try state(h), before, "line \(n) was an error (\(code)) and changed the daemon: \(shown)")
            }
            if n < 5 { XCTAssertEqual(ControlTests.code(object), "bad-json", "deep nesting is refused: \(reply)") }
        }
        // Every connection still answers, and the run did reach the server's checks.
        for c in clients {
            XCTAssertEqual(try c.request(#"{"v":1,"cmd":"ping"}"#, h)["pong"] as? Bool, true)
        }
        XCTAssertGreaterThan(replies, rounds * 9 / 10)
        XCTAssertGreaterThan(errors, rounds / 2, "\(codes)")
        XCTAssertLessThan(errors, replies, "some mutated requests stay valid")
        for code in ["bad-json", "bad-argument", "version", "too-long"] { XCTAssertGreaterThan(codes[code] ?? 0, 0, "\(code): \(codes)") }
    }
}
