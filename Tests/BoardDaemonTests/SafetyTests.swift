import Boardloop
import BoardDaemon
import BoardloopGPIOMock
import BoardloopTestSupport
import Foundation
import Glibc
import Logging
import XCTest

/// A config file in a temporary directory, rewritten by the test between
/// reloads (written to a new file and renamed over the old, as an editor
/// that saves atomically does).
final class ConfigFile {
    let dir: URL
    let url: URL
    var path: String { url.path }

    init(_ text: String) throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent(
            "boardd-safety-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        url = dir.appendingPathComponent("config.yaml")
        try write(text)
    }

    deinit { try? FileManager.default.removeItem(at: dir) }

    func write(_ text: String) throws {
        let tmp = dir.appendingPathComponent("config.yaml.new")
        try text.write(to: tmp, atomically: false, encoding: .utf8)
        XCTAssertEqual(rename(tmp.path, url.path), 0)
    }
}

/// Outputs are never left unsafe by a reload, a stop or a signal.
final class SafetyTests: XCTestCase {
    static let pour = """
        board: demo
        priorities: [low, high]
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true, debounce: 0ms }, priority: high }
          valve: { pin: VALVE, output: { initial: off, safe: off } }
          led: { pin: LED, output: { initial: off, safe: off } }
          fan: { pin: FAN, output: { initial: off, safe: off } }
        modes:
          critical: { admits: [high] }
        sequences:
          pour:
            mode: critical
            steps:
              - set: { valve: on }
              - wait: 2s
              - set: { valve: off }
        reactions:
          - on: { line: button, press: true }
            do: [{ sequence: pour }]

        """

    private func harness(_ file: ConfigFile) throws -> Harness {
        try Harness(path: file.path)
    }

    // MARK: Reload with a sequence in flight

    /// A reload 1 s into a 2 s sequence whose steps changed stops it, and
    /// the valve it had set on goes to its safe value at the reload (not
    /// at the old sequence's end, and not never).
    func testReloadStopsAChangedSequenceAndSetsItsOutputsSafe() throws {
        let file = try ConfigFile(Self.pour)
        let h = try harness(file)
        try h.press()
        try h.advance(1000)
        XCTAssertEqual(try h.writes("VALVE"), [true])
        XCTAssertEqual(h.daemon.mainMode, "critical")
        try file.write(Self.pour.replacingOccurrences(of: "wait: 2s", with: "wait: 3s"))
        h.daemon.reload()
        XCTAssertEqual(h.daemon.reloads.applied, 1, h.log)
        XCTAssertEqual(try h.writes("VALVE"), [true, false], "the valve goes safe at the reload")
        XCTAssertEqual(h.daemon.mainMode, "default", "the stopped sequence's mode ends")
        try h.advance(4000)
        XCTAssertEqual(try h.writes("VALVE"), [true, false], "nothing of the old run comes back")
        XCTAssertEqual(h.counters.sequence["pour"]?.running, 0)
    }

    /// The same reload, but of a config whose `pour` did not change: the
    /// sequence goes on, in its mode, and the valve goes off exactly when
    /// its wait ends (2 s after the start), once.
    func testReloadLetsAnUnchangedSequenceRunToItsEnd() throws {
        let file = try ConfigFile(Self.pour)
        let h = try harness(file)
        try h.press()
        try h.advance(1000)
        // Something else changes (the fan's settings), pour does not.
        try file.write(Self.pour.replacingOccurrences(
            of: "fan: { pin: FAN, output: { initial: off, safe: off } }", with: "fan: { pin: FAN, output: { initial: on, safe: off } }"))
        h.daemon.reload()
        XCTAssertEqual(h.daemon.reloads.applied, 1, h.log)
        XCTAssertTrue(h.log.contains("sequence pour: goes on under the new config"), h.log)
        XCTAssertEqual(h.daemon.mainMode, "critical", "the sequence's mode stays through the reload")
        XCTAssertEqual(try h.writes("VALVE"), [true])
        try h.advance(990)
        XCTAssertEqual(try h.writes("VALVE"), [true], "still within the 2 s wait")
        try h.advance(20)
        XCTAssertEqual(try h.writes("VALVE"), [true, false], "off when the wait ends")
        XCTAssertEqual(h.daemon.mainMode, "default")
        XCTAssertEqual(h.counters.sequence["pour"]?.completed, 1)
    }

