import Synchronization

/// The board files a program can use: found in a list of directories, then
/// among the boards built into the program; an earlier directory wins over a
/// later one for the same board name, and any directory over a built-in board.
///
/// The standard order: `/etc/boardd/boards` (a user's own boards and
/// overrides), `/usr/share/boardd/boards` (installed), the `boards/`
/// directory of the source checkout the running executable is in (a
/// `.build/…/boardd` of a checkout, so an edit there is seen without a
/// rebuild), then every file of `boards/` as compiled in
/// (`builtInBoards`). Never a path compiled into the binary: a binary copied
/// elsewhere reads no files from where it was built, and needs none.
public struct BoardCatalog: Sendable {
    public let directories: [String]
    /// Board files built into the program (name to the file's text), for a
    /// name no directory has.
    public let builtIn: [String: String]
    /// Boards this catalog (and its copies) parsed so far, files and built-in
    /// ones: a start parses the board its config names and no other unless
    /// it must detect.
    public var boardsParsed: Int { parsed.value.load(ordering: .relaxed) }
    private let parsed = ParseCount()

    private final class ParseCount: Sendable {
        let value = Atomic<Int>(0)
    }

    public init(directories: [String], builtIn: [String: String] = [:]) {
        self.directories = directories
        self.builtIn = builtIn
    }

    /// Every file of `boards/`, compiled in (Package.swift, `resources`,
    /// through the links in `Sources/BoardSupport/Boards/`): name to text.
    public static let builtInBoards: [String: String] = [
        "demo": text(PackageResources.demo_yaml),
        "generic": text(PackageResources.generic_yaml),
        "gpio-sim": text(PackageResources.gpio_sim_yaml),
        "raspberry-pi-1": text(PackageResources.raspberry_pi_1_yaml),
        "raspberry-pi-2": text(PackageResources.raspberry_pi_2_yaml),
        "raspberry-pi-3": text(PackageResources.raspberry_pi_3_yaml),
        "raspberry-pi-4": text(PackageResources.raspberry_pi_4_yaml),
        "raspberry-pi-400": text(PackageResources.raspberry_pi_400_yaml),
        "raspberry-pi-5": text(PackageResources.raspberry_pi_5_yaml),
        "raspberry-pi-500": text(PackageResources.raspberry_pi_500_yaml),
        "raspberry-pi-zero": text(PackageResources.raspberry_pi_zero_yaml),
        "raspberry-pi-zero-w": text(PackageResources.raspberry_pi_zero_w_yaml),
        "raspberry-pi-zero-2-w": text(PackageResources.raspberry_pi_zero_2_w_yaml),
    ]

    private static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    /// The standard catalog with `directories` searched first (`--boards DIR`).
    public static func standard(searchingFirst directories: [String]) -> BoardCatalog {
        BoardCatalog(directories: directories + standardDirectories(), builtIn: builtInBoards)
    }

    /// The standard search order (see the type's documentation).
    public static var standard: BoardCatalog { standard(searchingFirst: []) }

    public static func standardDirectories() -> [String] {
        var dirs = ["/etc/boardd/boards", "/usr/share/boardd/boards"]
        if let checkout = checkoutBoardsDirectory() { dirs.append(checkout) }
        return dirs
    }

    /// The checkout's `boards/`: beside the `Package.swift` above the running
    /// executable (`.build/debug/boardd` of a checkout).
    public static func checkoutBoardsDirectory() -> String? {
        var starts: [String] = []
        if let exe = FileSystem.readLink("/proc/self/exe") { starts.append(FileSystem.parent(exe)) }
        for start in starts {
            var dir = start
            for _ in 0..<8 {
                let boards = FileSystem.join(dir, "boards")
                if FileSystem.exists(FileSystem.join(dir, "Package.swift")) && FileSystem.isDirectory(boards) {
                    return boards
                }
                let parent = FileSystem.parent(dir)
                if parent == dir { break }
                dir = parent
            }
        }
        return nil
    }

