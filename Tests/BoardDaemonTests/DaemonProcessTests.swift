import BoardloopTestSupport
import Foundation
import Glibc
import XCTest

/// A spawned `boardd` whose stderr is collected by a reader thread; every
/// wait has a deadline.
final class Spawned: @unchecked Sendable {
    let process = Process()
    private let text = Locked("")
    private let err = Pipe()
    private var reader: Thread?

    init(_ args: [String], env: [String: String] = [:], executable: String = Boardd.path) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = args
        process.currentDirectoryURL = URL(fileURLWithPath: Fixtures.packageRoot)
        var e = Boardd.environment()
        e.removeValue(forKey: "NOTIFY_SOCKET")
        e.removeValue(forKey: "JOURNAL_STREAM")
        for (k, v) in env { e[k] = v }
        process.environment = e
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let handle = err.fileHandleForReading
        let text = self.text
        let t = Thread {
            while true {
                let d = handle.availableData
                if d.isEmpty { break }
                text.withLock { $0 += String(decoding: d, as: UTF8.self) }
            }
        }
        t.start()
        reader = t
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        Boardd.removeRuntimeDirectory(process.environment)
    }

    var log: String { text.withLock { $0 } }

    /// Waits until the log contains `s` (at most `seconds`).
    @discardableResult
    func waitFor(_ s: String, seconds: Double = 20) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            if log.contains(s) { return true }
            usleep(20_000)
        }
        return log.contains(s)
    }

    func signal(_ sig: Int32) { kill(process.processIdentifier, sig) }

    /// Waits for the exit (at most `seconds`; then kills and returns nil).
    func exitStatus(seconds: Double = 20) -> Int32? {
        let end = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < end { usleep(20_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return nil
        }
        _ = waitFor("\u{0}", seconds: 0.2)  // let the reader catch the last lines
        return process.terminationStatus
    }

    /// Children of the process, and how many are zombies (from /proc).
    func children() -> (all: Int, zombies: Int) {
        let c = childPIDs()
        return (c.all.count, c.zombies.count)
    }

    /// The pids of the process's children, and of those that are zombies.
    func childPIDs() -> (all: [Int32], zombies: [Int32]) {
        let pid = process.processIdentifier
        var all: [Int32] = [], zombies: [Int32] = []
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] where Int32(entry) != nil {
            guard let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { continue }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 2, Int32(fields[1]) == pid, let child = Int32(entry) else { continue }
            all.append(child)
            if fields[0] == "Z" { zombies.append(child) }
        }
        return (all, zombies)
    }
}

final class DaemonProcessTests: XCTestCase {
    /// The demo as an installed boardd runs it: a copy of the binary away
    /// from the checkout (no examples/, no boards/ above it) plays the
    /// built-in config and script on the built-in board.
    func testDemoForRunsTheStoryAndStopsCleanly() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("boardd-demo-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let binary = dir.appendingPathComponent("boardd").path
        try FileManager.default.copyItem(atPath: Boardd.path, toPath: binary)
        let p = try Spawned(["--demo", "--for", "3s"], executable: binary)
        XCTAssertEqual(p.exitStatus(seconds: 30), 0, p.log)
        let log = p.log
        for s in [
            "running examples/demo.yaml (built in) on demo (mock)", "ready: every loop is running (main, io)",
            "demo: click the button (a click starts pour)", "button: click -> click starts pour", "mode default -> critical",
            "demo: the contact floods 300 edges", "chatter: delivering 300 held events, in order", "mode critical -> default",
            "button: double click", "valve -> off (safe value)", "stopped: 3 outputs at their safe values, 6 lines released",
        ] {
            XCTAssertTrue(log.contains(s), "missing \"\(s)\" in:\n\(log)")
        }
        XCTAssertFalse(log.contains("the kernel dropped") || log.contains("ring full"), "nothing lost:\n\(log)")
    }

