import BoardSupport
import Glibc

/// One config for many boards: what makes a config's files one document
/// before its sections are read.
///
///   1. `!include FILE` — the included file's document replaces the node
///      (a mapping, a list or a single value), resolved depth first.
///   2. `packages:` — each package (a mapping, usually `!include FILE`) is
///      merged under the config (`merge`), and the key removed.
///   3. `substitutions:` — `${name}` and `$name` in every value and key are
///      replaced, and the key removed (only when the config, with its
///      packages, has the key, as ESPHome does).
///   4. `!secret NAME` — the name is looked up in `secrets.yaml` beside the
///      config; the node keeps the name, the value goes to `secretValues`.
///
/// Where nodes come from: every file besides the config's own is a source
/// of the log (`DiagnosticLog.addSource`), each included file's nodes are
/// recorded under its source in `r.files` (`NodeFiles`: by the identity of
/// each node's tag, since Yams marks hold only a line and a column), and
/// `r.position(node)` gives a position with its source. So an error found
/// anywhere later names the file the node was written in, its line and
/// column, and the includes that led there. Each file is composed on its
/// own, so the checks that read a file's text (syntax errors, duplicate
/// keys, alias expansion) work on each file as on a config of one file.
extension ConfigParser {
    static let includeTag = "!include"
    static let definedTags = [includeTag, YAMLReader.secretTag]
    /// How deep includes may nest (a file that includes a file that …).
    static let maximumIncludeDepth = 16
    /// How many `!include`s a config may resolve in all, and how many
    /// bytes the included files may hold in all (a fan-out of small files
    /// that include each other many times is as costly as one huge file).
    static let maximumIncludes = 1000
    static let maximumIncludedBytes = 16 << 20
    /// How much substitutions may grow a config's text in all.
    static let maximumSubstitutedBytes = 4 << 20
    /// Where included files may be, besides below the config's own
    /// directory: the system config directory.
    static let systemConfigDirectory = "/etc/boardd"
    /// The secrets file's name; it is read beside the config.
    static let secretsFileName = "secrets.yaml"

    /// A file of the config being read, and how it was reached.
    struct Inclusion {
        /// The file as messages name it (relative paths are joined to the
        /// including file's directory).
        let file: String
        /// Its real path, to find a cycle however it is spelt.
        let real: String
        /// Where it was included, innermost first ("common.yaml:3:10").
        let places: [String]
    }

    /// The config's files made one document, or nil when anything in them
    /// was reported as an error (the sections are then not read: they
    /// would only repeat what is missing).
    func assemble(_ root: Node) -> Node? {
        let before = log.errorCount
        let top = Inclusion(file: file, real: Self.realPath(file) ?? file, places: [])
        var root = resolveIncludes(root, "", in: [top])
        guard log.errorCount == before else { return nil }
        root = expandPackages(root, "")
        guard log.errorCount == before else { return nil }
        root = substitute(root)
        guard log.errorCount == before else { return nil }
        resolveSecrets(root, "")
        // A secret that cannot be read is reported at its `!secret`; the
        // lenient read (`ConfigLoader.safeLines`) goes on without it.
        return log.errorCount == before || secretsOptional ? root : nil
    }

    // MARK: !include

    /// The tree with every `!include` replaced by its file's document;
    /// `stack` is the files that led here, the config's own first.
    func resolveIncludes(_ node: Node, _ path: String, in stack: [Inclusion]) -> Node {
        switch node {
        case let .scalar(s):
            guard s.tag.description == Self.includeTag else { return node }
            return include(node, s.string, path, in: stack) ?? node
        case let .mapping(m):
            var pairs: [(Node, Node)] = []
            for (k, v) in m {
                if case let .scalar(ks) = k, Self.definedTags.contains(ks.tag.description) {
                    r.error(k, path, "\(ks.tag.description) cannot be a key: it stands for a value")
                    continue
                }
                pairs.append((k, resolveIncludes(v, YAMLReader.key(path, k.string ?? "?"), in: stack)))
            }
            return .mapping(Node.Mapping(pairs, m.tag, m.style, m.mark))
        case let .sequence(q):
            let items = q.enumerated().map { resolveIncludes($0.element, YAMLReader.index(path, $0.offset), in: stack) }
            return .sequence(Node.Sequence(items, q.tag, q.style, q.mark))
        }
    }

