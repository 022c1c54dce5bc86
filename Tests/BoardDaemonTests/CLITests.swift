import BoardControl
import Foundation
import Testing
import BoardDaemon
import BoardSupport

/// Runs the built `boardd` binary. It is found next to the test executable
/// (`/proc/self/exe`: `swift test` builds every product of the package into
/// the same directory, and this target depends on `boardd` so it is built
/// first); a missing binary fails the tests rather than skipping them.
enum Boardd {
    static var path: String {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
        return URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent("boardd").path
    }

    /// The environment a spawned boardd runs with: its control socket in a
    /// directory of its own (`RUNTIME_DIRECTORY`, which anyone may write:
    /// some tests run boardd as another user), so daemons the tests start
    /// at once never share a socket, nor take a running daemon's.
    static func environment(_ base: [String: String] = ProcessInfo.processInfo.environment) -> [String: String] {
        var e = base
        var template = Array("/tmp/boardd-test-XXXXXX".utf8CString)
        if let p = mkdtemp(&template) {
            chmod(p, 0o777)
            e["RUNTIME_DIRECTORY"] = String(cString: p)
        }
        return e
    }

    /// Removes the directory `environment()` made (once the daemon has exited).
    static func removeRuntimeDirectory(_ env: [String: String]?) {
        if let d = env?["RUNTIME_DIRECTORY"], d.hasPrefix("/tmp/boardd-test-") { try? FileManager.default.removeItem(atPath: d) }
    }

    /// Runs `executable` (the built boardd, or a copy of it, or a wrapper
    /// such as setpriv) to its end with `env` (default: `environment()`),
    /// in `cwd` (nil: the tests' own).
    static func run(
        _ arguments: [String], executable: String = path, environment env: [String: String]? = nil,
        cwd: String? = Fixtures.packageRoot
    ) throws -> (status: Int32, stdout: String, stderr: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = arguments
        p.environment = env ?? environment()
        defer { removeRuntimeDirectory(p.environment) }
        if let cwd { p.currentDirectoryURL = URL(fileURLWithPath: cwd) }
        let out = Pipe()
        let err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        // Read both before waiting, so a full pipe cannot stall the child.
        let (o, e) = ChildOutput.readBoth(out, err)
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
    }
}

@Suite struct CLITests {
    @Test func theBinaryIsBuilt() {
        #expect(FileManager.default.isExecutableFile(atPath: Boardd.path), "no boardd at \(Boardd.path)")
    }

