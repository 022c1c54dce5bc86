import BoardControl
import Boardloop
import Glibc

/// The control protocol's `events` (docs/control.md): the most recent
/// events the daemon kept, or a stream of them as they happen. The log
/// writer's thread hands each record it formats to the trace log's
/// `EventFeed`, which keeps the last `EventFeed.kept`; while a client
/// follows, the feed also wakes the main loop, and the events are written
/// here to the clients that follow. Main loop only.
extension ControlServer {
    /// A client's follow: the request's id (every event line carries it)
    /// and the line it asked for (nil: every event).
    struct Follow {
        var id: JSON
        var line: String?
        /// What each of its lines starts with, up to the event: `{"v":1,"id":N,"event":`.
        let prefix: [UInt8]

        init(id: JSON, line: String?) {
            self.id = id
            self.line = line
            prefix = Array(#"{"v":\#(ControlServer.version),"id":\#(id.serialized),"event":"#.utf8)
        }
    }

    /// The followers' side of `events`.
    final class Events {
        var followers = 0
        /// Followers dropped because their unread events filled their output.
        var tooSlow: UInt64 = 0
        /// Events the feed dropped (its queue full before the main loop took it).
        var overflowed: UInt64 = 0
        var item: PerformWorkItem?
        /// The server's end of the trace log's feed, while a client follows
        /// (none otherwise: nothing wakes the main loop for events then).
        var consumer: EventFeed.Consumer?
        /// A batch taken from the feed and not yet all written: it is
        /// written a slice (`slice` events) a pass, so a loop's timers run
        /// between the slices, not after the whole batch.
        var batch: [TraceEvent] = []
        var done = 0
        static let slice = 16
    }

    /// The server's end of the feed (a weak reference: the perform item
    /// outlives nothing, but the trace log may outlive the server).
    final class FeedTarget: @unchecked Sendable {
        weak var server: ControlServer?
        init(_ s: ControlServer) { server = s }
    }

    func startEvents() {
        let target = FeedTarget(self)
        events.item = PerformWorkItem(modes: [.common]) { target.server?.deliverEvents() }
        daemon.traceLog.feed.keep(true)
    }

    func stopEvents() {
        detachFromFeed()
        daemon.traceLog.feed.keep(false)
        if events.followers > 0 { daemon.traceLog.watch(false) }
    }

    /// The first follower: the feed wakes the main loop with each batch.
    private func attachToFeed() {
        guard events.consumer == nil, let item = events.item else { return }
        let loop = self.loop
        events.consumer = daemon.traceLog.feed.attach { _ = try? loop.perform(item) }
    }

    /// The last follower gone: what the feed had queued for them goes too.
    private func detachFromFeed() {
        if let c = events.consumer { daemon.traceLog.feed.detach(c) }
        events.consumer = nil
        events.batch = []
        events.done = 0
    }

    /// `events` (and `cancel` from a client that does not follow).
    func events(_ cmd: String, _ r: JSON, from c: Client) throws -> [(String, JSON)] {
        guard cmd == "events" else {
            throw Failure("not-following", "cancel ends an events stream (events with \"follow\":true); this connection follows none")
        }
        var filter: String?
        if let l = r["line"], l != .null { filter = try line(r).1.name }
        let follow = r["follow"] == nil || r["follow"] == .null ? false : try bool(r, "follow")
        guard follow else {
            let list = daemon.traceLog.feed.recentEvents().lazy.filter { e in filter == nil || e.line == filter }.map(Self.json)
            return [("events", .array(Array(list)))]
        }
        guard c.follow == nil else { throw Failure("bad-argument", "this connection already follows the events; cancel first") }
        // What the other followers' batch still holds goes to them first.
        deliverEvents(all: true)
        c.follow = Follow(id: r["id"] ?? .null, line: filter)
        // A follower waits for events, not requests: no idle timeout.
        c.idleAt = .max
        events.followers += 1
        if events.followers == 1 {
            attachToFeed()
            daemon.traceLog.watch(true)
        }
        logger.info("control: a client follows the events\(filter.map { " of \($0)" } ?? "") (\(c.peer))")
        return [("following", .bool(true))]
    }

