import BoardControl
import Foundation
import Glibc
import Testing

/// Two `boardd --mock` runs of one user in two terminals do not collide:
/// the second finds the first answering on the default socket and listens
/// on `boardd-2.sock` beside it, saying so; both answer.
@Suite struct SideBySideTests {
    static func waitForPing(_ path: String, seconds: Double = 30) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            if Boardctl.execute(.ping, socket: path, json: false).status == 0 { return true }
            usleep(50_000)
        }
        return false
    }

    @Test func aSecondMockRunListensBesideTheFirst() throws {
        let dir = try TempDir("side-by-side")
        let config = dir.path + "/led.yaml"
        try "board: demo\nlines:\n  led: { pin: LED, output: { safe: off } }\n".write(toFile: config, atomically: true, encoding: .utf8)
        var env = ProcessInfo.processInfo.environment
        env["RUNTIME_DIRECTORY"] = dir.path
        func start(_ log: String) throws -> Process {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: Boardd.path)
            p.arguments = ["--config", config, "--mock", "--for", "60s"]
            p.environment = env
            _ = FileManager.default.createFile(atPath: log, contents: nil)
            p.standardOutput = FileHandle(forWritingAtPath: log)
            p.standardError = FileHandle(forWritingAtPath: log)
            try p.run()
            return p
        }
        let first = try start(dir.path + "/first.log")
        defer {
            first.terminate()
            first.waitUntilExit()
        }
        try #require(Self.waitForPing(dir.path + "/boardd.sock"), "the first did not answer")
        let second = try start(dir.path + "/second.log")
        defer {
            second.terminate()
            second.waitUntilExit()
        }
        #expect(Self.waitForPing(dir.path + "/boardd-2.sock"), "the second listens beside the first")
        #expect(Self.waitForPing(dir.path + "/boardd.sock", seconds: 1), "the first still answers")
        let log = try String(contentsOfFile: dir.path + "/second.log", encoding: .utf8)
        #expect(
            log.contains("control socket: another boardd of yours answers on \(dir.path)/boardd.sock: this one listens on \(dir.path)/boardd-2.sock (boardctl --socket \(dir.path)/boardd-2.sock)"),
            "\(log)")
        #expect(second.isRunning, "\(log)")
    }
}
