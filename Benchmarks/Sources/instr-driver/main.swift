// instr-driver: one scenario, one implementation, a fixed number of events,
// nothing else — the process `scripts/bench.sh --instructions` runs under
// callgrind twice (N and 2N events) to get instructions per event as the
// difference, start-up cancelled out.
//
//   instr-driver SCENARIO IMPL EVENTS
//     fd            boardloop | raw | uv     8 always-readable pipes, one read + write-back per dispatch
//     wake-item     boardloop | raw | uv     round trips A -> B -> A; boardloop posts PerformWorkItems
//     wake-closure  boardloop                the same with closure literals (each allocates its context)
//     perform-item  boardloop | uv           a perform request re-posting itself on one thread (work item;
//                                            libuv: an async handle re-sent from its callback)
//     perform-closure boardloop              the same with closure literals
//     timer         boardloop | raw | raw-periodic   fires of a 1 ms repeating timer
//     message       boardloop                BoardMessagePort ping-pong between two loops
//     message-self  boardloop                one thread: a message re-sent from its handler to its own
//                                            port (one slot: one message a pass, each with its wake-up
//                                            write; libuv's counterpart is perform-item's uv)
//     message-burst boardloop | raw          one thread: a burst of 16 sends to its own port, then one
//                                            pass of the loop receives them (per message: send + receive;
//                                            raw: CBenchRaw's mutex ring + eventfd + epoll, one thread)
//     gpio          boardloop                mock-chip edge -> handler, one edge per pass
//   (the daemon's reaction scenario is instr-daemon's)
import Boardloop
import BoardloopGPIO
import BoardloopGPIOMock
import CInstrRef
import Glibc

let args = CommandLine.arguments
guard args.count == 4, let events = Int(args[3]), events > 0 else {
    fputs("usage: instr-driver SCENARIO IMPL EVENTS (see the source for the list)\n", stderr)
    exit(2)
}
let scenario = args[1], impl = args[2]

/// A pipe that always holds one byte: the handler reads it and writes it back.
struct BouncePipe {
    let read: Int32, write: Int32
    init() {
        var fds: [Int32] = [0, 0]
        precondition(pipe(&fds) == 0)
        for fd in fds { _ = fcntl(fd, F_SETFL, O_NONBLOCK) }
        read = fds[0]
        write = fds[1]
        var b: UInt8 = 1
        _ = Glibc.write(write, &b, 1)
    }
    @inline(__always) func bounce() {
        var b: UInt8 = 0
        if Glibc.read(read, &b, 1) == 1 { _ = Glibc.write(write, &b, 1) }
    }
}

func boardloopFD(_ n: Int) throws {
    let loop = try BoardRunLoop()
    var done = 0
    for _ in 0..<8 {
        let p = BouncePipe()
        try loop.add(PortSource(fd: p.read) { _, _ in
            p.bounce()
            done += 1
            if done == n { loop.stop() }
        }, mode: .default)
    }
    _ = try loop.run(mode: .default, timeout: .seconds(86_400))
}

/// Round trips between this thread's loop (A) and a worker's (B).
func boardloopWake(_ n: Int, workItems: Bool) throws {
    let a = BoardRunLoop.current
    // A timer that never fires keeps A's mode from being empty before B's
    // first post arrives (an empty mode's run returns at once).
    try a.add(RunLoopTimer(fireAt: .distantFuture) { _ in }, mode: .default)
    let worker = try LoopThread.start(name: "instr-b")
    guard let b = worker.loop else { fatalError("worker without a loop") }
    final class Count: @unchecked Sendable { var value = 0 }
    let count = Count()
    if workItems {
        final class Items: @unchecked Sendable { var toA: PerformWorkItem?; var toB: PerformWorkItem? }
        let items = Items()
        items.toA = PerformWorkItem {
            count.value += 1
            if count.value == n { a.stop() } else { _ = try? b.perform(items.toB!) }
        }
        items.toB = PerformWorkItem { _ = try? a.perform(items.toA!) }
        try b.perform(items.toB!)
    } else {
        @Sendable func toB() { _ = try? b.perform { _ = try? a.perform { toA() } } }
        @Sendable func toA() {
            count.value += 1
            if count.value == n { a.stop() } else { toB() }
        }
        toB()
    }
    _ = try a.run(mode: .default, timeout: .seconds(86_400))
    worker.stopAndJoin()
}

