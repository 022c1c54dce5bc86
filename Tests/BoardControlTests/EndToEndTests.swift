import BoardControl
import Foundation
import Glibc
import Testing

/// The built `boardctl` against the built `boardd` running
/// `examples/doorbell.yaml` on mock chips (`--mock`), as a person tries a
/// config on a laptop from a second terminal. Every wait has a deadline.
@Suite(.serialized) struct EndToEndTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// A boardd on the doorbell config, its socket and log in a directory
    /// of their own; stopped (SIGTERM, then waited for) by `stop()`.
    final class Daemon {
        let dir: String
        let socket: String
        let logPath: String
        let process = Process()

        /// `config`: the config to run (default the doorbell); `dir`: its
        /// directory when the caller made one (removed by `stop()`).
        init(config: String = EndToEndTests.root + "/examples/doorbell.yaml", dir given: String? = nil) throws {
            dir = try given ?? TempDir.make()
            socket = dir + "/boardd.sock"
            logPath = dir + "/boardd.log"
            let boardd = URL(fileURLWithPath: BoardctlBinary.path).deletingLastPathComponent().appendingPathComponent("boardd").path
            process.executableURL = URL(fileURLWithPath: boardd)
            process.arguments = ["--config", config, "--mock", "--socket", socket, "--for", "120s"]
            var env = ProcessInfo.processInfo.environment
            env.removeValue(forKey: "NOTIFY_SOCKET")
            env.removeValue(forKey: "JOURNAL_STREAM")
            process.environment = env
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
            process.standardError = FileHandle(forWritingAtPath: logPath)
            process.standardOutput = FileHandle.nullDevice
            try process.run()
        }

        var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

        /// Waits until `condition` holds (at most `seconds`).
        func wait(seconds: Double = 20, _ condition: () -> Bool) -> Bool {
            let end = Date().addingTimeInterval(seconds)
            while Date() < end {
                if condition() { return true }
                usleep(20_000)
            }
            return condition()
        }

        func ctl(_ args: [String]) throws -> Outcome { try BoardctlBinary.run(args + ["--socket", socket]) }

        func stop() -> Int32? {
            if process.isRunning { kill(process.processIdentifier, SIGTERM) }
            let ended = wait(seconds: 20) { !process.isRunning }
            if !ended {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
            defer { TempDir.remove(dir) }
            return ended ? process.terminationStatus : nil
        }
    }

    @Test func aPersonDrivesTheDoorbellFromASecondTerminal() throws {
        let d = try Daemon()
        var stopped = false
        defer { if !stopped { _ = d.stop() } }
        try #require(d.wait { d.log.contains("ready: every loop is running") && (try? d.ctl(["ping"]).status) == 0 }, Comment(rawValue: d.log))

        let status = try d.ctl(["status"])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout.contains("raspberry-pi-4"), "\(status.stdout)")
        #expect(status.stdout.contains("doorbell.yaml"), "\(status.stdout)")

        let lines = try d.ctl(["lines"])
        #expect(lines.status == 0)
        #expect(lines.stdout.contains("bell") && lines.stdout.contains("GPIO17") && lines.stdout.contains("porch"), "\(lines.stdout)")

        // A click on the bell: the reaction rings (its command cannot run
        // here; the pulse and the log line are what the test sees).
        let click = try d.ctl(["click", "bell"])
        #expect(click.status == 0, "\(click.stderr)")
        #expect(d.wait { d.log.contains("doorbell rang") }, "\(d.log)")
        #expect(d.wait { (try? d.ctl(["get", "porch"]).stdout) == "porch: on\n" }, "the pulse turned the porch light on")

        // set / get through the control path, logged with the peer.
        #expect(try d.ctl(["set", "porch", "off"]).status == 0)
        #expect(try d.ctl(["get", "porch", "--json"]).stdout == #"{"line":"porch","value":false}"# + "\n")
        #expect(d.log.contains("origin control"), "\(d.log)")

        // A person's mistakes: an input cannot be set; an unknown line.
        let input = try d.ctl(["set", "bell", "on"])
        #expect(input.status == 1)
        #expect(input.stderr.contains("bell") && input.stderr.contains("input"), "\(input.stderr)")
        let unknown = try d.ctl(["get", "nosuch"])
        #expect(unknown.status == 1)
        #expect(unknown.stderr.contains("nosuch"), "\(unknown.stderr)")

        // --json parses for every read command.
        for cmd in [["status"], ["lines"], ["get", "bell"], ["ping"]] {
            let r = try d.ctl(cmd + ["--json"])
            #expect(r.status == 0, "\(cmd): \(r.stderr)")
            #expect((try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8))) != nil, "\(cmd): \(r.stdout)")
        }

        let status2 = d.stop()
        stopped = true
        #expect(status2 == 0, "\(d.log)")
        #expect(!FileManager.default.fileExists(atPath: d.socket), "the socket file is removed at the stop")
    }
}
