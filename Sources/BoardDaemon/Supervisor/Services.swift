import Boardloop

/// A service the daemon runs on the main loop beside its loops: the
/// command service, the control socket, the command runner, the MQTT
/// client. The daemon keeps them in a list in the order they started
/// (`Daemon.services`); an applied reload tells each, in that order, once
/// the new config is in force; the stop stops them in the reverse order,
/// in two phases — those that would drive outputs from outside before the
/// outputs go safe, the rest after (MQTT publishes the safe values; the
/// children are stopped with the lines still held). A new front end is
/// one more element of the list.
protocol SupervisedService: AnyObject {
    /// For the logs ("the control socket").
    var serviceName: String { get }
    /// Stopped before the outputs go safe (it takes requests that would
    /// drive them), else after.
    var stopsBeforeOutputsAreSafe: Bool { get }
    /// An applied reload's config is in force (every loop has swapped).
    func configApplied(_ config: DaemonConfig)
    /// Stops, by `deadline` at the latest.
    func stop(by deadline: MonotonicInstant)
}

extension SupervisedService {
    func configApplied(_ config: DaemonConfig) {}
}

extension Daemon {
    /// Adds a started service to the list the reload and the stop walk.
    func supervise(_ s: any SupervisedService) { services.append(s) }

    /// Stops the services of one phase, the last started first.
    func stopServices(beforeOutputsAreSafe: Bool, by deadline: MonotonicInstant) {
        for s in services.reversed() where s.stopsBeforeOutputsAreSafe == beforeOutputsAreSafe { s.stop(by: deadline) }
    }
}

extension RemoteCommands: SupervisedService {
    var serviceName: String { "the command service" }
    var stopsBeforeOutputsAreSafe: Bool { true }
    func stop(by deadline: MonotonicInstant) { stop() }
}

extension ControlServer: SupervisedService {
    var serviceName: String { "the control socket" }
    var stopsBeforeOutputsAreSafe: Bool { true }
    func stop(by deadline: MonotonicInstant) { stop() }
}

extension CommandRunner: SupervisedService {
    var serviceName: String { "the command runner" }
    /// Its children are stopped once the outputs are safe, all at once
    /// (SIGTERM, then SIGKILL by the deadline). Its table of commands
    /// follows a reload inside the main loop's swap, before any action of
    /// the new program can run one (`LoopRuntime.swap`), so it needs no
    /// `configApplied`.
    var stopsBeforeOutputsAreSafe: Bool { false }
    func stop(by deadline: MonotonicInstant) { stopAll(deadline: deadline) }
}

extension MQTTBridge: SupervisedService {
    var serviceName: String { "the MQTT client" }
    /// After the outputs are safe: it publishes their safe values, then
    /// `offline` (its commands are refused by then: the command service
    /// has stopped).
    var stopsBeforeOutputsAreSafe: Bool { false }
    func configApplied(_ config: DaemonConfig) { if let m = config.mqtt { reload(m, config) } }
    func stop(by deadline: MonotonicInstant) { stop() }
}
