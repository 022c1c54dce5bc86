import Boardloop
@testable import BoardDaemon
import BoardloopGPIO
import BoardloopTestSupport
import Foundation
import Glibc
import Logging
import XCTest

/// Idle with MQTT connected means idle: libmosquitto's keepalive is a timer
/// armed for when a ping is due, not a tick each second, and the bridge
/// checks the published states against the lines only when a trace record
/// or a feed event was lost, not each second. Against a real broker.
final class MQTTIdleTests: XCTestCase {
    static func yaml(port: Int, keepalive: String) -> String {
        """
        board: demo
        lines:
          button: { pin: BUTTON, input: { edge: both, active_low: true } }
          relay: { pin: VALVE, output: { initial: off, safe: off } }
        reactions:
          - on: { line: button, press: true }
            do: [ toggle: relay ]
        mqtt:
          broker: 127.0.0.1
          port: \(port)
          client_id: idle
          keepalive: \(keepalive)
          publish: [button, relay]

        """
    }

    /// A daemon on the real clock (libmosquitto's keepalive is on it), its
    /// main loop run by the test's thread.
    private func daemon(_ yaml: String) throws -> Daemon {
        let loaded = ConfigLoader.load(text: yaml, file: "idle.yaml")
        let config = try XCTUnwrap(loaded.config, "\(loaded.errors)")
        var logger = Logger(label: "test") { l in BoarddLogHandler(label: l, level: .critical, journal: false) }
        logger.logLevel = .critical
        return try Daemon(
            config: config, options: .init(logger: logger, modeDriver: .external, summaryInterval: nil, mock: try Demo.makeChips()))
    }

    /// A daemon of `yaml(…)` connected to `broker` (its loop run until the
    /// connection is up, at most 20 s); shut down here if it cannot be.
    private func connected(_ broker: Broker, keepalive: String) throws -> (Daemon, MQTTBridge) {
        let d = try daemon(Self.yaml(port: broker.port, keepalive: keepalive))
        do {
            let bridge = try XCTUnwrap(d.mqtt)
            try run(d, for: 20) { bridge.client.state == .up }
            XCTAssertEqual(bridge.client.state, .up)
            return (d, bridge)
        } catch {
            d.shutdown()
            throw error
        }
    }

    private func run(_ d: Daemon, for seconds: Double, until done: () -> Bool = { false }) throws {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end && !done() {
            // Short runs: what is waited for may happen on another thread (the probe's).
            _ = try d.loop.run(mode: .default, timeout: .milliseconds(20), returnAfterSourceHandled: true)
        }
    }

    /// Connected and nothing changing, for 9 s with a 5 s keepalive: the
    /// main loop wakes for the pings and their answers only (a keepalive
    /// tick and a state check each second woke it at least 9 times), and the
    /// broker, which drops a client silent for 1.5 × the keepalive (7.5 s),
    /// keeps the connection: the pings went out on time.
    func testAConnectedIdleDaemonWakesForTheKeepaliveOnly() throws {
        let broker = try Broker()
        let (d, bridge) = try connected(broker, keepalive: "5s")
        defer { d.shutdown() }
        // What the connection published at its start is acknowledged.
        try run(d, for: 0.5)
        let ticks0 = bridge.client.keepaliveTicks
        let wakes = Locked(0)
        let observer = RunLoopObserver(activities: .afterWaiting) { _, _ in wakes.withLock { $0 += 1 } }
        try d.loop.add(observer, mode: .common)
        // One run of 9 s: it wakes for what it handles, and once at its end.
        _ = try d.loop.run(mode: .default, timeout: .seconds(9))
        observer.invalidate()
        let ticks = bridge.client.keepaliveTicks - ticks0
        let woke = wakes.withLock { $0 }
        print("idle with MQTT, 9 s at a 5 s keepalive: \(woke) wake-ups, \(ticks) keepalive ticks")
        XCTAssertEqual(bridge.client.state, .up, "the broker kept the connection (pings on time)")
        XCTAssertEqual(bridge.client.connections, 1)
        XCTAssertEqual(bridge.client.losses, 0)
        XCTAssertTrue((1...2).contains(ticks), "one ping per keepalive and a second: \(ticks)")
        XCTAssertLessThanOrEqual(woke, 2 * Int(ticks) + 1, "a ping and its answer per keepalive, and the run's end: \(woke) wake-ups")
        XCTAssertEqual(bridge.resyncs, 0, "nothing lost, no state check")
    }

