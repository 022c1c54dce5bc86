import BoardDaemon
import BoardSupport
import BoardloopTestSupport
import Foundation
import Glibc
import Logging
import XCTest

/// `realtime: required | optional` on a worker. The tests run as root, where
/// SCHED_FIFO is granted: the refusal is a CPU affinity to a CPU this
/// machine does not have (CPU 63), which the config check accepts when told
/// the machine has 64 CPUs and the worker's thread cannot apply.
final class RealtimeTests: XCTestCase {
    static func config(_ realtime: String) -> String {
        """
        board: demo
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true } }
          led: { pin: LED, output: {} }
        workers:
          io: { lines: [button, led], cpu: 63, priority: 50\(realtime) }
        reactions:
          - { name: p, on: { line: button, press: true }, do: [ set: { led: on } ] }

        """
    }

    /// A config checked as if for a machine with 64 CPUs.
    static let bigMachine = LoadOptions(machine: MachineInfo(cpuCount: 64, facts: MachineFacts()))

    func testRequiredRefusesToStartWithAMessageThatNamesTheWorkerOnce() throws {
        for realtime in ["", ", realtime: required"] {
            XCTAssertThrowsError(try Harness(Self.config(realtime), load: Self.bigMachine)) { error in
                let text = "\(error)"
                XCTAssertEqual(text.components(separatedBy: "worker 'io'").count - 1, 1, "one prefix: \(text)")
                XCTAssertTrue(text.hasPrefix("worker 'io': "), text)
                XCTAssertTrue(text.contains("CPU affinity [63]"), text)
            }
        }
    }

    func testOptionalRunsWithoutWhatWasRefusedAndWarnsOnce() throws {
        let log = Locked("")
        var logger = Logger(label: "t") { l in CollectingHandler(label: l, into: log) }
        logger.logLevel = .info
        let h = try Harness(Self.config(", realtime: optional"), load: Self.bigMachine, logger: logger)
        let warnings = log.withLock { $0 }.split(separator: "\n").filter { $0.contains("realtime: optional") }
        XCTAssertEqual(warnings.count, 1, log.withLock { $0 })
        let w = String(warnings.first ?? "")
        XCTAssertTrue(w.hasPrefix("worker 'io': "), w)
        XCTAssertTrue(w.contains("CPU affinity [63]"), w)
        XCTAssertEqual(w.components(separatedBy: "worker 'io'").count - 1, 1, w)
        // The worker runs: a reaction on a line it owns works.
        try h.press()
        let end = Date().addingTimeInterval(20)
        while try h.writes("LED").isEmpty && Date() < end { usleep(2000) }
        XCTAssertEqual(try h.writes("LED"), [true])
    }

    func testRealtimeIsRequiredOrOptional() {
        let bad = Self.config(", realtime: maybe")
        let r = ConfigLoader.load(text: bad, file: "w.yaml", options: Self.bigMachine)
        XCTAssertEqual(
            r.diagnostics.map(\.description),
            ["w.yaml:6:64: error: workers.io.realtime: 'maybe' is not one of required, optional"])
    }
}
