import Foundation
import Testing

@testable import BoardDaemon

/// What `boardd replay` refuses to read, and how it says what is wrong:
/// a device is refused before a byte is read, and a number that is out of
/// range or not whole is named with the value found.
@Suite struct ReplayInputTests {
    static let header = #"{"boardd_recording":1,"config":"c.yaml","board":"demo","seconds":1,"levels":{}}"#

    /// The message `boardd replay` gives for a recording of these lines.
    static func refusal(_ lines: [String]) throws -> String? {
        let dir = try TempDir("replay-input")
        let file = dir.path + "/r.jsonl"
        try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        guard case let .failure(p) = Replay.read(file) else { return nil }
        return p.message.replacingOccurrences(of: file, with: "r.jsonl")
    }

    @Test func devZeroIsRefusedBeforeItIsRead() throws {
        let r = try BoundedBoardd.run(["replay", "/dev/zero"])
        #expect(!r.killed, "boardd replay /dev/zero did not finish within the deadline")
        #expect(r.status == 2)
        #expect(r.stderr == "/dev/zero: cannot read the recording: not a regular file (a character device)\n")
        #expect(r.seconds < 5)
    }

    @Test func aVersionOutOfRangeIsSaidToBe() throws {
        #expect(
            try Self.refusal([#"{"boardd_recording":99999999999999999999,"config":"c.yaml"}"#])
                == "r.jsonl:1: version 99999999999999999999 is out of range; this boardd reads version 1")
        #expect(
            try Self.refusal([#"{"boardd_recording":0,"config":"c.yaml"}"#])
                == "r.jsonl:1: version 0 is out of range; this boardd reads version 1")
        #expect(
            try Self.refusal([#"{"boardd_recording":1.5,"config":"c.yaml"}"#])
                == "r.jsonl:1: version 1.5 is out of range; this boardd reads version 1")
        #expect(
            try Self.refusal([#"{"config":"c.yaml"}"#])
                == #"r.jsonl:1: not a boardd recording (its first line has no "boardd_recording" version)"#)
    }

    @Test func aTimeThatIsNotWholeNanosecondsIsSaidToBe() throws {
        #expect(
            try Self.refusal([Self.header, #"{"kind":"edge","t":1.5,"line":"button","edge":"rising"}"#])
                == #"r.jsonl:2: "t" must be a whole number of nanoseconds, found 1.5"#)
        #expect(
            try Self.refusal([Self.header, #"{"kind":"edge","t":1e30,"line":"button","edge":"rising"}"#])
                == #"r.jsonl:2: "t" must be a whole number of nanoseconds, found 1e30"#)
        #expect(
            try Self.refusal([Self.header, #"{"kind":"edge","t":"soon","line":"button","edge":"rising"}"#])
                == #"r.jsonl:2: "t" must be a whole number of nanoseconds, found a string"#)
        #expect(
            try Self.refusal([Self.header, #"{"kind":"edge","line":"button","edge":"rising"}"#])
                == #"r.jsonl:2: a record needs "t" (nanoseconds since the start)"#)
        #expect(
            try Self.refusal([Self.header, #"{"t":5,"line":"button","edge":"rising"}"#])
                == #"r.jsonl:2: a record needs "kind""#)
    }

    /// A length the header cannot mean is refused, not turned into a trap
    /// or a replay that runs for ever.
    @Test func aHeaderLengthOutOfRangeIsSaidToBe() throws {
        #expect(
            try Self.refusal([#"{"boardd_recording":1,"config":"c.yaml","seconds":1e30}"#])
                == #"r.jsonl:1: "seconds" must be from 0 to 86400, found 1e30"#)
    }
}