/// A perform request that posts itself again, on one thread: the queue's
/// post / take / run path without a cross-thread wake-up.
func boardloopPerformSelf(_ n: Int, workItems: Bool) throws {
    let loop = try BoardRunLoop()
    try loop.add(RunLoopTimer(fireAt: .distantFuture) { _ in }, mode: .default)
    final class State: @unchecked Sendable { var count = 0; var item: PerformWorkItem? }
    let st = State()
    if workItems {
        st.item = PerformWorkItem {
            st.count += 1
            if st.count == n { loop.stop() } else { _ = try? loop.perform(st.item!) }
        }
        try loop.perform(st.item!)
    } else {
        @Sendable func step() {
            st.count += 1
            if st.count == n { loop.stop() } else { _ = try? loop.perform { step() } }
        }
        try loop.perform { step() }
    }
    _ = try loop.run(mode: .default, timeout: .seconds(86_400))
}

func boardloopTimer(_ n: Int) throws {
    let loop = try BoardRunLoop()
    var fires = 0
    try loop.add(RunLoopTimer(fireAt: loop.now + .milliseconds(1), interval: .milliseconds(1)) { _ in
        fires += 1
        if fires == n { loop.stop() }
    }, mode: .default)
    _ = try loop.run(mode: .default, timeout: .seconds(86_400))
}

func boardloopMessage(_ n: Int) throws {
    let a = BoardRunLoop.current
    try a.add(RunLoopTimer(fireAt: .distantFuture) { _ in }, mode: .default)
    final class Ports: @unchecked Sendable { var a: BoardMessagePort?; var b: BoardMessagePort? }
    let ports = Ports()
    var count = 0
    let portA = try BoardMessagePort(label: "a", slots: 4, slotSize: 16) { m in
        count += 1
        if count == n { a.stop() } else { try? ports.b!.send(id: 1, value: Int64(count)) }
    }
    try portA.schedule(on: a)
    ports.a = portA
    let worker = try LoopThread.start(name: "instr-b") { loop in
        let portB = try BoardMessagePort(label: "b", slots: 4, slotSize: 16) { m in
            try? ports.a!.send(id: 2, value: (try? m.load(as: Int64.self)) ?? 0)
        }
        try portB.schedule(on: loop)
        ports.b = portB
    }
    try ports.b!.send(id: 1, value: Int64(0))
    _ = try a.run(mode: .default, timeout: .seconds(86_400))
    worker.stopAndJoin()
    portA.invalidate()
}

/// One thread, no wake-ups between threads: bursts of `messageBurst` sends to
/// a port on this thread's loop, each burst received by one pass of the
/// loop. The count per message is exact (nothing depends on scheduling).
let messageBurst = 16

final class PortHolder {
    var port: BoardMessagePort?
    /// Out of line, so the optimizer cannot keep the port retained across
    /// the loop: one retain and one release per message, as a program's.
    @inline(never) func take() -> BoardMessagePort { port! }
}

func boardloopMessageBurst(_ n: Int) throws {
    precondition(n % messageBurst == 0, "message-burst: events must be a multiple of \(messageBurst)")
    let loop = try BoardRunLoop()
    var got = 0
    var sum: UInt64 = 0
    struct Payload: BitwiseCopyable { var a: UInt64; var b: UInt64 }
    let port = try BoardMessagePort(label: "burst", slots: 64, slotSize: 16) { m in
        got += 1
        sum &+= (try? m.load(as: Payload.self))?.b ?? 0
    }
    try port.schedule(on: loop)
    // Sent through a stored reference, as a program holds its ports: each
    // send retains and releases the port, which costs a few instructions
    // unless the port has a side table (a weak reference to it somewhere).
    let holder = PortHolder()
    holder.port = port
    var sent = 0
    while sent < n {
        for _ in 0..<messageBurst {
            try holder.take().send(id: 1, value: Payload(a: 0, b: UInt64(sent)))
            sent += 1
        }
        _ = try loop.run(mode: .default, timeout: .zero, returnAfterSourceHandled: true)
    }
    precondition(got == n && sum == UInt64(n * (n - 1) / 2), "message-burst: \(got) of \(n) messages delivered")
    port.invalidate()
}

