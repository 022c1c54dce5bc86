import Boardloop
import BoardDaemon
import Foundation
import Glibc
import XCTest

/// A fresh temporary directory (removed by the caller).
private func tempDir(_ tag: String) throws -> URL {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("boardd-\(tag)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return dir
}

/// `/proc/PID/stat`'s state and process group, or nil when there is no such process.
private func procStat(_ pid: pid_t) -> (state: Character, pgrp: pid_t)? {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else {
        return nil
    }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 3, let state = fields[0].first, let pgrp = pid_t(fields[2]) else { return nil }
    return (state, pgrp)
}

/// True while `pid` runs. A process that is gone (ESRCH) or a zombie is
/// not running: an orphan is reparented to PID 1, which reaps it, except
/// in a container whose init does not, where it stays a zombie (dead all
/// the same).
private func isRunning(_ pid: pid_t) -> Bool {
    if kill(pid, 0) != 0 && errno == ESRCH { return false }
    guard let s = procStat(pid) else { return false }
    return s.state != "Z"
}

/// Processes of process group `pgrp` that still run (not zombies).
private func runningInGroup(_ pgrp: pid_t) -> [pid_t] {
    ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { entry -> pid_t? in
        guard let pid = pid_t(entry), let s = procStat(pid), s.pgrp == pgrp, s.state != "Z" else { return nil }
        return pid
    }
}

/// Polls `cond` (running the harness's main loop between polls) until it
/// holds or `seconds` of real time pass; returns whether it held.
@discardableResult
private func poll(_ h: Harness?, seconds: Double = 30, _ cond: () throws -> Bool) throws -> Bool {
    let end = Date().addingTimeInterval(seconds)
    while true {
        try h?.daemon.settle()
        if try cond() { return true }
        if Date() >= end { return false }
        usleep(5000)
    }
}

/// Reads a pid a child wrote into `path` (written to a temporary name and
/// renamed, so it is whole once it exists).
private func readPid(_ path: String) -> pid_t? {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
    return pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines))
}

/// The number after `prefix` in `log` (e.g. "task tick: " -> its runs).
private func number(after prefix: String, in log: String) -> Int? {
    guard let r = log.range(of: prefix) else { return nil }
    return Int(log[r.upperBound...].prefix { $0.isNumber })
}

final class CommandSafetyTests: XCTestCase {
    // MARK: Blocking pipes for the child

    /// A command writing far more than a pipe holds (about 588 KB) gets
    /// blocking stdout: it is not told EAGAIN ("write error: Resource
    /// temporarily unavailable"), it exits 0, and every line past the
    /// logged 200 is counted.
    func testCommandWritingMoreThanAPipeHoldsExitsZero() throws {
        let file = try ConfigFile(
            """
            board: demo
            lines:
              led: { pin: LED, output: {} }
            commands:
              seq: { argv: ["/usr/bin/seq", "1", "100000"] }
            tasks:
              counter: { every: 200ms, do: [ run: seq ] }

            """)
        let p = try Spawned(["--config", file.path])
        XCTAssertTrue(p.waitFor("exited with status", seconds: 30), p.log)
        p.signal(SIGTERM)
        XCTAssertEqual(p.exitStatus(seconds: 30), 0, p.log)
        let log = p.log
        let exits = log.split(separator: "\n").filter { $0.contains("command seq [pid") && $0.contains("exited with status") }
        XCTAssertFalse(exits.isEmpty, log)
        for line in exits { XCTAssertTrue(line.contains("exited with status 0"), "\(line)\n\(log)") }
        XCTAssertFalse(log.contains("Resource temporarily unavailable"), log)
        XCTAssertTrue(log.contains("99800 more stdout lines"), "100000 lines, 200 logged:\n\(log)")
    }

