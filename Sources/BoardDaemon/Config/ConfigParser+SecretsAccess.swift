import BoardSupport
import Glibc

/// Who may read the secrets file. The packaged unit runs boardd as the
/// user `boardd` (`User=boardd`, `Group=boardd`), so the file must be
/// readable by that user: owned by boardd, mode 0600 (docs/config.md,
/// "`!secret NAME`"). A check run as root reads any file, so it also says
/// when the user boardd could not.
extension ConfigParser {
    /// The user the packaged unit runs boardd as.
    static let serviceUser = "boardd"

    /// Why the secrets file could not be read, in words: for a permission,
    /// which user was refused and which must be able to read it.
    static func unreadableSecrets(_ why: FileSystem.ReadError) -> String {
        guard why.errno == EACCES || why.errno == EPERM else { return "\(why)" }
        return
            "\(why) for the user \(userName(geteuid())) (uid \(geteuid())), who runs this; the user boardd runs as must be able to read it (the packaged unit runs it as \(serviceUser): chown \(serviceUser):\(serviceUser) and chmod 600 the file)"
    }

    /// The name of the user `uid`, or `uid N`.
    static func userName(_ uid: uid_t) -> String {
        guard let pw = getpwuid(uid) else { return "uid \(uid)" }
        return String(cString: pw.pointee.pw_name)
    }

    /// A warning when root checks a secrets file that the user `boardd`
    /// (when there is one) may not read: the check passes, the service
    /// would not start.
    func warnIfTheServiceCannotRead(_ path: String, source: Int) {
        guard geteuid() == 0, let pw = getpwnam(Self.serviceUser) else { return }
        let uid = pw.pointee.pw_uid, gid = pw.pointee.pw_gid
        var st = stat()
        guard stat(path, &st) == 0, !Self.mayRead(st, uid: uid, gid: gid, user: Self.serviceUser) else { return }
        log.warning(
            Position(line: 0, column: 0, source: source), "",
            "the user \(Self.serviceUser), whom the packaged unit runs boardd as, cannot read it (owner uid \(st.st_uid), group gid \(st.st_gid), mode 0\(String(st.st_mode & 0o777, radix: 8))); boardd would fail to start there: chown \(Self.serviceUser):\(Self.serviceUser) \(path) && chmod 600 \(path), and check as that user: sudo -u \(Self.serviceUser) boardd --check --config \(file)"
        )
    }

    /// Whether the user `uid` (primary group `gid`) may read a file of `st`
    /// by its mode bits (no ACLs).
    static func mayRead(_ st: stat, uid: uid_t, gid: gid_t, user: String) -> Bool {
        if st.st_uid == uid { return st.st_mode & S_IRUSR != 0 }
        var groups = [gid_t](repeating: 0, count: 64)
        var n = Int32(groups.count)
        let member = getgrouplist(user, gid, &groups, &n) >= 0 && groups.prefix(Int(n)).contains(st.st_gid)
        if member || st.st_gid == gid { return st.st_mode & S_IRGRP != 0 }
        return st.st_mode & S_IROTH != 0
    }
}
