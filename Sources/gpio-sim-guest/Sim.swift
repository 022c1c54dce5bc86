import Boardloop
import Glibc

/// One gpio-sim bank (one gpiochip), found through configfs: never assume
/// chip or device numbers, read them back after `live=1`.
struct SimBank: CustomStringConvertible {
    /// /sys/kernel/config/gpio-sim/DEVICE
    let deviceDir: String
    /// /sys/kernel/config/gpio-sim/DEVICE/BANK
    let bankDir: String
    let label: String
    let chipName: String
    let devName: String
    let numLines: Int
    /// Line names set in configfs, by offset.
    let lineNames: [Int: String]

    static let configfs = "/sys/kernel/config/gpio-sim"

    var description: String { "\(chipName) [\(label)] on \(devName), \(numLines) lines" }

    /// Every live bank.
    static func discover() -> [SimBank] {
        var banks: [SimBank] = []
        for device in Files.list(configfs) {
            let deviceDir = "\(configfs)/\(device)"
            guard Files.readLine("\(deviceDir)/live") == "1", let devName = Files.readLine("\(deviceDir)/dev_name"),
                !devName.isEmpty
            else { continue }
            for bank in Files.list(deviceDir) {
                let bankDir = "\(deviceDir)/\(bank)"
                guard Files.exists("\(bankDir)/chip_name"), let chip = Files.readLine("\(bankDir)/chip_name"),
                    !chip.isEmpty
                else { continue }
                var names: [Int: String] = [:]
                for entry in Files.list(bankDir) where entry.hasPrefix("line") {
                    if let n = Int(entry.dropFirst(4)), let name = Files.readLine("\(bankDir)/\(entry)/name"), !name.isEmpty {
                        names[n] = name
                    }
                }
                banks.append(
                    SimBank(
                        deviceDir: deviceDir, bankDir: bankDir, label: Files.readLine("\(bankDir)/label") ?? "",
                        chipName: chip, devName: devName, numLines: Int(Files.readLine("\(bankDir)/num_lines") ?? "") ?? 0,
                        lineNames: names))
            }
        }
        return banks
    }

    static func find(label: String) -> SimBank? { discover().first { $0.label == label } }

    func linePath(_ offset: UInt32, _ attribute: String) -> String {
        "/sys/devices/platform/\(devName)/\(chipName)/sim_gpio\(offset)/\(attribute)"
    }

    /// Pulls a line up or down (an edge for a requested input). Returns errno.
    @discardableResult
    func pull(_ offset: UInt32, up: Bool) -> Int32 {
        Files.write(linePath(offset, "pull"), up ? "pull-up" : "pull-down")
    }

    /// The line's value as the simulator sees it (an output's driven value).
    func value(_ offset: UInt32) -> Int? { Files.readLine(linePath(offset, "value")).flatMap { Int($0) } }

    /// Takes the whole device (all its banks) down or up. Returns errno.
    @discardableResult
    func setLive(_ live: Bool) -> Int32 { Files.write("\(deviceDir)/live", live ? "1" : "0") }
}

/// A child process (gpioset holding a line), started with posix_spawnp and
/// watched through the engine's `ChildSource` (no loop runs it here).
final class Child {
    let pid: pid_t
    private let process: ChildSource

    init?(_ argv: [String]) {
        var cargs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) }
        cargs.append(nil)
        defer { for p in cargs { free(p) } }
        var pid: pid_t = 0
        guard posix_spawnp(&pid, argv[0], nil, nil, cargs, environ) == 0 else { return nil }
        self.pid = pid
        guard let p = try? ChildSource(pid: pid, handler: { _, _ in }) else {
            kill(pid, SIGKILL)
            waitpid(pid, nil, 0)
            return nil
        }
        process = p
    }

    /// Whether it is still running (reaped once it is not).
    var isRunning: Bool { process.reapIfExited() == nil }

    /// SIGTERM, up to 2 s for it to end, then SIGKILL; reaped either way.
    func stop() {
        try? process.send(signal: SIGTERM)
        if ChildSource.waitForAnyExit(of: [process], until: .now + .seconds(2)) && process.reapIfExited() != nil { return }
        try? process.send(signal: SIGKILL)
        process.waitForExit()
    }
}
