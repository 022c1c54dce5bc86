import BoardControl
import Boardloop
import BoardSupport
import CDaemon
import Glibc
import Logging

/// Where the control socket is, and making it: a stale socket file is
/// replaced, a live one refused, the file given its mode and group.
extension ControlServer {
    /// The socket's path: `--socket PATH`, the config's `control: { path }`,
    /// `$RUNTIME_DIRECTORY/boardd.sock` (systemd), `/run/boardd/boardd.sock`
    /// when `/run/boardd` is writable, `$XDG_RUNTIME_DIR/boardd.sock`, else
    /// `/tmp/boardd-$UID.sock` (`name`: the file name in those directories).
    public static func resolvePath(
        flag: String?, config: String?, name: String = "boardd.sock",
        environment: [String: String] = SocketPath.currentEnvironment(),
        writable: (String) -> Bool = { access($0, W_OK) == 0 }, uid: UInt32 = getuid()
    ) -> String {
        if let flag, !flag.isEmpty { return flag }
        if let config, !config.isEmpty { return config }
        return SocketPath.resolve(explicit: nil, environment: environment, name: name, uid: uid, isWritable: writable)
    }

    /// Fails when a daemon answers on the path `config` and `options`
    /// resolve to: the launcher asks before it requests any line, so a
    /// second boardd is refused for its socket, not for a busy line.
    public static func refuseLive(_ options: Options, _ config: ControlConfig) throws {
        guard config.enabled else { return }
        let path = resolvePath(flag: options.path, config: config.path, name: options.defaultName)
        var st = stat()
        guard lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFSOCK else { return }
        try refuseForeign(path, st)
        let probe = bd_unix_connect(path)
        guard probe >= 0 else { return }
        var p: pid_t = 0, u: uid_t = 0, g: gid_t = 0
        _ = bd_peer_credentials(probe, &p, &u, &g)
        Glibc.close(probe)
        throw StartError.live(path: path, pid: p, uid: u)
    }

    /// A second boardd on mock chips at the default path (two `--mock` runs
    /// in two terminals): where a boardd of this user answers on the
    /// default socket, the first free `boardd-N.sock` (N = 2…9) in the same
    /// directory instead. Nil when the options stand as they are (a path
    /// given, the socket free, or another user's: refused at start).
    public static func besideAnother(_ options: Options, _ config: ControlConfig) -> (options: Options, taken: String)? {
        guard config.enabled, options.path == nil, config.path == nil else { return nil }
        guard case let .live(taken, _, uid)? = liveProblem(options, config), uid == getuid() else { return nil }
        let base = options.defaultName.hasSuffix(".sock") ? String(options.defaultName.dropLast(5)) : options.defaultName
        for n in 2...9 {
            var o = options
            o.defaultName = "\(base)-\(n).sock"
            if liveProblem(o, config) == nil { return (o, taken) }
        }
        return nil
    }

    /// What `refuseLive` would throw.
    static func liveProblem(_ options: Options, _ config: ControlConfig) -> StartError? {
        do { try refuseLive(options, config) } catch let e as StartError { return e } catch { return nil }
        return nil
    }

    /// A socket file another user made (in `/tmp`, anyone may): neither
    /// asked whether it is live nor replaced.
    static func refuseForeign(_ path: String, _ st: stat) throws {
        if st.st_uid != getuid() && st.st_uid != geteuid() && st.st_uid != 0 { throw StartError.foreign(path: path, uid: st.st_uid) }
    }


    /// Binds `path`: a stale socket file (nothing answers) is replaced; a
    /// live one (a daemon answers) is an error naming it.
    static func listen(_ path: String, mode: UInt32, group: String?) throws -> Int32 {
        guard path.utf8.count <= ControlConfig.maxPathBytes else {
            throw StartError.system(path: path, what: "the path is longer than a Unix socket path may be", errno: ENAMETOOLONG)
        }
        var st = stat()
        if lstat(path, &st) == 0 {
            guard st.st_mode & S_IFMT == S_IFSOCK else { throw StartError.notSocket(path) }
            try refuseForeign(path, st)
            let probe = bd_unix_connect(path)
            if probe >= 0 {
                var p: pid_t = 0, u: uid_t = 0, g: gid_t = 0
                _ = bd_peer_credentials(probe, &p, &u, &g)
                Glibc.close(probe)
                throw StartError.live(path: path, pid: p, uid: u)
            }
            guard -probe == ECONNREFUSED else { throw StartError.system(path: path, what: "cannot tell whether it is in use", errno: -probe) }
            // Stale: left by a daemon that did not remove it.
            guard unlink(path) == 0 || errno == ENOENT else { throw StartError.system(path: path, what: "cannot remove the stale socket", errno: errno) }
        }
        // Made without permissions, then given `mode`: no moment where
        // others may connect.
        let old = umask(0o777)
        let fd = bd_unix_listen(path, 16)
        umask(old)
        guard fd >= 0 else { throw StartError.system(path: path, what: "cannot listen", errno: -fd) }
        var gid: gid_t = gid_t.max
        if let group {
            guard let gr = getgrnam(group) else {
                Glibc.close(fd)
                unlink(path)
                throw StartError.system(path: path, what: "no group named '\(group)'", errno: ENOENT)
            }
            gid = gr.pointee.gr_gid
        }
        if (group != nil && chown(path, uid_t.max, gid) != 0) || chmod(path, mode_t(mode)) != 0 {
            let e = errno
            Glibc.close(fd)
            unlink(path)
            throw StartError.system(path: path, what: "cannot set its group or mode", errno: e)
        }
        return fd
    }
}