    @Test(arguments: ExampleTests.examples)
    func checkPassesForEachExample(_ name: String) throws {
        let r = try Boardd.run(["--check", "--config", "examples/\(name).yaml"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr == "")
        #expect(r.stdout.hasPrefix("examples/\(name).yaml: OK\nboard: "))
        #expect(r.stdout.contains("\nloops:\n  main"))
    }

    @Test func checkPrintsTheResolvedSummary() throws {
        let r = try Boardd.run(["--check", "--config", "Tests/BoardDaemonTests/Fixtures/good/full-language.yaml"])
        #expect(r.status == 0)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("  button   GPIO17 (pin 11) -> pinctrl-bcm2711:17  input edge=both bias=pull-up active-low debounce=20ms  priority low, loop io"))
        #expect(lines.contains("  valve    GPIO5 (pin 29) -> pinctrl-bcm2711:5  output initial=off safe=off  priority normal, loop io"))
        #expect(lines.contains("  heartbeat: every 500ms in default on main: toggle led"))
        #expect(lines.contains("  reactions[3]: estop edge falling -> set valve off; stop pour; log info \"emergency stop\""))
        #expect(lines.contains("  pour: mode critical, policy single, on main: set valve on; wait 150ms; set valve off"))
        #expect(lines.contains("  io (cpu 1, SCHED_FIFO 50): lines button, estop, valve"))
        #expect(lines.contains("    capacities: sources 4, timers 6, observers 1, modes 2, pending performs 32, events per wait 4, nesting 4"))
    }

    /// A pin given by another of its names is shown with the board's name.
    @Test func checkNamesAPinByTheBoardsNameToo() throws {
        let text = "board: demo\nlines:\n  led: { pin: MOCK0_27, output: {} }\n  fan: { pin: FAN, output: {} }\n"
        let result = ConfigLoader.load(text: text, file: "pins.yaml", options: Fixtures.options())
        let summary = try #require(result.config.map(ConfigSummary.init))
        let lines = summary.text.split(separator: "\n").map(String.init)
        #expect(lines.contains("  led  MOCK0_27 (LED) -> boardloop-mock0:27  output initial=off  priority normal, loop main"))
        #expect(lines.contains("  fan  FAN -> boardloop-mock0:6  output initial=off  priority normal, loop main"))
        #expect(Set(summary.lines.map { $0.given ?? "-" }) == ["-", "MOCK0_27"])
    }

    @Test func checkAsJSON() throws {
        let r = try Boardd.run(["--check", "--json", "--config", "examples/doorbell.yaml"])
        #expect(r.status == 0)
        let object = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
        #expect(object?["board"] as? String == "raspberry-pi-4")
        let lines = object?["lines"] as? [[String: Any]]
        #expect(lines?.first?["address"] as? String == "pinctrl-bcm2711:17")
        let loops = object?["loops"] as? [[String: Any]]
        #expect((loops?.first?["capacities"] as? [String: Int])?["modes"] == 1)
    }

    @Test func aBrokenConfigPrintsEveryErrorAndExitsOne() throws {
        let r = try Boardd.run(["--check", "--config", "five-independent-errors.yaml"], cwd: Fixtures.directory + "/bad")
        #expect(r.status == 1)
        #expect(r.stdout == "")
        #expect(
            r.stderr == """
                five-independent-errors.yaml:3:57: error: lines.button.input.debounce: '20' has no unit; write 20ms (units: us, ms, s, min, h)
                five-independent-errors.yaml:4:15: error: lines.led.pin: the raspberry-pi-4 board has no pin 'GPIO72' (nearest: GPIO12, GPIO2, GPIO22)
                five-independent-errors.yaml:7:24: error: modes.critical.admits[0]: no priority named 'urgent' (priorities: low, normal, high)
                five-independent-errors.yaml:9:18: error: tasks.fast.every: 10us is too short; a task runs at most every 100us
                five-independent-errors.yaml:11:17: error: reactions[0].on.line: no line named 'buton'; did you mean 'button'? (lines: button, led, valve)
                five-independent-errors.yaml: 5 errors

                """)
    }

    @Test func errorsAsJSON() throws {
        let r = try Boardd.run(["--check", "--json", "--config", "Tests/BoardDaemonTests/Fixtures/bad/unknown-pin.yaml"])
        #expect(r.status == 1)
        let object = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
        #expect(object?["ok"] as? Bool == false)
        let d = (object?["diagnostics"] as? [[String: Any]])?.first
        #expect(d?["line"] as? Int == 3 && d?["column"] as? Int == 15 && d?["path"] as? String == "lines.led.pin")
    }

    @Test func boardOverrideChecksForAnotherBoard() throws {
        let r = try Boardd.run(["--check", "--config", "examples/doorbell.yaml", "--board", "raspberry-pi-5"])
        #expect(r.status == 0)
        #expect(r.stdout.contains("GPIO17 (pin 11) -> pinctrl-rp1:17"))
        let bad = try Boardd.run(["--check", "--config", "examples/doorbell.yaml", "--board", "raspberry-pi-9"])
        #expect(bad.status == 1)
        #expect(bad.stderr.hasPrefix("examples/doorbell.yaml: error: --board: unknown board 'raspberry-pi-9'"))
    }

    @Test func aMissingConfigFileIsAnError() throws {
        let r = try Boardd.run(["--check", "--config", "no-such.yaml"])
        #expect(r.status == 1)
        #expect(r.stderr == "no-such.yaml: error: no such file\nno-such.yaml: 1 error\n")
    }

