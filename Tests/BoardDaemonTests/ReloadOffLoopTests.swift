import Boardloop
import BoardloopTestSupport
@testable import BoardDaemon
import Foundation
import Glibc
import XCTest

/// A reload reads and checks its file on a thread of its own: the main
/// loop serves its sources meanwhile, a stop does not wait for the read,
/// and requests made during a read are served by one more read.
final class ReloadOffLoopTests: XCTestCase {
    /// Holds each reload's read before it reads, until the test opens it.
    final class ReadGate: @unchecked Sendable {
        private let state = Locked((entered: 0, opened: 0))

        /// On the read's thread: counts the read, waits until it may go on.
        func pass() {
            let n = state.withLock { s -> Int in
                s.entered += 1
                return s.entered
            }
            while state.withLock({ $0.opened }) < n { usleep(500) }
        }

        var entered: Int { state.withLock { $0.entered } }
        /// Lets the next held read go on.
        func openOne() { state.withLock { $0.opened += 1 } }
        func openAll() { state.withLock { $0.opened = .max } }

        /// Waits (the daemon's loop driven) until `n` reads have started.
        func waitEntered(_ n: Int, _ h: Harness, within seconds: Double = 30) throws -> Bool {
            let end = Date().addingTimeInterval(seconds)
            while entered < n && Date() < end {
                try h.daemon.settle()
                usleep(1000)
            }
            return entered >= n
        }
    }

    var dir = ""
    var file: String { dir + "/c.yaml" }
    var socketPath: String { dir + "/boardd.sock" }

