import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import BoardloopTestSupport
import BoardloopXCTestSupport
import Glibc
import XCTest

/// Requesting and releasing lines over and over, on and off a loop, leaves
/// no fd behind: each cycle's request fd, the loop's duplicate of it and the
/// chip's are all closed again.
final class RequestCycleTests: XCTestCase {
    /// Open fds of the process (less the directory's own).
    func openFDCount() -> Int {
        guard let d = opendir("/proc/self/fd") else { return -1 }
        defer { closedir(d) }
        var n = 0
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { n += 1 }
        }
        return n - 1
    }

    /// Runs `cycle` once (so lazily made state exists), then `count` times,
    /// and returns the fd count before and after those.
    func fdCounts(cycles count: Int, _ cycle: () throws -> Void) rethrows -> (before: Int, after: Int) {
        try cycle()
        let before = openFDCount()
        for _ in 0..<count { try cycle() }
        return (before, openFDCount())
    }

    /// The shapes of a cycle a program goes through: request, schedule, an
    /// edge delivered, then unschedule and release, or release alone, or
    /// release from the edge handler, or a reconfigure in between; with the
    /// chip opened once or for every cycle; v1 and v2 event models.
    func testRequestScheduleReleaseCyclesLeaveNoFDBehind() throws {
        for model in [MockChip.EventModel.v2, .v1] {
            let loop = try makeLoop()
            let chip = try MockChip(name: "gpiochip7", label: "test-chip", lineCount: 32, eventModel: model)
            let board = try MockGPIO([chip])
            let gpio = try GPIOChip("test-chip", backend: board)
            var batches = 0
            func edgeDelivered() throws {
                let seen = batches
                try chip.injectEdge(17, .rising)
                _ = try loop.run(mode: .default, timeout: .seconds(10), returnAfterSourceHandled: true)
                XCTAssertEqual(batches, seen + 1)
            }
            let shapes: [(String, () throws -> Void)] = [
                ("unschedule, release", {
                    let r = try gpio.request(17, .input(edges: .both))
                    try r.schedule(on: loop) { _ in batches += 1 }
                    try edgeDelivered()
                    r.unschedule()
                    r.release()
                }),
                ("release while scheduled", {
                    let r = try gpio.request([17, 22], .input(edges: .both))
                    try r.schedule(on: loop) { _ in batches += 1 }
                    try edgeDelivered()
                    r.release()
                }),
                ("release in the handler", {
                    let r = try gpio.request(17, .input(edges: .both))
                    try r.schedule(on: loop) { _ in batches += 1; r.release() }
                    try edgeDelivered()
                    XCTAssertNil(r.eventSource)
                }),
                ("software debounce, reconfigure, two modes", {
                    let r = try gpio.request(17, .input(edges: .both, debounce: .milliseconds(1)))
                    try r.schedule(on: loop) { _ in }
                    try r.add(to: RunLoopMode("other"))
                    try r.reconfigure(17, .input(edges: .rising))
                    _ = try loop.run(mode: .default, timeout: .zero)
                    r.unschedule()
                    r.release()
                }),
                ("chip opened for the cycle", {
                    let c = try GPIOChip("test-chip", backend: board)
                    let r = try c.request(17, .input(edges: .both))
                    try r.schedule(on: loop) { _ in batches += 1 }
                    try edgeDelivered()
                    r.release()
                    c.close()
                }),
            ]
            for (name, cycle) in shapes {
                let counts = try fdCounts(cycles: 100, cycle)
                XCTAssertEqual(counts.after, counts.before, "\(model) \(name): 100 cycles left \(counts.after - counts.before) fds open")
            }
        }
    }

    /// The same on the libgpiod backend, where a chip is there (the
    /// gpio-sim guest; a board): the first chip's line 0.
    func testRequestCyclesOnLibgpiodLeaveNoFDBehind() throws {
        let chips = (try? LibgpiodBackend.shared.listChips()) ?? []
        try XCTSkipIf(chips.isEmpty, "no GPIO chips on this host; the gpio-sim guest covers this path")
        let loop = try makeLoop()
        let gpio = try GPIOChip(chips[0].path)
        let counts = try fdCounts(cycles: 100) {
            let r = try gpio.request(0, .input(edges: .both))
            try r.schedule(on: loop) { _ in }
            _ = try loop.run(mode: .default, timeout: .zero)
            r.unschedule()
            r.release()
        }
        XCTAssertEqual(counts.after, counts.before, "100 cycles left \(counts.after - counts.before) fds open")
    }
}
