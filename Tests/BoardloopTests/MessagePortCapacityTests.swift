import Boardloop
import BoardloopTestSupport
import BoardloopXCTestSupport
import Glibc
import XCTest

/// A loop made with room for N sources given one message port more.
final class MessagePortCapacityTests: XCTestCase {
    /// The ninth port on a loop with room for eight sources: `schedule`
    /// throws `.runLoop(.capacityExceeded(.sources, limit: 8))`, naming the
    /// capacity to raise, and changes nothing — the ninth is on no loop and
    /// can be scheduled once a slot is free; the eight still deliver.
    func testANinthMessagePortOverCapacityThrowsAndChangesNothing() throws {
        let loop = try makeLoop(capacities: .init(sources: 8))
        var received: [Int32] = []
        var ports: [BoardMessagePort] = []
        for i in 0..<8 {
            let port = try BoardMessagePort(label: "port \(i)", slots: 4, slotSize: 8) { received.append($0.id) }
            try port.schedule(on: loop)
            ports.append(port)
        }
        let ninth = try BoardMessagePort(label: "ninth", slots: 4, slotSize: 8) { received.append($0.id) }
        var thrown: BoardMessagePortError?
        do { try ninth.schedule(on: loop) } catch { thrown = error }
        XCTAssertEqual(thrown, .runLoop(.capacityExceeded(.sources, limit: 8)))
        let text = thrown?.description ?? ""
        XCTAssertTrue(text.contains("limited to 8") && text.contains("Capacities.sources"), text)
        XCTAssertNil(ninth.source.runLoop, "a port refused by a full loop is on it after all")
        XCTAssertFalse(loop.contains(ninth.source, mode: .default))
        // The eight are untouched.
        for (i, port) in ports.enumerated() { try port.send(id: Int32(i)) }
        XCTAssertTrue(try runUntil(loop, until: { received.count == 8 }))
        XCTAssertEqual(received.sorted(), Array(0..<8))
        // A message sent to the ninth waits in it; once a slot is free it is scheduled and delivered.
        try ninth.send(id: 99)
        ports[0].invalidate()
        try ninth.schedule(on: loop)
        XCTAssertTrue(try runUntil(loop, until: { received.count == 9 }))
        XCTAssertEqual(received.last, 99)
        for port in ports { port.invalidate() }
        ninth.invalidate()
    }
}
