import BoardSupport
import Foundation
import Glibc
import Testing

@testable import BoardDaemon

/// Every folder of Fixtures/fleet is a config (`config.yaml`) with the
/// files it includes; this table holds exactly what checking a broken one
/// prints. File names are relative to Fixtures/fleet.
let fleetBadConfigs: [(String, [String])] = [
    ("broken-syntax", [
            "broken-syntax/lines.yaml:2:1: error: YAML syntax: did not find expected ',' or '}' (while parsing a flow mapping at 1:6) (included from broken-syntax/config.yaml:2:8)",
    ]),
    ("broken-value", [
            "broken-value/lines.yaml:2:13: error: lines.led.pin: the raspberry-pi-4 board has no pin 'GPIO72' (nearest: GPIO12, GPIO2, GPIO22) (included from broken-value/common.yaml:1:8, from broken-value/config.yaml:3:11)",
    ]),
    ("cycle", [
            "cycle/b.yaml:1:1: error: lines.led: include cycle: cycle/config.yaml → cycle/a.yaml → cycle/b.yaml → cycle/a.yaml (a file may not include itself, directly or through others) (included from cycle/a.yaml:1:6, from cycle/config.yaml:2:8)",
    ]),
    ("empty", [
            "empty/config.yaml:2:8: error: lines: cannot include 'lines.yaml': empty/lines.yaml is empty (it must hold a YAML document)",
    ]),
    ("missing", [
            "missing/config.yaml:2:8: error: lines: cannot include 'nowhere.yaml': missing/nowhere.yaml: no such file",
    ]),
    ("package-not-mapping", [
            "package-not-mapping/config.yaml:3:9: error: packages.base: a package is a mapping of config sections (usually !include FILE), found a list",
    ]),
    ("substitution-not-a-value", [
            "substitution-not-a-value/config.yaml:3:9: error: substitutions.pins: expected a single value (text or a number), found a mapping",
            "substitution-not-a-value/config.yaml:4:3: error: substitutions.2nd: '2nd' is not a substitution name: use letters, digits and _, not starting with a digit",
    ]),
    ("unclosed-substitution", [
            "unclosed-substitution/config.yaml:5:16: error: lines.led.pin: '${' is not closed: write ${name}, or $$ for a $ itself",
    ]),
    ("unknown-substitution", [
            "unknown-substitution/config.yaml:5:16: error: lines.led.pin: no substitution named 'led_pn'; did you mean 'led_pin'? (substitutions: led_pin; $$ writes a $ itself)",
    ]),
]

/// The good folders, with lines of the summary `--check` prints that
/// show what they resolve to.
let fleetGoodConfigs: [(String, [String])] = [
    // A mapping, a list and a single value, each from a file.
    ("include-kinds", [
        "board: gpio-sim — gpio-sim chips of scripts/gpio-sim-up.sh (boards/sim-chips.conf)",
        "  button  BUTTON -> boardloop-sim0:17  input edge=both  priority normal, loop main",
        "  led     LED -> boardloop-sim0:27  output initial=off  priority normal, loop main",
        "  press toggles: button press -> toggle led",
    ]),
    // parts/lines.yaml includes button.yaml from parts/.
    ("nested", [
        "  button  BUTTON -> boardloop-sim0:17  input edge=both  priority normal, loop main",
        "  led     LED -> boardloop-sim0:27  output initial=off  priority normal, loop main",
    ]),
    // Mappings merge key by key (button's edge from base, its debounce
    // from extra, which comes later; led's initial from the config, its
    // safe from base), lists concatenate in package order then the
    // config's, a single value is the config's over both packages'.
    ("packages", [
        "  button  BUTTON -> boardloop-sim0:17  input edge=both debounce=30ms  priority normal, loop main",
        "  led     LED -> boardloop-sim0:27  output initial=on safe=off  priority normal, loop main",
        "  fan     SIM0_3 -> boardloop-sim0:3  output initial=off  priority normal, loop main",
        "  blink: every 2s in default on main: toggle led",
        "  base's: button release -> toggle led",
        "  extra's: button press -> toggle fan",
        "  the board's: button press -> toggle led",
    ]),
    // The config's led_pin over the package's default; a package's own
    // substitution (period) in the package's text; $$ and a lone $.
    ("substitutions", [
        "  led     SIM0_9 -> boardloop-sim0:9  output initial=off  priority normal, loop main",
        "  heartbeat: every 250ms in default on main: toggle led",
        "  t: every 1s in default on main: log info \"house-7: costs $5, $ alone, house-7s\"",
    ]),
]

