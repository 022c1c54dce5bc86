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
}
