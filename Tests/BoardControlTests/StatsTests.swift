import BoardControl
import Foundation
import Glibc
import Testing

/// Text in the Prometheus exposition format, parsed by a real parser:
/// `prometheus_client`'s text parser under Debian's python3
/// (`python3-prometheus-client`, which scripts/install-deps.sh installs).
enum PrometheusParser {
    struct Sample: Equatable {
        var name: String
        var labels: [String: String]
        var value: Double
    }
    struct Family {
        var name: String, type: String, help: String
        var samples: [Sample]
    }
    struct Missing: Error, CustomStringConvertible {
        var description: String
    }

    /// Debian's python3 (apt installs its modules there, not in another python on PATH).
    static let python = "/usr/bin/python3"
    static let script = """
        import sys, json
        from prometheus_client.parser import text_string_to_metric_families
        out = []
        for f in text_string_to_metric_families(sys.stdin.read()):
            out.append({"name": f.name, "type": f.type, "help": f.documentation,
                        "samples": [[s.name, s.labels, s.value] for s in f.samples]})
        print(json.dumps(out))
        """

    /// Parses `text`; throws (never skips) when python3 or the module is missing.
    static func parse(_ text: String) throws -> [Family] {
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw Missing(description: "\(python) is missing: run scripts/install-deps.sh (it installs python3-prometheus-client)")
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: python)
        p.arguments = ["-c", script]
        let input = Pipe(), out = Pipe(), err = Pipe()
        p.standardInput = input
        p.standardOutput = out
        p.standardError = err
        try p.run()
        input.fileHandleForWriting.write(Data(text.utf8))
        try input.fileHandleForWriting.close()
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        if e.contains("No module named 'prometheus_client'") {
            throw Missing(description: "python3's prometheus_client is missing: run scripts/install-deps.sh (it installs python3-prometheus-client)")
        }
        guard p.terminationStatus == 0 else { throw Missing(description: "the parser refused the text: \(e)\n\(text)") }
        let list = try #require(try JSONSerialization.jsonObject(with: o) as? [[String: Any]])
        return list.map { f in
            Family(
                name: f["name"] as? String ?? "", type: f["type"] as? String ?? "", help: f["help"] as? String ?? "",
                samples: (f["samples"] as? [[Any]] ?? []).map { s in
                    Sample(
                        name: s[0] as? String ?? "", labels: s[1] as? [String: String] ?? [:],
                        value: (s[2] as? NSNumber)?.doubleValue ?? .nan)
                })
        }
    }

    /// The value of the one sample named `name` with `labels`.
    static func value(_ families: [Family], _ name: String, _ labels: [String: String] = [:]) -> Double? {
        families.lazy.flatMap(\.samples).first { $0.name == name && $0.labels == labels }?.value
    }
}

