import Boardloop
import Glibc
import BoardSupport
import BoardloopGPIO

extension ConfigParser {
    static let defaultCommandTimeout = Duration.seconds(60)
    static let defaultKillAfter = Duration.seconds(5)

    // MARK: Workers

    func parseWorkers(_ e: YAMLReader.Entry?, linesNode: Node) {
        loops = [
            LoopPlan(
                name: "main", lines: [], cpus: [], realtimePriority: nil, timerSlack: nil, lockMemory: false,
                capacities: BoardRunLoop.Capacities(sources: 0, timers: 0, observers: 0, modes: 0, pendingPerforms: 0, eventsPerWait: 0, nestingDepth: 0))
        ]
        loopLineNodes = [linesNode]
        var owner: [LineID: String] = [:]
        for we in e.flatMap({ r.mapping($0.value, $0.path) }) ?? [] {
            guard checkName(we.key, we.keyNode, we.path, what: "worker") else { continue }
            if we.key == "main" {
                r.error(we.keyNode, we.path, "'main' is the main loop's name; choose another name for the worker")
                continue
            }
            guard
                let entries = r.mapping(
                    we.value, we.path, allowed: ["lines", "cpu", "priority", "timer_slack", "mlockall", "realtime", "description"])
            else { continue }
            let loop = LoopID(loops.count)
            var plan = loops[0]
            plan.name = we.key
            var linesNodeHere: Node = we.keyNode
            for x in entries {
                switch x.key {
                case "lines":
                    linesNodeHere = x.value
                    for (name, node, p) in r.names(x.value, x.path, what: "a list of lines") ?? [] {
                        guard let id = lineRef(node, p, named: name) else { continue }
                        if plan.lines.contains(id) {
                            r.error(node, p, "line '\(name)' is listed twice")
                        } else if let other = owner[id] {
                            r.error(node, p, "line '\(name)' already belongs to worker '\(other)'; a line has one owner")
                        } else {
                            plan.lines.append(id)
                            owner[id] = we.key
                        }
                    }
                case "cpu":
                    var cpus: [(Int, Node, String)] = []
                    if case .sequence = x.value {
                        for (i, n) in (r.list(x.value, x.path) ?? []).enumerated() {
                            let p = YAMLReader.index(x.path, i)
                            if let c = r.int(n, p, in: 0...4095, what: "a CPU number") { cpus.append((c, n, p)) }
                        }
                    } else if let c = r.int(x.value, x.path, in: 0...4095, what: "a CPU number or a list of them") {
                        cpus.append((c, x.value, x.path))
                    }
                    for (c, n, p) in cpus where checkCPU(c, n, p) {
                        if plan.cpus.contains(c) { r.error(n, p, "CPU \(c) is listed twice") } else { plan.cpus.append(c) }
                    }
                case "priority":
                    plan.realtimePriority = r.int(x.value, x.path, in: 1...99, what: "a SCHED_FIFO priority (1-99)")
                case "timer_slack": plan.timerSlack = positiveDuration(x.value, x.path, suggest: "us")
                case "mlockall": plan.lockMemory = r.bool(x.value, x.path) ?? false
                case "realtime":
                    if let v = r.choice(x.value, x.path, RealtimePolicy.allCases.map(\.rawValue)) { plan.realtime = RealtimePolicy(rawValue: v)! }
                default: break
                }
            }
            _ = loop
            loops.append(plan)
            loopLineNodes.append(linesNodeHere)
        }
        for (i, l) in loops.enumerated() where i > 0 {
            for id in l.lines { lines[id.index].loop = LoopID(i) }
        }
        loops[0].lines = lines.indices.map(LineID.init).filter { lines[$0.index].loop == .main }
    }