    @Test func boardDetectReadsAFixtureRoot() throws {
        let root = Fixtures.packageRoot + "/Tests/BoardSupportTests/Fixtures/roots/raspberry-pi-4-model-b"
        let r = try Boardd.run(["--board-detect", "--root", root])
        #expect(r.status == 0)
        #expect(
            r.stdout.hasPrefix(
                """
                read from \(root):
                  model: "Raspberry Pi 4 Model B Rev 1.4"
                  compatible: raspberrypi,4-model-b, brcm,bcm2711
                  gpio chips: pinctrl-bcm2711, raspberrypi-exp-gpio
                verdict: raspberry-pi-4 (compatible "raspberrypi,4-model-b")
                """))
        let none = try Boardd.run(["--board-detect", "--root", Fixtures.packageRoot + "/Tests/BoardSupportTests/Fixtures/roots/no-match"])
        #expect(none.status == 1)
        #expect(none.stdout.contains("verdict: no board matches (known boards: demo, generic, gpio-sim, raspberry-pi-1"))
    }

    /// The naming of the board's lines is said.
    @Test func boardDetectSaysTheNaming() throws {
        let roots = Fixtures.packageRoot + "/Tests/BoardSupportTests/Fixtures/roots"
        let r = try Boardd.run(["--board-detect", "--root", roots + "/raspberry-pi-4-model-b"])
        #expect(r.stdout.contains("naming: pinctrl-bcm2711: not present (line names as the board file gives them, both namings accepted)"))
    }

    /// A compute module is no header board: the carrier's board file is asked for.
    @Test func boardDetectRefusesAComputeModule() throws {
        let roots = Fixtures.packageRoot + "/Tests/BoardSupportTests/Fixtures/roots"
        let cm = try Boardd.run(["--board-detect", "--root", roots + "/compute-module-4"])
        #expect(cm.status == 1)
        #expect(
            cm.stdout.contains(
                "verdict: a compute module (compatible \"raspberrypi,4-compute-module\"): name the carrier's board file (board: NAME or --board NAME)"),
            "\(cm.stdout)")
        let zero = try Boardd.run(["--board-detect", "--root", roots + "/raspberry-pi-zero-w"])
        #expect(zero.stdout.contains("verdict: raspberry-pi-zero-w (compatible \"raspberrypi,model-zero-w\")"))
    }

    @Test func checkWithoutConfigIsAUsageError() throws {
        let r = try Boardd.run(["--check"])
        #expect(r.status == 64)
        #expect(r.stderr.contains("--check needs --config FILE"))
    }
}

/// The command line's own mistakes: a clear message and the usage status,
/// never a crash.
@Suite struct CommandLineMistakeTests {
    /// `--for` takes the config's duration grammar, with its bounds and messages.
    @Test(arguments: [
        ("1e308s", "expected a duration such as 20ms, found '1e308s'"),
        ("infs", "expected a duration such as 20ms, found 'infs'"),
        ("9223372037s", "'9223372037s' is too long (the limit is about 292 years)"),
        ("5", "'5' has no unit; write 5s"),
        ("3 parsecs", "unknown unit 'parsecs'"),
    ])
    func forRefusesWhatTheConfigRefuses(_ arg: (String, String)) throws {
        let r = try Boardd.run(["--config", "examples/demo.yaml", "--for", arg.0])
        #expect(r.status == 64, "\(r.stderr)")
        #expect(r.stderr.contains("--for \(arg.0): \(arg.1)"), "\(r.stderr)")
    }

    @Test func forTakesTheConfigsUnits() throws {
        let r = try Boardd.run(["--config", "examples/demo.yaml", "--for", "300ms", "--log-level", "error"])
        #expect(r.status == 0, "\(r.stderr)")
    }

    /// Every unit of the config's grammar (`DurationText.units`), on both
    /// duration options: `--for 0<unit>` and the shortest whole stop timeout
    /// of at least 100ms in that unit.
    @Test(arguments: DurationText.units)
    func durationOptionsTakeEveryUnitTheConfigTakes(_ unit: (String, Int64)) throws {
        let (name, scale) = unit
        #expect(throws: Never.self) { try DurationText.parse("0\(name)").get() }
        let least = max(1, (100_000_000 + scale - 1) / scale)
        let r = try Boardd.run([
            "--config", "examples/demo.yaml", "--for", "0\(name)", "--stop-timeout", "\(least)\(name)", "--log-level", "error",
        ])
        #expect(r.status == 0, "\(name): \(r.stderr)")
    }

