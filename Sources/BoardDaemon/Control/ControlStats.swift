import BoardControl
import Boardloop

/// The control protocol's `stats` command (docs/control.md): every loop's
/// counters (tasks, reactions, lines), the commands' and the control
/// server's own. A worker loop's figures are read on its thread, as
/// `status` reads them (for at most a second; a loop that does not answer
/// is listed with `"answered": false` and no figures).
extension ControlServer {
    func stats() -> [(String, JSON)] {
        let d = daemon
        let config = d.config
        let n = { (v: UInt64) in JSON.int(Int64(clamping: v)) }
        let ns = { (v: Duration) in JSON.int(v.nanosecondsClamped) }
        var loops: [JSON] = []
        var mainCounters = Daemon.Counters()
        for (i, plan) in config.loops.enumerated() {
            var counters: Daemon.Counters?
            if i == 0 {
                counters = d.counters
                mainCounters = counters!
            } else if i - 1 < d.workers.count, case let .success(c) = d.workerCounters(i - 1, timeout: .seconds(1)) {
                counters = c
            }
            var f: [(String, JSON)] = [
                ("name", .string(plan.name)), ("mode", loopMode(i).map(JSON.string) ?? .null), ("answered", .bool(counters != nil)),
            ]
            let c = counters ?? Daemon.Counters()
            f.append((
                "tasks",
                .array(config.tasks.compactMap { t in
                    c.tasks[t.name].map { tc in
                        .object([
                            ("name", .string(t.name)), ("runs", n(tc.runs)), ("skipped_periods", n(tc.skippedPeriods)),
                            ("lateness_p50_ns", ns(tc.p50)), ("lateness_p99_ns", ns(tc.p99)), ("lateness_max_ns", ns(tc.max)),
                        ])
                    }
                })
            ))
            f.append((
                "reactions",
                .array(config.reactions.compactMap { r in
                    guard let fires = c.reactionFires[r.name] else { return nil }
                    let t = c.reactionTimes[r.name]
                    return .object([
                        ("name", .string(r.name)), ("fires", n(fires)), ("skipped", n(c.reactionSkipped[r.name] ?? 0)),
                        ("trigger_to_done_p50_ns", ns(t?.p50 ?? .zero)), ("trigger_to_done_p99_ns", ns(t?.p99 ?? .zero)),
                        ("trigger_to_done_max_ns", ns(t?.max ?? .zero)),
                    ])
                })
            ))
            f.append((
                "lines",
                .array(config.lines.compactMap { l in
                    c.lines[l.name].map { lc in
                        .object([
                            ("name", .string(l.name)), ("events", n(lc.events)), ("held", n(lc.heldInRing)), ("lost", n(lc.lost)),
                            ("rate_limited", n(lc.rateLimitHolds)),
                        ])
                    }
                })
            ))
            loops.append(.object(f))
        }
        let names = config.commands.map(\.name)
        let started = names.reduce(UInt64(0)) { $0 &+ (mainCounters.commandsStarted[$1] ?? 0) }
        let refused = names.reduce(UInt64(0)) { $0 &+ (mainCounters.commandsRefused[$1] ?? 0) }
        let each: [JSON] = names.map { name in
            .object([
                ("name", .string(name)), ("started", n(mainCounters.commandsStarted[name] ?? 0)),
                ("refused", n(mainCounters.commandsRefused[name] ?? 0)),
            ])
        }
        let s = counters
        let errors: [(String, JSON)] = s.errors.keys.sorted().map { ($0, n(s.errors[$0] ?? 0)) }
        return [
            ("boardd", .object([
                ("version", .string(Release.version)), ("board", .string(config.board.name)), ("config", .string(config.file)),
                ("generation", .int(Int64(d.generation))),
            ])),
            ("loops", .array(loops)),
            ("commands", .object([
                ("started", n(started)), ("refused", n(refused)), ("running", .int(Int64(mainCounters.commandsRunning))),
                ("each", .array(each)),
            ])),
            ("control", .object([
                ("accepted", n(s.accepted)), ("busy", n(s.busy)), ("idle", n(s.idle)), ("slow", n(s.slow)), ("hung_up", n(s.hungUp)),
                ("requests", n(s.requests)), ("errors", .object(errors)), ("clients", .int(Int64(clients.count))),
            ])),
        ]
    }
}