    override func setUpWithError() throws {
        var template = Array("/tmp/boardd-reload-XXXXXX".utf8CString)
        guard let p = mkdtemp(&template) else { throw POSIXError(.EIO) }
        dir = String(cString: p)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: dir) }

    static func yaml(log text: String) -> String {
        """
        board: demo
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true } }
          valve: { pin: VALVE, output: { initial: off, safe: off } }
        reactions:
          - name: press opens
            on: { line: button, press: true }
            do: [ set: { valve: on }, log: "\(text)" ]
        """
    }

    func harness(_ gate: ReadGate, control: Bool = true) throws -> Harness {
        try Self.yaml(log: "first").write(toFile: file, atomically: true, encoding: .utf8)
        return try Harness(
            result: ConfigLoader.load(path: file), level: .notice, eventModel: .v2, logger: nil, stopTimeout: .seconds(10),
            control: control ? ControlServer.Options(path: socketPath) : nil, configure: { $0.reloadReadStarts = { gate.pass() } },
            file: #filePath, line: #line)
    }

    /// While a read is held, the main loop answers another client and
    /// reacts to an edge; the reload's own client gets its reply once the
    /// read is let go, and the new config is in force.
    func testTheMainLoopServesWhileAReloadIsRead() throws {
        let gate = ReadGate()
        let h = try harness(gate)
        try Self.yaml(log: "second").write(toFile: file, atomically: true, encoding: .utf8)
        let asker = try ControlClient(socketPath)
        try asker.send(#"{"v":1,"id":7,"cmd":"reload"}"# + "\n", h)
        XCTAssertTrue(try gate.waitEntered(1, h), "the read started")
        XCTAssertEqual(asker.lines(), [], "no reply before the read ends")

        // The loop goes on: another client is answered, an edge reacted to.
        let other = try ControlClient(socketPath)
        XCTAssertEqual(try other.request(#"{"v":1,"cmd":"ping"}"#, h)["pong"] as? Bool, true)
        try h.press()
        try h.daemon.settle()
        XCTAssertEqual(try h.writes("VALVE").last, true)
        XCTAssertEqual(h.daemon.reloads.applied, 0, "nothing applied while the read is held")

        gate.openOne()
        let reply = try ControlTests.object(try XCTUnwrap(try asker.replies(h).first))
        XCTAssertEqual(reply["id"] as? Int, 7)
        XCTAssertEqual(reply["applied"] as? Bool, true)
        XCTAssertEqual(h.daemon.reloads.applied, 1)
        XCTAssertTrue(h.daemon.config.reactions[0].actions.contains { if case let .log(_, t) = $0 { t == "second" } else { false } })
        XCTAssertTrue(h.log.contains("reload: reading \(file) (off the main loop)"), h.log)
    }

    /// A client that sends a request after its reload in the same write
    /// gets the replies in order: the reload's first.
    func testRequestsAfterAReloadAreAnsweredAfterIt() throws {
        let gate = ReadGate()
        let h = try harness(gate)
        let c = try ControlClient(socketPath)
        try c.send(#"{"v":1,"id":1,"cmd":"reload"}"# + "\n" + #"{"v":1,"id":2,"cmd":"ping"}"# + "\n", h)
        XCTAssertTrue(try gate.waitEntered(1, h))
        try h.daemon.settle()
        XCTAssertEqual(c.lines(), [], "the ping waits behind the reload")
        gate.openAll()
        var got: [String] = []
        let end = Date().addingTimeInterval(30)
        while got.count < 2 && Date() < end { got += try c.replies(h, within: 1) }
        XCTAssertEqual(try got.map { try ControlTests.object($0)["id"] as? Int }, [1, 2], "\(got)")
        XCTAssertEqual(try ControlTests.object(got[1])["pong"] as? Bool, true)
    }

    /// A stop while a read is held does not wait for it: the outputs go
    /// safe, the waiting client is told the reload was not applied, and the
    /// read's result, when it comes, reaches nothing.
    func testAStopDoesNotWaitForAReloadsRead() throws {
        let gate = ReadGate()
        let h = try harness(gate)
        try h.press()
        try h.daemon.settle()
        XCTAssertEqual(try h.writes("VALVE").last, true)
        let asker = try ControlClient(socketPath)
        try asker.send(#"{"v":1,"id":3,"cmd":"reload"}"# + "\n", h)
        XCTAssertTrue(try gate.waitEntered(1, h))
        let read = try XCTUnwrap(h.daemon.reloadQueue.read)

        h.daemon.requestStop("test")
        XCTAssertTrue(h.daemon.shutdown(), "the stop is clean while the read is still held")
        XCTAssertEqual(try h.writes("VALVE").last, false, "safe value set")
        let reply = try ControlTests.object(try XCTUnwrap(asker.lines().first, "the waiting client was answered"))
        XCTAssertEqual(reply["id"] as? Int, 3)
        XCTAssertEqual(reply["applied"] as? Bool, false)
        XCTAssertEqual(reply["errors"] as? [String], ["boardd is stopping; the reload was not applied"])
        XCTAssertTrue(h.log.contains("reload: the read of \(file) is abandoned (boardd stops)"), h.log)

        // The read ends after the stop: its result reaches nothing.
        gate.openAll()
        let end = Date().addingTimeInterval(30)
        while read.take() == nil && Date() < end { usleep(1000) }
        XCTAssertNotNil(read.take(), "the read ended")
        XCTAssertEqual(h.daemon.loop.usage.pendingPerforms, 0, "nothing handed to the stopped loop")
        XCTAssertEqual(h.daemon.reloads.applied, 0)
        XCTAssertEqual(h.daemon.reloads.refused, 0)
    }

    /// Reloads asked for while a read is held (SIGHUPs, a client) are served
    /// by one more read, made after the first is applied, so a file changed
    /// after the first read started is what ends in force; every asker gets
    /// an answer.
    func testReloadsAskedForDuringAReadAreServedByOneMoreRead() throws {
        let gate = ReadGate()
        let h = try harness(gate)
        var outcomes: [Daemon.ReloadOutcome] = []
        h.daemon.requestReload { outcomes.append($0) }
        XCTAssertTrue(try gate.waitEntered(1, h))
        try Self.yaml(log: "third").write(toFile: file, atomically: true, encoding: .utf8)
        h.daemon.requestReload { outcomes.append($0) }
        h.daemon.requestReload()
        h.daemon.requestReload { outcomes.append($0) }
        gate.openOne()
        XCTAssertTrue(try gate.waitEntered(2, h), "one more read")
        XCTAssertEqual(outcomes.count, 1, "the first asker is answered when its read is applied")
        XCTAssertEqual(h.daemon.reloads.applied, 1, "the first read found the file unchanged")
        gate.openOne()
        let end = Date().addingTimeInterval(30)
        while outcomes.count < 3 && Date() < end {
            try h.daemon.settle()
            usleep(1000)
        }
        XCTAssertEqual(outcomes.map(\.applied), [true, true, true])
        XCTAssertEqual(gate.entered, 2, "three requests during a read make one read")
        XCTAssertEqual(h.daemon.reloads.applied, 2)
        XCTAssertTrue(h.daemon.config.reactions[0].actions.contains { if case let .log(_, t) = $0 { t == "third" } else { false } })
    }

    /// A file with errors read off the loop is refused as before: the
    /// errors in the reply, the running config kept.
    func testARefusedReadKeepsTheRunningConfig() throws {
        let gate = ReadGate()
        gate.openAll()
        let h = try harness(gate)
        try (Self.yaml(log: "x") + "\n  - on: { line: nosuch, press: true }\n    do: [ set: { valve: on } ]\n").write(
            toFile: file, atomically: true, encoding: .utf8)
        let c = try ControlClient(socketPath)
        let r = try c.request(#"{"v":1,"cmd":"reload"}"#, h)
        XCTAssertEqual(r["applied"] as? Bool, false)
        let errors = try XCTUnwrap(r["errors"] as? [String])
        XCTAssertTrue(errors.contains { $0.hasPrefix(file + ":") && $0.contains("nosuch") }, "\(errors)")
        XCTAssertEqual(h.daemon.reloads.refused, 1)
        XCTAssertTrue(h.daemon.config.reactions[0].actions.contains { if case let .log(_, t) = $0 { t == "first" } else { false } })
        try h.press()
        try h.daemon.settle()
        XCTAssertEqual(try h.writes("VALVE").last, true, "the running config still reacts")
    }
}
