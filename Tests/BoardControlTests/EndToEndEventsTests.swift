import BoardControl
import Foundation
import Glibc
import Testing

extension EndToEndTests {
    /// `boardctl events --follow --json` in a second process while
    /// `boardctl click bell` runs: the ring's reaction event arrives; Ctrl-C
    /// ends the follower with status 0.
    @Test func aFollowerSeesTheClicksReactionAndEndsAtCtrlC() throws {
        let d = try Daemon()
        defer { _ = d.stop() }
        try #require(d.wait { d.log.contains("ready: every loop is running") && (try? d.ctl(["ping"]).status) == 0 }, Comment(rawValue: d.log))

        let follower = Process()
        follower.executableURL = URL(fileURLWithPath: BoardctlBinary.path)
        follower.arguments = ["events", "--follow", "--json", "--socket", d.socket]
        let pipe = Pipe()
        follower.standardOutput = pipe
        follower.standardError = FileHandle.nullDevice
        try follower.run()
        defer {
            if follower.isRunning {
                kill(follower.processIdentifier, SIGKILL)
                follower.waitUntilExit()
            }
        }
        try #require(d.wait { d.log.contains("control: a client follows the events") }, Comment(rawValue: d.log))

        let click = try d.ctl(["click", "bell"])
        #expect(click.status == 0, "\(click.stderr)")

        // Reads what the follower printed until the reaction's event (at most 20 s).
        let fd = pipe.fileHandleForReading.fileDescriptor
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var text = ""
        var buffer = [UInt8](repeating: 0, count: 4096)
        var events: [[String: Any]] = []
        let sawReaction = d.wait {
            while true {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                guard n > 0 else { break }
                text += String(decoding: buffer[0..<n], as: UTF8.self)
            }
            events = text.split(separator: "\n").compactMap {
                (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
            }
            return events.contains { $0["kind"] as? String == "reaction" && $0["reaction"] as? String == "ring" }
        }
        #expect(sawReaction, "follower printed: \(text)\nlog: \(d.log)")
        let kinds = events.map { $0["kind"] as? String ?? "?" }
        #expect(kinds.first == "edge", "the press's edge comes first: \(kinds)")
        #expect(events.allSatisfy { $0["loop"] as? String == "main" && $0["text"] is String && $0["t_ns"] is Int }, "\(text)")

        // Ctrl-C: a clean end.
        kill(follower.processIdentifier, SIGINT)
        #expect(d.wait { !follower.isRunning }, "the follower ends at SIGINT")
        if !follower.isRunning {
            #expect(follower.terminationReason == .exit && follower.terminationStatus == 0)
        }
    }
}