    /// A sequence the new config no longer has is stopped and its valve set safe.
    func testReloadWithoutTheSequenceSetsItsOutputsSafe() throws {
        let file = try ConfigFile(Self.pour)
        let h = try harness(file)
        try h.press()
        try h.advance(500)
        let without = Self.pour.components(separatedBy: "sequences:")[0]
            + """
            reactions:
              - on: { line: button, press: true }
                do: [{ set: { led: on } }]

            """
        try file.write(without)
        h.daemon.reload()
        XCTAssertEqual(try h.writes("VALVE"), [true, false])
    }

    // MARK: Reload with a pulse in flight

    static let pulse = """
        board: demo
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true, debounce: 0ms } }
          led: { pin: LED, output: { initial: off } }
          fan: { pin: FAN, output: { initial: off } }
        reactions:
          - on: { line: button, press: true }
            do: [{ pulse: { led: 2s } }]

        """

    /// A reload 0.5 s into a 2 s pulse, of a config that still pulses the
    /// line: the LED goes off when the pulse would have ended.
    func testReloadKeepsAPulseOnAKeptLine() throws {
        let file = try ConfigFile(Self.pulse)
        let h = try harness(file)
        try h.press()
        try h.advance(500)
        try file.write(Self.pulse.replacingOccurrences(of: "fan: { pin: FAN, output: { initial: off } }", with: "fan: { pin: FAN, output: { initial: on } }"))
        h.daemon.reload()
        XCTAssertEqual(h.daemon.reloads.applied, 1, h.log)
        XCTAssertEqual(try h.writes("LED"), [true])
        try h.advance(1490)
        XCTAssertEqual(try h.writes("LED"), [true])
        try h.advance(20)
        XCTAssertEqual(try h.writes("LED"), [true, false], "off at the pulse's end")
    }

    /// A reload 0.5 s into the pulse, of a config that no longer pulses the
    /// LED: the pulse ends at the reload (the LED does not stay on).
    func testReloadEndsAPulseTheNewConfigDoesNotHave() throws {
        let file = try ConfigFile(Self.pulse)
        let h = try harness(file)
        try h.press()
        try h.advance(500)
        try file.write(Self.pulse.replacingOccurrences(of: "do: [{ pulse: { led: 2s } }]", with: "do: [{ toggle: fan }]"))
        h.daemon.reload()
        XCTAssertEqual(try h.writes("LED"), [true, false])
        try h.advance(3000)
        XCTAssertEqual(try h.writes("LED"), [true, false])
    }

    // MARK: Reload that drops an output

    /// An output the new config drops is set to its safe value before its
    /// line is released.
    func testReloadThatDropsAnOutputSetsItsSafeValueFirst() throws {
        let config = """
            board: demo
            lines:
              button: { pin: BUTTON, input: { edge: both, active_low: true, debounce: 0ms } }
              fan: { pin: FAN, output: { initial: off, safe: off } }
            reactions:
              - on: { line: button, press: true }
                do: [{ set: { fan: on } }]

            """
        let file = try ConfigFile(config)
        let h = try harness(file)
        try h.press()
        XCTAssertEqual(try h.writes("FAN"), [true])
        try file.write(
            """
            board: demo
            lines:
              button: { pin: BUTTON, input: { edge: both, active_low: true, debounce: 0ms } }

            """)
        h.daemon.reload()
        XCTAssertEqual(try h.writes("FAN"), [true, false], "the fan is set safe before it is released")
    }

    // MARK: Queued starts

