import BoardloopGPIO
import CGPIOD
import Glibc
import XCTest

/// The libgpiod backend, as far as a machine without GPIO can take it: the
/// shim is compiled for the installed libgpiod and linked, and opening chips
/// fails with clean typed errors when there are no /dev/gpiochip* devices.
/// The real-kernel path is proven in a gpio-sim guest (gpio-sim-guest).
final class LibgpiodBackendTests: XCTestCase {
    var hostHasChips: Bool { ((try? LibgpiodBackend.shared.listChips()) ?? []).isEmpty == false }

    func testTheShimIsLinkedAndReportsItsBranch() {
        let backend = LibgpiodBackend.shared
        XCTAssertTrue([1, 2].contains(backend.apiVersion))
        XCTAssertEqual(backend.apiVersion, Int(bl_gpiod_api_version()))
        XCTAssertFalse(backend.libraryVersion.isEmpty)
        XCTAssertTrue(backend.backendName.hasPrefix("libgpiod "))
        if backend.apiVersion == 1 {
            XCTAssertTrue(backend.libraryVersion.hasPrefix("1."), backend.libraryVersion)
            XCTAssertFalse(backend.capabilities.contains(.sequenceNumbers))
            XCTAssertFalse(backend.capabilities.contains(.kernelDebounce), "1.6 debounces in software")
        } else {
            XCTAssertTrue(backend.capabilities.contains(.sequenceNumbers))
            XCTAssertTrue(backend.capabilities.contains(.kernelDebounce))
        }
    }

    func testTheBranchIsTheOneTheBuildAskedFor() {
        // CI runs the suite against both libraries and sets
        // BOARDLOOP_EXPECT_LIBGPIOD=1 or 2, so a build that silently picked
        // the other library fails here instead of testing the same one twice.
        guard let expected = getenv("BOARDLOOP_EXPECT_LIBGPIOD").map({ String(cString: $0) }), !expected.isEmpty else {
            return
        }
        let backend = LibgpiodBackend.shared
        XCTAssertEqual("\(backend.apiVersion)", expected, "built against libgpiod \(backend.libraryVersion)")
        XCTAssertTrue(backend.libraryVersion.hasPrefix("\(expected)."), backend.libraryVersion)
    }

    func testOpeningAChipWithoutAnyIsACleanError() throws {
        try XCTSkipIf(hostHasChips, "this host has GPIO chips")
        XCTAssertEqual(try LibgpiodBackend.shared.listChips(), [])
        for spec in ["gpiochip0", "pinctrl-bcm2711", "boardloop-sim0"] {
            assertGPIOError(try GPIOChip(spec)) { error in
                guard case .chipNotFound(chip: spec, available: []) = error else { return false }
                return error.description.contains("no GPIO chips") && error.description.contains("gpio-sim")
            }
        }
        assertGPIOError(try GPIOChip.findLine(named: "BUTTON")) {
            if case .lineNotFound("BUTTON", nil) = $0 { return true }
            return false
        }
    }

    func testOpeningByPath() throws {
        assertGPIOError(try GPIOChip("/dev/gpiochip-does-not-exist")) {
            if case .chipNotFound(chip: "/dev/gpiochip-does-not-exist", _) = $0 { return true }
            return false
        }
        assertGPIOError(try GPIOChip("/etc/hostname")) {
            if case .notAGPIOChip(path: "/etc/hostname") = $0 { return $0.description.contains("not a GPIO chip") }
            return false
        }
        assertGPIOError(try GPIOChip("/dev/null")) { error in
            // A character device that is not a GPIO chip: libgpiod refuses it.
            switch error {
            case .notAGPIOChip, .chipVanished, .system: return true
            default: return false
            }
        }
    }

