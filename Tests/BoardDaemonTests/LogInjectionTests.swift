import BoardDaemon
import Foundation
import Glibc
import XCTest

/// Nothing logged can forge a journal entry or drive a terminal: what comes
/// from a config or a command is one line, its control characters escaped,
/// and under journald every line carries its priority.
final class LogInjectionTests: XCTestCase {
    func testConfigStringsAndCommandOutputCannotForgeEntries() throws {
        let file = try ConfigFile(
            """
            board: demo
            lines:
              led: { pin: LED, output: {} }
            commands:
              say: { argv: ["/usr/bin/printf", "out\\u001b[2Jansi\\rcr\\u0007bel\\n"] }
            tasks:
              forge: { every: 100ms, do: [ { log: "a\\n<0>FORGED" }, { run: say } ] }

            """)
        let p = try Spawned(["--config", file.path, "--for", "1s", "--log-level", "info"], env: ["JOURNAL_STREAM": "8:1234"])
        XCTAssertEqual(p.exitStatus(seconds: 30), 0, p.log)
        let lines = p.log.split(separator: "\n", omittingEmptySubsequences: true)
        XCTAssertFalse(lines.isEmpty)
        for l in lines {
            XCTAssertTrue(l.range(of: #"^<[2-7]>"#, options: .regularExpression) != nil, "every line has its priority: \(l)")
            XCTAssertFalse(l.hasPrefix("<0>"), "no forged emergency entry: \(l)")
        }
        XCTAssertTrue(p.log.contains(#"a\n<0>FORGED"#), "the newline is written escaped:\n\(p.log)")
        XCTAssertTrue(p.log.contains(#"out\x1b[2Jansi\rcr\x07bel"#), "ESC, CR and BEL escaped:\n\(p.log)")
        XCTAssertFalse(p.log.utf8.contains(0x1b), "no raw ESC reaches the log")
    }

    /// Start-up errors under journald carry the error priority too.
    func testStartUpErrorsCarryAPriorityUnderJournald() throws {
        let file = try ConfigFile("board: demo\nlines:\n  led: { pin: NOSUCH, output: {} }\n")
        let p = try Spawned(["--config", file.path], env: ["JOURNAL_STREAM": "8:1234"])
        XCTAssertEqual(p.exitStatus(seconds: 30), Launcher.configErrorStatus, p.log)
        let lines = p.log.split(separator: "\n", omittingEmptySubsequences: true)
        XCTAssertFalse(lines.isEmpty)
        for l in lines { XCTAssertTrue(l.hasPrefix("<3>") || l.hasPrefix("<4>"), "a priority on every line: \(l)") }
    }
}

/// A config that other users may change decides what boardd runs: a warning
/// at the check, refused under systemd unless the operator says otherwise.
final class InsecureConfigTests: XCTestCase {
    func testAWorldWritableConfigIsWarnedAboutAndRefusedUnderSystemd() throws {
        let file = try ConfigFile("board: demo\nlines:\n  led: { pin: LED, output: {} }\n")
        XCTAssertEqual(chmod(file.path, 0o666), 0)
        let check = try Boardd.run(["--check", "--config", file.path])
        XCTAssertEqual(check.status, 0, check.stderr)
        XCTAssertTrue(check.stderr.contains("\(file.path): warning: the config is writable by every user (mode 0666)"), check.stderr)

        let refused = try Spawned(["--config", file.path, "--for", "300ms"], env: ["INVOCATION_ID": "test"])
        XCTAssertEqual(refused.exitStatus(seconds: 30), Launcher.configErrorStatus, refused.log)
        XCTAssertTrue(refused.log.contains("error: the config is writable by every user"), refused.log)

        let allowed = try Spawned(["--config", file.path, "--for", "300ms", "--allow-insecure-config"], env: ["INVOCATION_ID": "test"])
        XCTAssertEqual(allowed.exitStatus(seconds: 30), 0, allowed.log)

        XCTAssertEqual(chmod(file.path, 0o644), 0)
        let fine = try Boardd.run(["--check", "--config", file.path])
        XCTAssertFalse(fine.stderr.contains("writable"), fine.stderr)
    }

    /// The board file decides which lines are driven: one that every user
    /// may change (in `--boards DIR`) is warned about and refused under
    /// systemd, as a config is.
    func testAWorldWritableBoardFileIsWarnedAboutAndRefusedUnderSystemd() throws {
        let file = try ConfigFile("board: demo\nlines:\n  led: { pin: LED, output: {} }\n")
        let boards = file.dir.appendingPathComponent("boards").path
        try FileManager.default.createDirectory(atPath: boards, withIntermediateDirectories: true)
        let board = boards + "/demo.yaml"
        try String(contentsOfFile: Fixtures.packageRoot + "/Sources/BoardSupport/Boards/demo.yaml", encoding: .utf8)
            .write(toFile: board, atomically: true, encoding: .utf8)
        XCTAssertEqual(chmod(board, 0o666), 0)
        let check = try Boardd.run(["--check", "--config", file.path, "--boards", boards])
        XCTAssertEqual(check.status, 0, check.stderr)
        XCTAssertTrue(
            check.stderr.contains("\(board): warning: the board file is writable by every user (mode 0666): anyone who can change it decides which lines boardd drives"),
            check.stderr)

        let refused = try Spawned(["--config", file.path, "--boards", boards, "--for", "300ms"], env: ["INVOCATION_ID": "test"])
        XCTAssertEqual(refused.exitStatus(seconds: 30), Launcher.configErrorStatus, refused.log)
        XCTAssertTrue(refused.log.contains("error: the board file is writable by every user"), refused.log)

        XCTAssertEqual(chmod(board, 0o644), 0)
        let fine = try Boardd.run(["--check", "--config", file.path, "--boards", boards])
        XCTAssertEqual(fine.status, 0, fine.stderr)
        XCTAssertFalse(fine.stderr.contains("writable"), fine.stderr)
    }
}
