import Foundation
import Testing

/// docs/architecture.md names files; these tests keep it from naming a file
/// that is gone, and its file maps from leaving one out.
@Suite struct DocPathTests {
    static let root = Fixtures.packageRoot
    static let page = "docs/architecture.md"

    /// Where a path the page names may start: the package, and each
    /// target's folder (so `Supervisor/Reload.swift` is the daemon's,
    /// `Kernel/` the engine's).
    static let bases: [String] = {
        var out = [root, root + "/Sources"]
        for dir in ["Sources", "Tests"] {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: root + "/" + dir)) ?? []
            out += names.sorted().map { root + "/" + dir + "/" + $0 }
        }
        return out
    }()

    static func text() throws -> String { try String(contentsOfFile: root + "/" + page, encoding: .utf8) }

    /// Every `code span` of the page that is a file path: no spaces, and
    /// ending in a file name extension the package uses or in `/` (a folder).
    static func namedPaths(_ text: String) -> [String] {
        let extensions = [".swift", ".h", ".c", ".sh", ".txt", ".yaml", ".md", ".supp"]
        return text.split(separator: "`", omittingEmptySubsequences: false).enumerated()
            .filter { $0.offset % 2 == 1 }.map { String($0.element) }
            .filter { s in
                !s.isEmpty && !s.contains(" ") && !s.hasPrefix("--") && !s.hasPrefix(".")
                    && (s.hasSuffix("/") || extensions.contains { s.hasSuffix($0) })
            }
    }

    /// Whether `path` exists under one of the bases; a `*` in its last
    /// component matches any run of characters.
    static func resolves(_ path: String) -> Bool {
        let fm = FileManager.default
        for base in bases {
            guard path.contains("*") else {
                var isDir: ObjCBool = false
                if fm.fileExists(atPath: base + "/" + path, isDirectory: &isDir), !path.hasSuffix("/") || isDir.boolValue { return true }
                continue
            }
            let dir = (path as NSString).deletingLastPathComponent
            let pattern = (path as NSString).lastPathComponent.split(separator: "*", omittingEmptySubsequences: false).map(String.init)
            let names = (try? fm.contentsOfDirectory(atPath: dir.isEmpty ? base : base + "/" + dir)) ?? []
            if names.contains(where: { matches($0, pattern) }) { return true }
        }
        return false
    }

    static func matches(_ name: String, _ parts: [String]) -> Bool {
        guard let first = parts.first, name.hasPrefix(first) else { return false }
        var rest = Substring(name.dropFirst(first.count))
        for (i, p) in parts.enumerated().dropFirst() {
            if i == parts.count - 1 { return rest.hasSuffix(p) && rest.count >= p.count }
            guard let r = rest.range(of: p) else { return false }
            rest = rest[r.upperBound...]
        }
        return rest.isEmpty
    }

    /// The Swift files of a folder, as paths relative to it (`Supervisor/Reload.swift`).
    static func swiftFiles(under dir: String, recursive: Bool) -> [String] {
        let fm = FileManager.default
        let names = recursive ? (fm.subpaths(atPath: dir) ?? []) : ((try? fm.contentsOfDirectory(atPath: dir)) ?? [])
        return names.filter { $0.hasSuffix(".swift") }.sorted()
    }

    @Test func everyPathThePageNamesExists() throws {
        let paths = Self.namedPaths(try Self.text())
        #expect(paths.count > 50, "the page's file maps and walks name many files")
        for p in paths { #expect(Self.resolves(p), "\(Self.page) names `\(p)`, which is not in the package") }
    }

    /// The check can fail: a made-up file, a file named as a folder and a
    /// pattern nothing matches do not resolve.
    @Test func theCheckRefusesWhatIsNotThere() {
        #expect(Self.resolves("Supervisor/Reload.swift"))
        #expect(Self.resolves("Config/ConfigParser*.swift"))
        #expect(Self.resolves("Kernel/"))
        #expect(!Self.resolves("Supervisor/NoSuchFile.swift"))
        #expect(!Self.resolves("Check.swift/"))
        #expect(!Self.resolves("Config/NoSuch*.swift"))
        #expect(Self.namedPaths("a `Runtime/Gone.swift` b `not a path` `Kernel/` `x`") == ["Runtime/Gone.swift", "Kernel/"])
    }

    /// Each file of the daemon, and of the engine's top folder, is in the
    /// page's maps under its path (a new file cannot be left out).
    @Test func theFileMapsNameEveryFile() throws {
        let text = try Self.text()
        let daemon = Self.swiftFiles(under: Self.root + "/Sources/BoardDaemon", recursive: true)
        let engine = Self.swiftFiles(under: Self.root + "/Sources/Boardloop", recursive: false)
        #expect(daemon.contains("Supervisor/Reload.swift") && engine.contains("Callouts.swift"))
        for f in daemon + engine { #expect(text.contains("`\(f)`"), "\(Self.page)'s file maps do not name `\(f)`") }
    }
}