    func testAnEmptyOrMissingDeviceDirectory() throws {
        var template = Array("/tmp/boardloop-gpio-XXXXXX".utf8CString)
        let dir = try XCTUnwrap(template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }.map { String(cString: $0) })
        defer { rmdir(dir) }
        let empty = LibgpiodBackend(deviceDirectory: dir)
        XCTAssertEqual(try empty.listChips(), [])
        assertGPIOError(try GPIOChip("gpiochip0", backend: empty)) {
            if case .chipNotFound(chip: "gpiochip0", available: []) = $0 { return true }
            return false
        }
        // A regular file called gpiochip3 is not a chip and is not listed.
        let fake = "\(dir)/gpiochip3"
        let fd = open(fake, O_CREAT | O_WRONLY, 0o644)
        XCTAssertGreaterThanOrEqual(fd, 0)
        close(fd)
        defer { unlink(fake) }
        XCTAssertEqual(try empty.listChips(), [])
        assertGPIOError(try GPIOChip("gpiochip3", backend: empty)) {
            if case .notAGPIOChip(path: fake) = $0 { return true }
            return false
        }
        let missing = LibgpiodBackend(deviceDirectory: "/nonexistent-gpio-dir")
        XCTAssertEqual(try missing.listChips(), [])
    }

    func testPermissionMessagesNameTheOwningGroup() {
        XCTAssertEqual(LibgpiodBackend.groupOwning("/dev/null"), "root")
        let e = GPIOError.permissionDenied(chip: "gpiochip0", path: "/dev/gpiochip0", group: "gpio")
        XCTAssertEqual(
            e.description,
            "permission denied opening GPIO chip 'gpiochip0' (/dev/gpiochip0): join the group 'gpio' that owns it "
                + "(sudo usermod -aG gpio $USER, then log in again); check with: ls -l /dev/gpiochip*")
    }

    func testTheRequestPathIsTheOneTheGuestDrives() throws {
        // On a host with chips (or in the gpio-sim guest) this requests a
        // line for real; without chips it only shows the path exists.
        try XCTSkipUnless(hostHasChips, "no GPIO chips on this host; gpio-sim-guest covers this path")
        let info = try XCTUnwrap(try LibgpiodBackend.shared.listChips().first)
        let chip = try GPIOChip(info.path)
        XCTAssertEqual(chip.info, info)
        XCTAssertEqual(try chip.lineInfos().count, info.lineCount)
    }

    // MARK: The line config the backend gives libgpiod (no chip needed)

    func testBackendLineConfigKeepsActiveLowOnInputsAndOutputs() throws {
        let backend = LibgpiodBackend.shared
        let asked: [(offset: UInt32, settings: GPIOLineSettings)] = [
            (17, .input(edges: .both, bias: .pullUp, activeLow: true)),
            (18, .input(edges: .rising, bias: .pullDown, activeLow: true, debounce: .milliseconds(5))),
            (19, .input(edges: .falling)),
            (27, .output(true, activeLow: true)),
            (26, .output(false, drive: .openDrain, activeLow: true)),
            (25, .output(true, drive: .openSource, bias: .disabled)),
        ]
        let got = try backend.libraryConfig(for: asked)
        XCTAssertEqual(got.map(\.offset), [17, 18, 19, 27, 26, 25])
        XCTAssertEqual(got.map(\.settings.activeLow), [true, true, false, true, true, false], "active-low kept on inputs and outputs")
        XCTAssertEqual(got.map(\.settings.direction), [.input, .input, .input, .output, .output, .output])
        XCTAssertEqual(got.map(\.settings.bias), [.pullUp, .pullDown, .asIs, .asIs, .asIs, .disabled])
        XCTAssertEqual(got[3].settings.drive, .pushPull)
        XCTAssertEqual(got[4].settings.drive, .openDrain)
        XCTAssertEqual(got[5].settings.drive, .openSource)
        XCTAssertEqual(got[3].settings.outputValue, true, "the logical initial value (libgpiod applies active-low)")
        XCTAssertEqual(got[4].settings.outputValue, false)
        XCTAssertEqual(got[5].settings.outputValue, true)
        XCTAssertEqual(got[0].settings.edgeDetection, .both)
        XCTAssertEqual(got[2].settings.edgeDetection, .falling)
        if backend.apiVersion == 2 {
            // libgpiod 2.x: the kernel debounces the line, on the edges asked for.
            XCTAssertEqual(backend.capabilities.debouncing, .kernel)
            XCTAssertEqual(got[1].settings.debounce, .microseconds(5000))
            XCTAssertEqual(got[1].settings.edgeDetection, .rising)
        } else {
            // libgpiod 1.6: no kernel debounce; the request debounces in
            // software and needs both edges from the kernel to follow the level.
            XCTAssertEqual(backend.capabilities.debouncing, .runLoop)
            XCTAssertEqual(got[1].settings.debounce, .zero)
            XCTAssertEqual(got[1].settings.edgeDetection, .both)
        }
    }

    func testBackendLineConfigRoundsASubMicrosecondDebounceUp() throws {
        let backend = LibgpiodBackend.shared
        let got = try backend.libraryConfig(for: [(4, .input(edges: .both, debounce: .nanoseconds(1500)))])
        // The kernel takes whole microseconds: 1.5 µs must not become 1 µs or 0.
        XCTAssertEqual(got[0].settings.debounce, backend.apiVersion == 2 ? .microseconds(2) : .zero)
    }

    func testBackendLineConfigRejectsWhatNoKernelAccepts() {
        assertGPIOError(try LibgpiodBackend.shared.libraryConfig(for: [(3, .output(true)), (3, .input())])) { e in
            if case .invalidConfiguration = e { return true }
            return false
        }
        assertGPIOError(try LibgpiodBackend.shared.libraryConfig(for: [(3, .input(debounce: .seconds(5000)))])) { e in
            guard case .invalidConfiguration(_, let reason) = e else { return false }
            return reason.contains("limit of")
        }
    }

    func testKernelEventBufferFollowsEachBranchsRule() {
        let backend = LibgpiodBackend.shared
        if backend.apiVersion == 2 {
            // linereq_create(): capped at GPIO_V2_LINES_MAX * 16; kfifo_alloc(): a power of two, at least 2.
            XCTAssertEqual(backend.kernelEventBuffer(lines: 1, eventBufferCapacity: 1), 2)
            XCTAssertEqual(backend.kernelEventBuffer(lines: 1, eventBufferCapacity: 16), 16)
            XCTAssertEqual(backend.kernelEventBuffer(lines: 1, eventBufferCapacity: 48), 64)
            XCTAssertEqual(backend.kernelEventBuffer(lines: 3, eventBufferCapacity: 0), 64)
            XCTAssertEqual(backend.kernelEventBuffer(lines: 1, eventBufferCapacity: 5000), 1024)
        } else {
            // The v1 uAPI: 16 per line, whatever was asked.
            XCTAssertEqual(backend.kernelEventBuffer(lines: 1, eventBufferCapacity: 1), 16)
            XCTAssertEqual(backend.kernelEventBuffer(lines: 3, eventBufferCapacity: 1024), 48)
        }
    }
}