    /// Each queued start of a sequence keeps the context it was started
    /// with: three starts from three lines run with three BOARDD_LINE values.
    func testQueuedStartsKeepTheirOwnContext() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("boardd-queue-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let h = try Harness(
            """
            board: demo
            lines:
              button: { pin: BUTTON, input: { edge: both, active_low: true, debounce: 0ms } }
              estop: { pin: ESTOP, input: { edge: both, debounce: 0ms } }
              chatter: { pin: CHATTER, input: { edge: both, debounce: 0ms } }
            commands:
              note: { argv: ["/bin/sh", "-c", "echo $BOARDD_LINE > \(dir.path)/$$"], max_running: 3 }
            sequences:
              greet:
                policy: queued
                max: 3
                steps:
                  - run: note
                  - wait: 1s
            reactions:
              - on: { line: button, press: true }
                do: [{ sequence: greet }]
              - on: { line: estop, press: true }
                do: [{ sequence: greet }]
              - on: { line: chatter, press: true }
                do: [{ sequence: greet }]

            """)
        try h.press()
        for pin in ["ESTOP", "CHATTER"] {
            try h.setLevel(pin, false)
            try h.setLevel(pin, true)
        }
        XCTAssertEqual(h.counters.sequence["greet"]?.queued, 2)
        try h.advance(3500)
        let end = Date().addingTimeInterval(30)
        var lines: [String] = []
        repeat {
            let files = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
            lines = files.compactMap { try? String(contentsOfFile: dir.appendingPathComponent($0).path, encoding: .utf8) }
                .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }.filter { !$0.isEmpty }
            if lines.count >= 3 { break }
            try h.daemon.settle()
            usleep(5000)
        } while Date() < end
        XCTAssertEqual(lines.sorted(), ["button", "chatter", "estop"], "each run has its own start's line")
    }

    // MARK: Stop

    /// A worker stuck in a handler does not hang the stop: the stop ends
    /// within its budget, says which worker is stuck, sets the worker's
    /// outputs to their safe values from the main thread and is not clean.
    func testStopWithAStuckWorkerIsBoundedAndSetsItsOutputsSafe() throws {
        // Two outputs of one request on the worker: the second's safe value
        // is written by its index.
        let h = try Harness(OutputGroupTests.onAWorker, stopTimeout: .milliseconds(600))
        try h.press()
        let end = Date().addingTimeInterval(30)
        try h.waitForWrites("FAN", [true])
        XCTAssertEqual(try h.writes("VALVE"), [true])
        XCTAssertEqual(try h.writes("FAN"), [true])
        // The worker blocks in a handler until the test lets it go.
        let release = Locked(false)
        let entered = Locked(false)
        try h.daemon.workerLoop("io")!.perform(inModes: [.common]) {
            entered.withLock { $0 = true }
            while !release.withLock({ $0 }) { usleep(1000) }
        }
        while !entered.withLock({ $0 }) && Date() < end { usleep(1000) }
        let t0 = Date()
        let clean = h.daemon.shutdown()
        let took = Date().timeIntervalSince(t0)
        release.withLock { $0 = true }
        XCTAssertFalse(clean, "a stop with a stuck worker is not clean")
        XCTAssertLessThan(took, 10, "the stop is bounded by its budget (0.6 s asked), not by the stuck handler")
        XCTAssertEqual(try h.writes("VALVE").last, false, "the stuck worker's valve is set safe from the main thread")
        XCTAssertEqual(try h.writes("FAN").last, false, "and its fan, the second line of the same request")
        XCTAssertTrue(h.log.contains("worker 'io' is stuck in"), h.log)
        // Once its handler returns, the stopped worker ends and is joined.
        XCTAssertTrue(h.daemon.joinStuckWorkers(within: .seconds(20)), "the stuck worker ends once its handler returns")
    }

    /// On SIGTERM the outputs go to their safe values before the children
    /// (which ignore SIGTERM) are dealt with, and the stop does not wait
    /// one child after another.
    func testSIGTERMSetsOutputsSafeBeforeStubbornChildrenAreStopped() throws {
        let file = try ConfigFile(
            """
            board: demo
            lines:
              valve: { pin: VALVE, output: { initial: on, safe: off } }
            commands:
              stubborn: { argv: ["/bin/sh", "-c", "trap '' TERM; while :; do sleep 0.05; done"], max_running: 8, timeout: 1h, kill_after: 1s }
            tasks:
              spawn: { every: 50ms, do: [{ run: stubborn }] }

            """)
        let p = try Spawned(["--config", file.path, "--log-level", "info"])
        XCTAssertTrue(p.waitFor("ready:"), p.log)
        let end = Date().addingTimeInterval(30)
        while p.log.components(separatedBy: ": started:").count - 1 < 8 && Date() < end { usleep(20_000) }
        p.signal(SIGTERM)
        XCTAssertEqual(p.exitStatus(seconds: 30), 0, p.log)
        let log = p.log
        guard let safe = log.range(of: "valve -> off (safe value)") else { return XCTFail("no safe value set:\n\(log)") }
        let childEnd = ["SIGKILL", "killed by"].compactMap { log.range(of: $0)?.lowerBound }.min()
        XCTAssertNotNil(childEnd, "the stubborn children were killed:\n\(log)")
        if let childEnd { XCTAssertLessThan(safe.lowerBound, childEnd, "safe values first, then the children:\n\(log)") }
    }

    // MARK: Signals

    /// Signals whose default would end boardd without safe values: the
    /// ignored ones are logged and boardd runs on; SIGQUIT and SIGPWR stop
    /// it as SIGTERM does, outputs to their safe values, exit 0.
    func testSignalsThatWouldKillAreIgnoredOrStopSafely() throws {
        for stop in [SIGQUIT, SIGPWR] {
            let p = try Spawned(["--config", "examples/demo.yaml"])
            XCTAssertTrue(p.waitFor("ready:"), p.log)
            for sig in [SIGUSR1, SIGUSR2, SIGALRM] {
                p.signal(sig)
                XCTAssertTrue(p.waitFor("\(SignalMask.name(sig)) from pid \(getpid()) ignored"), p.log)
            }
            p.signal(SignalMask.realtimeRange.lowerBound + 3)
            XCTAssertTrue(p.waitFor("ignored (boardd stops on", seconds: 20), p.log)
            p.signal(stop)
            XCTAssertEqual(p.exitStatus(), 0, p.log)
            XCTAssertTrue(p.log.contains("stopping (\(SignalMask.name(stop)) from pid"), p.log)
            XCTAssertTrue(p.log.contains("valve -> off (safe value)"), p.log)
            XCTAssertTrue(p.log.contains("stopped: 3 outputs at their safe values"), p.log)
        }
    }

    // MARK: --safe-outputs

    /// `boardd --safe-outputs` sets every output's safe value and exits 0.
    func testSafeOutputsSetsEverySafeValue() throws {
        let p = try Spawned(["--safe-outputs", "--config", "examples/demo.yaml"])
        XCTAssertEqual(p.exitStatus(), 0, p.log)
        XCTAssertTrue(p.log.contains("valve -> off (safe value)"), p.log)
        XCTAssertTrue(p.log.contains("safe outputs: 3 set, 0 failed"), p.log)
    }

    /// The same in process: each safe value is written to its line.
    func testSetSafeOutputsWritesEachLine() throws {
        let config = try XCTUnwrap(ConfigLoader.load(text: Self.pour, file: "test.yaml").config)
        let mock = try Demo.makeChips()
        let logger = Logger(label: "test") { l in BoarddLogHandler(label: l, level: .critical, journal: false) }
        let r = Daemon.setSafeOutputs(config, gpio: mock, logger: logger)
        XCTAssertEqual(r.set, 3)
        XCTAssertEqual(r.failed, 0)
        for pin: UInt32 in [5, 27, 6] {
            XCTAssertEqual(try mock.chips[0].outputHistory(.offset(pin)).last?.value, false)
        }
    }
}