/// One thread, the loop running: a message re-sent from its own handler to
/// its port, as libuv's async handle re-sent from its callback
/// (`ir_uv_perform`). The port has one slot, so each message is one pass
/// of the loop: the dispatch takes it, the handler sends the next, which
/// finds the port still signalled, and the dispatch, its budget of one
/// used up, writes the wake-up for the next pass.
func boardloopMessageSelf(_ n: Int) throws {
    let loop = try BoardRunLoop()
    var got = 0
    var sum: UInt64 = 0
    let holder = PortHolder()
    let port = try BoardMessagePort(label: "self", slots: 1, slotSize: 16) { m in
        got += 1
        sum &+= (try? m.load(as: UInt64.self)) ?? 0
        if got == n { loop.stop() } else { try? holder.take().send(id: 1, value: UInt64(got)) }
    }
    try port.schedule(on: loop)
    holder.port = port
    try port.send(id: 1, value: UInt64(0))
    _ = try loop.run(mode: .default, timeout: .seconds(86_400))
    precondition(got == n && sum == UInt64(n * (n - 1) / 2), "message-self: \(got) of \(n) messages delivered")
    port.invalidate()
}

func boardloopGPIO(_ n: Int) throws {
    let loop = try BoardRunLoop()
    let chip = try MockChip(label: "instr", lineCount: 8, eventBufferSize: 1024)
    let request = try chip.open().request(.offset(1), .input(edges: .both), eventBufferCapacity: 64)
    var got = 0
    try request.schedule(on: loop) { batch in got += batch.count }
    var level = false
    for _ in 0..<n {
        level.toggle()
        try chip.setLevel(.offset(1), level)
        _ = try loop.run(mode: .default, timeout: .zero, returnAfterSourceHandled: true)
    }
    precondition(got == n, "gpio: \(got) of \(n) edges delivered")
    request.release()
}

func check(_ rc: Int32) {
    if rc != 0 {
        fputs("instr-driver: \(scenario) \(impl) failed: errno \(-rc)\n", stderr)
        exit(1)
    }
}

do {
    switch (scenario, impl) {
    case ("fd", "boardloop"): try boardloopFD(events)
    case ("fd", "raw"): check(ir_raw_fd(events))
    case ("fd", "uv"): check(ir_uv_fd(events))
    case ("wake-item", "boardloop"): try boardloopWake(events, workItems: true)
    case ("wake-item", "raw"): check(ir_raw_wake(events))
    case ("wake-item", "uv"): check(ir_uv_wake(events))
    case ("wake-closure", "boardloop"): try boardloopWake(events, workItems: false)
    case ("perform-item", "boardloop"): try boardloopPerformSelf(events, workItems: true)
    case ("perform-item", "uv"): check(ir_uv_perform(events))
    case ("perform-closure", "boardloop"): try boardloopPerformSelf(events, workItems: false)
    case ("timer", "boardloop"): try boardloopTimer(events)
    case ("timer", "raw"): check(ir_raw_timer_oneshot(events, 1_000_000))
    case ("timer", "raw-periodic"): check(ir_raw_timer_periodic(events, 1_000_000))
    case ("message", "boardloop"): try boardloopMessage(events)
    case ("message-burst", "boardloop"): try boardloopMessageBurst(events)
    case ("message-self", "boardloop"): try boardloopMessageSelf(events)
    case ("message-burst", "raw"): check(ir_raw_message_burst(events, Int(messageBurst)))
    case ("gpio", "boardloop"): try boardloopGPIO(events)
    default:
        fputs("instr-driver: no implementation '\(impl)' of scenario '\(scenario)'\n", stderr)
        exit(2)
    }
} catch {
    fputs("instr-driver: \(scenario) \(impl): \(error)\n", stderr)
    exit(1)
}
