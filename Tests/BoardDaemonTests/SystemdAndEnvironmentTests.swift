import Boardloop
import BoardDaemon
import BoardloopTestSupport
import Foundation
import Glibc
import Logging
import XCTest

/// A `NOTIFY_SOCKET` of our own: an `AF_UNIX` datagram socket bound to a
/// fresh path; every receive has a deadline.
final class NotifyReceiver {
    let path: String
    private let fd: Int32

    init() throws {
        path = "/tmp/boardd-notify-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            let b = Array(path.utf8)
            for (i, c) in b.enumerated() { raw[i] = c }
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
    }

    deinit {
        close(fd)
        unlink(path)
    }

    /// The next datagram, or nil after `seconds`.
    func receive(seconds: Double) -> String? {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, Int32(seconds * 1000)) == 1 else { return nil }
        var buf = [UInt8](repeating: 0, count: 4096)
        let n = recv(fd, &buf, buf.count, 0)
        return n > 0 ? String(decoding: buf[0..<n], as: UTF8.self) : nil
    }

    /// Datagrams (with the monotonic time each arrived) until one satisfies
    /// `until` or `seconds` pass.
    func collect(seconds: Double, until: (String) -> Bool = { _ in false }) -> [(ns: UInt64, text: String)] {
        var out: [(UInt64, String)] = []
        let end = MonotonicInstant.now.nanoseconds + UInt64(seconds * 1e9)
        while true {
            let now = MonotonicInstant.now.nanoseconds
            guard now < end else { break }
            guard let d = receive(seconds: Double(end - now) / 1e9) else { break }
            out.append((MonotonicInstant.now.nanoseconds, d))
            if until(d) { break }
        }
        return out
    }
}

