import BoardControl
import Foundation
import Glibc
import Testing

/// Each command's request line, exactly as it goes on the wire.
@Suite struct RequestTests {
    static let cases: [(Command, String)] = [
        (.status, #"{"v":1,"id":1,"cmd":"status"}"#),
        (.lines, #"{"v":1,"id":1,"cmd":"lines"}"#),
        (.get(line: "led"), #"{"v":1,"id":1,"cmd":"get","line":"led"}"#),
        (.set(line: "led", value: true), #"{"v":1,"id":1,"cmd":"set","line":"led","value":true}"#),
        (.set(line: "led", value: false), #"{"v":1,"id":1,"cmd":"set","line":"led","value":false}"#),
        (.toggle(line: "led"), #"{"v":1,"id":1,"cmd":"toggle","line":"led"}"#),
        (.pulse(line: "bell", duration: "100ms"), #"{"v":1,"id":1,"cmd":"pulse","line":"bell","duration":"100ms"}"#),
        (.sequence(start: true, name: "fill"), #"{"v":1,"id":1,"cmd":"sequence","action":"start","name":"fill"}"#),
        (.sequence(start: false, name: "fill"), #"{"v":1,"id":1,"cmd":"sequence","action":"stop","name":"fill"}"#),
        (.mode(loop: "main", mode: nil), #"{"v":1,"id":1,"cmd":"mode","loop":"main"}"#),
        (.mode(loop: "main", mode: "critical"), #"{"v":1,"id":1,"cmd":"mode","loop":"main","mode":"critical"}"#),
        (.reload, #"{"v":1,"id":1,"cmd":"reload"}"#),
        (.press(line: "button", hold: nil), #"{"v":1,"id":1,"cmd":"press","line":"button"}"#),
        (.press(line: "button", hold: "2s"), #"{"v":1,"id":1,"cmd":"press","line":"button","hold":"2s"}"#),
        (.release(line: "button"), #"{"v":1,"id":1,"cmd":"release","line":"button"}"#),
        (.click(line: "button", count: nil, hold: nil), #"{"v":1,"id":1,"cmd":"click","line":"button"}"#),
        (.click(line: "button", count: 2, hold: "80ms"), #"{"v":1,"id":1,"cmd":"click","line":"button","count":2,"hold":"80ms"}"#),
        (.input(line: "door", value: true), #"{"v":1,"id":1,"cmd":"input","line":"door","value":true}"#),
        (.ping, #"{"v":1,"id":1,"cmd":"ping"}"#),
    ]

    @Test(arguments: 0..<cases.count)
    func eachCommandSendsItsRequest(_ i: Int) throws {
        let (command, expected) = Self.cases[i]
        let server = try FakeBoardd(result: "")
        defer { server.stop() }
        _ = Boardctl.execute(command, socket: server.path, json: true)
        #expect(server.requests == [expected])
    }

    @Test func aLineNameIsEscaped() {
        #expect(Command.get(line: "a\"b\\c\n").request.line(id: 7) == #"{"v":1,"id":7,"cmd":"get","line":"a\"b\\c\n"}"# + "\n")
    }
}

/// What a person reads, and what --json prints.
@Suite struct OutputTests {
    func run(_ command: Command, _ result: String, json: Bool = false) throws -> Outcome {
        let server = try FakeBoardd(result: result)
        defer { server.stop() }
        return Boardctl.execute(command, socket: server.path, json: json)
    }

    @Test func oneLineReplies() throws {
        #expect(try run(.get(line: "led"), #""line":"led","value":true"#) == Outcome(stdout: "led: on\n", stderr: "", status: 0))
        #expect(try run(.set(line: "led", value: false), #""line":"led","value":false"#).stdout == "led: off\n")
        #expect(try run(.toggle(line: "led"), #""line":"led","value":true"#).stdout == "led: on\n")
        #expect(try run(.pulse(line: "bell", duration: "100ms"), #""line":"bell""#).stdout == "bell: pulse 100ms started\n")
        #expect(try run(.sequence(start: true, name: "fill"), #""name":"fill""#).stdout == "fill: started\n")
        #expect(try run(.sequence(start: false, name: "fill"), #""name":"fill""#).stdout == "fill: stopped\n")
        #expect(try run(.mode(loop: "main", mode: nil), #""loop":"main","mode":"default""#).stdout == "main: default\n")
        #expect(try run(.reload, #""applied":true,"errors":[]"#) == Outcome(stdout: "reloaded: the new config is running\n", stderr: "", status: 0))
        #expect(try run(.press(line: "button", hold: "2s"), #""line":"button""#).stdout == "button: pressed for 2s\n")
        #expect(try run(.release(line: "button"), #""line":"button""#).stdout == "button: released\n")
        #expect(try run(.click(line: "button", count: 2, hold: nil), #""line":"button""#).stdout == "button: clicked 2 times\n")
        #expect(try run(.input(line: "door", value: true), #""line":"door""#).stdout == "door: input on\n")
        #expect(try run(.ping, #""pong":true"#).stdout == "pong\n")
    }

    @Test func jsonPrintsTheResultOnOneLine() throws {
        let r = try run(.get(line: "led"), #""line":"led","value":true"#, json: true)
        #expect(r == Outcome(stdout: #"{"line":"led","value":true}"# + "\n", stderr: "", status: 0))
        let s = try run(.status, Self.status, json: true)
        #expect(s.stdout.filter { $0 == "\n" }.count == 1)
        #expect(JSON.parse(s.stdout)?["loops"]?.array?.count == 3)
        #expect(JSON.parse(s.stdout)?["v"] == nil && JSON.parse(s.stdout)?["ok"] == nil)
    }

    static let status = """
        "board":{"name":"raspberry-pi-4","found":"config","backend":"libgpiod 2.x"},\
        "config":{"file":"/etc/boardd/boardd.yaml","generation":3},"pid":812,"uptime_s":7384.5,\
        "loops":[{"name":"main","mode":"default","answered":true,"thread_tid":812,"cpus":[],"priority":null,\
        "thread":{"cpu_now":1,"policy":"other","priority_now":0},"waits":48211,"handled":52030,\
        "slowest_handler":{"what":"task poll","took_ns":2400000}},\
        {"name":"critical","mode":"fill","answered":true,"thread_tid":815,"cpus":[2,3],"priority":80,\
        "thread":{"cpu_now":3,"policy":"fifo","priority_now":80},"waits":901,"handled":1207,\
        "slowest_handler":{"what":"reaction estop","took_ns":85000}},\
        {"name":"slow","mode":"default","answered":false,"cpus":[],"priority":null}],\
        "sequences_running":[{"name":"fill","runs":4,"queued":1}],\
        "lines_held":{"door":12},"lost":{"flow":2},"children":1,\
        "reloads":{"applied":2,"refused":1,"last_error":"boardd.yaml:4:3: error: unknown key"}
        """

    @Test func statusIsAlignedText() throws {
        let r = try run(.status, Self.status)
        #expect(r.status == 0)
        #expect(
            r.stdout == """
                board:    raspberry-pi-4 (found: config, libgpiod 2.x)
                config:   /etc/boardd/boardd.yaml (generation 3)
                boardd:   pid 812, up 2h 03m, 1 child process
                reloads:  2 applied, 1 refused (last error: boardd.yaml:4:3: error: unknown key)

                LOOP      MODE     TID  CPU  CPUS  SCHED    WAITS  HANDLED  SLOWEST HANDLER
                main      default  812  1    any   other    48211  52030    task poll 2.4ms
                critical  fill     815  3    2-3   fifo 80  901    1207     reaction estop 85us
                slow      default  -    -    any   -        -      -        (did not answer)

                SEQUENCE  RUNS  QUEUED
                fill      4     1

                LINE  HELD  LOST
                door  12    0
                flow  0     2

                """, "\(r.stdout)")
    }

    @Test func linesIsATable() throws {
        let r = try run(
            .lines,
            """
            "lines":[{"name":"button","pin":11,"chip":"gpiochip0","offset":17,"direction":"input","value":false,\
            "priority":"high","events":120,"held":0,"lost":0,"rate_limited":3,\
            "last_edge":{"edge":"rising","t_ns":90000000000,"ago_ns":3200000000}},\
            {"name":"led","pin":null,"chip":"gpiochip1","offset":4,"direction":"output","value":true,\
            "priority":"normal","events":0,"held":0,"lost":0,"rate_limited":0}]
            """)
        #expect(
            r.stdout == """
                LINE    PIN  CHIP       OFFSET  DIRECTION  VALUE  PRIORITY  LAST EDGE        EVENTS  HELD  LOST  RATE-LIMITED
                button  11   gpiochip0  17      input      off    high      rising 3.2s ago  120     0     0     3
                led     -    gpiochip1  4       output     on     normal    -                0       0     0     0

                """, "\(r.stdout)")
    }
}

/// Every way it goes wrong: the line on stderr and the exit status.
@Suite struct ErrorTests {
    @Test func aMissingSocketIsNoDaemon() throws {
        let dir = try TempDir.make()
        defer { TempDir.remove(dir) }
        let path = dir + "/boardd.sock"
        let r = Boardctl.execute(.status, socket: path, json: false)
        #expect(r.status == 3)
        #expect(
            r.stderr
                == "boardctl: no boardd is running at \(path) (start it: systemctl start boardd, or boardd --config FILE --mock; or give --socket)\n")
        #expect(r.stdout == "")
    }

    /// When boardctl chose the path itself and the system socket exists, the line names it.
    @Test func noDaemonNamesTheSystemSocketWhenItExists() throws {
        let dir = try TempDir.make()
        defer { TempDir.remove(dir) }
        let path = dir + "/boardd.sock"
        #expect(SocketPath.systemSocket(insteadOf: path, exists: { $0 == "/run/boardd/boardd.sock" }) == "/run/boardd/boardd.sock")
        #expect(SocketPath.systemSocket(insteadOf: path, exists: { _ in false }) == nil)
        #expect(SocketPath.systemSocket(insteadOf: "/run/boardd/boardd.sock", exists: { _ in true }) == nil)
        let r = Boardctl.execute(.status, socket: path, json: false, alternative: "/run/boardd/boardd.sock")
        #expect(r.status == 3)
        #expect(
            r.stderr
                == "boardctl: no boardd is running at \(path) (start it: systemctl start boardd, or boardd --config FILE --mock; or give --socket); /run/boardd/boardd.sock exists: try --socket /run/boardd/boardd.sock\n"
        )
    }

    @Test func aStaleSocketIsNoDaemon() throws {
        let (dir, path) = try FakeBoardd.staleSocket()
        defer { TempDir.remove(dir) }
        var st = stat()
        #expect(stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFSOCK, "the stale socket file exists")
        let r = Boardctl.execute(.ping, socket: path, json: false)
        #expect(r.status == 3)
        #expect(r.stderr.hasPrefix("boardctl: no boardd is running at \(path) "))
    }

    @Test(.enabled(if: getuid() != 0, "skipped when running as root: root is never refused a socket (the setpriv test covers it)"))
    func aSocketWithoutPermissionIsPermissionDenied() throws {
        let server = try FakeBoardd(result: #""pong":true"#)
        defer { server.stop() }
        #expect(chmod(server.path, 0) == 0)
        let r = Boardctl.execute(.ping, socket: server.path, json: false)
        #expect(r.status == 4)
        #expect(
            r.stderr
                == "boardctl: permission denied on \(server.path): add yourself to the group that owns it (ls -l \(server.path) shows it) and log in again\n"
        )
        #expect(server.requests.isEmpty)
    }

    /// As root, the binary runs as nobody (setpriv) against a socket only root may use.
    @Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), "runs only as root with setpriv"))
    func aSocketWithoutPermissionIsPermissionDeniedForNobody() throws {
        let server = try FakeBoardd(result: #""pong":true"#)
        defer { server.stop() }
        #expect(chmod(server.directory, 0o755) == 0)
        #expect(chmod(server.path, 0o600) == 0)
        let binary = BoardctlBinary.path
        let r = try BoardctlBinary.run(
            ["ping", "--socket", server.path], prefix: ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
        // The build tree may be closed to nobody; then this test proves nothing.
        try #require(!r.stderr.contains("Permission denied") || r.stderr.hasPrefix("boardctl:"), "nobody cannot run \(binary): \(r.stderr)")
        #expect(r.status == 4, "\(r.stderr)")
        #expect(r.stderr.hasPrefix("boardctl: permission denied on \(server.path): add yourself to the group"))
        #expect(server.requests.isEmpty)
    }

    @Test func anotherProtocolVersionSaysUpgrade() throws {
        let server = try FakeBoardd { _ in
            #"{"v":2,"id":1,"ok":false,"error":{"code":"version","message":"boardd speaks protocol v2"}}"#
        }
        defer { server.stop() }
        let r = Boardctl.execute(.status, socket: server.path, json: false)
        #expect(r == Outcome(stdout: "", stderr: "boardctl: boardd speaks protocol v2, this boardctl v1: upgrade boardctl\n", status: 5))
    }

    @Test func aRefusalInThisVersionSaysUpgradeWithTheDaemonsMessage() throws {
        let server = try FakeBoardd { _ in
            #"{"v":1,"id":1,"ok":false,"error":{"code":"version","message":"this boardd speaks protocol v2 and v3"}}"#
        }
        defer { server.stop() }
        let r = Boardctl.execute(.ping, socket: server.path, json: false)
        #expect(
            r == Outcome(
                stdout: "", stderr: "boardctl: boardd does not speak protocol v1 (this boardd speaks protocol v2 and v3): upgrade boardctl\n",
                status: 5))
    }

    /// A busy daemon writes one error line and closes without reading the request.
    @Test func aBusyDaemonsErrorIsRead() throws {
        let server = try FakeBoardd(
            greeting: #"{"v":1,"id":null,"ok":false,"error":{"code":"busy","message":"boardd has 16 clients already; try again"}}"#)
        defer { server.stop() }
        for _ in 0..<20 {
            let r = Boardctl.execute(.status, socket: server.path, json: false)
            #expect(r == Outcome(stdout: "", stderr: "boardctl: boardd has 16 clients already; try again\n", status: 1))
        }
    }

    @Test func anErrorReplyPrintsItsMessage() throws {
        let server = try FakeBoardd { _ in
            #"{"v":1,"id":1,"ok":false,"error":{"code":"unknown-line","message":"no line named lde (lines: button, led)"}}"#
        }
        defer { server.stop() }
        let r = Boardctl.execute(.get(line: "lde"), socket: server.path, json: true)
        #expect(r == Outcome(stdout: "", stderr: "boardctl: no line named lde (lines: button, led)\n", status: 1))
    }

    @Test func aRefusedReloadPrintsTheErrorsExactly() throws {
        let errors = [
            "/etc/boardd/boardd.yaml:12:5: error: unknown key 'edg' (did you mean 'edge'?)",
            "/etc/boardd/boardd.yaml:20:11: error: \"fill\" is not a sequence",
        ]
        let result = #""applied":false,"errors":"# + JSON.array(errors.map(JSON.string)).serialized
        let server = try FakeBoardd(result: result)
        defer { server.stop() }
        let r = Boardctl.execute(.reload, socket: server.path, json: false)
        #expect(r.status == 1)
        #expect(r.stdout == "")
        #expect(r.stderr.hasPrefix(errors.joined(separator: "\n") + "\n"), "\(r.stderr)")
        #expect(r.stderr.hasSuffix("boardctl: boardd refused the reload (2 errors) and keeps running the config it had\n"))
    }

    @Test func noReplyIsAConnectionError() throws {
        let server = try FakeBoardd { _ in nil }
        defer { server.stop() }
        let r = Boardctl.execute(.ping, socket: server.path, json: false)
        #expect(r == Outcome(stdout: "", stderr: "boardctl: boardd at \(server.path): the daemon closed the connection without a reply\n", status: 6))
    }

    @Test func aReplyThatIsNotJSONIsAConnectionError() throws {
        let server = try FakeBoardd { _ in "hello" }
        defer { server.stop() }
        let r = Boardctl.execute(.ping, socket: server.path, json: false)
        #expect(r.status == 6)
        #expect(r.stderr == "boardctl: boardd at \(server.path): the reply is not a JSON object: hello\n")
    }

    @Test func connectErrnosMeanWhatAPersonReads() {
        #expect(ControlClient.classify(connectErrno: ENOENT, path: "/p") == .noDaemon(path: "/p"))
        #expect(ControlClient.classify(connectErrno: ECONNREFUSED, path: "/p") == .noDaemon(path: "/p"))
        #expect(ControlClient.classify(connectErrno: EACCES, path: "/p") == .permissionDenied(path: "/p"))
        #expect(ControlClient.classify(connectErrno: EACCES, path: "/p").exitStatus == 4)
    }
}

/// The socket path, in the contract's order (boardctl has no config).
@Suite struct SocketPathTests {
    @Test func theOrder() {
        let all = ["RUNTIME_DIRECTORY": "/run/boardd-svc", "XDG_RUNTIME_DIR": "/run/user/1000"]
        #expect(SocketPath.resolve(explicit: "/x.sock", environment: all, uid: 1000, isWritable: { _ in true }) == "/x.sock")
        #expect(SocketPath.resolve(explicit: nil, environment: all, uid: 1000, isWritable: { _ in true }) == "/run/boardd-svc/boardd.sock")
        #expect(
            SocketPath.resolve(explicit: nil, environment: ["RUNTIME_DIRECTORY": "/a:/b"], uid: 1000, isWritable: { _ in false })
                == "/a/boardd.sock")
        var seen: [String] = []
        let xdg = ["XDG_RUNTIME_DIR": "/run/user/1000"]
        #expect(
            SocketPath.resolve(explicit: nil, environment: xdg, uid: 1000, isWritable: { seen.append($0); return true })
                == "/run/boardd/boardd.sock")
        #expect(seen == ["/run/boardd"])
        #expect(SocketPath.resolve(explicit: nil, environment: xdg, uid: 1000, isWritable: { _ in false }) == "/run/user/1000/boardd.sock")
        #expect(SocketPath.resolve(explicit: nil, environment: [:], uid: 1000, isWritable: { _ in false }) == "/tmp/boardd-1000.sock")
    }

    /// A client takes the first place where a socket exists: a person
    /// outside the service (no RUNTIME_DIRECTORY, /run/boardd not theirs)
    /// still reaches the system daemon; with none, the server's rule.
    @Test func aClientFindsTheSocketThatExists() {
        let xdg = ["XDG_RUNTIME_DIR": "/run/user/1000"]
        #expect(
            SocketPath.find(explicit: nil, environment: xdg, uid: 1000, exists: { $0 == "/run/boardd/boardd.sock" }, isWritable: { _ in false })
                == "/run/boardd/boardd.sock")
        #expect(
            SocketPath.find(explicit: nil, environment: xdg, uid: 1000, exists: { $0 == "/run/user/1000/boardd.sock" }, isWritable: { _ in true })
                == "/run/user/1000/boardd.sock")
        #expect(
            SocketPath.find(explicit: nil, environment: xdg, uid: 1000, exists: { _ in false }, isWritable: { _ in false })
                == "/run/user/1000/boardd.sock")
        #expect(SocketPath.find(explicit: "/x.sock", environment: xdg, uid: 1000, exists: { _ in true }) == "/x.sock")
        // A crashed daemon's file (nobody listening) does not hide a live one.
        #expect(
            SocketPath.find(
                explicit: nil, environment: xdg, uid: 1000,
                exists: { $0 == "/run/boardd/boardd.sock" || $0 == "/run/user/1000/boardd.sock" }, isWritable: { _ in false },
                isStale: { $0 == "/run/boardd/boardd.sock" }) == "/run/user/1000/boardd.sock")
        // `boardd --demo`'s socket, when no daemon's exists.
        #expect(
            SocketPath.find(explicit: nil, environment: xdg, uid: 1000, exists: { $0 == "/run/user/1000/boardd-demo.sock" }, isWritable: { _ in false })
                == "/run/user/1000/boardd-demo.sock")
        #expect(
            SocketPath.find(
                explicit: nil, environment: xdg, uid: 1000,
                exists: { $0 == "/run/user/1000/boardd-demo.sock" || $0 == "/run/boardd/boardd.sock" }, isWritable: { _ in false })
                == "/run/boardd/boardd.sock")
    }

    /// /run/boardd there but closed to this user (not in its group): the
    /// system daemon may be running in it, so the error says so (exit 4),
    /// not "no boardd is running" at a fallback path (exit 3).
    @Test func aSocketDirectoryTheUserMayNotEnterIsAPermissionError() throws {
        let denied = SocketPath.locate(
            explicit: nil, environment: [:], uid: 65534, exists: { $0 == "/run/boardd" }, isWritable: { _ in false },
            isStale: { _ in true }, canEnter: { $0 != "/run/boardd" }, group: { _ in "boardd" })
        guard case let .failure(error) = denied else {
            Issue.record("found \(denied)")
            return
        }
        #expect(error == .directoryDenied(path: "/run/boardd", group: "boardd"))
        #expect(error.exitStatus == 4)
        #expect(
            error.stderrText
                == "boardctl: permission denied on /run/boardd, the directory of boardd's socket: add yourself to group boardd (sudo usermod -aG boardd $USER) and log in again\n"
        )
        // A directory the user may enter, one that does not exist, a socket found elsewhere or --socket: no such error.
        let open = SocketPath.locate(
            explicit: nil, environment: [:], uid: 65534, exists: { $0 == "/run/boardd" }, isWritable: { _ in false },
            isStale: { _ in true }, canEnter: { _ in true })
        #expect(open == .success("/tmp/boardd-65534.sock"))
        #expect(
            SocketPath.locate(explicit: nil, environment: [:], uid: 65534, exists: { _ in false }, isWritable: { _ in false }, canEnter: { _ in false })
                == .success("/tmp/boardd-65534.sock"))
        let xdg = ["XDG_RUNTIME_DIR": "/run/user/1000"]
        #expect(
            SocketPath.locate(
                explicit: nil, environment: xdg, uid: 1000, exists: { $0 == "/run/boardd" || $0 == "/run/user/1000/boardd.sock" },
                isWritable: { _ in false }, isStale: { _ in false }, canEnter: { _ in false }) == .success("/run/user/1000/boardd.sock"))
        #expect(
            SocketPath.locate(explicit: "/x.sock", environment: [:], exists: { _ in true }, canEnter: { _ in false }) == .success("/x.sock"))
        // systemd's RUNTIME_DIRECTORY closed to the user, with its group's name.
        #expect(
            SocketPath.locate(
                explicit: nil, environment: ["RUNTIME_DIRECTORY": "/run/mine"], exists: { $0 == "/run/mine" }, isWritable: { _ in false },
                canEnter: { _ in false }, group: { _ in "staff" }) == .failure(.directoryDenied(path: "/run/mine", group: "staff")))
    }

    /// The same with a real directory of mode 000 standing for /run/boardd
    /// (no RUNTIME_DIRECTORY, no XDG_RUNTIME_DIR), with the default checks.
    /// Root enters any directory whatever its mode, so the permission check
    /// cannot apply there: skipped when the tests run as root (euid 0).
    @Test(.enabled(if: geteuid() != 0, "root enters a directory of any mode: permission checks do not apply"))
    func aRealDirectoryTheUserMayNotEnter() throws {
        var template = Array("/tmp/boardctl-denied-XXXXXX".utf8CString)
        let dir = try #require(template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }.map { String(cString: $0) })
        defer {
            chmod(dir, 0o700)
            rmdir(dir)
        }
        #expect(chmod(dir, 0) == 0)
        let r = SocketPath.locate(explicit: nil, environment: [:], uid: getuid(), isStale: { _ in true }, system: dir)
        guard case let .failure(error) = r, case let .directoryDenied(path, _) = error else {
            Issue.record("\(r)")
            return
        }
        #expect(path == dir)
        #expect(error.exitStatus == 4)
    }
}

@Suite struct JSONTests {
    @Test func roundTrips() {
        let text = #"{"a":[1,-2.5,true,false,null],"b":{"c":"x\"y\\z\n\u0001é"},"d":[]}"#
        let v = JSON.parse(text)
        #expect(v != nil)
        #expect(v?.serialized == text)
        #expect(JSON.parse(#""\ud83d\ude00""#) == .string("😀"))
        #expect(JSON.parse("{\"a\":1,}") == nil)
        #expect(JSON.parse("[1] x") == nil)
        #expect(JSON.parse("\"a\nb\"") == nil)
        #expect(JSON.parse(#""\ud83d""#) == nil, "a lone surrogate")
    }

    /// One number model on both ends: whole numbers that fit in 64 bits are
    /// `int`, every other number a double; `int` takes a whole double.
    @Test func numbers() throws {
        #expect(JSON.parse("1") == .int(1))
        #expect(JSON.parse("-0") == .int(0))
        #expect(JSON.parse("9223372036854775807") == .int(.max))
        #expect(JSON.parse("9223372036854775808") == .double(9223372036854775808))
        #expect(JSON.parse("1.0") == .double(1))
        #expect(JSON.parse("1e3") == .double(1000))
        #expect(JSON.parse("1.0")?.int == 1)
        #expect(JSON.parse("1.5")?.int == nil)
        #expect(JSON.parse("2")?.double == 2)
        #expect(JSON.parse("01") == nil)
        #expect(JSON.parse("1.5")?.serialized == "1.5")
        #expect(JSON.int(7).cell == "7" && JSON.null.cell == "-" && JSON.string("x").cell == "x")
    }

    /// A key given twice is an error, with where, in a small object and in
    /// a large one (past the scan, the set of keys); distinct keys are fine.
    @Test func aKeyGivenTwiceIsAnError() throws {
        #expect(JSON.parse(#"{"a":1,"a":2}"#) == nil)
        #expect(JSON.parse(#"{"a":{"b":1},"b":{"a":1}}"#) != nil, "the same key in different objects")
        do {
            _ = try JSON.parse(ArraySlice(#"{"a":1,"a":2}"#.utf8))
            Issue.record("a duplicate key was taken")
        } catch {
            #expect(error.message == "the key \"a\" is given twice at byte 8")
        }
        let many = (0..<40).map { "\"k\($0)\":\($0)" }
        #expect(JSON.parse("{" + many.joined(separator: ",") + "}")?.members?.count == 40)
        #expect(JSON.parse("{" + (many + ["\"k3\":0"]).joined(separator: ",") + "}") == nil)
        #expect(JSON.parse("{" + (many + ["\"k39\":0"]).joined(separator: ",") + "}") == nil)
    }
}

/// The built binary: version, help, completions, a request through it.
@Suite struct BinaryTests {
    @Test func versionMatchesBoarddsFormat() throws {
        let r = try BoardctlBinary.run(["--version"])
        #expect(
            r == Outcome(
                stdout: "boardctl 0.1.0 (control protocol v1)\ncommit \(Release.commit)\nbuilt against libgpiod \(Release.libgpiod) (boardd links it; boardctl does not)\n",
                stderr: "", status: 0))
        #expect(try describesACommit(Release.commit, root: EndToEndTests.root), "\(Release.commit)")
        #expect(Release.libgpiod != "unknown" && Release.libgpiod.first?.isNumber == true, "\(Release.libgpiod)")
    }

    static let subcommands = [
        "status", "lines", "get", "set", "toggle", "pulse", "sequence", "mode", "reload", "press", "release", "click", "input", "ping",
        "stats", "events", "flood", "trace", "record",
    ]

    /// The list above is every subcommand `boardctl --help` names (a new one
    /// cannot miss the checks below).
    @Test func theListIsEverySubcommand() throws {
        let help = try BoardctlBinary.run(["--help"]).stdout
        let section = try #require(help.range(of: "SUBCOMMANDS:")).upperBound
        let names = help[section...].split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("  "), !line.hasPrefix("   "), let word = line.split(separator: " ").first else { return nil }
            return String(word)
        }.filter { $0 != "See" }
        #expect(names == Self.subcommands)
    }

    @Test(arguments: subcommands)
    func everySubcommandHasHelpJsonAndSocket(_ name: String) throws {
        let r = try BoardctlBinary.run([name, "--help"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("USAGE: boardctl \(name)"), "\(r.stdout)")
        #expect(r.stdout.contains("--json"))
        #expect(r.stdout.contains("--socket <path>"))
    }

    @Test(arguments: ["bash", "zsh", "fish"])
    func completionScriptsGenerate(_ shell: String) throws {
        let r = try BoardctlBinary.run(["--generate-completion-script", shell])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("boardctl"))
        for name in Self.subcommands { #expect(r.stdout.contains(name), "\(shell) completion lacks \(name)") }
    }

    @Test func aRequestThroughTheBinary() throws {
        let server = try FakeBoardd(result: #""line":"led","value":true"#)
        defer { server.stop() }
        let r = try BoardctlBinary.run(["set", "led", "on", "--socket", server.path])
        #expect(r == Outcome(stdout: "led: on\n", stderr: "", status: 0))
        #expect(server.requests == [#"{"v":1,"id":1,"cmd":"set","line":"led","value":true}"#])
        let j = try BoardctlBinary.run(["get", "led", "--json", "--socket", server.path])
        #expect(j == Outcome(stdout: #"{"line":"led","value":true}"# + "\n", stderr: "", status: 0))
        // The common options before the subcommand, as `systemctl -H HOST status` reads.
        let before = try BoardctlBinary.run(["--socket", server.path, "--json", "get", "led"])
        #expect(before == j)
        let equals = try BoardctlBinary.run(["--socket=\(server.path)", "get", "led"])
        #expect(equals == Outcome(stdout: "led: on\n", stderr: "", status: 0))
    }

    @Test func theBinaryFindsTheSocketThroughRuntimeDirectory() throws {
        let server = try FakeBoardd(result: #""pong":true"#)
        defer { server.stop() }
        let r = try BoardctlBinary.run(["ping"], environment: ["RUNTIME_DIRECTORY": server.directory, "PATH": "/usr/bin:/bin"])
        #expect(r == Outcome(stdout: "pong\n", stderr: "", status: 0))
    }

    @Test func theBinaryExitCodes() throws {
        let dir = try TempDir.make()
        defer { TempDir.remove(dir) }
        let missing = try BoardctlBinary.run(["status", "--socket", dir + "/none.sock"])
        #expect(missing.status == 3)
        #expect(missing.stderr.hasPrefix("boardctl: no boardd is running at \(dir)/none.sock (start it:"))
        let server = try FakeBoardd { _ in #"{"v":3,"id":1,"ok":false,"error":{"code":"version","message":"v3 only"}}"# }
        defer { server.stop() }
        let old = try BoardctlBinary.run(["ping", "--socket", server.path])
        #expect(old == Outcome(stdout: "", stderr: "boardctl: boardd speaks protocol v3, this boardctl v1: upgrade boardctl\n", status: 5))
        let usage = try BoardctlBinary.run(["set", "led", "maybe"])
        #expect(usage.status == 64, "\(usage.stderr)")
        #expect(usage.stdout == "")
        let noCount = try BoardctlBinary.run(["click", "button", "--count", "0"])
        #expect(noCount.status == 64)
    }
}

/// docs/boardctl.md's exit status table states the code's statuses and messages.
@Suite struct DocTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    @Test func theExitStatusTableIsTheCodes() throws {
        let page = try String(contentsOfFile: Self.root + "/docs/boardctl.md", encoding: .utf8)
        let rows = page.split(separator: "\n").filter { $0.hasPrefix("| ") }
        func row(_ status: Int32, containing text: String) -> Bool {
            rows.contains { $0.hasPrefix("| \(status) |") && $0.contains(text) }
        }
        let errors: [ControlError] = [
            .noDaemon(path: "PATH"), .permissionDenied(path: "PATH"), .versionMismatch(daemon: "N"), .daemon(code: "x", message: "its message"),
        ]
        for e in errors { #expect(row(e.exitStatus, containing: "`\(e.message)`") || row(e.exitStatus, containing: e.message), "\(e)") }
        #expect(row(ControlError.reloadRefused(errors: []).exitStatus, containing: "`reload`"))
        #expect(row(ControlError.connection(path: "PATH", problem: "").exitStatus, containing: "`boardd at PATH: `"))
        #expect(row(ControlError.connection(path: "PATH", problem: "").exitStatus, containing: "within \(ControlClient.defaultTimeoutSeconds) s"))
        #expect(page.contains("`boardctl \(Release.version) (control protocol v\(ControlError.protocolVersion))`"))
        #expect(!row(2, containing: ""), "no status 2")
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
