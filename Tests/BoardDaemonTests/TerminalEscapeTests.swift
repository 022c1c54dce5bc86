import Foundation
import Testing

/// `boardd --check` on a terminal: what a config's text brings into a
/// message (an ESC in a key, a newline inside one, a bidi override) is
/// written escaped, so it can neither move the cursor nor reorder a line.
@Suite struct TerminalEscapeTests {
    @Test func aKeyWithAnEscapeANewlineAndABidiOverrideIsPrintedEscaped() throws {
        let dir = try TempDir("terminal-escape")
        let file = dir.path + "/c.yaml"
        try "board: demo\nlines:\n  led: { pin: LED, output: {} }\n\"col\\eo\\nur\\u202E\": 1\n".write(toFile: file, atomically: true, encoding: .utf8)
        let r = try Boardd.run(["--check", "--config", file])
        #expect(r.status != 0)
        #expect(r.stderr.contains("unknown key 'col\\u{1B}o\\u{A}ur\\u{202E}'"), "\(r.stderr)")
        #expect(r.stderr.split(separator: "\n").allSatisfy { $0.hasPrefix("\(file):") || $0.hasPrefix("boardd:") }, "no forged line: \(r.stderr)")
        #expect(!r.stderr.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x202E }, "no raw ESC or bidi override")
        #expect(r.stderr.split(separator: "\n").count >= 2, "the line breaks between messages stay")
    }
}
