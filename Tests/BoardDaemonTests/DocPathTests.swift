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
    /// README.md and every page of docs/.
    static func pages() throws -> [(name: String, text: String)] {
        let docs = try FileManager.default.contentsOfDirectory(atPath: root + "/docs").filter { $0.hasSuffix(".md") }.sorted()
        return try (["README.md"] + docs.map { "docs/" + $0 }).map { ($0, try String(contentsOfFile: root + "/" + $0, encoding: .utf8)) }
    }

    /// A path that starts with one of the package's top folders
    /// (`scripts/`, `Sources/`, `examples/`, …) is the package's, on any page.
    @Test func everyPackagePathTheDocsNameExists() throws {
        let tops = try FileManager.default.contentsOfDirectory(atPath: Self.root).filter { name in
            var isDir: ObjCBool = false
            return !name.hasPrefix(".") && FileManager.default.fileExists(atPath: Self.root + "/" + name, isDirectory: &isDir) && isDir.boolValue
        }.map { $0 + "/" }
        #expect(tops.contains("scripts/") && tops.contains("Sources/"))
        var checked = 0
        for (name, text) in try Self.pages() {
            let spans = text.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
            for p in spans where !p.contains(" ") && tops.contains(where: { p.hasPrefix($0) }) {
                checked += 1
                #expect(FileManager.default.fileExists(atPath: Self.root + "/" + p), "\(name) names `\(p)`, which is not in the package")
            }
        }
        #expect(checked > 20)
    }

    /// A link to a section (`[x](engine.md#cf-compared)`, `[x](#gestures)`)
    /// names a heading the page has.
    @Test func everySectionLinkHasItsHeading() throws {
        let pages = try Self.pages()
        func anchors(_ text: String) -> Set<String> {
            Set(text.split(separator: "\n").filter { $0.hasPrefix("#") }.map { line in
                let title = line.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces).lowercased()
                return String(title.compactMap { c -> Character? in
                    c == " " ? "-" : (c.isLetter || c.isNumber || c == "-" || c == "_") ? c : nil
                })
            })
        }
        var checked = 0
        for (name, text) in pages {
            var rest = Substring(text)
            while let open = rest.range(of: "](") {
                rest = rest[open.upperBound...]
                guard let close = rest.firstIndex(of: ")") else { break }
                let target = rest[..<close]
                guard let hash = target.firstIndex(of: "#"), !target.contains("://") else { continue }
                let file = String(target[..<hash]), anchor = String(target[target.index(after: hash)...])
                let dir = (name as NSString).deletingLastPathComponent
                let page = file.isEmpty ? name : (dir.isEmpty ? file : dir + "/" + file)
                let text = try #require(pages.first { $0.name == page }?.text, "\(name) links to \(page), not a page")
                #expect(anchors(text).contains(anchor), "\(name) links to \(page)#\(anchor), which has no such heading")
                checked += 1
            }
        }
        #expect(checked > 3)
    }
    /// architecture.md's account of what calls the kernel outside the
    /// engine's `Kernel/` folder names every file that calls the C shim or
    /// glibc's pthread functions there, and each shim function it calls;
    /// and no file there reads errno.
    @Test func theKernelCallsOutsideKernelAreTheOnesThePageNames() throws {
        let text = try Self.text()
        let start = try #require(text.range(of: "**What calls the kernel outside `Kernel/`.**"))
        let end = try #require(text.range(of: "\n\n", range: start.upperBound..<text.endIndex))
        let paragraph = String(text[start.lowerBound..<end.lowerBound])
        let dir = Self.root + "/Sources/Boardloop"
        let calls = try NSRegularExpression(pattern: #"\b(bl_[a-z0-9_]+|pthread_[a-z_]+)\("#)
        let errnoRead = try NSRegularExpression(pattern: #"\berrno\b(?!:)"#)
        var found = 0
        for file in Self.swiftFiles(under: dir, recursive: false) {
            let code = try String(contentsOfFile: dir + "/" + file, encoding: .utf8).split(separator: "\n")
                .filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("//") }.joined(separator: "\n")
            let range = NSRange(code.startIndex..., in: code)
            #expect(errnoRead.firstMatch(in: code, range: range) == nil, "\(file) reads errno outside Kernel/")
            for m in calls.matches(in: code, range: range) {
                let name = String(code[Range(m.range(at: 1), in: code)!])
                found += 1
                #expect(paragraph.contains("`\(file)`"), "\(file) calls \(name), and the page does not name it")
                if name.hasPrefix("bl_") {
                    #expect(paragraph.contains(name), "\(file) calls the shim's \(name), and the page does not name it")
                }
            }
        }
        #expect(found > 0, "the scan finds the calls the page names")
    }
}