    /// A broker that hangs (its socket open, nothing answered): the ping
    /// goes out when the keepalive is due, and the next tick, a keepalive
    /// later, finds it unanswered and gives the connection up; the client
    /// then tries again, as after any loss.
    func testABrokerThatStopsAnsweringIsGivenUpAfterAnUnansweredPing() throws {
        let broker = try Broker()
        let (d, bridge) = try connected(broker, keepalive: "5s")
        defer { d.shutdown() }
        try run(d, for: 0.3)
        broker.pause(true)
        defer { broker.pause(false) }
        let hung = Date()
        // Bound: the ping at 6 s, its check 6 s later, and room for a loaded machine.
        try run(d, for: 25) { bridge.client.losses > 0 }
        let after = Date().timeIntervalSince(hung)
        print("a hung broker given up after \(after) s at a 5 s keepalive")
        XCTAssertEqual(bridge.client.losses, 1, "the connection was given up")
        XCTAssertEqual(bridge.client.keepaliveTicks, 2, "the ping, then the tick that found it unanswered")
        XCTAssertGreaterThanOrEqual(after, 10, "not before the ping had a keepalive to be answered")
        XCTAssertTrue(bridge.client.lastError?.lowercased().contains("keepalive") ?? false, bridge.client.lastError ?? "no error")
    }

    /// The keepalive is armed from the last traffic: a message the client
    /// sends or reads moves the ping later (a busy connection needs none).
    func testTrafficMovesTheKeepaliveLater() throws {
        let broker = try Broker()
        let (d, bridge) = try connected(broker, keepalive: "60s")
        defer { d.shutdown() }
        let first = bridge.client.keepaliveDue
        XCTAssertGreaterThanOrEqual(first, d.loop.now + .seconds(59), "due a keepalive and a second after the connection")
        XCTAssertLessThanOrEqual(first, d.loop.now + .seconds(61))
        usleep(20_000)
        // A press: the button's and the relay's states are published.
        let chip = try XCTUnwrap(d.mock?.chips.first)
        try chip.setLevel(.offset(Harness.offset("BUTTON")), false)
        let published0 = bridge.stats.published
        try run(d, for: 10) { bridge.stats.published >= published0 + 2 }
        XCTAssertGreaterThanOrEqual(bridge.stats.published, published0 + 2)
        XCTAssertGreaterThan(bridge.client.keepaliveDue, first, "the publish moved the keepalive later")
        XCTAssertEqual(bridge.client.keepaliveTicks, 0)
    }

    /// A state change whose record never reached the feed leaves the
    /// retained state wrong until a loss is counted; the count pokes the
    /// bridge, which checks every published line and publishes the truth.
    /// Edges that all arrive cost no check.
    func testALostRecordPokesTheBridgeToCheckTheStates() throws {
        let broker = try Broker()
        let topic = "boardd/idle/line/relay/state"
        let probe = try Probe(port: broker.port, subscribe: topic)
        let (d, bridge) = try connected(broker, keepalive: "60s")
        defer { d.shutdown() }
        // The main loop is the test's thread: it runs while the probe is waited for.
        func states() -> [String] { probe.on(topic).map(\.payload) }
        try run(d, for: 20) { states() == ["OFF"] }
        XCTAssertEqual(states(), ["OFF"])
        let chip = try XCTUnwrap(d.mock?.chips.first)
        let button = GPIOLineSelector.offset(Harness.offset("BUTTON"))
        func press() throws {
            let fires = d.counters.reactionFires.values.reduce(0, +)
            try chip.setLevel(button, false)
            try run(d, for: 10) { d.counters.reactionFires.values.reduce(0, +) > fires }
            try chip.setLevel(button, true)
        }
        // Four presses, every record through: the relay's states follow, no check.
        for _ in 0..<4 { try press() }
        try run(d, for: 10) { states().count >= 5 }
        XCTAssertEqual(states(), ["OFF", "ON", "OFF", "ON", "OFF"])
        XCTAssertEqual(bridge.resyncs, 0, "no record lost, no state check")
        // A press whose records are not made (as a full ring drops them):
        // the relay is on, its retained state says off.
        d.traceLog.watch(false)
        try press()
        d.traceLog.watch(true)
        let relay = try XCTUnwrap(d.config.line(named: "relay"))
        XCTAssertTrue(d.main.program.cells[relay.index].value.load(ordering: .relaxed))
        try run(d, for: 0.5)
        XCTAssertEqual(states().count, 5, "nothing told the bridge")
        // The loss is counted (as a full ring counts it); the writer's
        // next drain pokes the bridge.
        d.traceLog.rings[0].dropped.add(1, ordering: .relaxed)
        d.traceLog.writer.wake.pokeNow()
        try run(d, for: 10) { bridge.resyncs > 0 && states().count >= 6 }
        XCTAssertEqual(bridge.resyncs, 1)
        XCTAssertEqual(states().last, "ON", "the truth published")
    }
}
