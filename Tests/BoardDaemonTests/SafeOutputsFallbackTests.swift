import Foundation
import Glibc
import XCTest

/// `boardd --safe-outputs` after a bad edit: the config has errors, yet the
/// outputs must still go safe (systemd's `ExecStopPost=` after a crash).
/// It uses the config when it loads, else the last applied safe table the
/// daemon kept in its runtime directory, else `board:` and `lines:` read
/// leniently; only when none of them gives a table is nothing set.
final class SafeOutputsFallbackTests: XCTestCase {
    /// Two outputs with safe values (one safe on), one without.
    static let good = """
        board: demo
        lines:
          valve: { pin: VALVE, output: { initial: off, safe: off } }
          led: { pin: LED, output: { initial: off, safe: on } }
          fan: { pin: FAN, output: { initial: off } }

        """

    /// A runtime directory of the test's own (`RUNTIME_DIRECTORY`), shared
    /// by a daemon run and the `--safe-outputs` run after it.
    final class RuntimeDirectory {
        let path: String
        init() throws {
            var template = Array("/tmp/boardd-safetable-XXXXXX".utf8CString)
            guard let p = mkdtemp(&template) else { throw XCTSkip("mkdtemp failed") }
            path = String(cString: p)
            chmod(path, 0o777)
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }
        var table: String { path + "/boardd-safe-outputs" }
        var env: [String: String] { ["RUNTIME_DIRECTORY": path] }
    }

    private func assertEverySafeOutputSet(_ log: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(log.contains("valve -> off (safe value)"), log, file: file, line: line)
        XCTAssertTrue(log.contains("led -> on (safe value)"), log, file: file, line: line)
        XCTAssertFalse(log.contains("fan -> "), "an output without safe: is left as it is:\n\(log)", file: file, line: line)
        XCTAssertTrue(log.contains("safe outputs: 2 set, 0 failed"), log, file: file, line: line)
        XCTAssertFalse(log.contains("no output set"), log, file: file, line: line)
    }

    // MARK: Errors outside board: and lines:

    /// A typo in `mqtt:` (`brokr:`) with no table: the lenient read sets
    /// every safe output, and says it was the source.
    func testSafeOutputsWithATypoInMQTTSetsEverySafeOutput() throws {
        let file = try ConfigFile(Self.good + "mqtt:\n  brokr: localhost\n")
        let p = try Spawned(["--safe-outputs", "--config", file.path])
        XCTAssertEqual(p.exitStatus(), 0, p.log)
        assertEverySafeOutputSet(p.log)
        XCTAssertTrue(p.log.contains("mqtt.brokr: unknown key 'brokr'"), "the error is logged:\n\(p.log)")
        XCTAssertEqual(p.log.components(separatedBy: "unknown key 'brokr'").count, 2, "each error once:\n\(p.log)")
        XCTAssertTrue(p.log.contains("from board: and lines: read leniently"), p.log)
    }

    /// An unknown top-level key: the same.
    func testSafeOutputsWithAnUnknownTopLevelKeySetsEverySafeOutput() throws {
        let file = try ConfigFile(Self.good + "frobnicate: 3\n")
        let p = try Spawned(["--safe-outputs", "--config", file.path])
        XCTAssertEqual(p.exitStatus(), 0, p.log)
        assertEverySafeOutputSet(p.log)
        XCTAssertTrue(p.log.contains("unknown key 'frobnicate'"), p.log)
        XCTAssertTrue(p.log.contains("from board: and lines: read leniently"), p.log)
    }

    /// A secret the user running `--safe-outputs` cannot read (secrets.yaml
    /// root:root 0600, boardd not root): the same.
    func testSafeOutputsWithAnUnreadableSecretSetsEverySafeOutput() throws {
        let r = try runAsAnotherUser(
            Self.good + "mqtt:\n  broker: localhost\n  username: boardd\n  password: !secret mqtt_password\n",
            secrets: "mqtt_password: hunter2\n", ["--safe-outputs"])
        XCTAssertEqual(r.status, 0, r.log)
        assertEverySafeOutputSet(r.log)
        XCTAssertTrue(r.log.contains("cannot read secret 'mqtt_password'"), r.log)
        XCTAssertFalse(r.log.contains("hunter2"), "a secret's value is never shown:\n\(r.log)")
        XCTAssertTrue(r.log.contains("from board: and lines: read leniently"), r.log)
    }

