// loop-demo: the run loop at work. A worker thread writes to a pipe; the main
// thread's loop handles the pipe as a port source, fires a repeating timer,
// and an observer shows each pass's activities. Runs for about two seconds.
import Boardloop
import Glibc

let loop = BoardRunLoop.current
var fds: [Int32] = [0, 0]
guard pipe(&fds) == 0, fcntl(fds[0], F_SETFL, O_NONBLOCK) == 0 else { fatalError("pipe: errno \(errno)") }
let (readEnd, writeEnd) = (fds[0], fds[1])
let start = loop.now

func stamp() -> String {
    let ms = (loop.now - start).nanosecondsClamped / 1_000_000
    return "[\(ms) ms]"
}

var passes = 0
let observer = RunLoopObserver(activities: [.beforeWaiting, .afterWaiting]) { _, activity in
    passes += 1
    if passes <= 6 { print("\(stamp()) observer: \(activity)") }
}
try loop.add(observer, mode: .default)

var ticks = 0
let timer = RunLoopTimer(fireAt: loop.now + .milliseconds(250), interval: .milliseconds(250)) { t in
    ticks += 1
    let late = t.lastFire.map { $0.lateness.nanosecondsClamped / 1000 } ?? 0
    print("\(stamp()) timer tick \(ticks), \(late) µs late, \(t.lastFire?.skippedPeriods ?? 0) skipped")
    if ticks == 8 { loop.stop() }
}
try loop.add(timer, mode: .default)

let pipeSource = PortSource(fd: readEnd) { _, events in
    var byte: UInt8 = 0
    while read(readEnd, &byte, 1) == 1 {
        print("\(stamp()) pipe \(events): message \(byte) from the worker thread")
    }
}
try loop.add(pipeSource, mode: .default)

// A worker thread: pokes the pipe three times, and once posts a block.
let worker = Thread {
    for i in 1...3 {
        usleep(400_000)
        var b = UInt8(i)
        _ = write(writeEnd, &b, 1)
    }
    do {
        try loop.perform { print("perform request from the worker ran on the loop's thread") }
    } catch {
        print("the perform request was refused: \(error)")
    }
}
worker.start()

print("running the loop (stops after 8 timer ticks)")
try loop.run()
print("stopped after \(ticks) ticks and \(passes) wait notifications; timer re-armed \(loop.timerArmCount) times")
worker.join()

/// A minimal joinable thread (no Foundation).
final class Thread: @unchecked Sendable {
    private var handle = pthread_t()
    private let body: () -> Void
    init(_ body: @escaping () -> Void) { self.body = body }
    func start() {
        let box = Unmanaged.passRetained(self).toOpaque()
        pthread_create(&handle, nil, { p in
            let t = Unmanaged<Thread>.fromOpaque(p!).takeRetainedValue()
            t.body()
            return nil
        }, box)
    }
    func join() { pthread_join(handle, nil) }
}
