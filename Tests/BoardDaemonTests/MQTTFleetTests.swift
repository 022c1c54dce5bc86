import BoardloopTestSupport
import Foundation
import Glibc
import XCTest

/// A fleet on one machine: three boardd processes (mock boards, their own
/// ids) made from the example fleet's shared packages (examples/fleet:
/// common.yaml and mqtt.yaml, the password from secrets.yaml), on one
/// broker with a password file; a Python client with paho-mqtt
/// (tests-fleet/controller.py) commands each and checks each one's events
/// are its own.
final class MQTTFleetTests: XCTestCase {
    func testThreeBoardsFromOnePackageOnOneBrokerWithAPythonController() throws {
        let password = "fleet-\(UInt32.random(in: 0...UInt32.max))"
        let broker = try Broker(credentials: .init(user: "boardd", password: password))
        let dir = try PythonTools.fleetDirectory(password: password)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try password.write(toFile: dir + "/controller-password", atomically: true, encoding: .utf8)

        var daemons: [Spawned] = []
        var boards: [String] = []
        defer {
            for d in daemons { d.signal(SIGTERM) }
            for d in daemons { _ = d.exitStatus() }
        }
        for n in 1...3 {
            let id = "greenhouse-\(n)"
            let file = dir + "/\(id).yaml"
            try """
                board: gpio-sim
                substitutions:
                  board_id: \(id)
                  button_pin: BUTTON
                  valve_pin: SIM0_5
                  led_pin: LED
                  water_for: 1s
                  mqtt_broker: 127.0.0.1
                  mqtt_port: "\(broker.port)"
                packages:
                  common: !include common.yaml
                  mqtt: !include mqtt.yaml
                """.write(toFile: file, atomically: true, encoding: .utf8)
            chmod(file, 0o644)
            let socket = dir + "/\(id).sock"
            daemons.append(try Spawned(["--config", file, "--mock", "--socket", socket]))
            boards += ["--board", "\(id)=\(socket)"]
        }
        for d in daemons { XCTAssertTrue(d.waitFor("mqtt: connected"), d.log) }

        let python = try PythonTools.python(venv: "venv", "python3", installs: "paho-mqtt")
        let (status, text) = try PythonTools.run(
            python,
            [Fixtures.packageRoot + "/tests-fleet/controller.py", "--port", "\(broker.port)", "--user", "boardd",
                "--password-file", dir + "/controller-password"] + boards)
        XCTAssertEqual(status, 0, "the controller:\n\(text)\n\(daemons.map(\.log).joined(separator: "\n---\n"))")
        XCTAssertTrue(text.contains("OK: 0 failed check(s)"), text)
        XCTAssertGreaterThan(text.components(separatedBy: "PASS ").count, 40, text)
    }
}
