import BoardDaemon
import Boardloop
import BoardSupport
import BoardloopGPIOMock
import Foundation
import Logging
import XCTest

/// `boardd --check` and the start agree: a config the check accepts
/// starts, and what the start would refuse the check refuses first.
final class CheckAgreesWithStartTests: XCTestCase {
    /// A worker that owns only an input line (its reaction acts on the main
    /// loop): the worker's loop has a source for the line, one for its
    /// message port and one for its thread's exit; it starts and the press
    /// reaches the main loop's output.
    func testAWorkerOwningOnlyAnInputStartsAndItsPressWorks() throws {
        let h = try Harness(
            """
            board: demo
            lines:
              button: { pin: BUTTON, input: { edge: both, active_low: true } }
              led: { pin: LED, output: { initial: off } }
            workers:
              w: { lines: [button] }
            reactions:
              - name: light
                on: { line: button, press: true }
                do: [ set: { led: on } ]
            """)
        try h.press()
        // The worker reacts on its own thread and posts the set to the main
        // loop: run the main loop until it arrives (bounded).
        let end = Date().addingTimeInterval(20)
        while try h.writes("LED").isEmpty && Date() < end {
            try h.advance(1)
            usleep(1000)
        }
        XCTAssertEqual(try h.writes("LED"), [true])
    }
}
