// instr-daemon: the daemon's scenario for callgrind, beside instr-driver's
// engine scenarios (a driver of its own, so the engine's driver does not
// link the daemon, Yams and Foundation):
//
//   instr-daemon reaction boardd | boardd-info | engine EVENTS
//     an edge toggles an output: through boardd's config path (at a quiet
//     log level, or at boardd's default, info, where each reaction is
//     traced), or written by hand with the engine and the GPIO layer
//     (Reaction.swift)
import Glibc

let args = CommandLine.arguments
guard args.count == 4, args[1] == "reaction", let events = Int(args[3]), events > 0 else {
    fputs("usage: instr-daemon reaction boardd|boardd-info|engine EVENTS\n", stderr)
    exit(2)
}
do {
    switch args[2] {
    case "boardd": try boarddReaction(events)
    case "boardd-info": try boarddReaction(events, level: .info)
    case "engine": try engineReaction(events)
    default:
        fputs("instr-daemon: no implementation '\(args[2])' of the reaction scenario\n", stderr)
        exit(2)
    }
} catch {
    fputs("instr-daemon: reaction \(args[2]): \(error)\n", stderr)
    exit(1)
}
