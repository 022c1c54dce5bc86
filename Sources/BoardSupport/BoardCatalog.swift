/// The board files a program can use, found in a list of directories; an
/// earlier directory wins over a later one for the same board name.
///
/// The standard order: `/etc/boardd/boards` (a user's own boards and
/// overrides), `/usr/share/boardd/boards` (installed), then the `boards/`
/// directory of the source checkout the running executable is in (a
/// `.build/…/boardd` of a checkout). Never a path compiled into the binary:
/// a binary copied elsewhere does not read files from where it was built.
public struct BoardCatalog: Sendable {
    public let directories: [String]
    /// Board files built into the program (name to the file's text), for a
    /// name no directory has: `boardd --demo` brings its own board.
    public let builtIn: [String: String]

    public init(directories: [String], builtIn: [String: String] = [:]) {
        self.directories = directories
        self.builtIn = builtIn
    }

    /// The standard search order (see the type's documentation).
    public static var standard: BoardCatalog { BoardCatalog(directories: standardDirectories()) }

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

    public var names: [String] { Array(Set(files().map(\.name)).union(builtIn.keys)).sorted() }

    /// Loads one board by name. A name the catalog does not have, or a
    /// broken board file, is reported in `log`.
    public func board(named name: String, log: DiagnosticLog, at position: Position = .none, path: String = "")
        -> Board?
    {
        let all = files()
        guard let file = all.first(where: { $0.name == name }) else {
            if let text = builtIn[name] { return Self.load(name: name, text: text, log: log) }
            let known = names
            log.error(
                position, path,
                "unknown board '\(name)'" + DidYouMean.hint(name, in: known)
                    + " (known boards: \(known.isEmpty ? "none found in \(directories.joined(separator: ", "))" : known.joined(separator: ", ")))"
            )
            return nil
        }
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

    /// Every board that loads, and the problems of those that do not.
    public func loadAll() -> (boards: [Board], problems: [Diagnostic]) {
        var boards: [Board] = []
        var problems: [Diagnostic] = []
        for file in files() {
            let log = DiagnosticLog(file: file.path)
            if let b = Self.load(file, log: log) { boards.append(b) }
            problems += log.items
        }
        return (boards, problems)
    }
}