    /// A follower's request line: `cancel` ends its follow (answered with
    /// the follow's id); a client being closed is not answered. Returns
    /// whether the line was taken here.
    func followerRequest(_ line: ArraySlice<UInt8>, from c: Client) -> Bool {
        if c.closeWhenFlushed { return true }
        guard let f = c.follow, let req = try? JSON.parse(line), req["cmd"] == .string("cancel") else { return false }
        unfollow(c)
        c.idleAt = deadline()
        armIdle()
        reply(.object([("v", .int(Self.version)), ("id", f.id), ("ok", .bool(true)), ("cancelled", .bool(true))]), to: c)
        return true
    }

    func unfollow(_ c: Client) {
        guard c.follow != nil else { return }
        c.follow = nil
        events.followers -= 1
        if events.followers == 0 {
            detachFromFeed()
            daemon.traceLog.watch(false)
        }
    }

    /// On the main loop, woken by the feed while a client follows: writes
    /// each event to the clients that follow it, a slice of the batch at a time (the
    /// rest in the next pass; `all`: the whole batch now). Each event is
    /// made JSON once, whoever follows it; each follower's socket is
    /// written once a slice.
    func deliverEvents(all: Bool = false) {
        repeat {
            if events.done >= events.batch.count {
                guard let consumer = events.consumer else { return }
                let (batch, overflowed) = daemon.traceLog.feed.take(consumer)
                events.overflowed = overflowed
                events.batch = batch
                events.done = 0
                if batch.isEmpty { return }
            }
            let end = min(events.batch.count, events.done + Events.slice)
            var wrote = false
            for e in events.batch[events.done..<end] {
                guard events.followers > 0 else { break }
                var text: [UInt8] = []
                for c in clients where !c.closed {
                    guard let f = c.follow else { continue }
                    if let l = f.line, e.line != l { continue }
                    if text.isEmpty { text = Array(Self.json(e).serialized.utf8) }
                    // The line (prefix, event, "}") and its newline must fit beside what waits.
                    guard c.output.count + f.prefix.count + text.count + 2 <= options.maxOutput else {
                        tooSlow(c, f)
                        continue
                    }
                    c.output += f.prefix
                    c.output += text
                    c.output.append(0x7d)
                    c.output.append(0x0a)
                    wrote = true
                }
            }
            events.done = end
            if wrote { for c in clients where !c.closed && c.follow != nil && !c.output.isEmpty { flush(c) } }
            if events.done >= events.batch.count {
                events.batch = []
                events.done = 0
            } else if !all, let item = events.item {
                _ = try? loop.perform(item)  // the rest in the next pass, after its timers
                return
            }
        } while all
    }

    /// A follower whose unread events fill its output: it follows no more,
    /// gets a last line saying why after what waits, and is closed once
    /// that is written (or at the idle timeout if it never reads).
    private func tooSlow(_ c: Client, _ f: Follow) {
        events.tooSlow += 1
        unfollow(c)
        logger.warning("control: dropped an events follower (\(c.peer)) that does not read them (\(c.output.count) bytes waiting)")
        dropTooSlow(c, id: f.id, "the events were not read as fast as they came (\(c.output.count) bytes waiting); the stream ends")
    }

    /// Ends a stream (`events`, `record`) whose client does not read it:
    /// a last line saying why goes after what waits, and the client is
    /// closed once that is written (or at the idle timeout if it never
    /// reads). Counted with the other error replies (it bypasses `reply`,
    /// whose output bound it would trip).
    func dropTooSlow(_ c: Client, id: JSON, _ message: String) {
        counters.errors["too-slow", default: 0] += 1
        append(error(id: id, "too-slow", message), to: &c.output)
        c.closeWhenFlushed = true
        c.idleAt = deadline()
        armIdle()
        flush(c)
    }

    static func json(_ e: TraceEvent) -> JSON {
        var o: [(String, JSON)] = [("t_ns", .int(Int64(clamping: e.nanoseconds))), ("loop", .string(e.loop)), ("kind", .string(e.kind))]
        if let l = e.line { o.append(("line", .string(l))) }
        o.append(("text", .string(e.text)))
        o.append(("level", .string(e.level)))
        for (k, v) in e.fields {
            switch v {
            case let .string(s): o.append((k, .string(s)))
            case let .int(n): o.append((k, .int(n)))
            case let .bool(b): o.append((k, .bool(b)))
            }
        }
        return .object(o)
    }
}
