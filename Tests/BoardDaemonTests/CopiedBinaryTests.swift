import Foundation
import Testing

/// The built boardd copied to a directory of its own and run from an empty
/// one: no checkout beside it, nothing of the package in its working
/// directory. What an installed boardd has is what it was built with.
@Suite struct CopiedBinaryTests {
    /// A temporary directory with a copy of boardd and of the doorbell
    /// example, and an empty directory to run in.
    final class Copy {
        let root: String
        var binary: String { root + "/bin/boardd" }
        var empty: String { root + "/empty" }

        init() throws {
            var template = Array("/tmp/boardd-copied-XXXXXX".utf8CString)
            guard let p = mkdtemp(&template) else { throw CocoaError(.fileWriteUnknown) }
            root = String(cString: p)
            let fm = FileManager.default
            try fm.createDirectory(atPath: root + "/bin", withIntermediateDirectories: true)
            try fm.createDirectory(atPath: empty, withIntermediateDirectories: true)
            try fm.copyItem(atPath: Boardd.path, toPath: binary)
            try fm.copyItem(atPath: Fixtures.examples + "/doorbell.yaml", toPath: root + "/doorbell.yaml")
        }

        deinit { try? FileManager.default.removeItem(atPath: root) }

        func run(_ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
            try Boardd.run(arguments, executable: binary, cwd: empty)
        }
    }

    /// Board names in boards/, each of which boardd must have built in.
    static var boardFiles: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: Fixtures.boards)) ?? [])
            .filter { $0.hasSuffix(".yaml") }.map { String($0.dropLast(5)) }.sorted()
    }

    /// Only the boards the machine running the tests overrides are not
    /// built in (a test machine has no /etc/boardd/boards, as a rule).
    static func installed(_ name: String) -> Bool {
        ["/etc/boardd/boards", "/usr/share/boardd/boards"].contains { FileManager.default.fileExists(atPath: "\($0)/\(name).yaml") }
    }

    @Test func everyBoardIsBuiltIn() throws {
        let copy = try Copy()
        let r = try copy.run(["boards"])
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.map { String($0.prefix { $0 != " " }) } == Self.boardFiles)
        for (name, line) in zip(Self.boardFiles, lines) where !Self.installed(name) {
            #expect(line.hasPrefix(name + " ") && line.contains("  built in — "), "\(line)")
        }
    }

    @Test func aBoardDirectoryOverridesTheBuiltInBoard() throws {
        let copy = try Copy()
        let dir = copy.root + "/mine"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try "name: raspberry-pi-4\ntitle: Mine\n".write(toFile: dir + "/raspberry-pi-4.yaml", atomically: true, encoding: .utf8)
        let r = try copy.run(["boards", "--boards", dir])
        #expect(r.status == 0, "\(r.stderr)")
        let line = r.stdout.split(separator: "\n").first { $0.hasPrefix("raspberry-pi-4 ") }.map(String.init) ?? ""
        #expect(line.contains("\(dir)/raspberry-pi-4.yaml (over ") && line.hasSuffix("built in) — Mine"), "\(line)")
        // And a config run with it uses it: the board has no pins now.
        let check = try copy.run(["--check", "--config", copy.root + "/doorbell.yaml", "--boards", dir])
        #expect(check.status == 1)
        #expect(check.stderr.contains("the raspberry-pi-4 board has no pin names"), "\(check.stderr)")
    }

    @Test func aBrokenBoardFileIsReported() throws {
        let copy = try Copy()
        let dir = copy.root + "/mine"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try "name: generic\nchips: 7\n".write(toFile: dir + "/generic.yaml", atomically: true, encoding: .utf8)
        let r = try copy.run(["boards", "--boards", dir])
        #expect(r.status == 1)
        #expect(r.stderr.contains("\(dir)/generic.yaml"), "\(r.stderr)")
    }

    @Test func checkRunsFromAnEmptyDirectory() throws {
        let copy = try Copy()
        let r = try copy.run(["--check", "--config", copy.root + "/doorbell.yaml"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("board: raspberry-pi-4 — "), "\(r.stdout)")
        if !Self.installed("raspberry-pi-4") {
            #expect(r.stdout.contains("[boards/raspberry-pi-4.yaml (built in)]"), "\(r.stdout)")
        }
    }

    @Test func boardDetectionKnowsEveryBoard() throws {
        let copy = try Copy()
        let root = Fixtures.packageRoot + "/Tests/BoardSupportTests/Fixtures/roots/raspberry-pi-4-model-b"
        let r = try copy.run(["--board-detect", "--root", root])
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.contains("verdict: raspberry-pi-4 ") && r.stdout.contains("[boards/raspberry-pi-4.yaml (built in)]"), "\(r.stdout)")
    }

    @Test func theDemoRuns() throws {
        let copy = try Copy()
        let r = try copy.run(["--demo", "--for", "300ms"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("stopped: "), "\(r.stderr)")
    }
}