    // MARK: The last applied table

    /// A config broken in `lines:` itself, after a daemon ran it: the table
    /// that daemon wrote is used (and said to be, with when it was written).
    func testSafeOutputsWithBrokenLinesUsesTheLastAppliedTable() throws {
        let dir = try RuntimeDirectory()
        let file = try ConfigFile(Self.good)
        let daemon = try Spawned(["--config", file.path, "--for", "300ms"], env: dir.env)
        XCTAssertEqual(daemon.exitStatus(), 0, daemon.log)
        XCTAssertTrue(FileManager.default.fileExists(atPath: dir.table), "the daemon wrote its table:\n\(daemon.log)")
        try file.write(Self.good.replacingOccurrences(of: "pin: VALVE", with: "pin: VALVEE"))
        let p = try Spawned(["--safe-outputs", "--config", file.path], env: dir.env)
        XCTAssertEqual(p.exitStatus(), 0, p.log)
        assertEverySafeOutputSet(p.log)
        XCTAssertTrue(p.log.contains("lines.valve.pin: the demo board has no pin 'VALVEE'"), p.log)
        XCTAssertTrue(p.log.contains("from the last applied safe table \(dir.table) (written "), p.log)
    }

    /// A torn table (cut short) and a corrupt one (a value changed, the
    /// checksum not) are each detected and reported, and `--safe-outputs`
    /// falls back to the lenient read. `--safe-table FILE` names the table.
    func testSafeOutputsDetectsATornOrCorruptTableAndFallsBack() throws {
        let dir = try RuntimeDirectory()
        let file = try ConfigFile(Self.good)
        let table = dir.path + "/other.table"
        let daemon = try Spawned(["--config", file.path, "--for", "300ms", "--safe-table", table])
        XCTAssertEqual(daemon.exitStatus(), 0, daemon.log)
        let written = try String(contentsOfFile: table, encoding: .utf8)
        try file.write(Self.good + "mqtt:\n  brokr: localhost\n")
        for (what, damaged) in [
            ("torn", String(written.prefix(written.count * 2 / 3))),
            ("corrupt", written.replacingOccurrences(of: "\ton\n", with: "\toff\n")),
        ] {
            XCTAssertNotEqual(damaged, written, what)
            try damaged.write(toFile: table, atomically: true, encoding: .utf8)
            let p = try Spawned(["--safe-outputs", "--config", file.path, "--safe-table", table])
            XCTAssertEqual(p.exitStatus(), 0, "\(what): \(p.log)")
            assertEverySafeOutputSet(p.log)
            XCTAssertTrue(p.log.contains("the last applied safe table \(table) is not used:"), "\(what): \(p.log)")
            XCTAssertTrue(p.log.contains("from board: and lines: read leniently"), "\(what): \(p.log)")
        }
    }

    /// Nothing usable (lines broken, no table): exit 1, nothing set, and
    /// the reason for each source.
    func testSafeOutputsWithNothingUsableExitsOneAndSaysWhy() throws {
        let dir = try RuntimeDirectory()
        let file = try ConfigFile(Self.good.replacingOccurrences(of: "pin: VALVE", with: "pin: VALVEE"))
        let p = try Spawned(["--safe-outputs", "--config", file.path], env: dir.env)
        XCTAssertEqual(p.exitStatus(), 1, p.log)
        XCTAssertFalse(p.log.contains("(safe value)"), p.log)
        XCTAssertTrue(p.log.contains("no output set"), p.log)
        XCTAssertTrue(p.log.contains("no last applied safe table at \(dir.table)"), p.log)
        XCTAssertTrue(p.log.contains("board: and lines: have errors of their own"), p.log)
    }

    // MARK: Writing the table

