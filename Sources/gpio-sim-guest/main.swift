// gpio-sim-guest: proves the libgpiod path end to end on a kernel with
// gpio-sim, inside a qemu guest or on a laptop after scripts/gpio-sim-up.sh,
// built against libgpiod 1.6 or 2.x (each scenario asserts its branch's own
// behaviour): engine and libgpiod, a custom mode, a held burst overflowing
// the kernel buffer (loss counted exactly by sequence numbers on 2.x, a
// lower bound on 1.6), the event buffer size, debounce (the kernel's on 2.x,
// the loop's on 1.6), line info by name and the event clock, active-low
// input and output, latency, hot-unplug. Prints one line per scenario:
//
//   PASS name: figures
//   FAIL name: why
//
// and exits 0 only if every scenario passed. The chips are the ones
// boards/sim-chips.conf describes: label boardloop-sim0 (32 lines,
// 17=BUTTON, 27=LED) and boardloop-sim1 (8 lines); they are found through
// configfs (/sys/kernel/config/gpio-sim), reading chip_name/dev_name back,
// never assuming numbers. A mapping file written by scripts/gpio-sim-up.sh
// (--map FILE or BOARDLOOP_SIM_MAP) is printed for the log when given.
//
// usage: gpio-sim-guest [--only NAME[,NAME...]] [--latency-edges N] [--map FILE] [--list]
import Boardloop
import BoardloopGPIO
import Glibc

let scenarioNames = [
    "engine-libgpiod", "custom-mode", "overflow", "event-buffer", "debounce", "line-info", "active-low", "latency",
    "hot-unplug",
]

struct Options {
    var only: Set<String>?
    var latencyEdges = 300
    var mapPath = getenv("BOARDLOOP_SIM_MAP").map { String(cString: $0) }

    init() {
        var args = CommandLine.arguments.dropFirst()
        while let a = args.popFirst() {
            switch a {
            case "--only": only = Set((args.popFirst() ?? "").split(separator: ",").map(String.init))
            case "--latency-edges": latencyEdges = max(10, Int(args.popFirst() ?? "") ?? 300)
            case "--map": mapPath = args.popFirst()
            case "--list":
                for n in scenarioNames { say(n) }
                exit(0)
            default:
                say("usage: gpio-sim-guest [--only NAME[,NAME...]] [--latency-edges N] [--map FILE] [--list]")
                exit(2)
            }
        }
    }

    func wants(_ name: String) -> Bool { only == nil || only!.contains(name) }
}

func main() -> Int32 {
    let options = Options()
    let backend = LibgpiodBackend.shared
    say("gpio-sim-guest: libgpiod \(backend.libraryVersion) (CGPIOD branch \(backend.apiVersion)), capabilities \(backend.capabilities)")
    if let path = options.mapPath, let text = Files.read(path) {
        say("gpio-sim-guest: mapping file \(path):")
        for line in text.split(separator: "\n") { say("  \(line)") }
    }
    let banks = SimBank.discover()
    for b in banks { say("gpio-sim-guest: found \(b) (configfs \(b.bankDir))") }

    var outcomes: [Outcome] = []
    func attempt(_ name: String, _ body: () throws -> String) {
        guard options.wants(name) else { return }
        let outcome: Outcome
        do {
            outcome = .pass(name, try body())
        } catch let f as ScenarioFailure {
            outcome = .fail(name, f.why)
        } catch {
            outcome = .fail(name, "\(error)")
        }
        say(outcome.line)
        outcomes.append(outcome)
    }

    guard let sim0 = banks.first(where: { $0.label == "boardloop-sim0" }) else {
        for n in scenarioNames where options.wants(n) {
            say(Outcome.fail(n, "no live gpio-sim bank labelled boardloop-sim0 under \(SimBank.configfs)").line)
        }
        return 1
    }
    attempt("engine-libgpiod") { try Scenarios.engineAndLibgpiod(sim0) }
    attempt("custom-mode") { try Scenarios.customMode(sim0) }
    attempt("overflow") { try Scenarios.overflow(sim0) }
    attempt("event-buffer") { try Scenarios.eventBuffer(sim0) }
    attempt("debounce") { try Scenarios.debounce(sim0) }
    attempt("line-info") { try Scenarios.lineInfo(sim0) }
    attempt("active-low") { try Scenarios.activeLow(sim0) }
    attempt("latency") { try Scenarios.latency(sim0, edges: options.latencyEdges) }
    // Last: taking a device down may take sim0 with it if they share a device.
    attempt("hot-unplug") {
        let target = SimBank.discover().first { $0.label == "boardloop-sim1" } ?? sim0
        return try Scenarios.hotUnplug(target)
    }
    let failed = outcomes.filter { !$0.passed }.count
    say("gpio-sim-guest: \(outcomes.count - failed) passed, \(failed) failed")
    return failed == 0 ? 0 : 1
}

exit(main())
