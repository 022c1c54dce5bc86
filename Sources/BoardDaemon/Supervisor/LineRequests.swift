import Boardloop
import BoardloopGPIO
import Logging

/// The daemon's GPIO requests: a loop's lines requested (or taken over from
/// the previous config at a reload) and attached to their components, and
/// the safe values set with no loop at all (`boardd --safe-outputs`).
extension Daemon {
    /// A request a reload keeps: the line's config, the request and the
    /// line's index in it, an output's value.
    struct Kept {
        var config: LineConfig
        var request: GPIOLineRequest
        var index = 0
        var value: Bool
        /// When a pulse in flight ends (it goes on under the new config).
        var pulseEnd: MonotonicInstant?
    }

    /// The chips a set of requests is made on, each opened once.
    final class ChipCache {
        let gpio: any GPIOBackend
        private var open: [String: GPIOChip] = [:]
        init(_ gpio: any GPIOBackend) { self.gpio = gpio }

        func chip(_ ref: ChipRef) throws -> GPIOChip {
            if let c = open[ref.text] { return c }
            let c = try GPIOChip.open(ref.text, backend: gpio)
            open[ref.text] = c
            return c
        }

        func close() { for c in open.values { c.close() } }
    }

    /// The chip a line of the config is on, and its offset there.
    static func locate(_ line: LineConfig, chips: ChipCache) throws -> (chip: GPIOChip, offset: UInt32) {
        do {
            switch line.address {
            case let .offset(ref, o):
                let c = try chips.chip(ref)
                return (c, try c.offset(of: .offset(o)))
            case let .named(ref?, n):
                let c = try chips.chip(ref)
                return (c, try c.offset(of: .name(n)))
            case let .named(nil, n):
                let found = try GPIOChip.findLine(named: n, backend: chips.gpio)
                return (try chips.chip(.path(found.chip.path)), found.offset)
            }
        } catch let error as GPIOError {
            throw DaemonError.line(line.name, error)
        }
    }

    /// Requests one line of the config with `settings`, on the chip its
    /// address names.
    static func request(
        _ line: LineConfig, _ settings: GPIOLineSettings, consumer: String, chips: ChipCache
    ) throws -> GPIOLineRequest {
        let (c, offset) = try locate(line, chips: chips)
        do {
            return try c.request(
                .offset(offset), settings, consumer: consumer, eventBufferCapacity: line.isInput ? line.held.kernelBuffer : 2)
        } catch {
            throw DaemonError.line(line.name, error)
        }
    }

    /// The most lines one output request holds (the GPIO layer's limit).
    static let linesPerRequest = 64

    /// Requests output lines of one loop grouped: one request per chip
    /// (each line with its own settings and initial value), so an action
    /// that sets several of them writes each chip once. Returns each
    /// line's request and its index there, in `lines` order.
    static func requestOutputs(
        _ lines: [(config: LineConfig, settings: GPIOLineSettings)], consumer: String, chips: ChipCache
    ) throws -> [(request: GPIOLineRequest, index: Int)] {
        var located: [(chip: GPIOChip, offset: UInt32)] = []
        for l in lines { located.append(try locate(l.config, chips: chips)) }
        var placed: [(request: GPIOLineRequest, index: Int)?] = Array(repeating: nil, count: lines.count)
        var done = Array(repeating: false, count: lines.count)
        for i in lines.indices where !done[i] {
            let path = located[i].chip.path
            var members: [Int] = []
            for j in i..<lines.count where !done[j] && located[j].chip.path == path && members.count < linesPerRequest {
                members.append(j)
                done[j] = true
            }
            let request: GPIOLineRequest
            do {
                request = try requestTogether(
                    members.map { (lines[$0].config, located[$0].offset, lines[$0].settings) }, on: located[i].chip,
                    consumer: consumer, eventBufferCapacity: 2)
            } catch {
                // The requests made so far go: nothing holds them.
                for case let p? in placed { p.request.release() }
                throw error
            }
            for (k, j) in members.enumerated() { placed[j] = (request, k) }
        }
        return placed.compactMap { $0 }
    }

    /// Whether an input line can share its request with the other inputs of
    /// its loop, chip and priority (`InputGroup`): not with a `rate_limit`
    /// (the engine limits a whole source) nor a `drain_every` (its own
    /// timed read). Lines drained as events come (`drain` without
    /// `drain_every`: a source in every mode) share only with each other.
    static func sharesRequest(_ line: LineConfig) -> Bool {
        line.isInput && line.rateLimit == nil && !line.held.drainsOnTimer
    }

    /// The most events a request's kernel buffer holds (the GPIO layer's
    /// and the kernel's limit): a group's buffer is its lines' summed.
    static let eventsPerRequest = 1024

