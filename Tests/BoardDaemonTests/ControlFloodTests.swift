import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
@testable import BoardDaemon
import Foundation
import Glibc
import XCTest

/// `flood` on the mock board, on the manual clock: each edge at its time,
/// counted by the line and seen by its reaction; the limits, `busy`,
/// `stop`, and the batch a tick drives at most. And drives through a
/// gpio-sim line's `pull`, in a directory tree laid out as sysfs is.
final class ControlFloodTests: XCTestCase {
    var dir = ""

    override func setUpWithError() throws {
        var template = Array("/tmp/boardd-flood-XXXXXX".utf8CString)
        guard let p = mkdtemp(&template) else { throw POSIXError(.EIO) }
        dir = String(cString: p)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: dir) }

    var socketPath: String { dir + "/boardd.sock" }

    func harness() throws -> Harness { try Harness(ControlTests.yaml, control: ControlServer.Options(path: socketPath)) }

    func events(_ h: Harness, _ line: String = "button") -> UInt64 { h.counters.lines[line]?.events ?? 0 }

    func testAFloodDrivesEachEdgeAtItsTimeAndTheReactionSeesEveryPress() throws {
        let h = try harness()
        let c = try ControlClient(socketPath)
        let button = Harness.offset("BUTTON")
        XCTAssertEqual(try h.chip.level(.offset(button)), true, "released (active low)")
        let r = try c.request(#"{"v":1,"id":3,"cmd":"flood","line":"button","edges":100,"rate":"2kHz"}"#, h)
        XCTAssertEqual(r["ok"] as? Bool, true, "\(r)")
        XCTAssertEqual(r["line"] as? String, "button")
        XCTAssertEqual(r["edges"] as? Int, 100)
        XCTAssertEqual(r["rate_hz"] as? Int, 2000)
        XCTAssertEqual(r["duration_ns"] as? Int, 49_500_000, "the last edge 99 periods of 500us after the first")
        XCTAssertEqual(r["first"] as? String, "low", "from the opposite of the line's level")
        XCTAssertEqual(r["timestamps"] as? String, "scheduled")
        // The first edge at once; then one each 500us.
        XCTAssertEqual(events(h), 1)
        XCTAssertEqual(h.fires("press lights"), 1)
        try h.advance(10)
        XCTAssertEqual(events(h), 21)
        try h.advance(40)
        XCTAssertEqual(events(h), 100)
        XCTAssertEqual(h.fires("press lights"), 50, "every other edge is a press")
        XCTAssertEqual(h.counters.lines["button"]?.lost, 0)
        XCTAssertEqual(try h.chip.level(.offset(button)), true, "an even count ends where it began")
        try h.advance(100)
        XCTAssertEqual(events(h), 100, "and no more")
        h.daemon.flushEvents()
        XCTAssertTrue(
            h.log.contains("control: flood button 100 edges at 2kHz (49.5ms) (uid \(getuid()) gid \(getgid()) pid \(getpid()), origin control)"),
            h.log)
        // Done: the line takes another flood, an odd count at a whole-number rate.
        let again = try c.request(#"{"v":1,"cmd":"flood","line":"button","edges":3,"rate":100}"#, h)
        XCTAssertEqual(again["duration_ns"] as? Int, 20_000_000)
        try h.advance(20)
        XCTAssertEqual(events(h), 103)
        XCTAssertEqual(try h.chip.level(.offset(button)), false, "three edges from high end low")
    }

    /// A mock edge carries the time it was due, not the time it was driven:
    /// edges driven 20 ms into a 1 kHz flood's 10 ms are seen that late.
    func testEachEdgeCarriesItsScheduledTime() throws {
        let h = try Harness(ControlTests.yaml, level: .info, control: ControlServer.Options(path: socketPath))
        let follower = try ControlClient(socketPath)
        let c = try ControlClient(socketPath)
        XCTAssertEqual(try follower.request(#"{"v":1,"id":4,"cmd":"events","follow":true,"line":"estop"}"#, h)["following"] as? Bool, true)
        _ = try c.request(#"{"v":1,"cmd":"flood","line":"estop","edges":10,"rate":"1kHz"}"#, h)
        h.clock.advance(to: MonotonicInstant(nanoseconds: h.clock.now.nanoseconds + 20_000_000))
        for _ in 0..<4 { try h.daemon.settle() }
        let edges = follower.lines().compactMap { try? ControlTests.object($0)["event"] as? [String: Any] }.filter {
            $0["kind"] as? String == "edge"
        }
        XCTAssertEqual(edges.map { $0["value"] as? Bool }, [false, true, false, true, false, true, false, true, false, true], "\(edges)")
        XCTAssertEqual(edges.compactMap { $0["late_ns"] as? Int }, [0] + (1...9).map { (20 - $0) * 1_000_000 }, "\(edges)")
    }

    func testTheLimitsBusyAndStop() throws {
        let h = try harness()
        let c = try ControlClient(socketPath)
        let refused: [(String, String)] = [
            (#""line":"button","edges":0,"rate":"1kHz""#, "bad-argument"),
            (#""line":"button","edges":1000001,"rate":"1kHz""#, "bad-argument"),
            (#""line":"button","edges":"many","rate":"1kHz""#, "bad-argument"),
            (#""line":"button","rate":"1kHz""#, "bad-argument"),
            (#""line":"button","edges":10,"rate":"200kHz""#, "bad-argument"),
            (#""line":"button","edges":10,"rate":"0Hz""#, "bad-argument"),
            (#""line":"button","edges":10,"rate":"1.5Hz""#, "bad-argument"),
            (#""line":"button","edges":10,"rate":100001"#, "bad-argument"),
            (#""line":"button","edges":10,"rate":"fast""#, "bad-argument"),
            (#""line":"button","edges":10"#, "bad-argument"),
            (#""line":"led","edges":10,"rate":"1kHz""#, "not-input"),
            (#""line":"nosuch","edges":10,"rate":"1kHz""#, "unknown-line"),
            (#""line":"button","stop":true"#, "not-flooding"),
        ]
        for (args, code) in refused {
            let r = try c.request(#"{"v":1,"cmd":"flood","# + args + "}", h)
            XCTAssertEqual(ControlTests.code(r), code, "\(args): \(r)")
        }
        XCTAssertEqual(events(h), 0, "a refused flood drives nothing")
        let rate = try c.request(#"{"v":1,"cmd":"flood","line":"button","edges":10,"rate":"200kHz"}"#, h)
        XCTAssertTrue(((rate["error"] as? [String: Any])?["message"] as? String)?.contains("at most 100kHz") == true, "\(rate)")

        XCTAssertEqual(try c.request(#"{"v":1,"cmd":"flood","line":"button","edges":1000000,"rate":"1kHz"}"#, h)["ok"] as? Bool, true)
        let busy = try c.request(#"{"v":1,"cmd":"flood","line":"button","edges":10,"rate":"1kHz"}"#, h)
        XCTAssertEqual(ControlTests.code(busy), "busy", "one flood per line")
        XCTAssertEqual(
            try c.request(#"{"v":1,"cmd":"flood","line":"estop","edges":2,"rate":"1kHz"}"#, h)["ok"] as? Bool, true,
            "another line may flood meanwhile")
        try h.advance(9)
        XCTAssertEqual(events(h), 10)
        let stop = try c.request(#"{"v":1,"cmd":"flood","line":"button","stop":true}"#, h)
        XCTAssertEqual(stop["stopped"] as? Bool, true, "\(stop)")
        XCTAssertEqual(stop["driven"] as? Int, 10)
        XCTAssertEqual(stop["edges"] as? Int, 1_000_000)
        try h.advance(100)
        XCTAssertEqual(events(h), 10, "stopped: no edge after the stop")
        XCTAssertEqual(events(h, "estop"), 2)
        XCTAssertEqual(ControlTests.code(try c.request(#"{"v":1,"cmd":"flood","line":"button","stop":true}"#, h)), "not-flooding")
        XCTAssertTrue(h.log.contains("control: flood button stop (after 10 of 1000000 edges)"), h.log)
        XCTAssertEqual(
            try c.request(#"{"v":1,"cmd":"flood","line":"button","edges":2,"rate":"1kHz"}"#, h)["ok"] as? Bool, true, "the line is free again")
    }

    /// A tick drives at most a batch (a quarter of the line's kernel buffer of 64):
    /// edges overdue by far are driven a batch at a time, 100us apart, so
    /// the loop reads the line between the batches and none is lost.
    func testATickDrivesAtMostABatchAndNoEdgeIsLost() throws {
        let h = try harness()
        let c = try ControlClient(socketPath)
        _ = try c.request(#"{"v":1,"cmd":"flood","line":"button","edges":1000,"rate":"100kHz"}"#, h)
        XCTAssertEqual(events(h), 1)
        // 10 ms pass with no loop running: every edge is overdue.
        h.clock.advance(to: MonotonicInstant(nanoseconds: h.clock.now.nanoseconds + 10_000_000))
        try h.daemon.settle()
        XCTAssertEqual(events(h), 1 + 16, "one batch, then nothing until the gap passed")
        try h.daemon.advance(by: .microseconds(100), step: .microseconds(100))
        XCTAssertEqual(events(h), 1 + 32, "the next batch")
        try h.daemon.advance(by: .milliseconds(10))
        XCTAssertEqual(events(h), 1000)
        XCTAssertEqual(h.counters.lines["button"]?.lost, 0)
        XCTAssertEqual(h.fires("press lights"), 500)
    }

    /// libgpiod 1.6's kernel FIFO keeps 16 events per line: a batch is 4.
    func testOnTheV1UAPIABatchIsAQuarterOfItsFIFO() throws {
        let h = try Harness(ControlTests.yaml, eventModel: .v1, control: ControlServer.Options(path: socketPath))
        let c = try ControlClient(socketPath)
        _ = try c.request(#"{"v":1,"cmd":"flood","line":"button","edges":1000,"rate":"100kHz"}"#, h)
        h.clock.advance(to: MonotonicInstant(nanoseconds: h.clock.now.nanoseconds + 10_000_000))
        try h.daemon.settle()
        XCTAssertEqual(events(h), 1 + 4)
        try h.daemon.advance(by: .milliseconds(40))
        XCTAssertEqual(events(h), 1000, "the v1 FIFO (16) never overflowed")
    }

    // MARK: gpio-sim

    /// A sysfs laid out as gpio-sim's: the chip's device directory with
    /// `sim_gpioN/{pull,value}` and `bus/gpio/devices/CHIP` linking to it.
    func makeSimSysfs(chip: String, lines: Int) throws -> String {
        let root = dir + "/sys"
        let device = root + "/devices/platform/gpio-sim.0/\(chip)"
        for o in 0..<lines {
            try FileManager.default.createDirectory(atPath: device + "/sim_gpio\(o)", withIntermediateDirectories: true)
            try "pull-down\n".write(toFile: device + "/sim_gpio\(o)/pull", atomically: false, encoding: .utf8)
            try "0\n".write(toFile: device + "/sim_gpio\(o)/value", atomically: false, encoding: .utf8)
        }
        try FileManager.default.createDirectory(atPath: root + "/bus/gpio/devices", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: root + "/bus/gpio/devices/\(chip)", withDestinationPath: device)
        return root
    }

    func line(_ address: LineAddress) -> LineConfig {
        LineConfig(
            name: "btn", pin: nil, boardPin: nil, physical: nil, address: address, settings: .input(), filters: InputFilters(),
            safeValue: nil, priority: PriorityID(0), rateLimit: nil, gestures: nil, loop: .main)
    }

    func testAGPIOSimLineIsFoundByItsChipAndOffsetAndDrivenThroughPull() throws {
        let root = try makeSimSysfs(chip: "gpiochip3", lines: 8)
        let backend = try MockGPIO([
            try MockChip(name: "gpiochip0", label: "pinctrl", lineCount: 8, lineNames: [5: "other"]),
            try MockChip(name: "gpiochip3", label: "sim-a", lineCount: 8, lineNames: [5: "btn"]),
        ])
        let expected = root + "/bus/gpio/devices/gpiochip3/sim_gpio5"
        // By label and offset, by label and name, by name on any chip, by name and path.
        for address: LineAddress in [
            .offset(chip: .label("sim-a"), offset: 5), .named(chip: .label("sim-a"), name: "btn"), .named(chip: nil, name: "btn"),
            .offset(chip: .name("gpiochip3"), offset: 5),
        ] {
            XCTAssertEqual(GPIOSimPin.find(line(address), backend: backend, sysfs: root)?.directory, expected, "\(address)")
        }
        // A chip without sim_gpio attributes is not a simulator; a line that does not resolve has none.
        XCTAssertNil(GPIOSimPin.find(line(.offset(chip: .label("pinctrl"), offset: 5)), backend: backend, sysfs: root))
        XCTAssertNil(GPIOSimPin.find(line(.named(chip: nil, name: "nosuch")), backend: backend, sysfs: root))
        XCTAssertNil(GPIOSimPin.find(line(.offset(chip: .label("sim-a"), offset: 9)), backend: backend, sysfs: root))
        XCTAssertNil(GPIOSimPin.find(line(.offset(chip: .label("sim-a"), offset: 5)), backend: backend, sysfs: dir + "/elsewhere"))

        let pin = try XCTUnwrap(GPIOSimPin.find(line(.offset(chip: .label("sim-a"), offset: 5)), backend: backend, sysfs: root))
        XCTAssertEqual(pin.pull(true), 0)
        XCTAssertEqual(try String(contentsOfFile: root + "/devices/platform/gpio-sim.0/gpiochip3/sim_gpio5/pull", encoding: .utf8), "pull-up")
        XCTAssertEqual(pin.pull(false), 0)
        XCTAssertEqual(try String(contentsOfFile: expected + "/pull", encoding: .utf8), "pull-down")
        XCTAssertEqual(pin.level(), false)
        try "1\n".write(toFile: expected + "/value", atomically: false, encoding: .utf8)
        XCTAssertEqual(pin.level(), true)
        // A pull that cannot be written says why.
        try FileManager.default.removeItem(atPath: expected + "/pull")
        XCTAssertEqual(pin.pull(true), ENOENT)
    }
}
