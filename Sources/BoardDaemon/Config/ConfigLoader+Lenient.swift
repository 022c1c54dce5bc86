import BoardSupport

extension ConfigLoader {
    /// What a lenient read of a config gives `boardd --safe-outputs`: its
    /// board and lines (the rest of the config left empty), or why there
    /// are none.
    struct SafeLines {
        var config: DaemonConfig?
        /// Why there is no config: the errors in `board:` and `lines:`
        /// themselves, in words.
        var why: String
    }

    /// Reads `path` for its `board:` and lines alone, ignoring the errors
    /// outside them (a typo in `mqtt:`, an unknown top-level key, a secret
    /// that cannot be read). An error in `board:` or `lines:`, or one about
    /// the whole file (it cannot be read, is not YAML, may be changed by
    /// others when that is refused, its includes or packages fail), gives
    /// no config. The errors themselves are the caller's to log (the full
    /// load reports each).
    static func safeLines(path: String, options: LoadOptions) -> SafeLines {
        let text: String
        switch FileSystem.readConfigText(path) {
        case let .success(t): text = t
        case let .failure(why): return SafeLines(config: nil, why: "\(path): \(why)")
        }
        if options.refuseInsecureConfig, let who = whoElseMayWrite(path) {
            return SafeLines(config: nil, why: "the config \(who)")
        }
        let parser = ConfigParser(file: path, options: options)
        parser.secretsOptional = true
        _ = parser.parse(text)
        if options.refuseInsecureConfig, let bad = parser.includedFiles.first(where: { whoElseMayWrite($0) != nil }) {
            return SafeLines(config: nil, why: "the included file \(bad) \(whoElseMayWrite(bad) ?? "")")
        }
        let fatal = parser.log.sorted.filter { $0.severity == .error && Self.concernsSafeLines($0.path) }
        if let first = fatal.first {
            return SafeLines(
                config: nil, why: "board: and lines: have errors of their own (\(fatal.count); the first: \(first.description))")
        }
        guard parser.board != nil else {
            return SafeLines(config: nil, why: "board: and lines: were not read (the config's files could not be put together: see the errors)")
        }
        var config = parser.resolved
        (config.tasks, config.reactions, config.sequences, config.commands, config.mqtt) = ([], [], [], [], nil)
        return SafeLines(config: config, why: "")
    }

    /// Whether an error at key path `path` concerns what the safe outputs
    /// are: the file as a whole (""), `board:` (or `--board`) or `lines:`.
    static func concernsSafeLines(_ path: String) -> Bool {
        path.isEmpty || path == "--board" || ["board", "lines"].contains { path == $0 || path.hasPrefix($0 + ".") || path.hasPrefix($0 + "[") }
    }
}