    func workerRef(_ node: Node, _ path: String) -> LoopID? {
        guard let name = r.string(node, path, what: "a worker name") else { return nil }
        if name == "main" { return .main }
        guard let i = loops.firstIndex(where: { $0.name == name }) else {
            if unreadable("workers", name) { return nil }
            let names = loops.dropFirst().map(\.name)
            r.error(
                node, path,
                "no worker named '\(name)'" + DidYouMean.hint(name, in: Array(names))
                    + (names.isEmpty ? " (the config declares no workers)" : ""))
            return nil
        }
        return LoopID(i)
    }

    /// A CPU the board (when its file says how many) or this machine (when
    /// checking for it) does not have is an error; checking for another
    /// machine whose CPU count is unknown, a warning.
    func checkCPU(_ cpu: Int, _ node: Node, _ path: String) -> Bool {
        func range(_ n: Int) -> String { n == 1 ? "1 CPU: 0" : "\(n) CPUs: 0-\(n - 1)" }
        if let board, let n = board.cpus, cpu >= n {
            r.error(node, path, "CPU \(cpu) does not exist on the \(board.name) board (\(range(n)))")
            return false
        }
        let here = options.machine.cpuCount
        guard cpu >= here else { return true }
        if forThisMachine {
            r.error(node, path, "CPU \(cpu) does not exist on this machine (\(range(here)))")
            return false
        }
        if board?.cpus == nil {
            r.warning(
                node, path,
                "CPU \(cpu) does not exist on this machine (\(range(here))); the \(board?.name ?? "") board this config is for may have it")
        }
        return true
    }

    // MARK: Commands

    func parseCommands(_ e: YAMLReader.Entry) {
        for ce in r.mapping(e.value, e.path) ?? [] {
            guard checkName(ce.key, ce.keyNode, ce.path, what: "command") else { continue }
            guard
                let entries = r.mapping(
                    ce.value, ce.path, allowed: ["argv", "shell", "timeout", "kill_after", "max_running", "description"])
            else { continue }
            let before = log.errorCount
            var c = CommandConfig(
                name: ce.key, argv: nil, shell: false, timeout: Self.defaultCommandTimeout, killAfter: Self.defaultKillAfter,
                maxRunning: 1, declared: true)
            var argvNode: Node?
            commandNodes[ce.key] = (ce.keyNode, ce.path)
            for x in entries {
                switch x.key {
                case "argv":
                    argvNode = x.value
                    if let items = r.list(x.value, x.path, what: "a list: the program and its arguments") {
                        let argv = items.enumerated().compactMap { r.string($1, YAMLReader.index(x.path, $0), what: "an argument") }
                        if items.isEmpty { r.error(x.value, x.path, "argv needs at least the program") }
                        c.argv = argv
                    }
                case "shell": c.shell = r.bool(x.value, x.path) ?? false
                case "timeout": c.timeout = positiveDuration(x.value, x.path, suggest: "s") ?? c.timeout
                case "kill_after": c.killAfter = positiveDuration(x.value, x.path, suggest: "s") ?? c.killAfter
                default:
                    c.maxRunning = r.int(x.value, x.path, in: 1...64) ?? c.maxRunning
                    commandNodes[ce.key] = (x.value, x.path)
                }
            }
            if c.shell {
                if let argv = c.argv, argv.count != 1, let argvNode {
                    r.error(argvNode, YAMLReader.key(ce.path, "argv"), "with shell: true, argv is one string: the shell command line")
                } else if c.argv == nil {
                    r.error(ce.keyNode, ce.path, "with shell: true the command needs argv: [\"the shell command line\"]")
                }
            }
            if !c.shell, let program = c.argv?.first, let argvNode, case let .sequence(items) = argvNode, let first = items.first {
                warnIfMissing(program, first, YAMLReader.index(YAMLReader.key(ce.path, "argv"), 0))
            }
            if log.errorCount == before { appendCommand(c) }
        }
    }

