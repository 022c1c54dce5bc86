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
    /// Why a file could not be read.
    public struct ReadError: Error, Equatable, Sendable, CustomStringConvertible {
        /// The errno of the failing call, or 0 when the bytes were read but
        /// are not UTF-8 text.
        public let errno: Int32

        public static let notUTF8 = ReadError(errno: 0)

        public var description: String {
            switch errno {
            case 0: return "the file is not UTF-8 text"
            case ENOENT: return "no such file"
            case EACCES, EPERM: return "permission denied"
            case EISDIR: return "it is a directory, not a file"
            case ENOTDIR: return "a part of the path is not a directory"
            case ELOOP: return "too many levels of symbolic links"
            default: return "cannot read the file (\(String(cString: strerror(errno))))"
            }
        }
    }

    /// The file's bytes. Reads until end of file, so files whose size
    /// `stat` does not know (`/proc`, `/sys`) are read whole.
    public static func readBytes(_ path: String) -> Result<[UInt8], ReadError> {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(ReadError(errno: errno)) }
        defer { close(fd) }
        var st = stat()
        if fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR { return .failure(ReadError(errno: EISDIR)) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                return .failure(ReadError(errno: errno))
            }
            if n == 0 { break }
            bytes.append(contentsOf: chunk[0..<n])
        }
        return .success(bytes)
    }

    /// The file as UTF-8 text; bytes that are not UTF-8 are an error, not
    /// replacement characters.
    public static func readText(_ path: String) -> Result<String, ReadError> {
        readBytes(path).flatMap { bytes in
            guard let text = String(validating: bytes, as: UTF8.self) else { return .failure(.notUTF8) }
            return .success(text)
        }
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
