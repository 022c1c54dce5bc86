import BoardControl
import BoardSupport
import BoardloopGPIO
import Glibc

/// The last applied config's safe outputs, as the running daemon keeps
/// them in its runtime directory for `boardd --safe-outputs`: a config that
/// no longer loads (a bad edit, a refused reload, then a crash) does not
/// stop the outputs from going safe.
///
/// The file is line-based text, one record a line, fields separated by a
/// tab, each field with `%`, tab, CR, LF and other control characters
/// written `%XX`:
///
///     boardd-safe-outputs	1
///     board	raspberry-pi-4
///     backend	gpio                  (or mock: the daemon ran on mock chips)
///     config	/etc/boardd/boardd.yaml   (the config's real path)
///     written	2025-05-01T12:00:00Z	pid 812
///     line	valve	label:pinctrl-bcm2711	5	active-high	push-pull	as-is	off
///     checksum	sha256	<SHA-256 of every byte before this line>
///
/// A line's chip is how it is opened (`label:`, `name:` or `path:`, as
/// the config named it, or the path of the chip a line found by its name
/// was on) and its offset is the one requested. A file cut short has no
/// checksum line, and a changed byte fails the checksum: either is reported
/// and the table is not used.
struct SafeTable: Equatable {
    static let magic = "boardd-safe-outputs"
    static let version = 1
    /// The file's name in the runtime directory.
    static let fileName = "boardd-safe-outputs"
    /// The most a table may be (a config has at most a few thousand lines).
    static let maximumSize = 1024 * 1024

    struct Entry: Equatable {
        var name: String
        var chip: ChipRef
        var offset: UInt32
        var activeLow: Bool
        var drive: GPIODrive
        var bias: GPIOBias
        var value: Bool
    }

    var board: String
    /// The daemon ran on mock chips (`--mock`, or a board of mock chips).
    var mock: Bool
    /// The config's real path.
    var config: String
    /// When it was written (UTC, ISO 8601) and by which process.
    var written: String
    var pid: Int32
    var entries: [Entry]

    /// Where the table is: `override` (`--safe-table FILE`), else by the
    /// control socket's rule (`SocketPath.resolve`):
    /// `$RUNTIME_DIRECTORY/boardd-safe-outputs` (systemd), `/run/boardd/…`
    /// when `/run/boardd` is writable, `$XDG_RUNTIME_DIR/…`, else
    /// `/tmp/boardd-safe-outputs-$UID`.
    static func path(
        override: String?, environment: [String: String] = SocketPath.currentEnvironment(), uid: UInt32 = getuid(),
        isWritable: (String) -> Bool = { access($0, W_OK) == 0 }
    ) -> String {
        if let override, !override.isEmpty { return override }
        let p = SocketPath.resolve(explicit: nil, environment: environment, name: fileName, uid: uid, isWritable: isWritable)
        // The rule's last place is a file of the user's own in /tmp.
        return p == "/tmp/\(fileName)-\(uid).sock" ? "/tmp/\(fileName)-\(uid)" : p
    }

    // MARK: Text

    var text: String {
        var out = "\(Self.magic)\t\(Self.version)\n"
        out += "board\t\(Self.escape(board))\n"
        out += "backend\t\(mock ? "mock" : "gpio")\n"
        out += "config\t\(Self.escape(config))\n"
        out += "written\t\(Self.escape(written))\tpid \(pid)\n"
        for e in entries {
            let fields = [
                "line", Self.escape(e.name), Self.escape(Self.chipText(e.chip)), "\(e.offset)",
                e.activeLow ? "active-low" : "active-high", e.drive.description, e.bias.description, e.value ? "on" : "off",
            ]
            out += fields.joined(separator: "\t") + "\n"
        }
        return out + "checksum\tsha256\t\(SHA256.hex(Array(out.utf8)))\n"
    }

    /// Why a table cannot be used.
    struct Problem: Error, CustomStringConvertible {
        let description: String
        init(_ d: String) { description = d }
    }