@Suite struct FleetConfigTests {
    static let directory = Fixtures.directory + "/fleet"

    static func load(_ name: String, options: LoadOptions = Fixtures.options()) -> LoadResult {
        ConfigLoader.load(path: "\(directory)/\(name)/config.yaml", options: options)
    }

    static func messages(_ result: LoadResult, in directory: String = Self.directory) -> [String] {
        result.diagnostics.map { $0.description.replacingOccurrences(of: directory + "/", with: "") }
    }

    @Test(arguments: fleetBadConfigs.map(\.0))
    func badFleetConfigReportsExactlyItsErrors(_ name: String) throws {
        let expected = try #require(fleetBadConfigs.first { $0.0 == name }?.1)
        let result = Self.load(name)
        #expect(Self.messages(result) == expected)
        #expect(result.config == nil)
    }

    @Test(arguments: fleetGoodConfigs.map(\.0))
    func goodFleetConfigResolves(_ name: String) throws {
        let expected = try #require(fleetGoodConfigs.first { $0.0 == name }?.1)
        let result = Self.load(name)
        #expect(Self.messages(result) == [])
        let config = try #require(result.config)
        let summary = ConfigSummary(config).text.split(separator: "\n").map { String($0) }
        for line in expected {
            // The board's line ends with the board file's path.
            #expect(summary.contains { $0 == line || $0.hasPrefix(line + " [") }, "\(line)\n\(summary.joined(separator: "\n"))")
        }
    }

    @Test func theTablesCoverEveryFixtureFolder() throws {
        let folders = try FileManager.default.contentsOfDirectory(atPath: Self.directory).sorted()
        #expect(folders == (fleetBadConfigs.map(\.0) + fleetGoodConfigs.map(\.0)).sorted())
    }

    /// The package's lists come first in the order listed, and a reaction's
    /// index counts in the merged list.
    @Test func packageListsComeFirstInOrder() throws {
        let config = try #require(Self.load("packages").config)
        #expect(config.reactions.map(\.name) == ["base's", "extra's", "the board's"])
        #expect(config.lines.map(\.name) == ["button", "led", "fan"])
    }

    @Test func includesNestedMoreThanTheLimitAreRefused() throws {
        let dir = try TemporaryDirectory()
        let depth = ConfigParser.maximumIncludeDepth + 1
        try dir.write("config.yaml", "board: demo\nlines: !include f1.yaml\n")
        for i in 1...depth { try dir.write("f\(i).yaml", "!include f\(i + 1).yaml\n") }
        try dir.write("f\(depth + 1).yaml", "led: { pin: LED, output: {} }\n")
        let result = ConfigLoader.load(path: dir.path + "/config.yaml", options: Fixtures.options())
        let messages = Self.messages(result, in: dir.path)
        #expect(messages.count == 1)
        #expect(messages.first?.hasPrefix("f16.yaml:1:1: error: lines: includes are nested more than 16 deep: config.yaml → f1.yaml → ") == true, "\(messages)")
        #expect(messages.first?.contains("(included from f15.yaml:1:1, from f14.yaml:1:1,") == true)
    }

