import BoardSupport
import Glibc

/// What the machine checking a config has (CPUs, the facts detection reads).
public struct MachineInfo: Sendable, Equatable {
    /// CPUs the kernel knows (`sysconf(_SC_NPROCESSORS_CONF)`).
    public var cpuCount: Int
    public var facts: MachineFacts

    public init(cpuCount: Int, facts: MachineFacts) {
        self.cpuCount = cpuCount
        self.facts = facts
    }

    /// This machine, with detection facts read under `root`.
    public static func current(root: String = "/") -> MachineInfo {
        MachineInfo(cpuCount: max(1, sysconf(Int32(_SC_NPROCESSORS_CONF))), facts: MachineFacts.read(root: root))
    }
}

/// How a config is loaded.
public struct LoadOptions: Sendable {
    /// A board name that overrides the config's `board` (`--board`).
    public var board: String?
    public var catalog: BoardCatalog
    public var machine: MachineInfo
    /// A config file that users other than boardd's own and root may change
    /// is an error, not a warning (boardd under systemd, unless
    /// `--allow-insecure-config`): its commands run as boardd's user.
    public var refuseInsecureConfig = false
    /// `--mock`: the board's chips are served by mock chips made from the
    /// board file (`MockBoard`), whatever the board's backend; `board: auto`
    /// is then an error (detection reads this machine, not the config's board).
    public var mock = false

    public init(board: String? = nil, catalog: BoardCatalog = .standard, machine: MachineInfo = .current()) {
        self.board = board
        self.catalog = catalog
        self.machine = machine
    }
}

/// The outcome of loading: a config when there were no errors, and every
/// diagnostic (errors and warnings) in file order.
public struct LoadResult: Sendable {
    public var config: DaemonConfig?
    public var diagnostics: [Diagnostic]
    public var errors: [Diagnostic] { diagnostics.filter { $0.severity == .error } }
    public var warnings: [Diagnostic] { diagnostics.filter { $0.severity == .warning } }
}

/// Loads and checks config files.
public enum ConfigLoader {
    /// Reads `path` and loads it; an unreadable file is one error. Only a
    /// regular file of at most `FileSystem.maximumConfigSize` bytes is read
    /// (never a FIFO or a device, which could block or never end). The
    /// config, every file it includes and the board file it names must be
    /// writable only by their owner, root or boardd's user (`whoElseMayWrite`).
    public static func load(path: String, options: LoadOptions = LoadOptions()) -> LoadResult {
        switch FileSystem.readConfigText(path) {
        case let .success(text):
            var (result, included) = parse(text: text, file: path, options: options)
            var insecure: [Diagnostic] = []
            // `what` (the config, an included file, the board file) `who`:
            // anyone who can change it decides `decides`.
            func check(_ file: String, _ what: String, decides: String) {
                guard let who = whoElseMayWrite(file) else { return }
                insecure.append(
                    Diagnostic(
                        options.refuseInsecureConfig ? .error : .warning, file: file, line: 0, column: 0, path: "",
                        message:
                            "\(what) \(who): anyone who can change it decides \(decides); make it writable only by its owner, root or boardd's user (chmod o-w, chown)\(options.refuseInsecureConfig ? "; --allow-insecure-config accepts it" : "")"
                    ))
            }
            var seen: Set<String> = []
            for file in [path] + included where seen.insert(file).inserted {
                check(file, file == path ? "the config" : "the included file", decides: "what boardd runs (its commands run as boardd's user)")
            }
            // The board file decides which lines are driven, and how: the
            // same rule (a built-in board has no file).
            if let board = result.config?.board.file { check(board, "the board file", decides: "which lines boardd drives and how") }
            result.diagnostics.insert(contentsOf: insecure, at: 0)
            if insecure.contains(where: { $0.severity == .error }) {
                result.config = nil
            } else {
                result.config?.warnings.insert(contentsOf: insecure, at: 0)
            }
            return result
        case let .failure(why):
            let at = why.position ?? .none
            return LoadResult(
                config: nil,
                diagnostics: [Diagnostic(.error, file: path, line: at.line, column: at.column, path: "", message: "\(why)")])
        }
    }

    /// Who besides boardd's user and root may change the file at `path`, in
    /// words (nil: nobody): a file writable by every user, or owned by
    /// another user.
    static func whoElseMayWrite(_ path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        let mode = String(st.st_mode & 0o7777, radix: 8)
        if st.st_mode & S_IWOTH != 0 { return "is writable by every user (mode 0\(mode))" }
        if st.st_uid != 0 && st.st_uid != geteuid() { return "is owned by uid \(st.st_uid), not by boardd's user (uid \(geteuid())) or root" }
        return nil
    }

    /// Loads a config from text; `file` is the name used in messages.
    /// Files it includes are read relative to `file`'s directory, and
    /// `!secret` from `secrets.yaml` there.
    public static func load(text: String, file: String, options: LoadOptions = LoadOptions()) -> LoadResult {
        parse(text: text, file: file, options: options).result
    }

    /// Loads a config from text, with the files it included.
    static func parse(text: String, file: String, options: LoadOptions) -> (result: LoadResult, included: [String]) {
        let parser = ConfigParser(file: file, options: options)
        let config = parser.parse(text)
        let diagnostics = parser.log.sorted
        let failed = diagnostics.contains { $0.severity == .error }
        var result = config
        result?.warnings = diagnostics.filter { $0.severity == .warning }
        return (LoadResult(config: failed ? nil : result, diagnostics: diagnostics), parser.includedFiles)
    }
}
