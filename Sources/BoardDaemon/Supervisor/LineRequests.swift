import Boardloop
import BoardloopGPIO
import Logging

/// The daemon's GPIO requests: a loop's lines requested (or taken over from
/// the previous config at a reload) and attached to their components, and
/// the safe values set with no loop at all (`boardd --safe-outputs`).
extension Daemon {
    /// A request a reload keeps: the line's config, the request, an output's value.
    struct Kept {
        var config: LineConfig
        var request: GPIOLineRequest
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

    /// Requests one line of the config with `settings`, on the chip its
    /// address names.
    static func request(
        _ line: LineConfig, _ settings: GPIOLineSettings, consumer: String, chips: ChipCache
    ) throws -> GPIOLineRequest {
        let c: GPIOChip
        let selector: GPIOLineSelector
        switch line.address {
        case let .offset(ref, o):
            c = try chips.chip(ref)
            selector = .offset(o)
        case let .named(ref?, n):
            c = try chips.chip(ref)
            selector = .name(n)
        case let .named(nil, n):
            let found = try GPIOChip.findLine(named: n, backend: chips.gpio)
            c = try chips.chip(.path(found.chip.path))
            selector = .offset(found.offset)
        }
        do {
            return try c.request(
                selector, settings, consumer: consumer, eventBufferCapacity: line.isInput ? line.held.kernelBuffer : 2)
        } catch {
            throw DaemonError.line(line.name, error)
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

extension LoopRuntime {
    /// Requests (or takes over) the loop's lines and schedules its inputs. On the loop's thread.
    func attachLines(
        gpio: any GPIOBackend, kept: [String: Daemon.Kept], filters: [String: InputLine.FilterState] = [:]
    ) throws {
        let rt = self
        let chips = Daemon.ChipCache(gpio)
        defer { chips.close() }
        defer { rt.noteSafeOutputs() }
        for (i, line) in config.lines.enumerated() where line.loop == rt.id {
            let request: GPIOLineRequest
            var value = line.settings.outputValue
            var pulseEnd: MonotonicInstant?
            if let k = kept[line.name] {
                request = k.request
                value = k.value
                pulseEnd = k.pulseEnd
            } else {
                request = try Daemon.request(line, line.settings, consumer: "boardd", chips: chips)
            }
            let cell = rt.program.cells[i]
            if line.isInput {
                let reactions = config.reactions.indices.filter { config.reactions[$0].line.index == i }
                let input = try InputLine(id: i, config: line, runtime: rt, request: request, cell: cell, reactions: reactions)
                if let state = filters[line.name] { input.carry(state) }
                try input.schedule()
                rt.inputs[i] = input
            } else {
                let out = OutputLine(id: i, config: line, loop: rt.loop, events: rt.events, request: request, cell: cell, value: value)
                if rt.program.pulsedLines.contains(i) { try out.makePulseTimer() }
                if let pulseEnd { try out.resumePulse(until: pulseEnd) }
                rt.outputs[i] = out
            }
        }
    }
}
