import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import BoardloopTestSupport
import XCTest

/// Every typed error, and that its message names the chip, the line and the cause.
final class ErrorTests: XCTestCase {
    func testMissingChipListsTheChipsThatExist() throws {
        let board = MockGPIO.exampleBoard()
        assertGPIOError(try GPIOChip("pinctrl-bcm2711", backend: board)) { error in
            guard case let .chipNotFound(chip, available) = error else { return false }
            let text = error.description
            return chip == "pinctrl-bcm2711" && available == ["gpiochip0 [boardloop-mock0]", "gpiochip1 [boardloop-mock1]"]
                && text.contains("'pinctrl-bcm2711'") && text.contains("gpiochip0 [boardloop-mock0]")
        }
    }

    func testChipsOpenByNameLabelAndList() throws {
        let board = MockGPIO.exampleBoard()
        XCTAssertEqual(try GPIOChip("gpiochip1", backend: board).label, "boardloop-mock1")
        XCTAssertEqual(try GPIOChip("boardloop-mock0", backend: board).name, "gpiochip0")
        XCTAssertEqual(try GPIOChip.list(backend: board).map(\.lineCount), [32, 8])
        let found = try GPIOChip.findLine(named: "LED", backend: board)
        XCTAssertEqual(found.chip.label, "boardloop-mock0")
        XCTAssertEqual(found.offset, 27)
    }

    func testUnknownLineName() throws {
        let rig = try ManualRig()
        assertGPIOError(try rig.gpio.request("BUZZER", .output())) { error in
            guard case let .lineNotFound(name, chip) = error else { return false }
            return name == "BUZZER" && chip == "gpiochip7 [test-chip]"
                && error.description == "no line named 'BUZZER' on GPIO chip gpiochip7 [test-chip]"
        }
        assertGPIOError(try GPIOChip.findLine(named: "BUZZER", backend: rig.board)) { error in
            guard case .lineNotFound("BUZZER", nil) = error else { return false }
            return error.description.contains("any GPIO chip")
        }
    }

    func testOffsetOutOfRange() throws {
        let rig = try ManualRig()
        assertGPIOError(try rig.gpio.request(40, .input())) { error in
            guard case .offsetOutOfRange(chip: "gpiochip7 [test-chip]", offset: 40, lineCount: 32) = error else { return false }
            return error.description.contains("0...31")
        }
    }

    /// A worker scheduled a request, then stopped and was joined and
    /// dropped: the loop and the request kept each other alive, and the line
    /// stayed busy ("line 17 is busy … 'worker-round-1'"), so restarting the
    /// same configuration failed.
    func testALineRequestedOnAWorkerIsFreeAgainOnceTheWorkerEnded() throws {
        let chip = try MockChip(label: "restart", lineCount: 32)
        for round in 1...3 {
            let worker = try LoopThread.start(name: "worker-round-\(round)") { loop in
                let gpio = try chip.open()
                let request = try gpio.request(17, .input(edges: .both), consumer: "worker-round-\(round)")
                try request.schedule(on: loop) { _ in }
            }
            XCTAssertTrue(try chip.open().lineInfo(17).used)
            worker.stopAndJoin()
            XCTAssertFalse(try chip.open().lineInfo(17).used, "round \(round): the line was released with the worker's loop")
        }
    }

    func testBusyLineNamesTheConsumer() throws {
        let rig = try ManualRig()
        // Held by another program.
        try rig.chip.hold(17, consumer: "gpioset")
        assertGPIOError(try rig.gpio.request("BUTTON", .input())) { error in
            guard case let .lineBusy(line, consumer) = error else { return false }
            return line.offset == 17 && line.name == "BUTTON" && consumer == "gpioset"
                && error.description.contains("line 17 (\"BUTTON\") of gpiochip7 [test-chip]")
                && error.description.contains("'gpioset'")
        }
        XCTAssertEqual(try rig.gpio.lineInfo(17).consumer, "gpioset")
        try rig.chip.unhold(17)
        // Held by a request of ours with its own consumer name.
        let first = try rig.gpio.request(17, .input(), consumer: "doorbell")
        assertGPIOError(try rig.gpio.request([16, 17], .input())) { error in
            guard case let .lineBusy(line, consumer) = error else { return false }
            return line.offset == 17 && consumer == "doorbell"
        }
        // Nothing was taken by the failed request.
        XCTAssertFalse(try rig.gpio.lineInfo(16).used)
        first.release()
        XCTAssertNoThrow(try rig.gpio.request(17, .input()))
    }

