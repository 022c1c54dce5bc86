import Boardloop
import CLinux
import XCTest

/// Makes a loop for a test. A loop retains what is scheduled on it, and test
/// handlers often refer to their loop (`loop.stop()`), so a loop and its
/// items keep each other alive until the loop ends. A loop made on another
/// thread ends when that thread exits; the main thread, which runs the
/// tests, never exits, so its loops are ended when each test finishes —
/// otherwise every test would leave a cycle behind, and LeakSanitizer (the
/// AddressSanitizer run checks for leaks at exit) would report them all.
public func makeLoop(capacities: BoardRunLoop.Capacities = .init(), clock: RunLoopClock = .monotonic) throws(RunLoopError) -> BoardRunLoop {
    let loop = try BoardRunLoop(capacities: capacities, clock: clock)
    if bl_cached_tid() == bl_main_tid() { LoopJanitor.shared.track(loop) }
    return loop
}

/// Ends the loops tests made on the main thread, after each test.
private final class LoopJanitor: NSObject, XCTestObservation {
    nonisolated(unsafe) static let shared: LoopJanitor = {
        let janitor = LoopJanitor()
        XCTestObservationCenter.shared.addTestObserver(janitor)
        return janitor
    }()

    /// Main thread only (tests and the observer run there).
    private var loops: [BoardRunLoop] = []

    func track(_ loop: BoardRunLoop) { loops.append(loop) }

    func testCaseDidFinish(_ testCase: XCTestCase) {
        for loop in loops { try? loop.end() }
        loops.removeAll()
    }
}
