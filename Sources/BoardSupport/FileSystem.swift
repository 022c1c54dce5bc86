#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The few file operations config and board loading need, straight over the
/// C library: reading a whole file, listing a directory, and asking what a
/// path is. Failures carry the errno, so a message says *why* a file could
/// not be read ("permission denied"), not only that it could not.
///
/// The daemon's start-up reads its files through this rather than
/// Foundation's `FileManager`, so a running `boardd` does not page in
/// Foundation's file and URL machinery.
public enum FileSystem {
    /// The most a config or board file may be: 4 MiB. The largest real
    /// configs are a few hundred KiB; the cap keeps `/dev/zero`, a huge log
    /// given by mistake and the like from exhausting memory.
    public static let maximumConfigSize = 4 * 1024 * 1024

    /// Why a file could not be read.
    public struct ReadError: Error, Equatable, Sendable, CustomStringConvertible {
        public enum Kind: Equatable, Sendable {
            /// A failing call's errno.
            case errno(Int32)
            /// The bytes are not UTF-8: the first bad byte, its 0-based
            /// offset and its 1-based line and column (in characters).
            case notUTF8(byte: UInt8, offset: Int, line: Int, column: Int)
            /// Not a regular file: what it is ("a FIFO", "a character device").
            case notRegular(String)
            /// More than `limit` bytes; `what` names the kind of file.
            case tooLarge(limit: Int, what: String)
        }

        public let kind: Kind

        public init(_ kind: Kind) { self.kind = kind }
        public init(errno: Int32) { kind = .errno(errno) }

        /// The errno of the failing call, or 0 when it was not a call that failed.
        public var errno: Int32 {
            if case let .errno(e) = kind { return e }
            return 0
        }

        /// Where the problem is in the file, when it is at a place.
        public var position: Position? {
            if case let .notUTF8(_, _, line, column) = kind { return Position(line: line, column: column) }
            return nil
        }

        public var description: String {
            switch kind {
            case let .notUTF8(byte, offset, _, _):
                let hex = String(byte, radix: 16, uppercase: true)
                return "the file is not UTF-8 text (byte 0x\(hex.count == 1 ? "0" : "")\(hex) at offset \(offset))"
            case let .notRegular(what): return "not a regular file (\(what))"
            case let .tooLarge(limit, what): return "larger than the \(Self.size(limit)) \(what) may be"
            case let .errno(errno):
                switch errno {
                case ENOENT: return "no such file"
                case EACCES, EPERM: return "permission denied"
                case EISDIR: return "it is a directory, not a file"
                case ENOTDIR: return "a part of the path is not a directory"
                case ELOOP: return "too many levels of symbolic links"
                case ENXIO: return "not a regular file (a socket, or a device that is not there)"
                default: return "cannot read the file (\(String(cString: strerror(errno))))"
                }
            }
        }

        static func size(_ bytes: Int) -> String {
            if bytes % (1024 * 1024) == 0 { return "\(bytes / (1024 * 1024)) MiB" }
            if bytes % 1024 == 0 { return "\(bytes / 1024) KiB" }
            return "\(bytes) bytes"
        }
    }