    /// The document of the file `name` names, with its own includes
    /// resolved; nil when it cannot be read (reported at `node`).
    func include(_ node: Node, _ name: String, _ path: String, in stack: [Inclusion]) -> Node? {
        guard !name.isEmpty else {
            r.error(node, path, "!include needs a file name (!include FILE, relative to the file it is in)")
            return nil
        }
        let parent = stack[stack.count - 1]
        let shown = name.hasPrefix("/") ? name : Self.join(Self.directory(of: parent.file), name)
        let real = Self.realPath(shown) ?? shown
        let chain = (stack.map(\.file) + [shown]).joined(separator: " → ")
        if stack.contains(where: { $0.real == real }) {
            r.error(node, path, "include cycle: \(chain) (a file may not include itself, directly or through others)")
            return nil
        }
        // Its values would be read as config text, and a message about
        // one (an unknown key, a value of the wrong kind) would show it.
        // (By inode: a hard link to it under another name is the same file.)
        if Self.sameFile(real, secretsPath) {
            r.error(
                node, path,
                "cannot include '\(name)': it is the secrets file; refer to its values with !secret NAME (they are never shown)")
            return nil
        }
        guard stack.count <= Self.maximumIncludeDepth else {
            r.error(node, path, "includes are nested more than \(Self.maximumIncludeDepth) deep: \(chain)")
            return nil
        }
        if let why = Self.outsideIncludeRoots(real, config: stack[0].real) {
            r.error(node, path, "cannot include '\(name)': \(why)")
            return nil
        }
        includes += 1
        guard includes <= Self.maximumIncludes else {
            if includes == Self.maximumIncludes + 1 {
                r.error(node, path, "more than \(Self.maximumIncludes) !include in all (this one: \(chain)); the config's files include each other too many times")
            }
            return nil
        }
        let text: String
        switch FileSystem.readConfigText(shown, what: "an included file") {
        case let .success(t): text = t
        case let .failure(why):
            r.error(node, path, "cannot include '\(name)': \(shown): \(why)")
            return nil
        }
        includedBytes += text.utf8.count
        guard includedBytes <= Self.maximumIncludedBytes else {
            r.error(
                node, path,
                "the included files hold more than \(Self.maximumIncludedBytes >> 20) MiB in all (this one: \(chain)); the config's files include each other too many times")
            includes = Self.maximumIncludes + 1  // nothing more is read
            return nil
        }
        let at = r.position(node)
        let places = ["\(parent.file):\(at.line):\(at.column)"] + parent.places
        let via = " (included from " + places.joined(separator: ", from ") + ")"
        let source = log.addSource(file: shown, via: via)
        // Composed on its own (a log of its own, positions in its own
        // lines), then its diagnostics taken with the chain that led here.
        let own = DiagnosticLog(file: shown)
        var reader = YAMLReader(log: own)
        reader.scalarTags = r.scalarTags
        let composed = reader.compose(text, source: source)
        log.append(own, via: via)
        guard let document = composed else {
            if !own.hasErrors { r.error(node, path, "cannot include '\(name)': \(shown) is empty (it must hold a YAML document)") }
            return nil
        }
        includedFiles.append(shown)
        return resolveIncludes(document, path, in: stack + [Inclusion(file: shown, real: real, places: places)])
    }