private func tempConfig(_ text: String) throws -> (URL, URL) {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("boardd-sd-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    let file = dir.appendingPathComponent("c.yaml")
    try text.write(to: file, atomically: true, encoding: .utf8)
    return (dir, file)
}

private let blinkConfig = """
    board: demo
    lines:
      led: { pin: LED, output: { safe: off } }
    tasks:
      blink: { every: 200ms, do: [ toggle: led ] }

    """

final class SystemdNotifyTests: XCTestCase {
    func testReadyStatusReloadingAndStopping() throws {
        let (dir, file) = try tempConfig(blinkConfig)
        defer { try? FileManager.default.removeItem(at: dir) }
        let sock = try NotifyReceiver()
        let p = try Spawned(["--config", file.path], env: ["NOTIFY_SOCKET": sock.path])
        let ready = sock.collect(seconds: 30) { $0.contains("READY=1") }
        let first = try XCTUnwrap(ready.last?.text, "no READY=1 within 30 s:\n\(p.log)")
        let fields = first.split(separator: "\n").map(String.init)
        XCTAssertTrue(fields.contains("READY=1"), first)
        XCTAssertTrue(fields.contains("MAINPID=\(p.process.processIdentifier)"), first)
        XCTAssertTrue(fields.contains("STATUS=1 lines, 1 tasks, 0 reactions; mode default"), first)
        XCTAssertTrue(p.waitFor("ready:"), "READY=1 comes with the ready log line:\n\(p.log)")

        p.signal(SIGHUP)
        let reload = sock.collect(seconds: 30) { $0.contains("READY=1") }.map(\.text)
        XCTAssertEqual(reload.count, 2, "RELOADING=1 then READY=1: \(reload)")
        XCTAssertTrue(reload.first?.split(separator: "\n").contains("RELOADING=1") ?? false, "\(reload)")
        XCTAssertTrue(reload.first?.contains("MONOTONIC_USEC=") ?? false, "RELOADING=1 carries MONOTONIC_USEC: \(reload)")
        XCTAssertTrue(reload.last?.split(separator: "\n").contains("READY=1") ?? false, "\(reload)")
        XCTAssertTrue(reload.last?.contains("STATUS=") ?? false, "\(reload)")

        p.signal(SIGTERM)
        let stop = sock.collect(seconds: 30) { $0.contains("STOPPING=1") }.map(\.text)
        XCTAssertTrue(stop.last?.split(separator: "\n").contains("STOPPING=1") ?? false, "\(stop)")
        XCTAssertEqual(p.exitStatus(), 0, p.log)
    }

    func testWatchdogPingsAtHalfTheInterval() throws {
        let (dir, file) = try tempConfig(blinkConfig)
        defer { try? FileManager.default.removeItem(at: dir) }
        let sock = try NotifyReceiver()
        // 400 ms: pings every 200 ms.
        let p = try Spawned(["--config", file.path], env: ["NOTIFY_SOCKET": sock.path, "WATCHDOG_USEC": "400000"])
        XCTAssertFalse(sock.collect(seconds: 30) { $0.contains("READY=1") }.isEmpty, p.log)
        let pings = sock.collect(seconds: 2.5).filter { $0.text == "WATCHDOG=1" }.map(\.ns)
        p.signal(SIGTERM)
        XCTAssertEqual(p.exitStatus(), 0, p.log)
        // 2.5 s at 200 ms is 12; a loaded machine may delay some, never add any.
        XCTAssertGreaterThanOrEqual(pings.count, 6, "pings: \(pings.count)")
        XCTAssertLessThanOrEqual(pings.count, 14, "pings: \(pings.count)")
        let gaps = zip(pings.dropFirst(), pings).map { Double($0 - $1) / 1e6 }.sorted()
        let median = gaps[gaps.count / 2]
        XCTAssertGreaterThanOrEqual(median, 150, "median gap \(median) ms (half the interval is 200 ms): \(gaps)")
        XCTAssertLessThanOrEqual(median, 320, "median gap \(median) ms (half the interval is 200 ms): \(gaps)")
    }

    func testNoWatchdogPingsWithoutWatchdogUSEC() throws {
        let (dir, file) = try tempConfig(blinkConfig)
        defer { try? FileManager.default.removeItem(at: dir) }
        let sock = try NotifyReceiver()
        let p = try Spawned(["--config", file.path], env: ["NOTIFY_SOCKET": sock.path])
        XCTAssertFalse(sock.collect(seconds: 30) { $0.contains("READY=1") }.isEmpty, p.log)
        let later = sock.collect(seconds: 1).map(\.text)
        p.signal(SIGTERM)
        XCTAssertEqual(p.exitStatus(), 0, p.log)
        XCTAssertFalse(later.contains("WATCHDOG=1"), "\(later)")
    }

    /// A handler stuck on a worker: the main loop stops pinging; once the
    /// worker runs passes again the pings resume. The config language has no
    /// blocking action, so the test stalls the worker with a perform request.
    func testWatchdogStopsWhileAWorkerIsStuck() throws {
        let sock = try NotifyReceiver()
        let result = ConfigLoader.load(
            text: """
                board: demo
                lines:
                  led: { pin: LED, output: { safe: off } }
                  valve: { pin: VALVE, output: { safe: off } }
                tasks:
                  blink: { every: 100ms, worker: io, do: [ toggle: valve ] }
                workers:
                  io: { lines: [valve] }

                """, file: "w.yaml")
        let config = try XCTUnwrap(result.config, "\(result.errors.map(\.description))")
        let log = Locked("")
        let shared = Locked<Daemon?>(nil)
        let release = Locked(false)
        let stuck = Locked(false)
        let done = Locked(false)
        let path = sock.path
        let thread = Thread {
            var logger = Logger(label: "t") { l in CollectingHandler(label: l, into: log) }
            logger.logLevel = .info
            do {
                let d = try Daemon(
                    config: config,
                    options: .init(
                        logger: logger, summaryInterval: nil, notifier: SystemdNotifier(socketPath: path),
                        watchdog: .milliseconds(200)))
                shared.withLock { $0 = d }
                try d.run(for: .seconds(20))
            } catch {
                log.withLock { $0 += "error: \(error)\n" }
            }
            shared.withLock { $0 = nil }
            done.withLock { $0 = true }
        }
        thread.start()
        defer {
            release.withLock { $0 = true }
            shared.withLock { d in
                if let d { _ = try? d.loop.perform(inModes: [.common]) { d.requestStop("test done") } }
            }
            let end = Date().addingTimeInterval(30)
            while !done.withLock({ $0 }) && Date() < end { usleep(10_000) }
        }
        XCTAssertFalse(sock.collect(seconds: 30) { $0.contains("READY=1") }.isEmpty, log.withLock { $0 })
        let before = sock.collect(seconds: 1.0).filter { $0.text == "WATCHDOG=1" }
        XCTAssertGreaterThanOrEqual(before.count, 2, "pings while every loop runs")
        let worker = try XCTUnwrap(shared.withLock { $0?.workerLoop("io") })
        try worker.perform(inModes: [.common]) {
            stuck.withLock { $0 = true }
            let end = MonotonicInstant.now.nanoseconds + 20_000_000_000
            while !release.withLock({ $0 }) && MonotonicInstant.now.nanoseconds < end { usleep(1000) }
        }
        let end = Date().addingTimeInterval(10)
        while !stuck.withLock({ $0 }) && Date() < end { usleep(1000) }
        XCTAssertTrue(stuck.withLock { $0 }, "the worker ran the stalling request")
        // The worker may have answered one ping before it stalled: at most one more ping, then none.
        let during = sock.collect(seconds: 1.5).filter { $0.text == "WATCHDOG=1" }
        XCTAssertLessThanOrEqual(during.count, 1, "pings while the worker is stuck: \(during.count)")
        XCTAssertTrue(log.withLock { $0 }.contains("watchdog: loop(s) io completed no pass"), log.withLock { $0 })
        release.withLock { $0 = true }
        let after = sock.collect(seconds: 5) { $0 == "WATCHDOG=1" }
        XCTAssertEqual(after.last?.text, "WATCHDOG=1", "pings resume once the worker runs again")
    }
}

/// Log lines into a `Locked<String>`.
struct CollectingHandler: LogHandler {
    let label: String
    let into: Locked<String>
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    init(label: String, into: Locked<String>) {
        self.label = label
        self.into = into
    }
    func log(event: LogEvent) {
        into.withLock { $0 += "\(event.message)\n" }
    }
}

final class JournalAndEnvironmentTests: XCTestCase {
    func testJournalStreamLinesCarryPriorityPrefixes() throws {
        let (dir, file) = try tempConfig(blinkConfig)
        defer { try? FileManager.default.removeItem(at: dir) }
        let p = try Spawned(["--config", file.path, "--for", "1s"], env: ["JOURNAL_STREAM": "8:12345"])
        XCTAssertEqual(p.exitStatus(seconds: 30), 0, p.log)
        let lines = p.log.split(separator: "\n")
        XCTAssertFalse(lines.isEmpty)
        for l in lines {
            XCTAssertNotNil(l.range(of: #"^<[0-7]>"#, options: .regularExpression), "no priority prefix: \(l)")
        }
        XCTAssertTrue(lines.contains { $0.hasPrefix("<5>ready: every loop is running") }, "notice is <5>:\n\(p.log)")
        XCTAssertTrue(lines.contains { $0.hasPrefix("<6>running ") }, "info is <6>:\n\(p.log)")

        let plain = try Spawned(["--config", file.path, "--for", "500ms"])
        XCTAssertEqual(plain.exitStatus(seconds: 30), 0, plain.log)
        XCTAssertFalse(plain.log.split(separator: "\n").contains { $0.hasPrefix("<") }, "no prefixes without JOURNAL_STREAM:\n\(plain.log)")
    }

    func testJournalWarningAndErrorPriorities() throws {
        // A warning (a config warning) and an error (a command that cannot start).
        let (dir, file) = try tempConfig(
            """
            board: demo
            lines:
              led: { pin: LED, output: { safe: off } }
            commands:
              boardd-test-program: {}
            tasks:
              t: { every: 100ms, do: [ run: ["/nonexistent/boardd-test-program"] ] }

            """)
        defer { try? FileManager.default.removeItem(at: dir) }
        let p = try Spawned(["--config", file.path, "--for", "1s"], env: ["JOURNAL_STREAM": "8:12345"])
        XCTAssertEqual(p.exitStatus(seconds: 30), 0, p.log)
        let lines = p.log.split(separator: "\n")
        XCTAssertTrue(lines.contains { $0.hasPrefix("<3>") && $0.contains("boardd-test-program") }, "an error is <3>:\n\(p.log)")
    }
}