    /// An absolute path is read as it is when it is below the config's
    /// directory; one elsewhere (`/etc/shadow`, another tree) is refused at
    /// the `!include`, before it is read: an included file is read as
    /// config text, and messages quote it.
    @Test func anAbsolutePathIsIncludedOnlyBelowTheConfigsDirectory() throws {
        let dir = try TemporaryDirectory()
        let mine = try String(contentsOfFile: Self.directory + "/include-kinds/lines.yaml", encoding: .utf8)
        try dir.write("lines.yaml", mine)
        try dir.write("config.yaml", "board: gpio-sim\nlines: !include \(dir.path)/lines.yaml\n")
        let result = ConfigLoader.load(path: dir.path + "/config.yaml", options: Fixtures.options())
        #expect(result.diagnostics.map(\.description) == [])
        #expect(result.config?.lines.map(\.name) == ["button", "led"])

        let elsewhere = Self.directory + "/include-kinds/lines.yaml"
        let real = realPathForTest(elsewhere)
        try dir.write("config.yaml", "board: gpio-sim\nlines: !include \(elsewhere)\n")
        let refused = ConfigLoader.load(path: dir.path + "/config.yaml", options: Fixtures.options())
        let dirReal = realPathForTest(dir.path)
        #expect(
            refused.diagnostics.map(\.description) == [
                "\(dir.path)/config.yaml:2:8: error: lines: cannot include '\(elsewhere)': \(real) is outside the config's directory (\(dirReal)) and /etc/boardd; an included file must be below one of them"
            ])
        try dir.write("config.yaml", "board: gpio-sim\nlines: !include /etc/shadow\n")
        let shadow = ConfigLoader.load(path: dir.path + "/config.yaml", options: Fixtures.options())
        #expect(shadow.diagnostics.count == 1)
        #expect(shadow.diagnostics.first?.description.contains("/etc/shadow is outside the config's directory") == true, "\(shadow.diagnostics)")
    }

    /// A 60 KB substitution used 2,000 times would make 120 MB of text:
    /// refused at the value that goes past the cap, cheaply (the rest is
    /// left as written, not expanded).
    @Test func substitutionsThatBlowUpTheConfigAreRefusedAtTheCulprit() throws {
        let big = String(repeating: "x", count: 60_000)
        var yaml = "substitutions:\n  big: \(big)\nboard: demo\nlines:\n  led: { pin: LED, output: {} }\ntasks:\n"
        for i in 0..<2000 { yaml += "  t\(i): { every: 1s, do: [ log: \"$big\" ] }\n" }
        let result = ConfigLoader.load(text: yaml, file: "c.yaml", options: Fixtures.options())
        #expect(result.config == nil)
        let errors = result.errors.map(\.description)
        #expect(errors.count == 1, "\(errors.count) errors")
        // 4 MiB / 60 KB: the 70th use goes past.
        #expect(
            errors == [
                "c.yaml:76:32: error: tasks.t69.do[0].log: with this value, substitutions make the config more than 4 MiB larger than written; use a substitution fewer times, or a shorter one"
            ])
    }

    /// Six small files that each include the next ten times: 10^5 includes
    /// (no cycle). Refused at the 1,001st, having read 1,000.
    @Test func anIncludeFanOutIsCappedAtTheCulprit() throws {
        let dir = try TemporaryDirectory()
        for level in 0..<5 {
            let body = (0..<10).map { _ in "  - !include f\(level + 1).yaml" }.joined(separator: "\n")
            try dir.write("f\(level).yaml", "\(body)\n")
        }
        try dir.write("f5.yaml", "x\n")
        try dir.write("config.yaml", "board: demo\nlines: {}\nfan: !include f0.yaml\n")
        let result = ConfigLoader.load(path: dir.path + "/config.yaml", options: Fixtures.options())
        let errors = result.errors.map(\.description).filter { $0.contains("!include in all") }
        #expect(errors.count == 1, "\(result.errors.map(\.description).prefix(3))")
        #expect(errors.first?.contains("more than 1000 !include in all (this one: \(dir.path)/config.yaml → \(dir.path)/f0.yaml →") == true, "\(errors)")
    }

    /// A package listed twice adds its reactions twice: refused at the
    /// second's name, which says where the first is.
    @Test func aReactionNameGivenTwiceIsAnError() throws {
        let dir = try TemporaryDirectory()
        try dir.write("bell.yaml", "reactions:\n  - { name: ring, on: { line: button, press: true }, do: [ toggle: led ] }\n")
        try dir.write(
            "config.yaml",
            "board: demo\nlines:\n  button: { pin: BUTTON, input: { edge: both } }\n  led: { pin: LED, output: {} }\npackages:\n  a: !include bell.yaml\n  b: !include bell.yaml\n")
        let result = ConfigLoader.load(path: dir.path + "/config.yaml", options: Fixtures.options())
        #expect(result.config == nil)
        let errors = result.errors.map(\.description)
        #expect(errors.count == 1, "\(errors)")
        #expect(
            errors.first?.contains(
                "error: reactions[1].name: reaction name 'ring' is given twice (first at \(dir.path)/bell.yaml:2:13); each reaction's name must be its own") == true,
            "\(errors)")
    }

    /// A hard link to the secrets file under another name is the secrets
    /// file: it cannot be included (its values would be quoted).
    @Test func aHardLinkToTheSecretsFileCannotBeIncluded() throws {
        let dir = try TemporaryDirectory()
        try dir.write("secrets.yaml", "token: hunter2\n")
        #expect(chmod(dir.path + "/secrets.yaml", 0o600) == 0)
        #expect(link(dir.path + "/secrets.yaml", dir.path + "/innocent.yaml") == 0)
        try dir.write("config.yaml", "board: gpio-sim\nlines: !include innocent.yaml\n")
        let result = ConfigLoader.load(path: dir.path + "/config.yaml", options: Fixtures.options())
        let text = result.diagnostics.map(\.description).joined(separator: "\n")
        #expect(text.contains("cannot include 'innocent.yaml': it is the secrets file"), "\(text)")
        #expect(!text.contains("hunter2"))
    }

    /// A file included by mistake (a key, a file of tokens) is not quoted
    /// line by line in errors: each error shows at most 64 characters of
    /// the value it names, then its length.
    @Test func anErrorQuotesOnlyAShortExcerptOfAnIncludedFile() throws {
        let dir = try TemporaryDirectory()
        let body = (0..<20).map { i in String(repeating: Character(UnicodeScalar(UInt8(65 + i))), count: 70) }
        try dir.write("key", "-----BEGIN PRIVATE KEY-----\n" + body.joined(separator: "\n") + "\n-----END PRIVATE KEY-----\n")
        try dir.write("tokens", (0..<5).map { "t\($0): " + String(repeating: "z", count: 300) }.joined(separator: "\n") + "\n")
        try dir.write("a.yaml", "board: gpio-sim\nlines: !include key\n")
        try dir.write("b.yaml", "board: gpio-sim\nlines: !include tokens\n")
        let a = ConfigLoader.load(path: dir.path + "/a.yaml", options: Fixtures.options()).errors.map(\.description)
        #expect(a.count == 1, "\(a)")
        #expect(a.first?.contains("expected a mapping, found '-----BEGIN PRIVATE KEY----- AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA…' (1473 characters)") == true, "\(a)")
        #expect(!a.joined().contains("BBBB"), "the second line of the key is not shown")
        let b = ConfigLoader.load(path: dir.path + "/b.yaml", options: Fixtures.options()).errors.map(\.description)
        #expect(b.count == 5, "\(b)")
        for e in b { #expect(e.contains("found '" + String(repeating: "z", count: 64) + "…' (300 characters)") && e.count < 300, "\(e)") }
    }

    /// MQTT command permissions merged from a package and the config: the
    /// summary says where each was given, and where they all come from one
    /// file it says nothing more. Where they were written is no part of the
    /// config: the same permissions one line lower are the same config.
    @Test func mergedMQTTPermissionsSayWhereEachCameFrom() throws {
        let dir = try TemporaryDirectory()
        try dir.write(
            "mqtt.yaml",
            """
            mqtt:
              broker: 127.0.0.1
              client_id: gh
              commands: { outputs: [valve], sequences: [water] }
            lines:
              valve: { pin: GPIO17, output: {} }
            sequences:
              water: { steps: [ set: { valve: on } ] }
            """)
        let own = """
            board: raspberry-pi-4
            packages: { mqtt: !include mqtt.yaml }
            lines:
              fan: { pin: GPIO27, output: {} }
            mqtt:
              commands: { outputs: [fan] }
            """
        try dir.write("config.yaml", own)
        let config = try #require(ConfigLoader.load(path: dir.path + "/config.yaml", options: Fixtures.options()).config)
        let mqttLine = try #require(ConfigSummary(config).text.split(separator: "\n").first { $0.hasPrefix("mqtt: ") })
        let pkg = realPathForTest(dir.path + "/mqtt.yaml"), cfg = dir.path + "/config.yaml"
        #expect(mqttLine.contains("commands: valve (\(pkg):4:25), fan (\(cfg):6:25), sequence water (\(pkg):4:45)"), "\(mqttLine)")

        try dir.write("single.yaml", try String(contentsOfFile: dir.path + "/mqtt.yaml", encoding: .utf8) + "\nboard: raspberry-pi-4\n")
        let single = try #require(ConfigLoader.load(path: dir.path + "/single.yaml", options: Fixtures.options()).config)
        #expect(ConfigSummary(single).text.contains("commands: valve, sequence water;"), "\(ConfigSummary(single).text)")

        try dir.write("config.yaml", "\n" + own)
        let lower = try #require(ConfigLoader.load(path: dir.path + "/config.yaml", options: Fixtures.options()).config)
        #expect(lower.mqtt == config.mqtt && lower.mqtt?.commandOrigins.places != config.mqtt?.commandOrigins.places)
    }

    /// A single-file config's errors are as they were: no chain, its own file.
    @Test func aTagThatIsNotDefinedIsAnErrorWithTheNearestOne() {
        let result = ConfigLoader.load(
            text: "board: demo\nlines:\n  led: { pin: !inclde led.yaml, output: {} }\n", file: "c.yaml", options: Fixtures.options())
        #expect(
            result.diagnostics.map(\.description) == [
                "c.yaml:3:15: error: unknown tag '!inclde'; did you mean '!include'? (the config language has only the tags !include and !secret)"
            ])
    }

    /// Without `substitutions:` a `$` is text, as in ESPHome.
    @Test func withoutSubstitutionsADollarIsText() throws {
        let result = ConfigLoader.load(
            text: "board: demo\nlines:\n  led: { pin: LED, output: {} }\ntasks:\n  t: { every: 1s, do: [ log: \"$HOME ${x} $$\" ] }\n",
            file: "c.yaml", options: Fixtures.options())
        #expect(result.diagnostics.map(\.description) == [])
        let config = try #require(result.config)
        #expect(ConfigSummary(config).text.contains("log info \"$HOME ${x} $$\""))
    }

    @Test func aKeyMadeTwiceBySubstitutionIsAnError() {
        let text = """
            board: demo
            substitutions: { name: led }
            lines:
              led: { pin: LED, output: {} }
              ${name}: { pin: FAN, output: {} }
            """
        let result = ConfigLoader.load(text: text, file: "c.yaml", options: Fixtures.options())
        #expect(
            result.diagnostics.map(\.description) == [
                "c.yaml:5:3: error: lines: key 'led' is given more than once in this mapping, after substitution (first at 4:3)"
            ])
    }

    // MARK: Secrets

    static let secretValue = "hunter2-Zq9"

    /// A directory with a secrets file of mode `mode`.
    static func secretsDirectory(mode: mode_t = 0o600) throws -> TemporaryDirectory {
        let dir = try TemporaryDirectory()
        try dir.write("secrets.yaml", "mqtt_password: \(secretValue)\napi_token: abc\n")
        #expect(chmod(dir.path + "/secrets.yaml", mode) == 0)
        return dir
    }

    /// The section parsers' interface: `secret` gives the value of a
    /// `!secret NAME` node, and refuses a value written in the config.
    @Test func aSecretIsReadOnlyThroughItsInterface() throws {
        let dir = try Self.secretsDirectory()
        let parser = ConfigParser(file: dir.path + "/config.yaml", options: Fixtures.options())
        let text = "board: demo\nsubstitutions: { who: mqtt }\npassword: !secret ${who}_password\nwritten: plain-text\n"
        let root = try #require(parser.r.compose(text))
        let assembled = try #require(parser.assemble(root))
        guard case let .mapping(top) = assembled else { Issue.record("not a mapping: \(assembled)"); return }
        let password = try #require(top.first { $0.key.string == "password" }?.value)
        let written = try #require(top.first { $0.key.string == "written" }?.value)
        #expect(parser.isSecret(password))
        #expect(!parser.isSecret(written))
        // The node keeps the name; only `secret` has the value.
        #expect(password.string == "mqtt_password")
        #expect(parser.secret(password, "password") == Self.secretValue)
        #expect(parser.secret(written, "written") == nil)
        #expect(
            parser.log.items.map(\.description) == [
                "\(dir.path)/config.yaml:4:10: error: written: write the value in secrets.yaml and refer to it with !secret NAME; it may not be written in the config"
            ])
    }

    @Test func anUnknownSecretSuggestsANameAndNeverShowsAValue() throws {
        let dir = try Self.secretsDirectory()
        try dir.write("config.yaml", "board: demo\nlines:\n  led: { pin: LED, output: {} }\nx: !secret mqtt_pasword\n")
        let result = ConfigLoader.load(path: dir.path + "/config.yaml", options: Fixtures.options())
        #expect(
            Self.messages(result, in: dir.path) == [
                "config.yaml:4:4: error: x: no secret named 'mqtt_pasword' in secrets.yaml; did you mean 'mqtt_password'?"
            ])
        #expect(!result.diagnostics.contains { $0.description.contains(Self.secretValue) })
    }

    /// A secret where a plain value is read (a log message) is refused by
    /// its name: its value would be logged.
    @Test func aSecretIsNotTakenWhereItsValueWouldShow() throws {
        let dir = try Self.secretsDirectory()
        try dir.write(
            "config.yaml", "board: demo\nlines:\n  led: { pin: LED, output: {} }\ntasks:\n  t: { every: 1s, do: [ log: !secret mqtt_password ] }\n")
        let result = ConfigLoader.load(path: dir.path + "/config.yaml", options: Fixtures.options())
        #expect(
            Self.messages(result, in: dir.path) == [
                "config.yaml:5:30: error: tasks.t.do[0].log: a secret (!secret mqtt_password) is not taken here: only a password or token may come from the secrets file; write the value itself"
            ])
        #expect(!result.diagnostics.contains { $0.description.contains(Self.secretValue) })
    }

    /// Its values would be read as config text, and shown by a message.
    @Test func theSecretsFileCannotBeIncluded() throws {
        let dir = try Self.secretsDirectory()
        try dir.write("config.yaml", "board: demo\nlines: !include ./secrets.yaml\n")
        let result = ConfigLoader.load(path: dir.path + "/config.yaml", options: Fixtures.options())
        #expect(
            Self.messages(result, in: dir.path) == [
                "config.yaml:2:8: error: lines: cannot include './secrets.yaml': it is the secrets file; refer to its values with !secret NAME (they are never shown)"
            ])
    }

    @Test func aMissingSecretsFileIsAnErrorAtTheSecret() throws {
        let dir = try TemporaryDirectory()
        try dir.write("config.yaml", "board: demo\nx: !secret api_token\n")
        let result = ConfigLoader.load(path: dir.path + "/config.yaml", options: Fixtures.options())
        #expect(
            Self.messages(result, in: dir.path) == [
                "config.yaml:2:4: error: x: cannot read secret 'api_token': secrets.yaml: no such file (secrets are read from secrets.yaml beside the config)"
            ])
    }

    /// A secrets file others may read is a warning, not a failure; its
    /// problems are reported in it without a value.
    @Test func aSecretsFileOthersMayReadIsAWarning() throws {
        let dir = try Self.secretsDirectory(mode: 0o644)
        let parser = ConfigParser(file: dir.path + "/config.yaml", options: Fixtures.options())
        let root = try #require(parser.r.compose("board: demo\npassword: !secret api_token\n"))
        _ = try #require(parser.assemble(root))
        #expect(
            parser.log.sorted.map(\.description) == [
                "\(dir.path)/secrets.yaml: warning: users other than its owner may read it (mode 0644); make it readable by its owner only: chmod 600 \(dir.path)/secrets.yaml"
            ])
        try dir.write("secrets.yaml", "api_token: [\(Self.secretValue)]\n")
        #expect(chmod(dir.path + "/secrets.yaml", 0o600) == 0)
        try dir.write("config.yaml", "board: demo\nx: !secret api_token\n")
        let result = ConfigLoader.load(path: dir.path + "/config.yaml", options: Fixtures.options())
        #expect(
            Self.messages(result, in: dir.path) == [
                "secrets.yaml:1:12: error: api_token: expected the secret's value (text), found a list"
            ])
        #expect(!result.diagnostics.contains { $0.description.contains(Self.secretValue) })
    }
}

/// A directory under /tmp, removed when released.
final class TemporaryDirectory {
    let path: String

    init() throws {
        var template = Array("/tmp/boardd-fleet-tests-XXXXXX".utf8CString)
        guard let p = mkdtemp(&template) else { throw CocoaError(.fileWriteUnknown) }
        path = String(cString: p)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    func write(_ name: String, _ text: String) throws {
        try text.write(toFile: path + "/" + name, atomically: false, encoding: .utf8)
    }
}

/// The real path of `path` (symbolic links resolved), as messages show it.
func realPathForTest(_ path: String) -> String {
    guard let p = realpath(path, nil) else { return path }
    defer { free(p) }
    return String(cString: p)
}