    /// Why the file at real path `real` may not be included in the config
    /// whose real path is `config`; nil when it may. An included file is
    /// read as config text and quoted in messages, so it must be below the
    /// config's own directory or the system config directory (symbolic
    /// links are followed first).
    static func outsideIncludeRoots(_ real: String, config: String) -> String? {
        let dir = directory(of: config)
        let own = realPath(dir.isEmpty ? "." : dir) ?? dir
        for root in [own, realPath(systemConfigDirectory) ?? systemConfigDirectory] {
            let r = root.hasSuffix("/") ? root : root + "/"
            if real.hasPrefix(r) { return nil }
        }
        return "\(real) is outside the config's directory (\(own)) and \(systemConfigDirectory); an included file must be below one of them"
    }

    /// Whether two paths name one file (device and inode).
    static func sameFile(_ a: String, _ b: String) -> Bool {
        var x = stat(), y = stat()
        return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino
    }

    /// The directory part of a path as written ("" for none).
    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "" }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    static func join(_ directory: String, _ name: String) -> String {
        if directory.isEmpty { return name }
        return directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }

    static func realPath(_ path: String) -> String? {
        guard let p = realpath(path, nil) else { return nil }
        defer { free(p) }
        return String(cString: p)
    }

    // MARK: packages:

    /// The config with its packages merged under it and `packages:`
    /// removed. A package may have packages of its own, merged into it
    /// first.
    func expandPackages(_ root: Node, _ path: String) -> Node {
        guard case let .mapping(m) = root, let i = m.firstIndex(where: { $0.key.string == "packages" }) else { return root }
        let packagesPath = YAMLReader.key(path, "packages")
        let own = Node.Mapping(m.enumerated().filter { $0.offset != i }.map { ($0.element.key, $0.element.value) }, m.tag, m.style, m.mark)
        guard let entries = r.mapping(m[i].value, packagesPath, what: "a mapping of package names to packages (name: !include FILE)")
        else { return .mapping(own) }
        var merged: Node?
        for e in entries {
            guard case .mapping = e.value else {
                r.error(
                    e.value, e.path,
                    "a package is a mapping of config sections (usually !include FILE), found \(YAMLReader.kind(e.value))")
                continue
            }
            let package = expandPackages(e.value, e.path)
            merged = merged.map { Self.merge($0, package) } ?? package
        }
        return merged.map { Self.merge($0, .mapping(own)) } ?? .mapping(own)
    }

    /// `new` merged over `old`, as ESPHome merges packages: two mappings
    /// merge key by key (a key in one only is kept; a key in both merges
    /// its two values by this same rule, `new`'s key node standing for
    /// it); two lists concatenate, `old`'s items first; in every other
    /// case (two single values, or values of different kinds) `new` wins.
    /// Packages are merged in the order listed, each over those before it,
    /// and the config over them all.
    static func merge(_ old: Node, _ new: Node) -> Node {
        switch (old, new) {
        case let (.mapping(o), .mapping(n)):
            var pairs = o.map { ($0.key, $0.value) }
            var index: [String: Int] = [:]
            for (i, (k, _)) in pairs.enumerated() { if let s = k.string, index[s] == nil { index[s] = i } }
            for (k, v) in n {
                if let s = k.string, let i = index[s] {
                    pairs[i] = (k, merge(pairs[i].1, v))
                } else {
                    if let s = k.string { index[s] = pairs.count }
                    pairs.append((k, v))
                }
            }
            return .mapping(Node.Mapping(pairs, n.tag, n.style, n.mark))
        case let (.sequence(o), .sequence(n)):
            return .sequence(Node.Sequence(Array(o) + Array(n), n.tag, n.style, n.mark))
        default:
            return new
        }
    }

    // MARK: substitutions:

    /// The config with `substitutions:` applied to every other value and
    /// key, and removed. Without the key the config is left as written.
    func substitute(_ root: Node) -> Node {
        guard case let .mapping(m) = root, let i = m.firstIndex(where: { $0.key.string == "substitutions" }) else { return root }
        let rest = Node.Mapping(m.enumerated().filter { $0.offset != i }.map { ($0.element.key, $0.element.value) }, m.tag, m.style, m.mark)
        var table = Substitutions()
        for e in r.mapping(m[i].value, "substitutions", what: "a mapping of names to values (name: value)") ?? [] {
            guard Substitutions.isName(e.key) else {
                r.error(
                    e.keyNode, e.path,
                    "'\(e.key)' is not a substitution name: use letters, digits and _, not starting with a digit")
                continue
            }
            guard case let .scalar(s) = e.value, !YAMLReader.isSecret(e.value),
                !(s.style == .plain && (s.string.isEmpty || s.string == "~" || s.string == "null"))
            else {
                r.error(e.value, e.path, "expected a single value (text or a number), found \(YAMLReader.kind(e.value))")
                continue
            }
            table.values[e.key] = s.string
        }
        return substituted(.mapping(rest), "", table)
    }

    /// Names to their values, and how `$` in a scalar is read.
    struct Substitutions {
        var values: [String: String] = [:]

        static func isName(_ s: String) -> Bool {
            guard let first = s.unicodeScalars.first, isNameStart(first) else { return false }
            return s.unicodeScalars.allSatisfy(isNameCharacter)
        }
        static func isNameStart(_ c: Unicode.Scalar) -> Bool { c == "_" || (c.isASCII && c.properties.isAlphabetic) }
        static func isNameCharacter(_ c: Unicode.Scalar) -> Bool { isNameStart(c) || ("0"..."9").contains(c) }

        /// A problem in a scalar's text, at the offset (in Unicode scalars)
        /// of its `$`.
        struct Problem {
            let offset: Int
            let message: String
        }

        /// `text` with `${name}` and `$name` replaced and `$$` made `$`: a
        /// `$` not followed by `{`, `$` or a letter or `_` is kept as it
        /// is. A value put in is not itself substituted.
        func expand(_ text: String) -> (String, [Problem]) {
            let chars = Array(text.unicodeScalars)
            var out = String.UnicodeScalarView()
            var problems: [Problem] = []
            var i = 0
            while i < chars.count {
                let c = chars[i]
                guard c == "$", i + 1 < chars.count else {
                    out.append(c)
                    i += 1
                    continue
                }
                let next = chars[i + 1]
                if next == "$" {
                    out.append("$")
                    i += 2
                } else if next == "{" {
                    guard let close = chars[(i + 2)...].firstIndex(of: "}") else {
                        problems.append(Problem(offset: i, message: "'${' is not closed: write ${name}, or $$ for a $ itself"))
                        out.append(contentsOf: chars[i...])
                        break
                    }
                    let name = String(String.UnicodeScalarView(chars[(i + 2)..<close]))
                    if !Self.isName(name) {
                        problems.append(
                            Problem(
                                offset: i,
                                message:
                                    "'${\(name)}' is not a substitution: a name has letters, digits and _, not starting with a digit ($$ writes a $ itself)"
                            ))
                    } else if let value = values[name] {
                        out.append(contentsOf: value.unicodeScalars)
                    } else {
                        problems.append(Problem(offset: i, message: unknown(name)))
                    }
                    i = close + 1
                } else if Self.isNameStart(next) {
                    var end = i + 1
                    while end < chars.count && Self.isNameCharacter(chars[end]) { end += 1 }
                    let name = String(String.UnicodeScalarView(chars[(i + 1)..<end]))
                    if let value = values[name] {
                        out.append(contentsOf: value.unicodeScalars)
                    } else {
                        problems.append(Problem(offset: i, message: unknown(name)))
                    }
                    i = end
                } else {
                    out.append(c)
                    i += 1
                }
            }
            return (String(out), problems)
        }

        func unknown(_ name: String) -> String {
            let names = values.keys.sorted()
            let hint = DidYouMean.hint(name, in: names)
            let known = names.isEmpty ? "the config declares none" : "substitutions: " + names.joined(separator: ", ")
            return "no substitution named '\(name)'\(hint) (\(known); $$ writes a $ itself)"
        }
    }

    /// The tree with substitutions made in every scalar, keys included (a
    /// secret's name too: `!secret ${id}_token`).
    func substituted(_ node: Node, _ path: String, _ table: Substitutions) -> Node {
        switch node {
        case let .scalar(s):
            guard s.string.unicodeScalars.contains("$"), substitutedBytes <= Self.maximumSubstitutedBytes else { return node }
            let (text, problems) = table.expand(s.string)
            for p in problems { log.error(position(of: s, node, offset: p.offset), path, p.message) }
            substitutedBytes += max(0, text.utf8.count - s.string.utf8.count)
            if substitutedBytes > Self.maximumSubstitutedBytes {
                // Reported once, at the value that went past; the rest is left as written.
                r.error(
                    node, path,
                    "with this value, substitutions make the config more than \(Self.maximumSubstitutedBytes >> 20) MiB larger than written; use a substitution fewer times, or a shorter one")
                return node
            }
            return .scalar(Node.Scalar(text, s.tag, s.style, s.mark))
        case let .mapping(m):
            var pairs: [(Node, Node)] = []
            var first: [String: Position] = [:]
            for (k, v) in m {
                let key = substituted(k, path, table)
                let name = key.string ?? ""
                let at = r.position(k)
                if k.string != key.string, let earlier = first[name] {
                    r.error(k, path, "key '\(name)' is given more than once in this mapping, after substitution (first at \(earlier))")
                }
                if first[name] == nil { first[name] = at }
                pairs.append((key, substituted(v, YAMLReader.key(path, name), table)))
            }
            return .mapping(Node.Mapping(pairs, m.tag, m.style, m.mark))
        case let .sequence(q):
            let items = q.enumerated().map { substituted($0.element, YAMLReader.index(path, $0.offset), table) }
            return .sequence(Node.Sequence(items, q.tag, q.style, q.mark))
        }
    }

    /// Where the character `offset` Unicode scalars into a scalar's text
    /// is: exact for a value on one line written plain or in quotes without
    /// escapes; else the scalar's start.
    func position(of s: Node.Scalar, _ node: Node, offset: Int) -> Position {
        var at = r.position(node)
        guard at.line > 0, !s.string.contains(where: { $0.isNewline }) else { return at }
        switch s.style {
        case .plain: at.column += offset
        case .singleQuoted where !s.string.contains("'"): at.column += offset + 1
        case .doubleQuoted where !s.string.contains(where: { $0 == "\"" || $0 == "\\" || !$0.isASCII || $0 == "\t" }):
            at.column += offset + 1
        default: break
        }
        return at
    }

    // MARK: !secret

    /// Looks up every `!secret NAME` in the secrets file. The node keeps the
    /// name; the value goes to `secretValues`, for `secret(_:_:)`.
    func resolveSecrets(_ node: Node, _ path: String) {
        switch node {
        case let .scalar(s):
            guard s.tag.description == YAMLReader.secretTag else { return }
            let name = s.string
            guard !name.isEmpty else {
                r.error(node, path, "!secret needs a name (!secret NAME, a key of \(Self.secretsFileName))")
                return
            }
            guard let file = secretsFile() else {
                r.error(
                    node, path,
                    "cannot read secret '\(name)': \(secretsPath): \(secretsProblem ?? "unreadable") (secrets are read from \(Self.secretsFileName) beside the config)"
                )
                return
            }
            guard let entry = file[name] else {
                let names = file.keys.sorted()
                let hint = DidYouMean.hint(name, in: names)
                let known = names.isEmpty ? " (it has none)" : hint.isEmpty ? " (it has: \(names.joined(separator: ", ")))" : ""
                r.error(node, path, "no secret named '\(name)' in \(secretsPath)\(hint)\(known)")
                return
            }
            // A name whose value is not one was reported in the file.
            if let value = entry { secretValues[name] = value }
        case let .mapping(m):
            for (k, v) in m { resolveSecrets(v, YAMLReader.key(path, k.string ?? "?")) }
        case let .sequence(q):
            for (i, item) in q.enumerated() { resolveSecrets(item, YAMLReader.index(path, i)) }
        }
    }

    /// The secrets file beside the config.
    var secretsPath: String { Self.join(Self.directory(of: file), Self.secretsFileName) }

    /// The secrets file's names and values (nil for a name whose value is
    /// not a single value), read once; nil when it cannot be read (why:
    /// `secretsProblem`). Problems inside it are reported in it and never
    /// quote a value: only names and kinds.
    func secretsFile() -> [String: String?]? {
        if let secretsRead { return secretsRead }
        if secretsProblem != nil { return nil }
        let path = secretsPath
        let text: String
        switch FileSystem.readConfigText(path, what: "a secrets file") {
        case let .success(t): text = t
        case let .failure(why):
            secretsProblem = Self.unreadableSecrets(why)
            return nil
        }
        let source = log.addSource(file: path)
        var st = stat()
        if stat(path, &st) == 0, st.st_mode & 0o077 != 0 {
            log.warning(
                Position(line: 0, column: 0, source: source), "",
                "users other than its owner may read it (mode 0\(String(st.st_mode & 0o777, radix: 8))); make it readable by its owner only: chmod 600 \(path)"
            )
        }
        warnIfTheServiceCannotRead(path, source: source)
        let own = DiagnosticLog(file: path)
        var values: [String: String?] = [:]
        if let root = YAMLReader(log: own).compose(text) {
            if case let .mapping(m) = root {
                for (k, v) in m {
                    guard case let .scalar(ks) = k else {
                        own.error(YAMLReader.position(k), "", "a secret's name must be a plain name, found \(Self.shape(k))")
                        continue
                    }
                    guard case let .scalar(vs) = v, !(vs.style == .plain && (vs.string.isEmpty || vs.string == "~" || vs.string == "null"))
                    else {
                        own.error(YAMLReader.position(v), ks.string, "expected the secret's value (text), found \(Self.shape(v))")
                        values[ks.string] = .some(nil)
                        continue
                    }
                    values[ks.string] = vs.string
                }
            } else {
                own.error(YAMLReader.position(root), "", "expected a mapping of names to values (name: value), found \(Self.shape(root))")
            }
        }
        log.append(own, via: "")
        secretsRead = values
        return values
    }

    /// What a node of the secrets file is, without its text.
    static func shape(_ node: Node) -> String {
        switch node {
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        case let .scalar(s):
            return s.style == .plain && (s.string.isEmpty || s.string == "~" || s.string == "null") ? "nothing (null)" : "a single value"
        }
    }

    // MARK: Reading secrets (for the sections that take one)

    /// Whether `node` was written `!secret NAME`.
    func isSecret(_ node: Node) -> Bool { YAMLReader.isSecret(node) }

    /// The value of a secret, for a key that takes a password or token: the
    /// value when `node` is `!secret NAME` (its name found in the secrets
    /// file when the config was assembled), else nil, reporting that such a
    /// value may not be written in the config itself (it would be in every
    /// copy of the config, and in version control).
    ///
    /// The value is only ever returned here: the node keeps the secret's
    /// name, so no message, summary or log that shows a node's text can
    /// show a secret, and the plain readers (`r.string` and the others)
    /// refuse a secret.
    func secret(_ node: Node, _ path: String) -> String? {
        guard isSecret(node) else {
            r.error(
                node, path,
                "write the value in \(Self.secretsFileName) and refer to it with !secret NAME; it may not be written in the config")
            return nil
        }
        guard case let .scalar(s) = node, let value = secretValues[s.string] else {
            // Reported when the config was assembled.
            return nil
        }
        return value
    }
}