    /// The key of the request an input line can share: its priority and
    /// the chip its config names (nil: the line has a request of its own,
    /// as one found by its name alone on whatever chip has it).
    static func shareKey(_ line: LineConfig) -> String? {
        guard sharesRequest(line) else { return nil }
        switch line.address {
        case let .offset(chip, _), let .named(chip?, _):
            return "\(line.priority.index) \(line.held.drainsOnReadiness ? "drained" : "held") \(chip.text)"
        case .named(nil, _): return nil
        }
    }

    /// A loop's inputs (`lines`, in config order) partitioned into the
    /// requests they are made with, as indices into `lines`: the lines with
    /// one `shareKey` share a request, in config order, at most 64 lines and
    /// 1024 buffered events (their `kernelBuffer`s summed) each; the others
    /// have one each. The loop's budget counts this partition, and a reload
    /// keeps a request only where the new config's partition has the same
    /// lines in it.
    static func inputGroups(_ lines: [LineConfig]) -> [[Int]] {
        var groups: [[Int]] = []
        var open: [String: (group: Int, buffer: Int)] = [:]
        for (i, l) in lines.enumerated() {
            guard let key = shareKey(l) else {
                groups.append([i])
                continue
            }
            if let o = open[key], groups[o.group].count < linesPerRequest, o.buffer + l.held.kernelBuffer <= eventsPerRequest {
                groups[o.group].append(i)
                open[key] = (o.group, o.buffer + l.held.kernelBuffer)
            } else {
                open[key] = (groups.count, l.held.kernelBuffer)
                groups.append([i])
            }
        }
        return groups
    }

    /// Requests the input lines of one group (`inputGroups`) as one request,
    /// each line with its own settings, its kernel buffer the lines' summed.
    /// Returns the request, and the group that serves its lines (nil for a
    /// line alone: its handler is the request's).
    static func requestInputs(_ lines: [LineConfig], consumer: String, chips: ChipCache) throws -> (GPIOLineRequest, InputGroup?) {
        var located: [(chip: GPIOChip, offset: UInt32)] = []
        for l in lines { located.append(try locate(l, chips: chips)) }
        let buffer = lines.reduce(0) { $0 + $1.held.kernelBuffer }
        let request = try requestTogether(
            zip(lines, located).map { ($0, $1.offset, $0.settings) }, on: located[0].chip, consumer: consumer,
            eventBufferCapacity: min(max(buffer, 1), eventsPerRequest))
        return (request, lines.count > 1 ? InputGroup(request: request) : nil)
    }

    /// Requests `lines` (located on `chip`) as one request, each with its
    /// own settings. An error names the line it is about where the GPIO
    /// layer says which, else the first.
    private static func requestTogether(
        _ lines: [(config: LineConfig, offset: UInt32, settings: GPIOLineSettings)], on chip: GPIOChip, consumer: String,
        eventBufferCapacity: Int
    ) throws -> GPIOLineRequest {
        do {
            return try chip.request(lines.map { (.offset($0.offset), $0.settings) }, consumer: consumer, eventBufferCapacity: eventBufferCapacity)
        } catch {
            let culprit = lines.first { error.line?.offset == $0.offset } ?? lines[0]
            throw DaemonError.line(culprit.config.name, error)
        }
    }

    /// Sets every output of `config` that has a `safe:` value to it, each
    /// requested, written and released in turn, with no loop: what
    /// `boardd --safe-outputs` does after the daemon died without a stop
    /// of its own (systemd's `ExecStopPost=`). Returns the lines set and
    /// the failures (each logged).
    public static func setSafeOutputs(_ config: DaemonConfig, gpio: any GPIOBackend, logger: Logger) -> (set: Int, failed: Int) {
        let chips = ChipCache(gpio)
        defer { chips.close() }
        var set = 0, failed = 0
        for line in config.lines where line.isOutput {
            guard let v = line.safeValue else { continue }
            var settings = line.settings
            settings.outputValue = v
            do {
                let r = try request(line, settings, consumer: "boardd-safe", chips: chips)
                try r.setValue(v)
                r.release()
                set += 1
                logger.notice("\(line.name) -> \(v ? "on" : "off") (safe value)")
            } catch {
                failed += 1
                logger.error("\(line.name): cannot set its safe value: \(error)")
            }
        }
        return (set, failed)
    }
}

/// A line of an output request that no output of the loop uses now: a
/// reload dropped it while other outputs of its request stayed (the
/// kernel cannot release one line of a request). It stays requested at
/// its last value until its request goes.
struct IdleOutput {
    var name: String
    var request: GPIOLineRequest
    var index: Int
}

