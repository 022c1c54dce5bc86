// worker-demo: a worker thread with its own run loop and message port, a
// signal source on the main loop, and the guide's check-in handshake.
//
//   swift run worker-demo             # runs, then send it signals: kill -USR1 <pid>, kill -HUP <pid>
//   swift run worker-demo --self-test # raises the signals itself and checks every delivery
import Boardloop
import Glibc

func demo() throws -> Int32 {
    let selfTest = CommandLine.arguments.contains("--self-test")
    let rt1 = SignalMask.realtimeRange.lowerBound + 1
    // 1. Block the signals before any thread starts: every thread inherits the
    //    mask, so they are queued for signalfd instead of killing the process.
    try SignalMask.block([SIGUSR1, SIGUSR2, SIGHUP, SIGTERM, SIGINT, rt1])

    let main = BoardRunLoop.current
    var failures = 0
    func check(_ ok: Bool, _ what: String) {
        print(ok ? "PASS \(what)" : "FAIL \(what)")
        if !ok { failures += 1 }
    }

    // 2. The main thread's port, registered by name for the check-in.
    var workerPort: BoardMessagePort?
    var replies: [Int32] = []
    let mainPort = try BoardMessagePort(label: "main", slots: 16, slotSize: 64) { message in
        switch message.id {
        case 1: // check-in: the worker's port comes as the reply port
            workerPort = message.replyPort
            print("main: worker checked in with port '\(message.replyPort?.label ?? "?")'")
            try? workerPort?.send(id: 2, value: Int64(21))
        case 3:
            // A checked read: a short payload is an error, never a crash.
            guard let answer = try? message.load(as: Int64.self) else { return }
            replies.append(Int32(answer))
            print("main: worker answered \(answer)")
        case 4:
            guard let signal = try? message.load(as: Int32.self) else { return }
            print("main: worker saw \(SignalMask.name(signal)) on its own loop")
            replies.append(-signal)
        default: break
        }
    }
    try mainPort.schedule(on: main)
    try mainPort.register(name: "demo.main")

    // 3. A worker thread with its own loop, port and signal source (SIGHUP).
    let worker = try LoopThread.start(name: "demo-worker") { loop in
        let port = try BoardMessagePort(label: "worker", slots: 16, slotSize: 64) { message in
            if message.id == 2, let v = try? message.load(as: Int64.self) {
                try? BoardMessagePortRegistry.lookup("demo.main")?.send(id: 3, value: v * 2)
            }
        }
        try port.schedule(on: loop)
        let hup = try SignalSource(signals: [SIGHUP]) { info in
            try? BoardMessagePortRegistry.lookup("demo.main")?.send(id: 4, value: info.signal)
        }
        try hup.add(to: loop)
        // Check in: look the main port up by name, hand it our port.
        guard let mainPort = BoardMessagePortRegistry.lookup("demo.main") else { throw BoardMessagePortError.invalidated(port: "demo.main") }
        try mainPort.send(id: 1, replyPort: port)
        // No need to keep `port` and `hup`: the loop keeps what is scheduled
        // on it alive, and releases it when the worker's thread ends.
    }

    // 4. Signals on the main loop, with their siginfo.
    var received: [SignalSource.Info] = []
    let signals = try SignalSource(signals: [SIGUSR1, SIGUSR2, SIGTERM, SIGINT, rt1]) { info in
        print("main: \(info.name) from pid \(info.senderPID) uid \(info.senderUID) value \(info.value)")
        received.append(info)
        if info.signal == SIGTERM || info.signal == SIGINT { main.stop() }
    }
    try signals.add(to: main)

    if selfTest {
        // Let the check-in and the exchange finish.
        while replies.isEmpty { _ = try main.run(mode: .default, timeout: .seconds(10), returnAfterSourceHandled: true) }
        check(replies == [42], "check-in handshake and exchange both ways (worker doubled 21 to \(replies))")
        kill(getpid(), SIGUSR1)
        sigqueue(getpid(), SIGUSR2, sigval(sival_int: 7))
        sigqueue(getpid(), rt1, sigval(sival_int: 1))
        sigqueue(getpid(), rt1, sigval(sival_int: 2))
        kill(getpid(), SIGHUP)
        let deadline = main.now + .seconds(20)
        while (received.count < 4 || replies.count < 2) && main.now < deadline {
            _ = try main.run(mode: .default, timeout: .milliseconds(100), returnAfterSourceHandled: true)
        }
        let pid = getpid(), uid = getuid()
        check(received.first { $0.signal == SIGUSR1 }.map { $0.code == SI_USER && $0.senderPID == pid && $0.senderUID == uid } == true,
              "SIGUSR1 by kill arrives on the main loop with sender pid/uid")
        check(received.first { $0.signal == SIGUSR2 }.map { $0.code == SI_QUEUE && $0.value == 7 } == true, "SIGUSR2 by sigqueue arrives with its value")
        check(received.filter { $0.signal == rt1 }.map(\.value) == [1, 2], "real-time signals queue: both arrive, in order, with values")
        check(replies.contains(-SIGHUP) && !received.contains { $0.signal == SIGHUP }, "SIGHUP arrives on the worker's loop, not the main loop")
        kill(getpid(), SIGTERM)
        let r = try main.run(mode: .default, timeout: .seconds(20))
        check(r == .stopped, "SIGTERM stops the main loop cleanly")
        worker.stopAndJoin()
        mainPort.invalidate()
        print(failures == 0 ? "ALL PASS" : "\(failures) FAILED")
        return failures == 0 ? 0 : 1
    }

    let pid = getpid()
    print("""
        worker-demo is running (pid \(pid)) and waits for signals. From another terminal:
          kill -USR1 \(pid)                  # arrives on the main loop, with the sender's pid and uid
          kill -HUP \(pid)                   # arrives on the worker's loop, which reports it to main
          /bin/kill -s RTMIN+1 -q 5 \(pid)   # a real-time signal with a value (util-linux kill)
        Ctrl-C (SIGINT) or kill -TERM \(pid) ends it.
        """)
    _ = try main.run(mode: .default, timeout: .seconds(86_400 * 365))
    worker.stopAndJoin()
    mainPort.invalidate()
    print("stopped cleanly")
    return 0
}

exit(try demo())
