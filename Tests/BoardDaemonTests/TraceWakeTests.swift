import Boardloop
import BoardDaemon
import Foundation
import Glibc
import Logging
import XCTest

/// At boardd's default log level a reaction's trace costs its loop no
/// system call: the record goes into the loop's ring, and the log writer,
/// which traced records recently, naps and looks by itself instead of
/// waiting to be woken by each record.
final class TraceWakeTests: XCTestCase {
    /// Write system calls made by this thread so far (`syscw`).
    private func writesByThisThread() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/thread-self/io", encoding: .utf8) else { return -1 }
        for line in text.split(separator: "\n") where line.hasPrefix("syscw:") {
            return Int(line.dropFirst(6).trimmingCharacters(in: .whitespaces)) ?? -1
        }
        return -1
    }

    /// Five reactions 150 ms apart (the writer long quiet between them),
    /// each a press on the loop's thread; returns the write system calls
    /// this thread made for them.
    private func sparseReactions(level: Logger.Level) throws -> Int {
        let config = try XCTUnwrap(
            ConfigLoader.load(
                text: """
                    board: demo
                    lines:
                      button: { pin: BUTTON, input: { edge: both, active_low: true } }
                      led: { pin: LED, output: { initial: off } }
                    reactions:
                      - on: { line: button, press: true }
                        do: [ toggle: led ]

                    """, file: "test.yaml"
            ).config)
        var logger = Logger(label: "test") { l in BoarddLogHandler(label: l, level: level, journal: false) }
        logger.logLevel = level
        let mock = try Demo.makeChips()
        let daemon = try Daemon(config: config, options: .init(logger: logger, modeDriver: .external, summaryInterval: nil, mock: mock))
        defer { daemon.shutdown() }
        let chip = mock.chips[0]
        func press() throws {
            try chip.setLevel(17, false)
            for _ in 0..<4 { _ = try daemon.loop.run(mode: .default, timeout: .zero) }
            try chip.setLevel(17, true)
            for _ in 0..<4 { _ = try daemon.loop.run(mode: .default, timeout: .zero) }
        }
        try press()  // the first trace may wake a writer asleep since the start
        usleep(150_000)
        let before = writesByThisThread()
        for _ in 0..<5 {
            try press()
            usleep(150_000)
        }
        let n = writesByThisThread() - before
        XCTAssertEqual(daemon.counters.reactionFires.values.reduce(0, +), 6)
        return n
    }

    func testSparseReactionsAtInfoCostTheLoopNoWrite() throws {
        let quiet = try sparseReactions(level: .critical)
        let info = try sparseReactions(level: .info)
        XCTAssertGreaterThanOrEqual(quiet, 0)
        XCTAssertEqual(info, quiet, "at info the loop's thread makes the same write calls as with no trace (the mock's own)")
    }
}