extension LoopRuntime {
    /// Requests (or takes over) the loop's lines and schedules its inputs.
    /// Outputs are requested one request per chip (`Daemon.requestOutputs`);
    /// kept outputs stay in theirs. A line the config now needs that an
    /// idle output line holds (`idleOutputs`) has that request re-made: its
    /// kept outputs are requested again at their values. On the loop's thread.
    /// Returns how many kept outputs were requested again.
    @discardableResult
    func attachLines(
        gpio: any GPIOBackend, kept keptLines: [String: Daemon.Kept], filters: [String: InputLine.FilterState] = [:]
    ) throws -> Int {
        let rt = self
        let chips = Daemon.ChipCache(gpio)
        defer { chips.close() }
        defer { rt.noteSafeOutputs() }
        var kept = keptLines
        let mine = config.lines.enumerated().filter { $0.element.loop == rt.id }
        let moved = try reclaimIdleLines(mine.map(\.element).filter { kept[$0.name] == nil }, kept: &kept, chips: chips)
        var fresh: [(id: Int, line: LineConfig, value: Bool, pulseEnd: MonotonicInstant?)] = []
        // Inputs, a request per group (`inputGroups`): kept ones in their
        // requests (a reload keeps a group whole or not at all), the others
        // requested now.
        let mineInputs = mine.filter { $0.element.isInput }
        var inputRequests: [Int: (request: GPIOLineRequest, index: Int, group: InputGroup?)] = [:]
        for members in Daemon.inputGroups(mineInputs.map(\.element)) {
            let lines = members.map { mineInputs[$0] }
            let keptOnes = lines.compactMap { kept[$0.element.name] }
            if let first = keptOnes.first, keptOnes.count == lines.count, first.request.count == lines.count,
                keptOnes.allSatisfy({ $0.request === first.request })
            {
                let group = lines.count > 1 ? InputGroup(request: first.request) : nil
                for (l, k) in zip(lines, keptOnes) { inputRequests[l.offset] = (k.request, k.index, group) }
                continue
            }
            for k in keptOnes { k.request.release() }
            let (request, group) = try Daemon.requestInputs(lines.map(\.element), consumer: "boardd", chips: chips)
            for (k, l) in lines.enumerated() { inputRequests[l.offset] = (request, k, group) }
        }
        for (i, line) in mine {
            if line.isInput {
                guard let p = inputRequests[i] else { continue }
                let reactions = config.reactions.indices.filter { config.reactions[$0].line.index == i }
                let input = try InputLine(
                    id: i, config: line, runtime: rt, request: p.request, index: p.index, group: p.group, cell: rt.program.cells[i],
                    reactions: reactions)
                if let state = filters[line.name] { input.carry(state) }
                try input.schedule()
                rt.inputs[i] = input
            } else if let k = kept[line.name] {
                try attachOutput(i, line, k.request, k.index, k.value, k.pulseEnd)
            } else if let k = moved[line.name] {
                fresh.append((i, line, k.value, k.pulseEnd))
            } else {
                fresh.append((i, line, line.settings.outputValue, nil))
            }
        }
        guard !fresh.isEmpty else { return moved.count }
        let placed = try Daemon.requestOutputs(
            fresh.map { f in
                var s = f.line.settings
                s.outputValue = f.value
                return (f.line, s)
            }, consumer: "boardd", chips: chips)
        for (f, p) in zip(fresh, placed) { try attachOutput(f.id, f.line, p.request, p.index, f.value, f.pulseEnd) }
        return moved.count
    }

    private func attachOutput(
        _ i: Int, _ line: LineConfig, _ request: GPIOLineRequest, _ index: Int, _ value: Bool, _ pulseEnd: MonotonicInstant?
    ) throws {
        let out = OutputLine(
            id: i, config: line, loop: loop, events: events, request: request, index: index, cell: program.cells[i], value: value)
        if program.pulsedLines.contains(i) { try out.makePulseTimer() }
        if let pulseEnd { try out.resumePulse(until: pulseEnd) }
        outputs[i] = out
    }

    /// Frees the idle output lines that `lines` (this loop's lines not
    /// kept) need: each request holding one is released, and its kept
    /// outputs leave `kept`; they are returned, to be requested again at
    /// their values (pulses in flight go on).
    private func reclaimIdleLines(
        _ lines: [LineConfig], kept: inout [String: Daemon.Kept], chips: Daemon.ChipCache
    ) throws -> [String: Daemon.Kept] {
        var moved: [String: Daemon.Kept] = [:]
        guard !idleOutputs.isEmpty else { return moved }
        for line in lines {
            let (chip, offset) = try Daemon.locate(line, chips: chips)
            guard let idle = idleOutputs.first(where: { $0.request.chip.path == chip.path && $0.request.offsets[$0.index] == offset })
            else { continue }
            let r = idle.request
            let names = kept.values.filter { $0.request === r }.map(\.config.name).sorted()
            for name in names { moved[name] = kept.removeValue(forKey: name) }
            idleOutputs.removeAll { $0.request === r }
            r.release()
            logger.notice(
                "\(line.name): its line stayed requested when an earlier reload dropped '\(idle.name)' (other outputs share its request); that request is made again\(names.isEmpty ? "" : " (\(names.joined(separator: ", ")) requested again at their values)")")
        }
        return moved
    }
}
