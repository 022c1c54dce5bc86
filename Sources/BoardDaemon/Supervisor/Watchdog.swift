import Boardloop
import Logging

/// systemd's watchdog: pinged only while every loop completes its passes
/// (each worker answers a ping on its port between two ticks).
extension Daemon {
    func watchdogTick() {
        var stuck: [String] = []
        for (i, w) in workers.enumerated() {
            let p = boxes[i + 1].rt?.pings.load(ordering: .acquiring) ?? 0
            if p == lastPings[i] && watchdogPingsSent { stuck.append(w.name) }
            lastPings[i] = p
        }
        if stuck.isEmpty {
            options.notifier?.send("WATCHDOG=1")
        } else {
            logger.error("watchdog: loop(s) \(stuck.joined(separator: ", ")) completed no pass in \((options.watchdog ?? .zero) / 2); not pinging systemd")
        }
        for (i, _) in workers.enumerated() {
            try? ports[i + 1].send(id: PortMessage.ping.rawValue, value: UInt8(0), timeout: .zero)
        }
        watchdogPingsSent = true
    }
}
