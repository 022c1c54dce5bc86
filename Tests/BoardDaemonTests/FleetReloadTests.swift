import BoardDaemon
import Foundation
import XCTest

/// A reload (SIGHUP) reads the files a config includes again: a change in
/// an included file is applied, and an error in it is refused naming it.
final class FleetReloadTests: XCTestCase {
    func testAReloadReadsAnIncludedFileAgain() throws {
        let file = try ConfigFile(
            """
            board: demo
            lines:
              led: { pin: LED, output: { initial: off } }
            tasks: !include tasks.yaml

            """)
        let tasks = file.dir.appendingPathComponent("tasks.yaml").path
        try "heartbeat: { every: 100ms, do: [ toggle: led ] }\n".write(toFile: tasks, atomically: false, encoding: .utf8)
        let h = try Harness(path: file.path)
        XCTAssertEqual(h.daemon.config.tasks.map(\.every), [.milliseconds(100)])

        try "heartbeat: { every: 1s, do: [ toggle: led ] }\n".write(toFile: tasks, atomically: false, encoding: .utf8)
        let applied = h.daemon.reload()
        XCTAssertTrue(applied.applied, h.log)
        XCTAssertEqual(h.daemon.config.tasks.map(\.every), [.seconds(1)], "the included file as it is now")

        try "heartbeat: { every: 1, do: [ toggle: led ] }\n".write(toFile: tasks, atomically: false, encoding: .utf8)
        let refused = h.daemon.reload()
        XCTAssertFalse(refused.applied)
        XCTAssertEqual(
            refused.errors,
            [
                "\(tasks):1:21: error: tasks.heartbeat.every: '1' has no unit; write 1ms (units: us, ms, s, min, h) (included from \(file.path):4:8)"
            ])
        XCTAssertEqual(h.daemon.config.tasks.map(\.every), [.seconds(1)], "the running config stays")
    }
}