    /// The exit status logged is the child's, also when its pipes reach
    /// their end while what is left in them is read after the exit.
    func testExitStatusIsTheChildsWhenItsPipesCloseAfterItsExit() throws {
        let file = try ConfigFile(
            """
            board: demo
            lines:
              led: { pin: LED, output: {} }
            commands:
              three: { argv: ["echo out; echo err >&2; exit 3"], shell: true, max_running: 4 }
            tasks:
              runner: { every: 20ms, do: [ run: three ] }

            """)
        let p = try Spawned(["--config", file.path])
        let end = Date().addingTimeInterval(30)
        func exits() -> [Substring] {
            p.log.split(separator: "\n").filter { $0.contains("command three [pid") && $0.contains("exited with status") }
        }
        while exits().count < 20 && Date() < end { usleep(20_000) }
        p.signal(SIGTERM)
        XCTAssertEqual(p.exitStatus(seconds: 30), 0, p.log)
        let all = exits()
        XCTAssertGreaterThanOrEqual(all.count, 20, p.log)
        for line in all { XCTAssertTrue(line.contains("exited with status 3"), "\(line)") }
    }

    // MARK: Process groups

    /// The timeout signals the child's process group: a grandchild (here a
    /// shell's `sleep`, which the shell waits for) goes too.
    func testTimeoutSignalsTheWholeProcessGroup() throws {
        let dir = try tempDir("cmd-pgrp")
        defer { try? FileManager.default.removeItem(at: dir) }
        let f = dir.appendingPathComponent("grandchild").path
        let h = try Harness(
            """
            board: demo
            lines:
              button: { pin: BUTTON, input: { edge: both, active_low: true }, priority: low }
              led: { pin: LED, output: {} }
            commands:
              tree: { argv: ["/bin/sh", "-c", "/bin/sh -c 'echo $$ > \(f).tmp && mv \(f).tmp \(f) && exec sleep 3600'; true"], timeout: 1s, kill_after: 1s }
            reactions:
              - name: go
                on: { line: button, press: true }
                do: [ run: tree ]

            """)
        try h.press()
        XCTAssertEqual(h.counters.commandsStarted["tree"], 1)
        var grandchild: pid_t?
        XCTAssertTrue(try poll(h) { grandchild = readPid(f); return grandchild != nil }, "the grandchild wrote its pid")
        let g = try XCTUnwrap(grandchild)
        defer { kill(g, SIGKILL) }
        XCTAssertTrue(isRunning(g))
        try h.advance(1100)  // past the timeout: SIGTERM
        XCTAssertTrue(try poll(h) { h.counters.commandsRunning == 0 }, "the command was reaped")
        XCTAssertTrue(try poll(h) { !isRunning(g) }, "the grandchild \(g) got the timeout's SIGTERM too")
    }

    /// Stopping the daemon signals every child's process group.
    func testStopSignalsTheWholeProcessGroup() throws {
        let dir = try tempDir("cmd-pgrp-stop")
        defer { try? FileManager.default.removeItem(at: dir) }
        let f = dir.appendingPathComponent("grandchild").path
        var h: Harness? = try Harness(
            """
            board: demo
            lines:
              button: { pin: BUTTON, input: { edge: both, active_low: true }, priority: low }
              led: { pin: LED, output: {} }
            commands:
              tree: { argv: ["/bin/sh", "-c", "/bin/sh -c 'echo $$ > \(f).tmp && mv \(f).tmp \(f) && exec sleep 3600'; true"] }
            reactions:
              - name: go
                on: { line: button, press: true }
                do: [ run: tree ]

            """)
        try h?.press()
        var grandchild: pid_t?
        XCTAssertTrue(try poll(h) { grandchild = readPid(f); return grandchild != nil }, "the grandchild wrote its pid")
        let g = try XCTUnwrap(grandchild)
        defer { kill(g, SIGKILL) }
        XCTAssertTrue(isRunning(g))
        h = nil  // shutdown
        XCTAssertTrue(try poll(nil) { !isRunning(g) }, "the grandchild \(g) was stopped with the daemon")
    }

    // MARK: Bounded reads

