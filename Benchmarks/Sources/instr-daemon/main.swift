// instr-daemon: the daemon's scenario for callgrind, beside instr-driver's
// engine scenarios (a driver of its own, so the engine's driver does not
// link the daemon, Yams and Foundation):
//
//   instr-daemon reaction boardd | boardd-info | engine EVENTS
//     an edge toggles an output: through boardd's config path (at a quiet
//     log level, or at boardd's default, info, where each reaction is
//     traced), or written by hand with the engine and the GPIO layer
//     (Reaction.swift); boardd-2 and engine-2: a second reaction on the
//     same edge toggles a second output (what one more reaction costs);
//     boardd-thread: boardd's on a thread of its own, as a worker's loop
//     is (a loop made off the main thread is remembered by its thread);
//     boardd-flood: at info in a flood the log's rate limit throttles,
//     every thread's part counted (the records drained on this thread;
//     boardd-flood-notice: the same at notice, its reference;
//     boardd-flood-described: each record described before the limit
//     drops it, as before the limit was asked first)
//
//   instr-daemon deadlines boardd | boardd-1 EVENTS
//     a deadline-heavy config: 50 inputs (boardd-1: one), each with
//     delayed_on/off filters and a click/hold gesture group; an event is
//     one click on the next line in turn, on the manual clock
//     (Deadlines.swift)
//
//   instr-daemon post boardd | boardd-local EVENTS
//     an edge on the main loop toggles an output a worker owns: the action
//     is posted to the worker's port (boardd-local: the output is the main
//     loop's, no post); every loop on this thread (Post.swift)
//
//   instr-daemon start boardd | boardd-detect STARTS
//     examples/doorbell.yaml loaded and its daemon made and stopped on
//     mock chips (boardd-detect: with board detection over every board
//     file besides, as a start used to run it) (Start.swift)
import Glibc

let args = CommandLine.arguments
let usage = """
    usage: instr-daemon reaction boardd|boardd-info|boardd-flood|boardd-flood-notice|boardd-flood-described|engine|boardd-2|engine-2|boardd-thread EVENTS
           instr-daemon deadlines boardd|boardd-1 EVENTS
           instr-daemon post boardd|boardd-local EVENTS
           instr-daemon start boardd|boardd-detect STARTS

    """
guard args.count == 4, let events = Int(args[3]), events > 0 else {
    fputs(usage, stderr)
    exit(2)
}
/// Runs `body` on a new thread and waits for it (this thread blocks in the
/// join, so the count is as exact as on one thread). Not the test support's
/// `JoinableThread`: that library links the allocation counter, whose
/// `malloc` callgrind would count in every scenario.
func onThread(_ body: @escaping () throws -> Void) throws {
    final class Box { let body: () throws -> Void; var error: Error?; init(_ b: @escaping () throws -> Void) { body = b } }
    let box = Box(body)
    var t = pthread_t()
    let rc = pthread_create(&t, nil, { p in
        let b = Unmanaged<Box>.fromOpaque(p!).takeUnretainedValue()
        do { try b.body() } catch { b.error = error }
        return nil
    }, Unmanaged.passUnretained(box).toOpaque())
    precondition(rc == 0, "pthread_create: \(rc)")
    pthread_join(t, nil)
    if let e = box.error { throw e }
}

do {
    switch (args[1], args[2]) {
    case ("reaction", "boardd"): try boarddReaction(events)
    case ("reaction", "boardd-info"): try boarddReaction(events, level: .info)
    case ("reaction", "boardd-flood"): try boarddReactionFlood(events, level: .info)
    case ("reaction", "boardd-flood-notice"): try boarddReactionFlood(events, level: .notice)
    case ("reaction", "boardd-flood-described"): try boarddReactionFlood(events, level: .info, describedFirst: true)
    case ("reaction", "engine"): try engineReaction(events)
    case ("reaction", "boardd-2"): try boarddReaction(events, second: true)
    case ("reaction", "engine-2"): try engineReaction(events, second: true)
    case ("reaction", "boardd-thread"): try onThread { try boarddReaction(events) }
    case ("deadlines", "boardd"): try deadlinesScenario(events, lines: 50)
    case ("deadlines", "boardd-1"): try deadlinesScenario(events, lines: 1)
    case ("start", "boardd"): try startScenario(events, detect: false)
    case ("start", "boardd-detect"): try startScenario(events, detect: true)
    case ("post", "boardd"): try postScenario(events, crossLoop: true)
    case ("post", "boardd-local"): try postScenario(events, crossLoop: false)
    default:
        fputs("instr-daemon: no scenario '\(args[1])' with implementation '\(args[2])'\n" + usage, stderr)
        exit(2)
    }
} catch {
    fputs("instr-daemon: \(args[1]) \(args[2]): \(error)\n", stderr)
    exit(1)
}
