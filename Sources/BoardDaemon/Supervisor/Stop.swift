import Boardloop
import BoardloopGPIO
import Glibc

// The stop, in the order a board needs it (docs/daemon.md, "Stopping"):
// 1. every loop stops its tasks and sequences and sets its outputs to their
//    safe values (all loops at once, within half the stop budget);
//    a loop that does not answer is stuck in a handler: it is named, with
//    the handler, and its outputs are set safe from the main thread;
// 2. child processes are stopped, all at once (SIGTERM to every group,
//    SIGKILL after each command's kill_after, one deadline for all);
// 3. every loop releases its lines, and the workers end.
// The whole stop has one budget (`Options.stopTimeout`); it never waits
// on a loop without a deadline.

/// An output with a safe value, as the main thread may set it when the
/// loop that owns it is stuck.
struct SafeOutput {
    var name: String
    var request: GPIOLineRequest
    /// The line's index in `request`.
    var index: Int
    var value: Bool
}

extension LoopRuntime {
    /// Publishes this loop's outputs that have a safe value (after its
    /// lines are attached, on its thread), for a stop that finds it stuck.
    func noteSafeOutputs() {
        var list: [SafeOutput] = []
        for case let o? in outputs {
            if let v = o.config.safeValue { list.append(SafeOutput(name: o.config.name, request: o.request, index: o.index, value: v)) }
        }
        safeOutputs.set(list)
    }
}

extension Daemon {
    /// Stops everything within `options.stopTimeout` and releases every
    /// line; called by `run` at the end (tests that drive the loop
    /// themselves call it directly). Returns true for a clean stop, false
    /// when a loop was stuck (its outputs were still set safe). Idempotent.
    @discardableResult
    public func shutdown() -> Bool {
        if let stopResult { return stopResult }
        stopRequested = true
        watchdogTimer?.invalidate()
        signalSource?.invalidate()
        // A reload being read is not waited for (its waiters are told).
        abandonReload()
        // The control socket and the command service first: no command is
        // taken from here on, and no pulse ends (the outputs go safe below).
        stopServices(beforeOutputsAreSafe: true, by: .now)
        let start = MonotonicInstant.now.nanoseconds
        let budget = UInt64(max(options.stopTimeout.nanosecondsClamped, 1_000_000))
        let deadline = start &+ budget

        // 1. Automation stops and outputs go safe, on every loop at once.
        let done = LockedValue<[Int?]>(Array(repeating: nil, count: workers.count))
        for i in workers.indices {
            let box = boxes[i + 1]
            if workers[i].thread == nil {
                // Inline: this is the worker's thread.
                let n = box.rt?.stopAutomation() ?? 0
                done.update { $0[i] = n }
                continue
            }
            do {
                try box.loop?.perform(inModes: [.common]) {
                    let n = box.rt?.stopAutomation() ?? 0
                    done.update { $0[i] = n }
                }
            } catch {
                logger.error("stop: cannot reach worker '\(workers[i].name)': \(error)")
            }
        }
        var safe = main.stopAutomation()
        let firstStep = start &+ budget / 2
        while done.get().contains(where: { $0 == nil }) && MonotonicInstant.now.nanoseconds < firstStep {
            usleep(1000)
        }
        var stuck: [Int] = []
        for (i, n) in done.get().enumerated() {
            if let n {
                safe += n
            } else {
                stuck.append(i)
                safe += forceSafe(worker: i)
            }
        }

        // 2. Once the outputs are safe, the last started first: MQTT (never
        // before: its goodbye may wait up to half a second for a slow
        // broker; the safe values published, `offline` on the status topic,
        // and a DISCONNECT), then the child processes, all at once: SIGKILL
        // at the latest when a tenth of the budget is left, for the lines
        // and the workers.
        stopServices(beforeOutputsAreSafe: false, by: MonotonicInstant(nanoseconds: deadline &- budget / 10))
        mqtt = nil
        services = []

        // 3. Lines released, workers ended, each with what is left of the
        // budget (at least 100 ms).
        func left() -> Duration {
            max(.nanoseconds(Int64(clamping: deadline &- min(deadline, MonotonicInstant.now.nanoseconds))), .milliseconds(100))
        }
        for i in workers.indices where !stuck.contains(i) {
            if case let .failure(error) = onWorker(i, timeout: left(), { $0.releaseLines() }) {
                stuck.append(i)
                logger.error("stop: worker '\(workers[i].name)' did not release its lines: \(error)")
            }
        }
        main.releaseLines()
        for (i, w) in workers.enumerated() {
            w.stop()
            if stuck.contains(i) { continue }
            if !w.join(timeout: left()) {
                stuck.append(i)
                logger.error("stop: worker '\(w.name)' did not end within the stop budget")
            }
        }
        stuckWorkers = stuck.map { (box: $0 + 1, worker: workers[$0]) }
        workers = []
        let clean = stuck.isEmpty
        if clean {
            logger.notice("stopped: \(safe) outputs at their safe values, \(config.lines.count) lines released")
        } else {
            logger.critical(
                "stopped with \(stuck.count) stuck loop(s): \(safe) outputs at their safe values; the stuck loops' lines are released when the process exits")
        }
        stopResult = clean
        detachLogWriter()
        return clean
    }