    /// A command flooding stdout and stderr does not starve the main loop:
    /// a 10 ms task keeps running through the flood, `--for` stops the
    /// daemon, and the lines not logged are counted.
    func testFloodingCommandDoesNotStarveTheMainLoop() throws {
        let file = try ConfigFile(
            """
            board: demo
            lines:
              led: { pin: LED, output: {} }
            commands:
              flood: { argv: ["yes out & yes err >&2"], shell: true }
            tasks:
              starter: { every: 100ms, do: [ run: flood ] }
              tick: { every: 10ms, do: [ toggle: led ] }

            """)
        let started = Date()
        let p = try Spawned(["--config", file.path, "--for", "3s", "--log-level", "info"])
        let status = p.exitStatus(seconds: 40)
        let took = Date().timeIntervalSince(started)
        let log = p.log
        XCTAssertEqual(status, 0, "boardd stops after --for 3s even during the flood (took \(took) s):\n\(log.suffix(3000))")
        XCTAssertLessThan(took, 20, "--for 3s, then the stop")
        XCTAssertTrue(log.contains("command flood [pid") && log.contains(": started: /bin/sh -c"), String(log.suffix(3000)))
        // 3 s of a 10 ms task is about 300 runs; a loaded machine gets fewer, a starved loop none.
        let runs = number(after: "task tick: ", in: log) ?? 0
        XCTAssertGreaterThanOrEqual(runs, 30, "the task ran during the flood:\n\(log.suffix(3000))")
        XCTAssertTrue(log.contains("more stdout lines") && log.contains("more stderr lines"), "unlogged lines are counted:\n\(log.suffix(3000))")
    }

    // MARK: Environment

    /// A child does not inherit the daemon's systemd notify and watchdog
    /// variables (it could report READY or pet the watchdog for boardd).
    func testChildDoesNotInheritNotifySocketOrWatchdog() throws {
        let file = try ConfigFile(
            """
            board: demo
            lines:
              led: { pin: LED, output: {} }
            commands:
              env: { argv: ["/usr/bin/env"] }
            tasks:
              printer: { every: 200ms, do: [ run: env ] }

            """)
        let sock = try NotifyReceiver()
        let p = try Spawned(
            ["--config", file.path],
            env: ["NOTIFY_SOCKET": sock.path, "WATCHDOG_USEC": "60000000", "WATCHDOG_PID": "1"])
        XCTAssertTrue(p.waitFor("BOARDD_TASK=printer", seconds: 30), p.log)
        XCTAssertTrue(p.waitFor("exited with status 0", seconds: 30), p.log)
        p.signal(SIGTERM)
        XCTAssertEqual(p.exitStatus(seconds: 30), 0, p.log)
        let lines = p.log.split(separator: "\n").filter { $0.contains("command env [pid") }
        XCTAssertTrue(lines.contains { $0.contains("PATH=") }, "the environment is passed on:\n\(p.log)")
        for v in ["NOTIFY_SOCKET=", "WATCHDOG_USEC=", "WATCHDOG_PID="] {
            XCTAssertFalse(lines.contains { $0.contains(v) }, "\(v) reached the child:\n\(lines.joined(separator: "\n"))")
        }
    }

    // MARK: Reload

    /// Running children are charged to their command by name: after a
    /// reload that reorders the commands, the running `a` still counts
    /// toward `a` (a second `a` is refused) and `b` can start.
    func testReloadThatReordersCommandsKeepsRunningChildrenWithTheirCommand() throws {
        func config(_ commands: [String]) -> String {
            """
            board: demo
            lines:
              button: { pin: BUTTON, input: { edge: both, active_low: true }, priority: low }
              estop: { pin: ESTOP, input: { edge: both, active_low: true }, priority: low }
              led: { pin: LED, output: {} }
            commands:
            \(commands.map { "  \($0): { argv: [\"/bin/sleep\", \"3600\"], max_running: 1 }" }.joined(separator: "\n"))
            reactions:
              - name: run a
                on: { line: button, press: true }
                do: [ run: a ]
              - name: run b
                on: { line: estop, press: true }
                do: [ run: b ]

            """
        }
        let file = try ConfigFile(config(["a", "b"]))
        let h = try Harness(path: file.path)
        try h.press()
        XCTAssertEqual(h.counters.commandsStarted["a"], 1)
        XCTAssertEqual(h.counters.commandsRunning, 1)
        try h.advance(20)
        try h.press(false)
        try h.advance(20)

        try file.write(config(["b", "a"]))
        h.daemon.reload()
        XCTAssertEqual(h.daemon.reloads.applied, 1)
        XCTAssertEqual(h.daemon.config.commands.map(\.name), ["b", "a"])

        try h.press()  // a again: a is still running
        XCTAssertEqual(h.counters.commandsRefused["a"], 1, "the running a counts toward a")
        XCTAssertEqual(h.counters.commandsStarted["a"], 0)
        try h.setLevel("ESTOP", false)  // press estop: b
        XCTAssertEqual(h.counters.commandsStarted["b"], 1, "nothing runs for b")
        XCTAssertEqual(h.counters.commandsRefused["b"], 0)
        XCTAssertEqual(h.counters.commandsRunning, 2)
    }

