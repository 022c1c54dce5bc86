import CLinux
import Glibc

extension BoardRunLoop {
    // MARK: Current and main

    /// The calling thread's loop, made with default capacities on first use.
    /// On the main thread this is `BoardRunLoop.main`.
    public static var current: BoardRunLoop {
        if let loop = currentIfExists { return loop }
        do {
            return try makeCurrent()
        } catch {
            fatalError("boardloop: cannot create the current thread's run loop: \(error)")
        }
    }

    /// The calling thread's loop if it has one.
    public static var currentIfExists: BoardRunLoop? {
        if OSThread.currentID == OSThread.mainID { return mainLock.withLock { mainLoop } }
        return ThreadLoops.ofThisThread(creating: false)?.current
    }

    /// The main thread's loop. It may be created from any thread, but only the
    /// main thread runs it.
    public static var main: BoardRunLoop {
        mainLock.withLock {
            if let loop = mainLoop { return loop }
            do {
                let loop = try BoardRunLoop(capacities: Capacities(), clock: .monotonic, owner: OSThread.mainID)
                mainLoop = loop
                return loop
            } catch {
                fatalError("boardloop: cannot create the main run loop: \(error)")
            }
        }
    }

    /// Makes the calling thread's `current` loop with the given capacities and
    /// clock. Throws `currentLoopExists` if the thread already has one.
    @discardableResult
    public static func makeCurrent(capacities: Capacities = Capacities(), clock: RunLoopClock = .monotonic) throws(RunLoopError) -> BoardRunLoop {
        let tid = OSThread.currentID
        if tid == OSThread.mainID {
            let result: Result<BoardRunLoop, RunLoopError> = mainLock.withLock {
                if mainLoop != nil { return .failure(.currentLoopExists(thread: tid)) }
                do throws(RunLoopError) {
                    let loop = try BoardRunLoop(capacities: capacities, clock: clock, owner: tid)
                    mainLoop = loop
                    return .success(loop)
                } catch { return .failure(error) }
            }
            return try result.get()
        }
        if ThreadLoops.ofThisThread(creating: false)?.current != nil { throw .currentLoopExists(thread: tid) }
        let loop = try BoardRunLoop(capacities: capacities, clock: clock, owner: tid)
        ThreadLoops.ofThisThread(creating: true)!.current = loop
        return loop
    }

    private static let mainLock = Lock()
    nonisolated(unsafe) private static var mainLoop: BoardRunLoop?
}

/// The loops of one thread other than the main thread: its current loop
/// (retained) and the standalone loops it made (weakly). Kept in a
/// thread-specific slot whose destructor ends them all when the thread
/// exits: a loop can never run again once its thread is gone, and ending it
/// releases what was scheduled on it.
final class ThreadLoops {
    var current: BoardRunLoop?
    private var owned: [Weak] = []
    private struct Weak { weak var loop: BoardRunLoop? }

    /// The calling thread's record; made on first use when `creating`.
    static func ofThisThread(creating: Bool) -> ThreadLoops? {
        if let p = pthread_getspecific(threadLoopsKey) { return Unmanaged<ThreadLoops>.fromOpaque(p).takeUnretainedValue() }
        guard creating else { return nil }
        let record = ThreadLoops()
        pthread_setspecific(threadLoopsKey, Unmanaged.passRetained(record).toOpaque())
        return record
    }

    /// Remembers a standalone loop made on the calling thread (not the main
    /// thread, which never exits while the process runs).
    static func register(_ loop: BoardRunLoop) {
        guard OSThread.currentID != OSThread.mainID, let record = ofThisThread(creating: true) else { return }
        record.owned.removeAll { $0.loop == nil }
        record.owned.append(Weak(loop: loop))
    }

    /// Ends every loop of the exiting thread. Only loops the thread owns:
    /// in a fork() child, the thread exiting is a copy of the one that
    /// forked, with another id, and the record's loops are the parent's
    /// (their epoll sets are shared with it): ending them would take the
    /// parent's sources off its sets. They are left as they are.
    fileprivate func endAll() {
        let tid = OSThread.currentID
        if let loop = current, loop.ownerThread == tid { loop.endOnOwnerThread() }
        for w in owned { if let loop = w.loop, loop.ownerThread == tid { loop.endOnOwnerThread() } }
        owned.removeAll()
        current = nil
    }
}

/// The thread-specific slot of `ThreadLoops`; its destructor runs on the
/// exiting thread, which owns the loops it ends.
let threadLoopsKey: pthread_key_t = {
    var key = pthread_key_t()
    let rc = pthread_key_create(&key) { p in
        guard let p else { return }
        let record = Unmanaged<ThreadLoops>.fromOpaque(p)
        record.takeUnretainedValue().endAll()
        record.release()
    }
    precondition(rc == 0, "boardloop: pthread_key_create failed")
    return key
}()