    /// The table `text` holds, or why it cannot be used.
    static func parse(_ text: String) -> Result<SafeTable, Problem> {
        let sumPrefix = "checksum\tsha256\t"
        let all = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard text.hasSuffix("\n"), all.count > 2, let last = all.dropLast().last, last.hasPrefix(sumPrefix) else {
            return .failure(Problem("it does not end with its checksum line (cut short: a torn write)"))
        }
        let body = all.dropLast(2).joined(separator: "\n") + "\n"
        guard last.dropFirst(sumPrefix.count) == SHA256.hex(Array(body.utf8)) else {
            return .failure(Problem("its checksum does not match its contents (it changed after it was written)"))
        }
        var t = SafeTable(board: "", mock: false, config: "", written: "", pid: 0, entries: [])
        var seen: Set<String> = []
        for (i, raw) in body.dropLast().split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let f = raw.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            if i == 0 {
                guard f.count == 2, f[0] == magic else { return .failure(Problem("line 1: not a safe table")) }
                guard f[1] == "\(version)" else {
                    return .failure(Problem("line 1: version \(f[1]); this boardd reads version \(version)"))
                }
                continue
            }
            guard let key = f.first, seen.insert(key).inserted || key == "line" else {
                return .failure(Problem("line \(i + 1): '\(f.first ?? "")' is given twice"))
            }
            switch (key, f.count) {
            case ("board", 2): t.board = unescape(f[1]) ?? ""
            case ("backend", 2) where f[1] == "mock" || f[1] == "gpio": t.mock = f[1] == "mock"
            case ("config", 2): t.config = unescape(f[1]) ?? ""
            case ("written", 3) where f[2].hasPrefix("pid "):
                t.written = unescape(f[1]) ?? ""
                t.pid = Int32(f[2].dropFirst(4)) ?? 0
            case ("line", 8):
                guard let e = entry(f) else { return .failure(Problem("line \(i + 1): not a line of the table (\(raw.count) bytes)")) }
                t.entries.append(e)
            default:
                return .failure(Problem("line \(i + 1): not a record of the table ('\(escape(key))' with \(f.count) fields)"))
            }
        }
        guard !t.board.isEmpty, !t.config.isEmpty, !t.written.isEmpty else {
            return .failure(Problem("it lacks its board, config or written line"))
        }
        return .success(t)
    }

    private static func entry(_ f: [String]) -> Entry? {
        guard let name = unescape(f[1]), !name.isEmpty, let chipText = unescape(f[2]), let chip = chipRef(chipText),
            let offset = UInt32(f[3]), f[4] == "active-low" || f[4] == "active-high", f[7] == "on" || f[7] == "off"
        else { return nil }
        let drives: [GPIODrive] = [.pushPull, .openDrain, .openSource]
        let biases: [GPIOBias] = [.asIs, .disabled, .pullUp, .pullDown]
        guard let drive = drives.first(where: { $0.description == f[5] }), let bias = biases.first(where: { $0.description == f[6] })
        else { return nil }
        return Entry(name: name, chip: chip, offset: offset, activeLow: f[4] == "active-low", drive: drive, bias: bias, value: f[7] == "on")
    }

    static func chipText(_ c: ChipRef) -> String {
        switch c {
        case let .label(s): "label:" + s
        case let .name(s): "name:" + s
        case let .path(s): "path:" + s
        }
    }

    static func chipRef(_ text: String) -> ChipRef? {
        for (prefix, make) in [("label:", ChipRef.label), ("name:", ChipRef.name), ("path:", ChipRef.path)] where text.hasPrefix(prefix) {
            let rest = String(text.dropFirst(prefix.count))
            return rest.isEmpty ? nil : make(rest)
        }
        return nil
    }

    /// `s` with `%`, tab, CR, LF and the other control characters as `%XX`.
    static func escape(_ s: String) -> String {
        var out = ""
        for u in s.unicodeScalars {
            if u == "%" || u.value < 0x20 || u.value == 0x7F {
                let hex = String(u.value, radix: 16, uppercase: true)
                out += "%" + (hex.count == 1 ? "0" : "") + hex
            } else {
                out.unicodeScalars.append(u)
            }
        }
        return out
    }

    /// The text `escape` wrote; nil for a `%` not followed by two hex digits.
    static func unescape(_ s: String) -> String? {
        guard s.contains("%") else { return s }
        var bytes: [UInt8] = []
        var u = Array(s.utf8)[...]
        while let b = u.popFirst() {
            guard b == UInt8(ascii: "%") else {
                bytes.append(b)
                continue
            }
            guard u.count >= 2, let v = UInt8(String(decoding: u.prefix(2), as: UTF8.self), radix: 16) else { return nil }
            bytes.append(v)
            u = u.dropFirst(2)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    // MARK: The file

    /// The table at `path`; nil when there is none; else why it cannot be read.
    static func read(_ path: String) -> Result<SafeTable, Problem>? {
        switch FileSystem.readText(path, limit: maximumSize, what: "a safe table", regularOnly: true) {
        case let .success(text): return parse(text)
        case let .failure(why) where why.errno == ENOENT: return nil
        case let .failure(why): return .failure(Problem("\(why)"))
        }
    }

    /// Writes the table to `path` atomically: a temporary file beside it,
    /// written, flushed to the disk (`fsync`), renamed over the old one and
    /// the directory flushed, so a reader sees the old table or the new,
    /// never a part. Throws why it could not.
    func write(to path: String) throws(Problem) {
        // Named for this process: two daemons that share a directory never
        // write into one temporary file.
        let tmp = "\(path).\(getpid()).new"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard fd >= 0 else { throw Problem("cannot create \(tmp): \(Self.errnoText())") }
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                let why = Self.errnoText()
                close(fd)
                unlink(tmp)
                throw Problem("cannot write \(tmp): \(why)")
            }
            bytes = bytes.dropFirst(n)
        }
        guard fsync(fd) == 0 else {
            let why = Self.errnoText()
            close(fd)
            unlink(tmp)
            throw Problem("cannot flush \(tmp): \(why)")
        }
        close(fd)
        guard rename(tmp, path) == 0 else {
            let why = Self.errnoText()
            unlink(tmp)
            throw Problem("cannot rename \(tmp) to \(path): \(why)")
        }
        let dir = open(FileSystem.parent(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 {
            _ = fsync(dir)
            close(dir)
        }
    }

    static func errnoText() -> String { String(cString: strerror(errno)) }

    /// Now, in UTC, as ISO 8601 (`2025-05-01T12:00:00Z`).
    static func now() -> String {
        var t = time(nil)
        var parts = tm()
        gmtime_r(&t, &parts)
        var buffer = [CChar](repeating: 0, count: 32)
        let n = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%SZ", &parts)
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