    /// A child whose command a reload removed counts toward no command
    /// and still ends under the limits it started with (its timeout).
    func testChildOfARemovedCommandFinishesUnderItsOldLimits() throws {
        func config(_ commands: [String]) -> String {
            """
            board: demo
            lines:
              button: { pin: BUTTON, input: { edge: both, active_low: true }, priority: low }
              led: { pin: LED, output: {} }
            commands:
            \(commands.joined(separator: "\n"))
            reactions:
              - name: run b
                on: { line: button, press: true }
                do: [ run: b ]

            """
        }
        let a = "  a: { argv: [\"/bin/sleep\", \"3600\"], timeout: 1s, kill_after: 1s }"
        let b = "  b: { argv: [\"/bin/sleep\", \"3600\"] }"
        let file = try ConfigFile(config([a, b]) + "tasks:\n  once: { every: 10ms, do: [ run: a ] }\n")
        let h = try Harness(path: file.path)
        try h.advance(15)
        XCTAssertEqual(h.counters.commandsStarted["a"], 1)
        try file.write(config([b]))
        h.daemon.reload()
        XCTAssertEqual(h.daemon.config.commands.map(\.name), ["b"])
        XCTAssertEqual(h.counters.commandsRunning, 1, "a's child still runs")
        try h.press()
        XCTAssertEqual(h.counters.commandsStarted["b"], 1, "a's child does not count toward b")
        try h.advance(1100)  // past a's timeout: SIGTERM
        XCTAssertTrue(try poll(h) { h.counters.commandsRunning == 1 }, "a's child was stopped by its timeout")
    }

    // MARK: Stop

    /// Stopping 8 children that ignore SIGTERM (the shell and everything
    /// it starts) with kill_after 1s takes one kill_after, not 8: SIGTERM
    /// goes to every group at once, SIGKILL to each group 1 s later, and
    /// nothing of any group survives.
    func testStopKillsStubbornChildrenConcurrently() throws {
        let dir = try tempDir("cmd-stop")
        defer { try? FileManager.default.removeItem(at: dir) }
        let d = dir.path
        var h: Harness? = try Harness(
            """
            board: demo
            lines:
              button: { pin: BUTTON, input: { edge: both, active_low: true }, priority: low }
              led: { pin: LED, output: {} }
            commands:
              stubborn: { argv: ["/bin/sh", "-c", "trap '' TERM; echo $$ > \(d)/$$.tmp && mv \(d)/$$.tmp \(d)/$$.pid; while :; do sleep 0.1; done"], kill_after: 1s, max_running: 8 }
            reactions:
              - name: go
                on: { line: button, press: true }
                do: [ run: stubborn ]

            """)
        for _ in 0..<8 {
            try h?.press()
            try h?.advance(20)
            try h?.press(false)
            try h?.advance(20)
        }
        XCTAssertEqual(h?.counters.commandsStarted["stubborn"], 8)
        var pids: [pid_t] = []
        XCTAssertTrue(
            try poll(h) {
                pids = ((try? FileManager.default.contentsOfDirectory(atPath: d)) ?? []).filter { $0.hasSuffix(".pid") }
                    .compactMap { readPid("\(d)/\($0)") }
                return pids.count == 8
            }, "every child ignores SIGTERM (wrote its pid after its trap)")
        defer { for p in pids { kill(-p, SIGKILL) } }
        let start = MonotonicInstant.now
        h = nil  // shutdown
        let took = MonotonicInstant.now - start
        XCTAssertLessThan(took, .seconds(5), "the children are stopped together, not one kill_after after another")
        XCTAssertGreaterThanOrEqual(took, .milliseconds(950), "SIGKILL waits kill_after after SIGTERM")
        for p in pids { XCTAssertFalse(isRunning(p), "child \(p) was reaped") }
        XCTAssertTrue(try poll(nil) { pids.allSatisfy { runningInGroup($0).isEmpty } }, "nothing of any child's group survives")
    }
}