@Suite struct StatsOutputTests {
    /// A stats reply with a worker loop, a task, two reactions (one whose
    /// name needs escaping in a label), a line and a command.
    static let result = #"""
        "boardd":{"version":"0.1.0","board":"demo","config":"/etc/boardd/a \"b\".yaml","generation":2},
        "loops":[
          {"name":"main","mode":"default","answered":true,
           "tasks":[{"name":"blink","runs":12,"skipped_periods":1,"lateness_p50_ns":85000,"lateness_p99_ns":1200000,"lateness_max_ns":3000000000}],
           "reactions":[{"name":"flip","fires":3,"skipped":1,"trigger_to_done_p50_ns":850,"trigger_to_done_p99_ns":12300,"trigger_to_done_max_ns":45600000},
                        {"name":"odd \\ \"one\"\nx","fires":0,"skipped":0,"trigger_to_done_p50_ns":0,"trigger_to_done_p99_ns":0,"trigger_to_done_max_ns":0}],
           "lines":[{"name":"button","events":6,"held":2,"lost":1,"rate_limited":4}]},
          {"name":"w","mode":"quiet","answered":true,"tasks":[],"reactions":[],"lines":[]}],
        "commands":{"started":5,"refused":2,"running":1,"each":[{"name":"chime","started":5,"refused":2}]},
        "control":{"accepted":9,"busy":0,"idle":1,"slow":0,"hung_up":8,"requests":14,"errors":{"bad-json":2},"clients":1}
        """#.replacingOccurrences(of: "\n", with: "")

    func run(_ prometheus: Bool, json: Bool = false) throws -> Outcome {
        let server = try FakeBoardd(result: Self.result)
        defer { server.stop() }
        let r = Boardctl.execute(.stats(prometheus: prometheus), socket: server.path, json: json)
        #expect(server.requests == [#"{"v":1,"id":1,"cmd":"stats"}"#])
        return r
    }

    @Test func humanIsAlignedTables() throws {
        let r = try run(false)
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.contains("TASK   LOOP  RUNS  SKIPPED  LATE P50  LATE P99  LATE MAX"), "\(r.stdout)")
        #expect(lines.contains("blink  main  12    1        85us      1.2ms     3s"), "\(r.stdout)")
        #expect(lines.contains { $0.hasPrefix("flip ") && $0.hasSuffix("main  3      1        850ns     12.3us    45.6ms") }, "\(r.stdout)")
        #expect(lines.contains("LINE    LOOP  EVENTS  HELD  LOST  RATE-LIMITED"), "\(r.stdout)")
        #expect(lines.contains("button  main  6       2     1     4"), "\(r.stdout)")
        #expect(lines.contains("chime    5        2"), "\(r.stdout)")
        #expect(lines.contains("w     quiet"), "\(r.stdout)")
        #expect(r.stdout.contains("14 requests") && r.stdout.contains("bad-json 2"), "\(r.stdout)")
        #expect(!lines.contains { $0.hasSuffix(" ") }, "no trailing spaces")
    }

    @Test func jsonIsTheResult() throws {
        let r = try run(false, json: true)
        #expect(r.status == 0)
        #expect(r.stdout.hasSuffix("}\n") && r.stdout.filter { $0 == "\n" }.count == 1, "one line")
        let got = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? NSDictionary
        let sent = try JSONSerialization.jsonObject(with: Data(("{" + Self.result + "}").utf8)) as? NSDictionary
        #expect(got != nil && got == sent, "\(r.stdout)")
    }

    @Test func prometheusParsesWithARealParser() throws {
        let r = try run(true)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.hasSuffix("\n") && !r.stdout.hasSuffix("\n\n"))
        let f = try PrometheusParser.parse(r.stdout)
        let v = { (n: String, l: [String: String]) in PrometheusParser.value(f, n, l) }
        #expect(v("boardd_info", ["board": "demo", "config": "/etc/boardd/a \"b\".yaml", "version": "0.1.0"]) == 1)
        #expect(v("boardd_config_generation", [:]) == 2)
        #expect(v("boardd_loop_mode", ["loop": "w", "mode": "quiet"]) == 1)
        #expect(v("boardd_reaction_fires_total", ["reaction": "flip", "loop": "main"]) == 3)
        #expect(v("boardd_reaction_fires_total", ["reaction": "odd \\ \"one\"\nx", "loop": "main"]) == 0, "escaped and read back")
        #expect(v("boardd_reaction_skipped_total", ["reaction": "flip", "loop": "main"]) == 1)
        #expect(v("boardd_reaction_trigger_to_done_seconds", ["reaction": "flip", "loop": "main", "quantile": "0.99"]) == 12.3e-6)
        #expect(v("boardd_reaction_trigger_to_done_max_seconds", ["reaction": "flip", "loop": "main"]) == 0.0456)
        #expect(
            v("boardd_reaction_trigger_to_done_seconds", ["reaction": "odd \\ \"one\"\nx", "loop": "main", "quantile": "0.5"]) == nil,
            "no time for a reaction that never fired")
        #expect(v("boardd_task_runs_total", ["task": "blink", "loop": "main"]) == 12)
        #expect(v("boardd_task_skipped_periods_total", ["task": "blink", "loop": "main"]) == 1)
        #expect(v("boardd_task_lateness_seconds", ["task": "blink", "loop": "main", "quantile": "0.5"]) == 85e-6)
        #expect(v("boardd_task_lateness_seconds", ["task": "blink", "loop": "main", "quantile": "0.99"]) == 0.0012)
        #expect(v("boardd_task_lateness_max_seconds", ["task": "blink", "loop": "main"]) == 3)
        #expect(v("boardd_line_events_total", ["line": "button", "loop": "main"]) == 6)
        #expect(v("boardd_line_held_events_total", ["line": "button", "loop": "main"]) == 2)
        #expect(v("boardd_line_lost_events_total", ["line": "button", "loop": "main"]) == 1)
        #expect(v("boardd_line_rate_limited_events_total", ["line": "button", "loop": "main"]) == 4)
        #expect(v("boardd_command_started_total", ["command": "chime"]) == 5)
        #expect(v("boardd_command_refused_total", ["command": "chime"]) == 2)
        #expect(v("boardd_commands_running", [:]) == 1)
        #expect(v("boardd_control_requests_total", [:]) == 14)
        #expect(v("boardd_control_errors_total", ["code": "bad-json"]) == 2)
        // Counters are counter families (the parser names them without _total), the rest gauges; each has its help.
        let types = Dictionary(f.map { ($0.name, $0.type) }, uniquingKeysWith: { a, _ in a })
        #expect(types["boardd_reaction_fires"] == "counter")
        #expect(types["boardd_line_lost_events"] == "counter")
        #expect(types["boardd_task_lateness_seconds"] == "gauge")
        #expect(types["boardd_info"] == "gauge")
        #expect(f.allSatisfy { !$0.help.isEmpty })
    }

    @Test func prometheusAndJSONTogetherAreAUsageError() throws {
        let server = try FakeBoardd(result: Self.result)
        defer { server.stop() }
        let r = try BoardctlBinary.run(["stats", "--prometheus", "--json", "--socket", server.path])
        #expect(r.status == 64, "\(r.stderr)")
        #expect(server.requests.isEmpty)
    }
}

extension EndToEndTests {
    /// A click on the doorbell, then `stats --prometheus` from the real
    /// daemon: the ring reaction fired once, the bell line saw its events.
    @Test func statsAfterAClickFromTheRealDaemon() throws {
        let d = try Daemon()
        defer { _ = d.stop() }
        try #require(d.wait { d.log.contains("ready: every loop is running") && (try? d.ctl(["ping"]).status) == 0 }, Comment(rawValue: d.log))
        #expect(try d.ctl(["click", "bell"]).status == 0)
        #expect(d.wait { d.log.contains("doorbell rang") }, "\(d.log)")
        var text = ""
        #expect(
            d.wait {
                text = (try? d.ctl(["stats", "--prometheus"]).stdout) ?? ""
                return text.contains(#"boardd_reaction_fires_total{reaction="ring",loop="main"} 1"#)
            }, "\(text)")
        let f = try PrometheusParser.parse(text)
        #expect(PrometheusParser.value(f, "boardd_reaction_fires_total", ["reaction": "ring", "loop": "main"]) == 1)
        #expect(PrometheusParser.value(f, "boardd_reaction_fires_total", ["reaction": "stuck", "loop": "main"]) == 0)
        #expect((PrometheusParser.value(f, "boardd_line_events_total", ["line": "bell", "loop": "main"]) ?? 0) >= 1, "the press at least: \(text)")
        #expect(PrometheusParser.value(f, "boardd_info", ["board": "raspberry-pi-4", "config": EndToEndTests.root + "/examples/doorbell.yaml", "version": Release.version]) == 1, "\(text)")
        let human = try d.ctl(["stats"])
        #expect(human.status == 0 && human.stdout.contains("REACTION") && human.stdout.contains("ring"), "\(human.stdout)")
    }
}