    /// The file's bytes. Reads until end of file, so files whose size
    /// `stat` does not know (`/proc`, `/sys`) are read whole, but never
    /// more than `limit` bytes (more is `tooLarge`, named `what`). Opens
    /// with `O_NONBLOCK`, so a FIFO without a writer cannot block the
    /// open; with `regularOnly`, anything but a regular file (a FIFO, a
    /// device such as `/dev/zero`, a socket) is refused before a read.
    public static func readBytes(
        _ path: String, limit: Int = Int.max, what: String = "a file", regularOnly: Bool = false
    ) -> Result<[UInt8], ReadError> {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else { return .failure(ReadError(errno: errno)) }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return .failure(ReadError(errno: errno)) }
        let type = st.st_mode & S_IFMT
        if type == S_IFDIR { return .failure(ReadError(errno: EISDIR)) }
        if regularOnly && type != S_IFREG {
            let what: String
            switch type {
            case S_IFIFO: what = "a FIFO"
            case S_IFCHR: what = "a character device"
            case S_IFBLK: what = "a block device"
            case S_IFSOCK: what = "a socket"
            default: what = "not a file with contents"
            }
            return .failure(ReadError(.notRegular(what)))
        }
        if type == S_IFREG && Int(st.st_size) > limit { return .failure(ReadError(.tooLarge(limit: limit, what: what))) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            // One byte beyond the limit tells a file that is too large.
            let room = limit == Int.max ? chunk.count : min(chunk.count, limit + 1 - bytes.count)
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, room) }
            if n < 0 {
                if errno == EINTR { continue }
                return .failure(ReadError(errno: errno))
            }
            if n == 0 { break }
            bytes.append(contentsOf: chunk[0..<n])
            if bytes.count > limit { return .failure(ReadError(.tooLarge(limit: limit, what: what))) }
        }
        return .success(bytes)
    }

    /// The file as UTF-8 text; bytes that are not UTF-8 are an error (with
    /// where the first is), not replacement characters. The limits are
    /// `readBytes`'s.
    public static func readText(
        _ path: String, limit: Int = Int.max, what: String = "a file", regularOnly: Bool = false
    ) -> Result<String, ReadError> {
        readBytes(path, limit: limit, what: what, regularOnly: regularOnly).flatMap { bytes in
            guard let text = String(validating: bytes, as: UTF8.self) else { return .failure(notUTF8(bytes)) }
            return .success(text)
        }
    }

    /// A config or board file: a regular file of at most
    /// `maximumConfigSize` bytes, as UTF-8 text. `what` names it in the
    /// size message ("a config", "a board file").
    public static func readConfigText(_ path: String, what: String = "a config") -> Result<String, ReadError> {
        readText(path, limit: maximumConfigSize, what: what, regularOnly: true)
    }

    /// Where the first byte that is not UTF-8 is.
    static func notUTF8(_ bytes: [UInt8]) -> ReadError {
        var line = 1
        var column = 1
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            let length = b < 0x80 ? 1 : b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0
            if length == 0 || i + length > bytes.count
                || String(validating: bytes[i..<(i + length)], as: UTF8.self) == nil
            {
                return ReadError(.notUTF8(byte: b, offset: i, line: line, column: column))
            }
            if b == 0x0A {
                line += 1
                column = 1
            } else {
                column += 1
            }
            i += length
        }
        return ReadError(.notUTF8(byte: 0, offset: bytes.count, line: line, column: column))
    }

    /// The names in a directory (without `.` and `..`), sorted; empty when
    /// the directory cannot be read.
    public static func list(_ directory: String) -> [String] {
        guard let d = opendir(directory) else { return [] }
        defer { closedir(d) }
        var names: [String] = []
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { raw in
                let b = raw.bindMemory(to: UInt8.self)
                return String(decoding: b[0..<(b.firstIndex(of: 0) ?? b.count)], as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    /// Whether `path` exists (following symbolic links).
    public static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    /// Whether `path` is a regular file this process may execute.
    public static func isExecutableFile(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG && access(path, X_OK) == 0
    }

    /// Whether `path` is a directory (following symbolic links).
    public static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    /// The target of a symbolic link, or nil.
    public static func readLink(_ path: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX))
        let n = buffer.withUnsafeMutableBytes { readlink(path, $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count) }
        guard n > 0 && n < buffer.count else { return nil }
        return String(decoding: buffer[0..<n], as: UTF8.self)
    }

    /// `directory` and `name` joined with one `/`.
    public static func join(_ directory: String, _ name: String) -> String {
        if directory.isEmpty { return name }
        if name.hasPrefix("/") { return name }
        return directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }

    /// The directory part of `path` ("/a/b/c" → "/a/b", "/a" → "/", "a" → ".").
    public static func parent(_ path: String) -> String {
        var p = Substring(path)
        while p.count > 1 && p.hasSuffix("/") { p.removeLast() }
        guard let slash = p.lastIndex(of: "/") else { return "." }
        if slash == p.startIndex { return "/" }
        return String(p[..<slash])
    }
}