    /// A warning when a program is not there to run: an absolute (or
    /// relative) path that is missing or not an executable file, or a name
    /// not found on PATH. Only on the machine the config is for (elsewhere
    /// the programs are the other machine's), once per program. The
    /// program is looked for first: whether this is the machine the config
    /// is for (detection, which reads every board file) is asked only when
    /// it is missing, so a start whose programs are there reads no other
    /// board's file.
    func warnIfMissing(_ program: String, _ node: Node, _ path: String) {
        guard !program.isEmpty, !programsLookedFor.contains(program) else { return }
        programsLookedFor.insert(program)
        guard let problem = Self.missing(program), checkedHere else { return }
        r.warning(node, path, problem)
    }

    /// Why `program` cannot be run here (nil: it can).
    static func missing(_ program: String) -> String? {
        let executable = FileSystem.isExecutableFile
        if program.contains("/") {
            if !FileSystem.exists(program) { return "'\(program)' does not exist on this machine: running it will fail" }
            if !executable(program) { return "'\(program)' is not an executable file: running it will fail" }
            return nil
        }
        let searchPath = getenv("PATH").map { String(cString: $0) } ?? "/usr/local/bin:/usr/bin:/bin"
        let dirs = searchPath.split(separator: ":", omittingEmptySubsequences: false).map { $0.isEmpty ? "." : String($0) }
        if dirs.contains(where: { executable(FileSystem.join($0, program)) }) { return nil }
        return "'\(program)' is not found on PATH: running it will fail (give its absolute path)"
    }

    // MARK: Capacities

    /// The config as resolved so far, for the loops' budgets (the parts a
    /// loop's capacities are the sum of: `LoopBudget`).
    var resolved: DaemonConfig {
        DaemonConfig(
            file: file,
            board: BoardChoice(
                name: board?.name ?? "", title: board?.title ?? "", file: board?.file ?? "", backend: board?.backend ?? .kernel,
                chips: board?.chips ?? [], detected: boardDetected, pins: board?.pins ?? [], mock: options.mock),
            priorities: priorities, lines: lines, modes: modes, tasks: tasks, reactions: reactions, sequences: sequences,
            commands: commands, loops: loops, warnings: [], control: control, log: logging, mqtt: mqtt)
    }

    /// The backend capabilities the plan counts with (`LoopBudget.planningCapabilities`).
    var planningCapabilities: GPIOCapabilities { LoopBudget.planningCapabilities(board?.backend ?? .kernel) }

    /// The engine capacities of each loop (docs/config.md, "Capacities"):
    /// what `boardd --config FILE` makes it with, at most.
    func computeCapacities(root: Node) {
        guard !loops.isEmpty else { return }
        let config = resolved
        let customModes = modes.count - 1
        for (i, loop) in loops.enumerated() {
            let owned = loop.lines.map { lines[$0.index] }
            loops[i].capacities = LoopBudget.capacities(
                config, loop: LoopID(i), capabilities: planningCapabilities, extras: .configStart)
            let modeCount = loops[i].capacities.modes

            // What the engine and the kernel cannot provide.
            if modeCount > Self.maxModes {
                log.error(
                    r.position(modesNode ?? root), "modes",
                    "\(customModes) modes and the default mode make \(modeCount) on the \(loop.name) loop; a run loop has at most \(Self.maxModes)"
                )
            }
            checkReservation(loop: i, config: config, root: root)
            var perChip: [String: Int] = [:]
            for l in owned {
                switch l.address {
                case let .offset(c, _): perChip[c.text, default: 0] += 1
                case let .named(c, _): perChip[c?.text ?? "", default: 0] += 1
                }
            }
            for (chip, n) in perChip.sorted(by: { $0.key < $1.key }) where n > Self.maxLinesPerRequest && !chip.isEmpty {
                let node = loopLineNodes[i] ?? root
                log.error(
                    r.position(node), i == 0 ? "lines" : "workers.\(loop.name).lines",
                    "the \(loop.name) loop owns \(n) lines of chip \(chip); one line request holds at most \(Self.maxLinesPerRequest) (move some to a worker)"
                )
            }
        }
    }
}
