import Boardloop
import BoardDaemon
import BoardloopGPIOMock
import BoardloopTestSupport
import Glibc
import Logging
import XCTest

/// Under qemu-user the top real-time signals cannot be blocked (the
/// emulator keeps them): boardd still starts, leaves them out of its
/// signal source with one warning, and still stops on SIGTERM.
final class UnblockableSignalTests: XCTestCase {
    func testAnIgnoredSignalThatCannotBeBlockedIsLeftOutWithAWarning() throws {
        let refused = SignalMask.realtimeRange.upperBound
        try SignalMask.block(Daemon.handledSignals)
        SignalMask.unblock([refused])  // as qemu-user leaves it
        defer {
            // Nothing pending may be left for the unblock to deliver.
            var pending = sigset_t()
            sigemptyset(&pending)
            for s in Daemon.handledSignals { sigaddset(&pending, s) }
            var none = timespec()
            while sigtimedwait(&pending, nil, &none) > 0 {}
            SignalMask.unblock(Daemon.handledSignals)
        }
        let text = Locked("")
        var logger = Logger(label: "test") { _ in CapturingLogHandler(text: text, level: .notice) }
        logger.logLevel = .notice
        let mock = try Demo.makeChips(clock: .manual(ManualClock()), eventModel: .v2)
        var options = Daemon.Options(logger: logger, clock: .monotonic, modeDriver: .external, summaryInterval: nil, mock: mock)
        options.handleSignals = true
        let config = try XCTUnwrap(ConfigLoader.load(text: "board: demo\nlines:\n  led: { pin: LED, output: { safe: off } }\n", file: "t.yaml").config)
        let d = try Daemon(config: config, options: options)
        defer { d.shutdown() }
        let name = SignalMask.name(refused)
        XCTAssertTrue(text.withLock { $0 }.contains("signals \(name) could not be blocked here"), text.withLock { $0 })
        XCTAssertFalse(text.withLock { $0 }.contains("SIGTERM could not"), "only the one left unblocked is named")
        // The stop signals are still taken: a SIGTERM to this thread stops it.
        XCTAssertEqual(pthread_kill(pthread_self(), SIGTERM), 0)
        try d.settle()
        XCTAssertTrue(text.withLock { $0 }.contains("stopping (SIGTERM from pid"), text.withLock { $0 })
    }
}
