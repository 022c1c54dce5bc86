/// The ops a control request performs, compiled with every program after
/// its action lists: per line `set` on, `set` off and `toggle`; per
/// sequence `start` and `stop`; per mode its `mode:` op. A control `set`
/// is then `perform(pc, ctx)` as a reaction's is (a line another loop owns
/// is posted to that loop, in order), with `Origin.control`.
struct ControlOps: Sendable, Equatable {
    var lines: Int32 = 0
    var sequences: Int32 = 0
    var modes: Int32 = 0

    func set(line: Int, _ value: Bool) -> Int32 { lines + 3 * Int32(line) + (value ? 0 : 1) }
    func toggle(line: Int) -> Int32 { lines + 3 * Int32(line) + 2 }
    func start(sequence: Int) -> Int32 { sequences + 2 * Int32(sequence) }
    func stop(sequence: Int) -> Int32 { sequences + 2 * Int32(sequence) + 1 }
    func mode(_ m: Int) -> Int32 { modes + Int32(m) }
}

extension Program.Builder {
    mutating func compileControl(_ config: DaemonConfig) -> ControlOps {
        var c = ControlOps()
        c.lines = Int32(ops.count)
        for i in config.lines.indices {
            ops.append(.set(line: Int32(i), value: true))
            ops.append(.set(line: Int32(i), value: false))
            ops.append(.toggle(line: Int32(i)))
        }
        c.sequences = Int32(ops.count)
        for i in config.sequences.indices {
            ops.append(.start(sequence: Int32(i)))
            ops.append(.stop(sequence: Int32(i)))
        }
        c.modes = Int32(ops.count)
        for i in config.modes.indices { ops.append(.mode(Int32(i))) }
        return c
    }
}
