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
        let dir = NSTemporaryDirectory() + "fleet-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for f in ["common.yaml", "mqtt.yaml"] {
            try FileManager.default.copyItem(atPath: Fixtures.examples + "/fleet/" + f, toPath: dir + "/" + f)
        }
        try "mqtt_password: \(password)\n".write(toFile: dir + "/secrets.yaml", atomically: true, encoding: .utf8)
        chmod(dir + "/secrets.yaml", 0o600)
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

        let p = Process()
        p.executableURL = URL(fileURLWithPath: try Self.python())
        p.arguments = [Fixtures.packageRoot + "/tests-fleet/controller.py", "--port", "\(broker.port)", "--user", "boardd",
            "--password-file", dir + "/controller-password"] + boards
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0, "the controller:\n\(text)\n\(daemons.map(\.log).joined(separator: "\n---\n"))")
        XCTAssertTrue(text.contains("OK: 0 failed check(s)"), text)
        XCTAssertGreaterThan(text.components(separatedBy: "PASS ").count, 40, text)
    }

    /// The python with paho-mqtt that scripts/install-deps.sh makes (a venv
    /// under ~/.cache/boardloop).
    static func python() throws -> String {
        let env = ProcessInfo.processInfo.environment
        let cache = env["XDG_CACHE_HOME"] ?? ((env["HOME"] ?? "/root") + "/.cache")
        let path = cache + "/boardloop/venv/bin/python3"
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw BrokerError("no \(path): run scripts/install-deps.sh (it installs paho-mqtt from PyPI there)")
        }
        return path
    }
}
