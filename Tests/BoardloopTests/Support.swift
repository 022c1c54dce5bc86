import Boardloop
import BoardloopTestSupport
import BoardloopXCTestSupport
import Glibc
import XCTest


/// An ordered record of what happened, for asserting exact sequences.
final class Log: @unchecked Sendable {
    var entries: [String] = []
    func add(_ s: String) { entries.append(s) }
}

/// An observer of every activity that records each one by name.
@discardableResult
func recordActivities(_ loop: BoardRunLoop, mode: RunLoopMode = .default, into log: Log) throws -> RunLoopObserver {
    let o = RunLoopObserver(activities: .allActivities) { _, a in log.add(a.description) }
    try loop.add(o, mode: mode)
    return o
}

/// A fresh loop whose default mode records every activity in the log (the
/// opening of each observer-sequence test).
func observedLoop() throws -> (BoardRunLoop, Log) {
    let loop = try makeLoop()
    let log = Log()
    try recordActivities(loop, into: log)
    return (loop, log)
}

/// A non-blocking pipe; closed on deinit.
final class Pipe {
    let readEnd: Int32
    let writeEnd: Int32
    init() {
        var fds: [Int32] = [0, 0]
        precondition(pipe(&fds) == 0)
        readEnd = fds[0]
        writeEnd = fds[1]
        _ = fcntl(readEnd, F_SETFL, O_NONBLOCK)
        _ = fcntl(writeEnd, F_SETFL, O_NONBLOCK)
    }
    deinit {
        close(readEnd)
        close(writeEnd)
    }
    func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { b in precondition(Glibc.write(writeEnd, b.baseAddress, b.count) == b.count) }
    }
    /// Reads one byte, or nil if none is there.
    func readByte() -> UInt8? {
        var b: UInt8 = 0
        return Glibc.read(readEnd, &b, 1) == 1 ? b : nil
    }
}

/// How long one wait in a test may take before the test fails: generous for
/// a loaded 2-core machine (the events waited for take microseconds), short
/// enough that a broken engine fails the suite in seconds, not hours.
let testDeadline: Duration = .seconds(10)

/// Runs `loop` in `mode`, one handled source at a time, until `condition`
/// holds or the overall `deadline` passes; returns whether it held.
@discardableResult
func runUntil(_ loop: BoardRunLoop, mode: RunLoopMode = .default, until condition: () -> Bool, deadline: Duration = testDeadline) throws -> Bool {
    let end = MonotonicInstant.now + deadline
    while !condition() {
        let left = end - MonotonicInstant.now
        if left <= .zero { return false }
        _ = try loop.run(mode: mode, timeout: left, returnAfterSourceHandled: true)
    }
    return true
}

/// The text of a NUL-terminated C buffer (fgets, readlink).
func string(fromC buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// A timer that never fires on its own; keeps a mode from being empty.
func farTimer() -> RunLoopTimer { RunLoopTimer(fireAt: .distantFuture) { _ in } }

extension RunLoopError {
    var isCapacity: Bool { if case .capacityExceeded = self { true } else { false } }
}

/// Asserts `body` throws exactly `expected`.
func XCTAssertThrows<T>(_ expected: RunLoopError, file: StaticString = #filePath, line: UInt = #line, _ body: () throws(RunLoopError) -> T) {
    do {
        _ = try body()
        XCTFail("expected \(expected), nothing was thrown", file: file, line: line)
    } catch {
        XCTAssertEqual(error, expected, file: file, line: line)
    }
}

/// A mutable box for state a @Sendable perform block updates on the loop's
/// own thread (the test reads it on the same thread afterwards).
final class Cell<T>: @unchecked Sendable {
    var value: T
    init(_ value: T) { self.value = value }
}
