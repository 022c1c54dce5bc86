import Boardloop
import BoardloopGPIO

/// Reading the output history ring: whole, per line, only what is new
/// since a count, or a line's last change. A reader that looks again and
/// again (an expectation at every step of a long `boardd test`) reads
/// only the changes since its last look, or the last change alone, and
/// does not copy the whole ring each time.
extension MockChip {
    /// Every recorded output change of one line, oldest first (the value a
    /// request set it to when made, then each change).
    public func outputHistory(_ line: GPIOLineSelector) throws(GPIOError) -> [OutputChange] {
        let o = try offset(line)
        return allOutputChanges().filter { $0.offset == o }
    }

    /// Every recorded output change, oldest first.
    public func allOutputChanges() -> [OutputChange] {
        lock.locked { changes(from: 0) }
    }

    /// Output changes recorded so far, the dropped and the forgotten
    /// included: what `outputChanges(since:)` takes back.
    public var outputChangeCount: UInt64 { lock.locked { changesRecorded } }

    /// The changes recorded after the first `count` (an `outputChangeCount`
    /// read earlier), oldest first, and the count now. Those the ring has
    /// dropped since, or `clearOutputHistory` forgot, are not there.
    public func outputChanges(since count: UInt64) -> (changes: [OutputChange], count: UInt64) {
        lock.locked { (changes(from: count), changesRecorded) }
    }

    /// The line's last change still in the ring (`outputHistory(line).last`),
    /// found without a copy of the ring.
    public func lastOutputChange(_ line: GPIOLineSelector) throws(GPIOError) -> OutputChange? {
        let o = Int(try offset(line))
        return lock.locked {
            let oldest = changesRecorded - UInt64(historyCount)
            guard lastChange[o] > oldest else { return nil }
            entriesCopied &+= 1
            return history[(historyStart + Int(lastChange[o] - 1 - oldest)) % historyCapacity]
        }
    }

    /// Entries copied out of the history ring so far, by every reader of
    /// it: the work reading the history costs, which tests bound.
    public var historyEntriesCopied: UInt64 { lock.locked { entriesCopied } }

    /// Forgets the recorded output changes.
    public func clearOutputHistory() {
        lock.locked {
            historyStart = 0
            historyCount = 0
        }
    }

    /// With the lock held: the changes in the ring numbered `count` and
    /// later (0 is the first change the chip recorded).
    private func changes(from count: UInt64) -> [OutputChange] {
        let oldest = changesRecorded - UInt64(historyCount)
        let first = Int(max(count, oldest) - oldest)
        guard first < historyCount else { return [] }
        entriesCopied &+= UInt64(historyCount - first)
        return (first..<historyCount).map { history[(historyStart + $0) % historyCapacity] }
    }
}