    /// Every board name with the file that wins for it, sorted by name.
    public func files() -> [(name: String, path: String)] {
        var found: [String: String] = [:]
        for dir in directories.reversed() where FileSystem.isDirectory(dir) {
            for entry in FileSystem.list(dir) where entry.hasSuffix(".yaml") && !entry.hasPrefix(".") {
                found[String(entry.dropLast(5))] = FileSystem.join(dir, entry)
            }
        }
        return found.keys.sorted().map { ($0, found[$0]!) }
    }

    /// Where a board comes from: a file, or the program itself.
    public enum Source: Sendable, Equatable, CustomStringConvertible {
        case file(String)
        case builtIn
        public var description: String {
            switch self {
            case let .file(path): return path
            case .builtIn: return "built in"
            }
        }
    }

    /// Every board name with each place it is found, the one used first
    /// (then those it overrides), sorted by name.
    public func sources() -> [(name: String, sources: [Source])] {
        var found: [String: [Source]] = [:]
        for dir in directories where FileSystem.isDirectory(dir) {
            for entry in FileSystem.list(dir).sorted() where entry.hasSuffix(".yaml") && !entry.hasPrefix(".") {
                found[String(entry.dropLast(5)), default: []].append(.file(FileSystem.join(dir, entry)))
            }
        }
        for name in builtIn.keys { found[name, default: []].append(.builtIn) }
        return found.keys.sorted().map { ($0, found[$0]!) }
    }

    public var names: [String] { Array(Set(files().map(\.name)).union(builtIn.keys)).sorted() }

    /// Loads one board by name. A name the catalog does not have, or a
    /// broken board file, is reported in `log`.
    public func board(named name: String, log: DiagnosticLog, at position: Position = .none, path: String = "")
        -> Board?
    {
        let all = files()
        guard let file = all.first(where: { $0.name == name }) else {
            if let text = builtIn[name] {
                parsed.value.add(1, ordering: .relaxed)
                return Self.load(name: name, text: text, log: log)
            }
            let known = names
            log.error(
                position, path,
                "unknown board '\(name)'" + DidYouMean.hint(name, in: known)
                    + " (known boards: \(known.isEmpty ? "none found in \(directories.joined(separator: ", "))" : known.joined(separator: ", ")))"
            )
            return nil
        }
        parsed.value.add(1, ordering: .relaxed)
        return Self.load(file, log: log)
    }

    static func load(_ file: (name: String, path: String), log: DiagnosticLog) -> Board? {
        let fileLog = DiagnosticLog(file: file.path)
        let board = BoardFile.load(path: file.path, log: fileLog)
        if let board, board.name != file.name {
            fileLog.error(.none, "name", "the board is named '\(board.name)' but its file is \(file.name).yaml")
        }
        for d in fileLog.items { log.append(d) }
        return fileLog.hasErrors ? nil : board
    }

    static func load(name: String, text: String, log: DiagnosticLog) -> Board? {
        let file = "boards/\(name).yaml (built in)"
        let fileLog = DiagnosticLog(file: file)
        let board = BoardFile.parse(text, file: file, log: fileLog)
        if let board, board.name != name {
            fileLog.error(.none, "name", "the board is named '\(board.name)' but it is built in as \(name)")
        }
        for d in fileLog.items { log.append(d) }
        return fileLog.hasErrors ? nil : board
    }

    /// Every board that loads (a file, else the built-in one), and the
    /// problems of those that do not.
    public func loadAll() -> (boards: [Board], problems: [Diagnostic]) {
        var boards: [Board] = []
        var problems: [Diagnostic] = []
        let files = files()
        for name in Set(files.map(\.name)).union(builtIn.keys).sorted() {
            parsed.value.add(1, ordering: .relaxed)
            if let file = files.first(where: { $0.name == name }) {
                let log = DiagnosticLog(file: file.path)
                if let b = Self.load(file, log: log) { boards.append(b) }
                problems += log.items
            } else if let text = builtIn[name] {
                let log = DiagnosticLog(file: "boards/\(name).yaml (built in)")
                if let b = Self.load(name: name, text: text, log: log) { boards.append(b) }
                problems += log.items
            }
        }
        return (boards, problems)
    }
}