    /// A running daemon writes its safe table at the start, rewrites it
    /// after a reload that changes a safe value, and leaves it as it was
    /// after a refused reload.
    func testARunningDaemonWritesTheTableAtStartAndAfterAnAppliedReload() throws {
        let dir = try RuntimeDirectory()
        let file = try ConfigFile(Self.good)
        let h = try Harness(path: file.path, safeTable: dir.table)
        let led = "line\tled\tlabel:boardloop-mock0\t27\tactive-high\tpush-pull\tas-is\t"
        let first = try String(contentsOfFile: dir.table, encoding: .utf8)
        XCTAssertTrue(first.hasPrefix("boardd-safe-outputs\t1\nboard\tdemo\nbackend\tmock\n"), first)
        XCTAssertTrue(first.contains(led + "on\n"), first)
        XCTAssertTrue(first.contains("line\tvalve\tlabel:boardloop-mock0\t5\tactive-high\tpush-pull\tas-is\toff\n"), first)
        XCTAssertFalse(first.contains("\tfan\t"), "no safe value, not in the table:\n\(first)")
        try file.write(Self.good.replacingOccurrences(of: "safe: on", with: "safe: off"))
        h.daemon.reload()
        XCTAssertEqual(h.daemon.reloads.applied, 1, h.log)
        let second = try String(contentsOfFile: dir.table, encoding: .utf8)
        XCTAssertTrue(second.contains(led + "off\n"), second)
        let left = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".new") }
        XCTAssertEqual(left, [], "no temporary file is left")
        try file.write(Self.good + "frobnicate: 3\n")
        h.daemon.reload()
        XCTAssertEqual(h.daemon.reloads.refused, 1, h.log)
        XCTAssertEqual(try String(contentsOfFile: dir.table, encoding: .utf8), second, "a refused reload leaves the table")
    }

    // MARK: As another user

    /// Runs boardd with `args` on `config` (and `secrets`, owned by root
    /// with mode 0600) as a user who is not root: `nobody` when the tests
    /// run as root (the binary is copied where `nobody` reaches it).
    private func runAsAnotherUser(_ config: String, secrets: String, _ args: [String]) throws -> (status: Int32, log: String) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("boardd-secret-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("boardd.yaml").path
        try config.write(toFile: file, atomically: false, encoding: .utf8)
        XCTAssertEqual(chmod(file, 0o644), 0)
        let secretsFile = dir.appendingPathComponent("secrets.yaml").path
        try secrets.write(toFile: secretsFile, atomically: false, encoding: .utf8)
        XCTAssertEqual(chmod(secretsFile, geteuid() == 0 ? 0o600 : 0o000), 0)
        let binary = dir.appendingPathComponent("boardd").path
        try FileManager.default.copyItem(atPath: Boardd.path, toPath: binary)
        XCTAssertEqual(chmod(binary, 0o755), 0)
        var argv = [binary] + args + ["--config", file]
        if geteuid() == 0 { argv = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + argv }
        var env = Boardd.environment()
        env.removeValue(forKey: "JOURNAL_STREAM")
        let r = try Boardd.run(Array(argv.dropFirst()), executable: argv[0], environment: env, cwd: nil)
        return (r.status, r.stdout + r.stderr)
    }

    /// `boardd --check` as a user who cannot read the secrets file fails at
    /// the `!secret`, and says which user would need to read it.
    func testCheckFailsAtTheSecretWhenTheCheckingUserCannotReadIt() throws {
        let r = try runAsAnotherUser(
            Self.good + "mqtt:\n  broker: localhost\n  username: boardd\n  password: !secret mqtt_password\n",
            secrets: "mqtt_password: hunter2\n", ["--check"])
        XCTAssertEqual(r.status, 1, r.log)
        XCTAssertTrue(r.log.contains("boardd.yaml:9:13: error: mqtt.password: cannot read secret 'mqtt_password'"), r.log)
        let user = geteuid() == 0 ? "nobody" : String(cString: getpwuid(geteuid())!.pointee.pw_name)
        XCTAssertTrue(r.log.contains("permission denied for the user \(user) (uid "), r.log)
        XCTAssertTrue(r.log.contains("the user boardd runs as must be able to read it"), r.log)
        XCTAssertFalse(r.log.contains("hunter2"), r.log)
    }
}
