import BoardSupport
import Foundation
import Testing

@testable import BoardDaemon

/// Runs `boardd` with a deadline: a check that blocks (a FIFO) or reads
/// forever (`/dev/zero`) is killed rather than hanging the tests.
enum BoundedBoardd {
    struct Outcome {
        var status: Int32
        var stderr: String
        var seconds: Double
        var killed: Bool
    }

    static func run(_ arguments: [String], deadline: Double = 10) throws -> Outcome {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Boardd.path)
        p.arguments = arguments
        p.environment = Boardd.environment()
        defer { Boardd.removeRuntimeDirectory(p.environment) }
        p.currentDirectoryURL = URL(fileURLWithPath: Fixtures.packageRoot)
        let err = Pipe()
        p.standardOutput = FileHandle.nullDevice
        p.standardError = err
        let start = Date()
        try p.run()
        let pid = p.processIdentifier
        let killed = LockedFlag()
        DispatchQueue.global().asyncAfter(deadline: .now() + deadline) {
            if p.isRunning {
                killed.set()
                kill(pid, SIGKILL)
            }
        }
        let e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return Outcome(
            status: p.terminationStatus, stderr: String(decoding: e, as: UTF8.self), seconds: Date().timeIntervalSince(start),
            killed: killed.value)
    }
}

final class LockedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var flag = false
    func set() { lock.withLock { flag = true } }
    var value: Bool { lock.withLock { flag } }
}

/// A temporary directory, removed at the end.
final class TempDir {
    let path: String
    init(_ name: String) throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("boardd-\(name)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

@Suite struct HostileInputTests {
    /// Each refused with the rule that refused it, quickly: never a read of
    /// GBs, never a blocked open.
    func expectRefused(_ config: String, _ message: String, extra: [String] = []) throws {
        let r = try BoundedBoardd.run(["--check", "--config", config] + extra)
        #expect(!r.killed, "boardd --check \(config) did not finish within the deadline")
        #expect(r.status == 1)
        #expect(r.stderr.components(separatedBy: "\n").first == message)
        #expect(r.seconds < 5)
    }

    @Test func devZeroIsNotAConfig() throws {
        try expectRefused("/dev/zero", "/dev/zero: error: not a regular file (a character device)")
    }

    @Test func devURandomIsNotAConfig() throws {
        try expectRefused("/dev/urandom", "/dev/urandom: error: not a regular file (a character device)")
    }

    @Test func aFIFODoesNotBlock() throws {
        let dir = try TempDir("fifo")
        let fifo = dir.path + "/boardd.yaml"
        #expect(mkfifo(fifo, 0o600) == 0)
        try expectRefused(fifo, "\(fifo): error: not a regular file (a FIFO)")
    }

    @Test func aDirectoryIsNotAConfig() throws {
        let dir = try TempDir("dir")
        try expectRefused(dir.path, "\(dir.path): error: it is a directory, not a file")
    }

    @Test func aFileOverFourMiBIsRefused() throws {
        let dir = try TempDir("big")
        let big = dir.path + "/big.yaml"
        // 5 MiB of comment lines: valid YAML, just too much of it.
        let line = "# " + String(repeating: "x", count: 1021) + "\n"
        #expect(FileManager.default.createFile(atPath: big, contents: Data(String(repeating: line, count: 5 * 1024).utf8)))
        try expectRefused(big, "\(big): error: larger than the 4 MiB a config may be")
    }

    @Test func exactlyFourMiBIsRead() throws {
        let dir = try TempDir("limit")
        let path = dir.path + "/limit.yaml"
        var text = "board: demo\n"
        text += String(repeating: "#", count: 4 * 1024 * 1024 - text.utf8.count - 1) + "\n"
        #expect(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
        let result = ConfigLoader.load(path: path, options: Fixtures.options())
        #expect(result.diagnostics.map(\.description) == [])
    }

    /// Board files are read under the same rules, named or found in a directory.
    @Test func aBoardFileThatIsAFIFOOrTooLargeIsRefused() throws {
        let dir = try TempDir("boards")
        #expect(mkfifo(dir.path + "/fifo-board.yaml", 0o600) == 0)
        let config = dir.path + "/config.yaml"
        #expect(FileManager.default.createFile(atPath: config, contents: Data("board: fifo-board\n".utf8)))
        try expectRefused(
            config, "\(dir.path)/fifo-board.yaml: error: cannot read the board file: not a regular file (a FIFO)",
            extra: ["--boards", dir.path])

        let big = dir.path + "/big-board.yaml"
        let line = "# " + String(repeating: "x", count: 1021) + "\n"
        #expect(FileManager.default.createFile(atPath: big, contents: Data(String(repeating: line, count: 5 * 1024).utf8)))
        #expect(FileManager.default.createFile(atPath: config, contents: Data("board: big-board\n".utf8)))
        try expectRefused(
            config, "\(big): error: cannot read the board file: larger than the 4 MiB a board file may be",
            extra: ["--boards", dir.path])
        // Auto-detection loads every board in the directory: still no hang.
        // (config.yaml, in the same directory, is not a board: left out.)
        let (_, problems) = BoardCatalog(directories: [dir.path]).loadAll()
        #expect(problems.filter { !$0.file.hasSuffix("config.yaml") }.map(\.description).sorted() == [
            "\(big): error: cannot read the board file: larger than the 4 MiB a board file may be",
            "\(dir.path)/fifo-board.yaml: error: cannot read the board file: not a regular file (a FIFO)",
        ])
    }

    /// Nested aliases are refused at the alias, in well under a second.
    @Test func nestedAliasesAreRefusedQuickly() throws {
        let text = try String(contentsOfFile: Fixtures.bad("alias-expansion"), encoding: .utf8)
        let start = Date()
        let result = ConfigLoader.load(text: text, file: "alias-expansion.yaml", options: Fixtures.options())
        let seconds = Date().timeIntervalSince(start)
        #expect(seconds < 1, "took \(seconds) s")
        #expect(result.config == nil)
        #expect(result.errors.first.map { "\($0.line):\($0.column)" } == "9:169")
    }

    /// A few aliases of a small node are fine.
    @Test func modestAliasesStillWork() {
        let text = """
            board: demo
            lines:
              led: { pin: LED, output: {} }
            tasks:
              a: { every: 1s, do: &blink [ toggle: led, log: blink ] }
              b: { every: 2s, do: *blink }
            """
        let result = ConfigLoader.load(text: text, file: "a.yaml", options: Fixtures.options())
        #expect(result.diagnostics.map(\.description) == [])
        #expect(result.config?.tasks.count == 2)
    }

    /// A byte order mark is accepted, and positions on line 1 do not move.
    @Test func aByteOrderMarkIsAccepted() {
        let result = ConfigLoader.load(
            text: "\u{FEFF}board: demo\nlines:\n  led: { pin: LED, output: {} }\n", file: "bom.yaml", options: Fixtures.options())
        #expect(result.diagnostics.map(\.description) == [])
    }

    /// Where the first byte that is not UTF-8 is.
    @Test func bytesThatAreNotUTF8AreFoundByLineAndColumn() throws {
        let dir = try TempDir("utf8")
        let path = dir.path + "/bad.yaml"
        let bytes: [UInt8] = Array("board: demo\nlines:\n  led: { pin: LED, description: \"caf".utf8) + [0xE9] + Array("\" }\n".utf8)
        #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        #expect(
            ConfigLoader.load(path: path, options: Fixtures.options()).diagnostics.map(\.description) == [
                "\(path):3:37: error: the file is not UTF-8 text (byte 0xE9 at offset 55)"
            ])
    }
}