    func testSIGTERMSetsSafeValuesAndExitsZero() throws {
        let p = try Spawned(["--config", "examples/demo.yaml"])
        XCTAssertTrue(p.waitFor("ready:"), p.log)
        p.signal(SIGTERM)
        XCTAssertEqual(p.exitStatus(), 0, p.log)
        XCTAssertTrue(p.log.contains("stopping (SIGTERM from pid"), p.log)
        XCTAssertTrue(p.log.contains("valve -> off (safe value)"), p.log)
        XCTAssertTrue(p.log.contains("stopped: 3 outputs at their safe values, 6 lines released"), p.log)
    }

    func testSIGHUPWithABadThenAGoodConfig() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("boardd-reload-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("c.yaml")
        let good = """
            board: demo
            lines:
              led: { pin: LED, output: { safe: off } }
              fan: { pin: FAN, output: {} }
            tasks:
              blink: { every: 100ms, do: [ toggle: led ] }

            """
        try good.write(to: file, atomically: true, encoding: .utf8)
        let p = try Spawned(["--config", file.path])
        XCTAssertTrue(p.waitFor("ready:"), p.log)
        try (good + "reactions:\n  - { on: { line: nosuch, press: true }, do: [ toggle: led ] }\n    bad: [\n")
            .write(to: file, atomically: true, encoding: .utf8)
        p.signal(SIGHUP)
        XCTAssertTrue(p.waitFor("reload refused"), p.log)
        XCTAssertTrue(p.log.contains("\(file.path):"), "errors name file:line:column:\n\(p.log)")
        try good.replacingOccurrences(of: "100ms", with: "50ms").write(to: file, atomically: true, encoding: .utf8)
        p.signal(SIGHUP)
        XCTAssertTrue(p.waitFor("reloaded \(file.path): 2 lines kept as they were, 0 requested, 0 released"), p.log)
        p.signal(SIGTERM)
        XCTAssertEqual(p.exitStatus(), 0, p.log)
    }

    func testCommandsTimeoutKillConcurrencyLimitAndNoZombies() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("boardd-cmd-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("c.yaml")
        try """
            board: demo
            lines:
              led: { pin: LED, output: {} }
            commands:
              sleep: { timeout: 300ms, kill_after: 200ms, max_running: 2 }
              env: { argv: ["/usr/bin/env"], max_running: 1 }
              stubborn: { argv: ["/bin/sh", "-c", "trap '' TERM; echo started; sleep 5"], timeout: 200ms, kill_after: 200ms }
            tasks:
              sleeper: { every: 100ms, do: [ run: ["/bin/sleep", "5"] ] }
              printer: { every: 700ms, do: [ run: env ] }
              trapper: { every: 2s, do: [ run: stubborn ] }

            """.write(to: file, atomically: true, encoding: .utf8)
        let p = try Spawned(["--config", file.path])
        XCTAssertTrue(p.waitFor("killed by SIGKILL (timeout)", seconds: 30), p.log)
        XCTAssertTrue(p.waitFor("BOARDD_TASK=printer"), "the environment reaches the child:\n\(p.log)")
        XCTAssertTrue(p.log.contains("still running after its timeout 300ms: SIGTERM"), p.log)
        XCTAssertTrue(p.log.contains("killed by SIGTERM (timeout)"), p.log)
        XCTAssertTrue(p.log.contains("(max_running 2); this run is refused"), p.log)
        XCTAssertTrue(p.log.contains("command stubborn") && p.log.contains("started"), p.log)
        // Sample the children a few times: never more than the limits, never
        // a zombie left over. A child is a zombie for the moment between its
        // exit and the pass that reaps it (its pidfd's dispatch); one seen in
        // a sample must be gone soon after (bounded, generous for a loaded
        // machine).
        var maxChildren = 0
        for _ in 0..<10 {
            let c = p.childPIDs()
            maxChildren = max(maxChildren, c.all.count)
            for z in c.zombies {
                let end = Date().addingTimeInterval(10)
                while p.childPIDs().zombies.contains(z) && Date() < end { usleep(10_000) }
                XCTAssertFalse(p.childPIDs().zombies.contains(z), "zombie child \(z) of boardd was not reaped")
            }
            usleep(50_000)
        }
        XCTAssertLessThanOrEqual(maxChildren, 4, "sleep 2 + env 1 + stubborn 1")
        p.signal(SIGTERM)
        XCTAssertEqual(p.exitStatus(), 0, p.log)
    }
}
