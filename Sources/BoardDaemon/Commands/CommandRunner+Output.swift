import Boardloop
import CDaemon
import Glibc
import Logging

/// A child's stdout and stderr: read as they come (at most a fixed buffer
/// per read), split into lines, each logged under the command's name.
extension CommandRunner {
    /// Reads once, at most `readBudget` bytes, from a readable stream: a
    /// child that writes without pause cannot keep the loop from its
    /// timers and other sources (what is left stays readable for the next
    /// pass: the loop's sources are level-triggered).
    func readable(_ s: Stream, _ child: Child) {
        let n = read(s.fd, readBuffer, Self.readBudget)
        if n > 0 {
            consume(s, child, UnsafePointer(readBuffer), n)
        } else if n == 0 || (errno != EAGAIN && errno != EINTR) {
            closeStream(s, child)
        }
    }

    /// What is in the pipes of a child that exited, read before its exit
    /// is reported: until EAGAIN, or at most `drainBudget` bytes a stream
    /// (something the child started may still hold the pipe and write).
    func drain(_ child: Child) {
        for s in child.streams {
            var left = Self.drainBudget
            while left > 0 && s.source != nil {
                let n = read(s.fd, readBuffer, min(left, Self.readBudget))
                if n > 0 {
                    consume(s, child, UnsafePointer(readBuffer), n)
                    left -= n
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    if n == 0 || errno != EAGAIN { closeStream(s, child) }
                    break
                }
            }
        }
    }

    /// Splits what was read into lines: the first `maxLines` are logged
    /// (each cut at `maxLineBytes`), the rest counted.
    func consume(_ s: Stream, _ child: Child, _ p: UnsafePointer<UInt8>, _ n: Int) {
        var i = 0
        while i < n {
            let nl = memchr(p + i, 10, n - i).map { $0.assumingMemoryBound(to: UInt8.self) - UnsafeMutablePointer(mutating: p) }
            let end = nl ?? n
            let count = end - i
            if count > 0 {
                s.midLine = true
                if s.logged < Self.maxLines {
                    let take = min(count, Self.maxLineBytes - s.pending.count)
                    if take > 0 { s.pending.append(contentsOf: UnsafeBufferPointer(start: p + i, count: take)) }
                    s.bytesNotLogged += count - take
                } else {
                    s.bytesNotLogged += count
                }
            }
            guard let nl else { break }
            endLine(s, child)
            i = nl + 1
        }
    }

    /// A line of `s` ended (at a newline, or at the stream's end).
    func endLine(_ s: Stream, _ child: Child) {
        s.midLine = false
        guard s.logged < Self.maxLines else {
            s.linesNotLogged += 1
            return
        }
        s.logged += 1
        let label = child.label
        if s.name == "stderr" {
            logger.warning("\(label) stderr: \(String(decoding: s.pending, as: UTF8.self))", source: child.outputSource)
        } else {
            logger.info("\(label): \(String(decoding: s.pending, as: UTF8.self))", source: child.outputSource)
        }
        s.pending.removeAll(keepingCapacity: true)
    }

    /// The stream's last line (without a newline), and what was not logged.
    func report(_ s: Stream, _ child: Child) {
        if s.midLine { endLine(s, child) }
        if s.linesNotLogged > 0 {
            logger.notice(
                "\(child.label): \(s.linesNotLogged) more \(s.name) lines not logged (\(s.bytesNotLogged) bytes of \(s.name) not logged in all)")
        } else if s.bytesNotLogged > 0 {
            logger.notice("\(child.label): \(s.bytesNotLogged) bytes of \(s.name) not logged (lines cut at \(Self.maxLineBytes) bytes)")
        }
    }

    func closeStream(_ s: Stream, _ child: Child) {
        report(s, child)
        s.source?.invalidate()
        s.source = nil
        close(s.fd)
        child.streams.removeAll { $0 === s }
    }
}
