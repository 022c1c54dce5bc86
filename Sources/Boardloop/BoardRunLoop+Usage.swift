extension BoardRunLoop {
    /// What a loop holds at a moment, to set against its `capacities`.
    package struct Usage: Sendable, Equatable {
        /// Custom and port sources on the loop.
        package var sources: Int
        package var timers: Int
        package var observers: Int
        /// Modes made so far, the default mode included.
        package var modes: Int
        /// Perform requests posted and not yet taken to run.
        package var pendingPerforms: Int
        /// Port sources (each an fd in the loop's epoll sets).
        package var portSources: Int
    }

    /// The loop's current usage. On the loop's thread (the tables are the
    /// owner's); the pending performs may be read from any thread.
    package var usage: Usage {
        Usage(
            sources: sourceCount, timers: timers.count, observers: observers.count, modes: usedModes,
            pendingPerforms: performs.queuedCount, portSources: ports.count)
    }
}

extension BoardRunLoop {
    /// Callouts the loop has made: timers fired, sources handled, performs
    /// run (observers' calls not counted). On the loop's thread.
    package var handledCount: UInt64 { workCount }
}