    /// Sets a stuck worker's outputs to their safe values from this thread
    /// (a line write is one kernel call; the request is not the main
    /// loop's, but the worker is not running its automation). Returns how
    /// many were set.
    private func forceSafe(worker i: Int) -> Int {
        guard let rt = boxes[i + 1].rt else { return 0 }
        let what = rt.describeActivity(rt.activity.load(ordering: .relaxed))
        let outputs = rt.safeOutputs.get()
        logger.critical(
            "stop: worker '\(workers[i].name)' is stuck in \(what) and did not stop within \((options.stopTimeout / 2).short); setting its \(outputs.count) output(s) to their safe values from the main thread")
        var n = 0
        for o in outputs {
            do {
                try o.request.setValueFromAnotherThread(o.value, at: o.index)
                n += 1
                logger.notice("\(o.name) -> \(o.value ? "on" : "off") (safe value, set for the stuck worker)")
            } catch {
                logger.critical("\(o.name): cannot set its safe value: \(error)")
            }
        }
        return n
    }
}

/// A loop's part of the stop, on its thread.
extension LoopRuntime {
    /// The first step of a stop: tasks and sequences stop (no new action
    /// starts), then every output that has a `safe:` value is set to it.
    /// Returns how many were. On the loop's thread.
    @discardableResult
    func stopAutomation() -> Int {
        logSummary(level: .notice)
        stopping = true
        for t in tasks { t.stop() }
        for case let s? in sequences { s.detach() }
        var safe = 0
        for case let o? in outputs {
            o.detach()
            if let v = o.config.safeValue {
                o.set(v)
                safe += 1
                logger.notice("\(o.config.name) -> \(v ? "on" : "off") (safe value)")
            }
        }
        return safe
    }

    /// The last step of a stop: every line is released, the loop's own
    /// sources end. On the loop's thread.
    func releaseLines() {
        for case let o? in outputs { o.request.release() }
        for idle in idleOutputs { idle.request.release() }
        idleOutputs = []
        for case let i? in inputs {
            i.unschedule()
            i.request.release()
        }
        outputs = Array(repeating: nil, count: outputs.count)
        inputs = Array(repeating: nil, count: inputs.count)
        replayTimer?.invalidate()
        summaryTimer?.invalidate()
        ports[id.index].invalidate()
        if driving { loop.stop() }
    }
}

extension Daemon {
    /// The end of a stop: a last drain of the loops' trace rings, and the
    /// log writer writes what is queued (at most 2 s: a stderr nobody reads
    /// does not hold the exit).
    func detachLogWriter() {
        // The writer outlives the daemon (a process's next daemon, a
        // test's): it goes back to its own rate limit.
        defer { traceLog.writer.rateLimit = traceLog.writer.defaultRateLimit }
        if options.inlineWorkers {
            _ = traceLog.drain()
            return
        }
        traceLog.writer.detach(traceLog, timeout: .seconds(2))
    }
}