    /// `--stop-timeout` refuses what the config refuses, with the config's
    /// message, and a timeout below its floor by name.
    @Test(arguments: [
        ("1e308s", "expected a duration such as 20ms, found '1e308s'"),
        ("9223372037s", "'9223372037s' is too long (the limit is about 292 years)"),
        ("5", "'5' has no unit; write 5s"),
        ("3 parsecs", "unknown unit 'parsecs'"),
        ("-1s", "'-1s' is negative; a duration is zero or more"),
        ("1.0000000001s", "'1.0000000001s' is finer than a nanosecond"),
        ("50ms", "at least 100ms is needed"),
    ])
    func stopTimeoutRefusesWhatTheConfigRefuses(_ arg: (String, String)) throws {
        // `=` form: a negative value is not taken for an option.
        let r = try Boardd.run(["--config", "examples/demo.yaml", "--for", "0s", "--stop-timeout=\(arg.0)"])
        #expect(r.status == 64, "\(r.stderr)")
        #expect(r.stderr.contains("--stop-timeout \(arg.0): \(arg.1)"), "\(r.stderr)")
    }

    @Test func demoWithAConfigIsAnError() throws {
        let r = try Boardd.run(["--demo", "--config", "examples/doorbell.yaml", "--for", "1s"])
        #expect(r.status == 64)
        #expect(r.stderr.contains("--demo runs the built-in demo config and would ignore --config examples/doorbell.yaml"), "\(r.stderr)")
    }

    @Test func versionNamesTheReleaseTheCommitLibgpiodAndLibmosquitto() throws {
        let r = try Boardd.run(["--version"])
        #expect(r.status == 0)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 4, "\(r.stdout)")
        #expect(lines.first?.hasPrefix("boardd 0.1.0 (libgpiod ") == true, "\(r.stdout)")
        let commit = lines.dropFirst().first ?? ""
        #expect(commit.hasPrefix("commit "), "\(r.stdout)")
        #expect(try describesACommit(String(commit.dropFirst(7)), root: Fixtures.packageRoot), "\(commit)")
        let gpio = lines.count > 2 ? lines[2] : ""
        #expect(gpio.hasPrefix("built against libgpiod ") && !gpio.hasPrefix("built against libgpiod unknown"), "\(gpio)")
        #expect(gpio.contains("(the 1.x branch)") || gpio.contains("(the 2.x branch)"), "\(gpio)")
        let mqtt = lines.last ?? ""
        #expect(mqtt.hasPrefix("MQTT: libmosquitto 2.") || mqtt.hasPrefix("MQTT: libmosquitto 1."), "\(mqtt)")
    }
}

/// Whether `describe` (what `git describe --always --dirty` gave at build
/// time) names a commit of the repository at `root`: the build read the
/// real tree, not a placeholder. Outside a git checkout it must be `unknown`.
func describesACommit(_ describe: String, root: String) throws -> Bool {
    let git = Process()
    git.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    var name = describe.hasSuffix("-dirty") ? String(describe.dropLast(6)) : describe
    if let g = name.range(of: "-g", options: .backwards) { name = String(name[g.upperBound...]) }
    git.arguments = ["git", "-C", root, "cat-file", "-e", name + "^{commit}"]
    git.standardError = FileHandle.nullDevice
    try git.run()
    git.waitUntilExit()
    if FileManager.default.fileExists(atPath: root + "/.git") { return git.terminationStatus == 0 && !name.isEmpty }
    return describe == "unknown"
}

/// A binary copied out of its checkout reads no file from where it was
/// built: its boards are its built-in ones (or /etc/boardd/boards and
/// /usr/share/boardd/boards), never the build tree's boards/.
@Suite struct BuildTreeTests {
    @Test func aCopiedBinaryDoesNotReadTheBuildTreesBoards() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("boardd-copy-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let copy = dir.appendingPathComponent("boardd").path
        try FileManager.default.copyItem(atPath: Boardd.path, toPath: copy)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: copy)
        p.arguments = ["--check", "--config", Fixtures.packageRoot + "/examples/doorbell.yaml"]
        p.currentDirectoryURL = dir
        let out = Pipe()
        p.standardError = FileHandle.nullDevice
        p.standardOutput = out
        try p.run()
        let o = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
        #expect(!o.contains(Fixtures.boards), "\(o)")
        if !CopiedBinaryTests.installed("raspberry-pi-4") {
            #expect(o.contains("[boards/raspberry-pi-4.yaml (built in)]"), "\(o)")
        }
    }
}
