import BoardControl
import Foundation
import Glibc
import Testing

/// `boardctl press --hold` and `click` return when boardd has made the
/// drive's last change (the reply's `ends_in_ns`), so a script's next step
/// sees the line released; without a hold, at once.
@Suite struct DriveWaitTests {
    static func elapsed(_ body: () -> Outcome) -> (Outcome, Double) {
        var a = timespec(), b = timespec()
        clock_gettime(CLOCK_MONOTONIC, &a)
        let o = body()
        clock_gettime(CLOCK_MONOTONIC, &b)
        return (o, Double(b.tv_sec - a.tv_sec) + Double(b.tv_nsec - a.tv_nsec) / 1e9)
    }

    @Test func aPressWithAHoldReturnsWhenTheHoldEnds() throws {
        let server = try FakeBoardd(result: #""line":"button","ends_in_ns":300000000"#)
        defer { server.stop() }
        let (o, took) = Self.elapsed { Boardctl.execute(.press(line: "button", hold: "300ms"), socket: server.path, json: false) }
        #expect(o.status == 0, "\(o)")
        #expect(o.stdout == "button: pressed for 300ms\n")
        #expect(took >= 0.3, "returned after the hold: \(took) s")
    }

    @Test func aPressWithoutAHoldDoesNotWait() throws {
        let server = try FakeBoardd(result: #""line":"button""#)
        defer { server.stop() }
        let o = Boardctl.execute(.press(line: "button", hold: nil), socket: server.path, json: false)
        #expect(o == Outcome(stdout: "button: pressed\n", stderr: "", status: 0))
    }
}
