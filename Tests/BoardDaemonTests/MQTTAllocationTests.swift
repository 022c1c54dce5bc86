import Boardloop
@testable import BoardDaemon
import BoardloopTestSupport
import Foundation
import Glibc
import XCTest

/// MQTT on costs a worker loop no allocation: the bridge publishes the
/// worker's edges, writes and reactions to a real broker (every edge is a
/// state and an event message) while the worker reads a chattering input,
/// reacts and runs a 1 ms task, and the stats summary reads the worker's
/// figures. Counted by the malloc interposer on the worker's thread. MQTT's
/// own allocations (topics, JSON, libmosquitto's packets) are the main
/// loop's and the log writer's: printed, not asserted.
final class MQTTAllocationTests: XCTestCase {
    func testAWorkersReactionsAllocateNothingWhileMQTTPublishesThem() throws {
        try XCTSkipUnless(AllocationCounter.isActive, "malloc interposer not linked (ThreadSanitizer build)")
        let broker = try Broker()
        let probe = try Probe(port: broker.port, subscribe: "boardd/alloc/line/chatter/edge")
        let h = try Harness(
            """
            board: demo
            lines:
              chatter: { pin: CHATTER, input: { edge: both } }
              valve: { pin: VALVE, output: { initial: off } }
              fan: { pin: FAN, output: { initial: off } }
            workers:
              w: { lines: [chatter, valve, fan] }
            tasks:
              tick: { every: 1ms, worker: w, do: [ toggle: fan ] }
            reactions:
              - name: chatter flips
                on: { line: chatter, edge: both }
                do: [ toggle: valve ]
            mqtt:
              broker: 127.0.0.1
              port: \(broker.port)
              client_id: alloc
              stats_interval: 1s
              queue: 100000
            """, level: .info)
        let d = h.daemon
        let bridge = try XCTUnwrap(d.mqtt)
        // Connected: the connecting thread hands its instance to the main loop.
        let end = Date().addingTimeInterval(20)
        while bridge.client.state != .up && Date() < end {
            try d.advance(by: .milliseconds(10))
            usleep(5_000)
        }
        XCTAssertEqual(bridge.client.state, .up, h.log)

        var level = false
        func round() throws {
            level.toggle()
            try h.chip.setLevel(23, level)
            try d.advance(by: .milliseconds(1))
            try d.settle()
        }
        for _ in 0..<200 { try round() }  // warm-up
        _ = d.onWorker(0, timeout: .seconds(10)) { _ in
            AllocationCounter.resetThisThread()
            AllocationCounter.beginCountingOnThisThread()
        }
        let published0 = bridge.stats.published
        let rounds = 2_000
        for _ in 0..<rounds { try round() }
        let counted = d.onWorker(0, timeout: .seconds(10)) { _ in
            AllocationCounter.endCountingOnThisThread()
            return AllocationCounter.countOnThisThread
        }
        let workerAllocations = try counted.get()
        // The log writer hands the last records over: let them through.
        let settleEnd = Date().addingTimeInterval(30)  // a bound, left as soon as they are through
        while probe.messages.count <= rounds / 2 && Date() < settleEnd {
            try d.advance(by: .milliseconds(10))
            usleep(5_000)
        }
        XCTAssertGreaterThan(bridge.stats.published - published0, UInt64(rounds), "the bridge published the worker's edges and states")
        XCTAssertGreaterThan(probe.messages.count, rounds / 2, "the broker passed the edges on")
        XCTAssertEqual(workerAllocations, 0, "the worker's thread allocated over \(rounds) edges with MQTT on")
        print("mqtt at steady state: worker w \(workerAllocations) allocations over \(rounds) edges; \(bridge.stats.published - published0) messages published")
        d.shutdown()
    }
}
