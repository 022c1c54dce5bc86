import Foundation
import Glibc
import XCTest

/// `realtime: optional` as the daemon meets it on a board without
/// CAP_SYS_NICE: boardd runs unprivileged (as root, the test drops to
/// `nobody` with setpriv, and lowers RLIMIT_MEMLOCK with prlimit), so the
/// kernel refuses SCHED_FIFO and mlockall for real.
final class RealtimeProcessTests: XCTestCase {
    private func run(_ config: String) throws -> (status: Int32, log: String) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("boardd-rt-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("rt.yaml")
        try config.write(to: file, atomically: false, encoding: .utf8)
        XCTAssertEqual(chmod(file.path, 0o644), 0)
        // The binary and the demo board are copied into the temporary
        // directory: `nobody` may not be able to reach the checkout.
        let boards = dir.appendingPathComponent("boards")
        try FileManager.default.createDirectory(at: boards, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        try FileManager.default.copyItem(atPath: Fixtures.packageRoot + "/boards/demo.yaml", toPath: boards.appendingPathComponent("demo.yaml").path)
        let binary = dir.appendingPathComponent("boardd").path
        try FileManager.default.copyItem(atPath: Boardd.path, toPath: binary)
        XCTAssertEqual(chmod(binary, 0o755), 0)
        XCTAssertEqual(chmod(boards.appendingPathComponent("demo.yaml").path, 0o644), 0)
        var args = [binary, "--config", file.path, "--boards", boards.path, "--for", "500ms"]
        if geteuid() == 0 {
            args = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/prlimit", "--memlock=65536:65536"] + args
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: args[0])
        p.arguments = Array(args.dropFirst())
        p.environment = Boardd.environment()
        defer { Boardd.removeRuntimeDirectory(p.environment) }
        let err = Pipe()
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        return (p.terminationStatus, text)
    }

    static func config(_ realtime: String) -> String {
        """
        board: demo
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true } }
          led: { pin: LED, output: { initial: off } }
        workers:
          io: { lines: [button, led], priority: 50, mlockall: true, realtime: \(realtime) }

        """
    }

    func testOptionalRunsWithoutSCHED_FIFOAndMlockallAndSaysWhatGrantsThem() throws {
        let r = try run(Self.config("optional"))
        XCTAssertEqual(r.status, 0, r.log)
        XCTAssertTrue(r.log.contains("SCHED_FIFO priority 50: not permitted (EPERM); it needs CAP_SYS_NICE"), r.log)
        // AddressSanitizer and ThreadSanitizer replace mlockall with one
        // that does nothing and succeeds: a build under them has no refusal
        // to name.
        if !TestBuild.sanitized {
            XCTAssertTrue(r.log.contains("mlockall"), "the refused memory lock is named:\n\(r.log)")
        }
        XCTAssertTrue(r.log.contains("ready: every loop is running (main, io)"), r.log)
    }

    func testRequiredRefusesToStartAndSaysWhatGrantsIt() throws {
        let r = try run(Self.config("required"))
        XCTAssertEqual(r.status, 1, r.log)
        XCTAssertTrue(r.log.contains("CAP_SYS_NICE") || r.log.contains("LimitMEMLOCK") || r.log.contains("CAP_IPC_LOCK"), r.log)
        XCTAssertFalse(r.log.contains("ready:"), r.log)
    }
}
