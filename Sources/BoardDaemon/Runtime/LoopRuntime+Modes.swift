import Boardloop
import BoardloopGPIO
import Logging

/// How a loop enters a sequence's (or a `mode:` action's) mode.
public enum ModeDriver: Sendable {
    /// A nested run of the loop in the mode, started from a perform request
    /// and stopped when the mode ends (as Cocoa runs a modal panel).
    case nestedRuns
    /// The caller runs the loop in `effectiveMode` (tests on a manual clock).
    case external
}

/// The loop's modes: the config's as run-loop modes, which priorities each
/// admits, the base mode (`mode:` actions) under the modes of running
/// sequences, and the nested runs that enter them.
extension LoopRuntime {
    /// The config's modes as the loop's modes, each in the common set (so
    /// the daemon's own sources and every sequence's timers are in it): at
    /// the start, and again at a reload.
    func setUpModes() throws {
        runModes = config.modes.enumerated().map { i, m in i == 0 ? .default : RunLoopMode("boardd.\(m.name)") }
        admitMask = config.modes.map { m in m.admits.reduce(0) { $0 | (UInt64(1) << UInt64($1.index)) } }
        admitMask[0] = ~0
        for m in runModes.dropFirst() where !loop.commonModes.contains(m) { try loop.addCommonMode(m) }
        // Room for every sequence's mode, so a start does not allocate.
        sequenceModes.reserveCapacity(config.sequences.count)
    }

    /// Once per loop: the nested run that enters a mode, and the timer
    /// that delivers held events once their mode is back.
    func setUpModeItems() throws {
        driveItem = PerformWorkItem(modes: [.common]) { [unowned self] in self.drive() }
        let replay = RunLoopTimer.rearmable(order: -1) { [unowned self] _ in
            self.replayHeld()
        }
        try loop.add(replay, mode: .common)
        replayTimer = replay
    }

    func runLoopMode(_ m: ModeID) -> RunLoopMode { runModes[m.index] }

    /// The modes that admit a priority's sources.
    func modes(admitting p: PriorityID) -> [RunLoopMode] { modes(of: p, admitted: true) }

    /// The modes that hold a priority's sources (the rest).
    func modes(holding p: PriorityID) -> [RunLoopMode] { modes(of: p, admitted: false) }

    private func modes(of p: PriorityID, admitted: Bool) -> [RunLoopMode] {
        var out: [RunLoopMode] = []
        for (i, mask) in admitMask.enumerated() where (mask & (UInt64(1) << UInt64(p.index)) != 0) == admitted {
            out.append(runModes[i])
        }
        return out
    }

    /// (A config has at most 64 priorities: `ConfigParser.parsePriorities`.)
    @inline(__always) func admits(_ p: PriorityID) -> Bool {
        admitsNow & (UInt64(1) &<< UInt64(truncatingIfNeeded: p.index)) != 0
    }

    /// A sequence's first run started: its mode, if it has one, is entered.
    /// (The searches here and in the tasks are index loops: on the event
    /// path, a closure passed to `contains(where:)` can cost an allocation
    /// where the optimizer does not specialize it.)
    func sequenceEntered(_ s: SequenceRunner) {
        if let m = s.config.mode, sequenceModeIndex(s.index) == nil {
            sequenceModes.append((s.index, m.index))
            modeChanged(because: .sequenceStarted(s.index))
        }
    }

    func sequenceExited(_ s: SequenceRunner) {
        if let i = sequenceModeIndex(s.index) {
            sequenceModes.remove(at: i)
            modeChanged(because: .sequenceEnded(s.index))
        }
    }

    private func sequenceModeIndex(_ sequence: Int) -> Int? {
        var i = 0
        while i < sequenceModes.count {
            if sequenceModes[i].sequence == sequence { return i }
            i += 1
        }
        return nil
    }

    func setBaseMode(_ m: Int) {
        guard m != baseMode else { return }
        baseMode = m
        modeChanged(because: .action)
    }

    func modeChanged(because why: EventSink.ModeReason) {
        let new = sequenceModes.isEmpty ? baseMode : sequenceModes[sequenceModes.count - 1].mode
        guard new != effectiveMode else { return }
        enter(mode: new, from: effectiveMode, name: config.modes[effectiveMode].name, mask: admitMask[effectiveMode], because: why)
    }

    /// Makes `new` the effective mode: reports the switch, restarts the
    /// grids of tasks the mode starts, delivers held events the mode
    /// admits, and moves the nested run. `old` is the mode left (-1: one of
    /// a previous config, known by its name and admit mask: a reload, which
    /// `why` nil stands for).
    func enter(mode new: Int, from old: Int, name oldName: String, mask oldMask: UInt64, because why: EventSink.ModeReason?) {
        effectiveMode = new
        if let why {
            events.modeChanged(to: new, from: old, because: why)
        } else {
            let held = inputs.compactMap { $0 }.filter { !admits($0.config.priority) }.map(\.config.name)
            logger.info(
                "mode \(oldName) -> \(config.modes[new].name) (reload)\(held.isEmpty ? "" : "; holding \(held.joined(separator: ", "))")")
        }
        var k = 0
        while k < tasks.count {
            tasks[k].modeChanged(from: old, to: new)
            k += 1
        }
        if admitMask[new] & ~oldMask != 0 || new == 0 {
            replayTimer?.arm(at: loop.now)
        }
        guard driver == .nestedRuns, !stopping else { return }
        if driving {
            loop.stop()  // the nested run ends; drive() runs the new mode
        } else if new != 0, let driveItem {
            _ = try? loop.perform(driveItem)
        }
    }

    /// Runs the loop in the effective mode while it is not the default
    /// (nested in the top-level run, which is in the default mode).
    fileprivate func drive() {
        guard !driving else { return }
        driving = true
        defer { driving = false }
        while !stopping && effectiveMode != 0 {
            do { _ = try loop.run(mode: runModes[effectiveMode], timeout: runWithoutDeadline) } catch {
                logger.error("\(name): cannot run mode \(config.modes[effectiveMode].name): \(error)")
                break
            }
        }
        if stopping { loop.stop() }  // the top-level run ends too
    }

    /// Delivers events held in the lines' rings once their mode is back.
    fileprivate func replayHeld() {
        var k = 0
        while k < inputs.count {
            inputs[k]?.catchUp()
            k += 1
        }
    }

}
