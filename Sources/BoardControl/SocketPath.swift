import Glibc

/// The release of boardloop's executables: `boardd --version` and
/// `boardctl --version` both print it, with the build's facts.
public enum Release {
    public static let version = "0.1.0"
    /// `git describe --always --dirty` of the tree the build was made from
    /// (`unknown` outside a git checkout), read at build time.
    public static let commit = BuildInfo.commit
    /// The libgpiod version the build compiled against (pkg-config at build
    /// time; `unknown` without it).
    public static let libgpiod = BuildInfo.libgpiod
}

/// Where the control socket is, in the order the control protocol gives
/// (boardd also reads its config's `control: { path: }` between the first
/// and the second; boardctl has no config):
/// `--socket PATH`, `$RUNTIME_DIRECTORY/boardd.sock` (systemd),
/// `/run/boardd/boardd.sock` when `/run/boardd` is writable,
/// `$XDG_RUNTIME_DIR/boardd.sock`, else `/tmp/boardd-$UID.sock`.
public enum SocketPath {
    public static let systemDirectory = "/run/boardd"

    /// Where a boardd started now listens (boardd's rule, after its
    /// `--socket` and config): `name` in the first of those directories it
    /// may write; in /tmp with the user's id (`boardd-$UID.sock`).
    public static func resolve(
        explicit: String?, environment: [String: String], name: String = "boardd.sock", uid: UInt32 = getuid(),
        isWritable: (String) -> Bool = { access($0, W_OK) == 0 }, system systemDirectory: String = SocketPath.systemDirectory
    ) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        // systemd sets RUNTIME_DIRECTORY to the service's runtime directories,
        // colon-separated when there are several: the first is boardd's.
        if let dir = environment["RUNTIME_DIRECTORY"]?.split(separator: ":").first, !dir.isEmpty {
            return "\(dir)/\(name)"
        }
        if isWritable(systemDirectory) { return "\(systemDirectory)/\(name)" }
        if let dir = environment["XDG_RUNTIME_DIR"], !dir.isEmpty { return "\(dir)/\(name)" }
        let base = name.hasSuffix(".sock") ? String(name.dropLast(5)) : name
        return "/tmp/\(base)-\(uid).sock"
    }

    /// The socket a client should try: `--socket PATH`; else the first of
    /// the places a boardd listens (in the order above) where a socket file
    /// exists and is not stale (nobody listening: a crashed daemon's file)
    /// — so a person outside boardd's service, who may not write
    /// `/run/boardd`, still finds the system daemon's socket there, and a
    /// crashed daemon's file does not hide a live one further on; else the
    /// first that exists; else where a boardd started now would listen
    /// (`resolve`), for the error.
    public static func find(
        explicit: String?, environment: [String: String], uid: UInt32 = getuid(),
        exists: (String) -> Bool = { access($0, F_OK) == 0 }, isWritable: (String) -> Bool = { access($0, W_OK) == 0 },
        isStale: (String) -> Bool = SocketPath.isStale, system systemDirectory: String = SocketPath.systemDirectory
    ) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        var dirs: [String] = []
        if let dir = environment["RUNTIME_DIRECTORY"]?.split(separator: ":").first, !dir.isEmpty { dirs.append(String(dir)) }
        dirs.append(systemDirectory)
        if let dir = environment["XDG_RUNTIME_DIR"], !dir.isEmpty { dirs.append(dir) }
        // `boardd --demo` listens as boardd-demo.sock in the same places (it
        // never takes a daemon's socket): found when no daemon's is there.
        let candidates =
            dirs.map { "\($0)/boardd.sock" } + ["/tmp/boardd-\(uid).sock"] + dirs.map { "\($0)/boardd-demo.sock" }
            + ["/tmp/boardd-demo-\(uid).sock"]
        let present = candidates.filter(exists)
        return present.first { !isStale($0) } ?? present.first
            ?? resolve(explicit: nil, environment: environment, uid: uid, isWritable: isWritable, system: systemDirectory)
    }

    /// The socket a client should try (`find`), or why none can be: a
    /// directory a daemon's socket is kept in (`$RUNTIME_DIRECTORY`,
    /// `/run/boardd`) that exists but that this user may not enter or
    /// read, when no socket was found elsewhere — the system daemon may
    /// well be running there, so "no boardd is running" at a fallback path
    /// would mislead (`ControlError.directoryDenied`, exit 4).
    /// `canEnter`: whether the user may search and read a directory;
    /// `group`: the group owning it (for the message); `system`: the
    /// system directory (tests).
    public static func locate(
        explicit: String?, environment: [String: String], uid: UInt32 = getuid(),
        exists: (String) -> Bool = { access($0, F_OK) == 0 }, isWritable: (String) -> Bool = { access($0, W_OK) == 0 },
        isStale: (String) -> Bool = SocketPath.isStale, canEnter: (String) -> Bool = { access($0, R_OK | X_OK) == 0 },
        group: (String) -> String? = SocketPath.groupName, system systemDirectory: String = SocketPath.systemDirectory
    ) -> Result<String, ControlError> {
        let path = find(
            explicit: explicit, environment: environment, uid: uid, exists: exists, isWritable: isWritable, isStale: isStale,
            system: systemDirectory)
        if let explicit, !explicit.isEmpty { return .success(explicit) }
        if exists(path) { return .success(path) }
        var dirs: [String] = []
        if let dir = environment["RUNTIME_DIRECTORY"]?.split(separator: ":").first, !dir.isEmpty { dirs.append(String(dir)) }
        dirs.append(systemDirectory)
        for dir in dirs where exists(dir) && !canEnter(dir) {
            return .failure(.directoryDenied(path: dir, group: group(dir) ?? "boardd"))
        }
        return .success(path)
    }

    /// The name of the group that owns `path` (nil when it cannot be read).
    public static func groupName(_ path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0, let g = getgrgid(st.st_gid), let name = g.pointee.gr_name else { return nil }
        return String(cString: name)
    }

    /// Whether nobody listens on the socket file at `path` (connect is
    /// refused). A socket a daemon listens on but this user may not use is
    /// not stale: the person is told about the permission.
    public static func isStale(_ path: String) -> Bool {
        do {
            close(try ControlClient.connect(path))
            return false
        } catch {
            if case .noDaemon = error { return true }
            return false
        }
    }

    /// The system socket, when boardctl chose another path on its own and a
    /// socket file exists there too: named in the error as a hint (`find`
    /// passes over it only when nobody listened on it at that moment).
    public static func systemSocket(insteadOf path: String, exists: (String) -> Bool = { access($0, F_OK) == 0 }) -> String? {
        let system = "\(systemDirectory)/boardd.sock"
        return path != system && exists(system) ? system : nil
    }

    /// This process's environment as a dictionary.
    public static func currentEnvironment() -> [String: String] {
        var env: [String: String] = [:]
        var p = environ
        while let entry = p.pointee {
            let s = String(cString: entry)
            if let eq = s.firstIndex(of: "=") { env[String(s[..<eq])] = String(s[s.index(after: eq)...]) }
            p += 1
        }
        return env
    }
}