    func testPermissionDeniedSaysWhichGroupToJoin() throws {
        let chip = try MockChip(label: "locked", lineCount: 4)
        chip.denyAccess = true
        assertGPIOError(try chip.open()) { error in
            guard case .permissionDenied(chip: "gpiochip0", path: "mock:gpiochip0", group: "gpio") = error else { return false }
            let text = error.description
            return text.contains("group 'gpio'") && text.contains("usermod -aG gpio") && text.contains("ls -l /dev/gpiochip*")
        }
        // A root-owned device: the message says how to get access.
        let rootOnly = GPIOError.permissionDenied(chip: "gpiochip0", path: "/dev/gpiochip0", group: "root")
        XCTAssertTrue(rootOnly.description.contains("'gpio' group"))
        XCTAssertTrue(rootOnly.description.contains("udev rule"))
    }

    func testInvalidCombinationsAreRejectedBeforeTheKernel() throws {
        let rig = try ManualRig()
        let cases: [(GPIOLineSettings, String)] = [
            (GPIOLineSettings(direction: .output, edgeDetection: .both), "edge detection (both) on an output"),
            (GPIOLineSettings(direction: .output, debounce: .milliseconds(5)), "debounce on an output"),
            (GPIOLineSettings(direction: .input, drive: .openDrain), "open-drain drive on an input"),
            (.input(debounce: .zero - .milliseconds(1)), "negative debounce"),
        ]
        for (settings, reason) in cases {
            assertGPIOError(try rig.gpio.request("LED", settings)) { error in
                guard case let .invalidConfiguration(line?, text) = error else { return false }
                return line.offset == 27 && text.contains(reason)
                    && error.description.contains("line 27 (\"LED\") of gpiochip7 [test-chip]")
            }
        }
        assertGPIOError(try rig.gpio.request([(3, .input()), (3, .output())])) { error in
            guard case .invalidConfiguration(let line?, let reason) = error else { return false }
            return line.offset == 3 && reason.contains("named twice")
        }
        assertGPIOError(try rig.gpio.request([GPIOLineSelector](), .input())) {
            if case .invalidConfiguration(nil, _) = $0 { return true }
            return false
        }
        assertGPIOError(try rig.gpio.request((0..<32).map { GPIOLineSelector.offset(UInt32($0)) } + ["BUTTON"], .input())) {
            if case .invalidConfiguration(let line?, _) = $0 { return line.offset == 17 }
            return false
        }
    }

    func testWrongUseOfARequest() throws {
        let rig = try ManualRig()
        let req = try rig.gpio.request([4, 27], .input())
        assertGPIOError(try req.value(5)) {
            if case .lineNotInRequest(let line) = $0 { return line.offset == 5 }
            return false
        }
        assertGPIOError(try req.setValue(true, 4)) {
            if case .notAnOutput(let line) = $0 { return line.offset == 4 && line.name == "DOOR" }
            return false
        }
        assertGPIOError(try req.schedule(on: rig.loop) { _ in }) {
            if case .invalidConfiguration(nil, let reason) = $0 { return reason.contains("no line") }
            return false
        }
        req.release()
        XCTAssertEqual(req.state, .released)
        assertGPIOError(try req.value(4)) {
            if case .requestReleased(chip: "gpiochip7 [test-chip]", operation: "value") = $0 { return true }
            return false
        }
        XCTAssertFalse(try rig.gpio.lineInfo(4).used, "released lines are free")
    }

    func testSchedulingFromTheWrongThreadIsATypedError() throws {
        let rig = try ManualRig()
        let req = try rig.gpio.request(4, .input(edges: .both))
        nonisolated(unsafe) var caught: GPIOError?
        nonisolated(unsafe) let r = req
        let loop = rig.loop
        let t = JoinableThread {
            do throws(GPIOError) { try r.schedule(on: loop) { _ in } } catch { caught = error }
        }
        guard t.join(within: .seconds(5)) else { return XCTFail("the thread was still running after 5 s") }
        guard case .runLoop(.notOwner)? = caught else { return XCTFail("got \(String(describing: caught))") }
    }

    func testConsumerDefaultsToTheProgramName() throws {
        let rig = try ManualRig()
        let req = try rig.gpio.request(4, .input())
        XCTAssertEqual(req.consumer, ProgramName.current)
        XCTAssertFalse(req.consumer.isEmpty)
        XCTAssertEqual(try rig.gpio.lineInfo(4).consumer, ProgramName.current)
        XCTAssertEqual(ProgramName.truncatedConsumer(String(repeating: "x", count: 50)).utf8.count, 31)
    }
}
