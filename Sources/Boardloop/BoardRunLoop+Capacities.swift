extension BoardRunLoop {
    /// The fixed sizes a loop is made with. All storage is reserved at creation.
    public struct Capacities: Sendable, Equatable {
        /// Custom and port sources together.
        public var sources: Int
        public var timers: Int
        public var observers: Int
        /// Distinct modes, including the default mode (at most 64).
        public var modes: Int
        /// Perform requests queued at once (posted and not yet run).
        public var pendingPerforms: Int
        /// Events one `epoll_wait` can return; more ready fds are simply
        /// reported by the next wait.
        public var eventsPerWait: Int
        /// Run calls nested deeper than this still work, but their snapshots
        /// may use the heap.
        public var nestingDepth: Int

        /// The largest value each capacity may take, and the most memory a
        /// loop may reserve (256 MiB): beyond these a loop is refused with
        /// `.invalidArgument` naming the capacity, rather than reserving
        /// gigabytes the board does not have.
        public static let maxima = (
            sources: 1 << 20, timers: 1 << 20, observers: 1 << 16, modes: 64, pendingPerforms: 1 << 20,
            eventsPerWait: 65536, nestingDepth: 256, bytes: 256 << 20)

        /// The bytes a loop with these capacities reserves (approximately: the
        /// tables, each mode's lists, the snapshot stack and the ready list).
        public var reservedBytes: Int {
            let perMode = (sources + observers) * 4 + timers * 8
            let tables = (sources * 2 + timers + observers) * 20 + timers * 24 + pendingPerforms * 48
            let scratch = (sources + observers + timers + pendingPerforms) * 4 * nestingDepth
            let remote = (sources * 2 + timers + observers) * 16
            return modes * perMode + tables + scratch + remote + eventsPerWait * 40
        }

        public init(
            sources: Int = 64, timers: Int = 64, observers: Int = 32, modes: Int = 8,
            pendingPerforms: Int = 128, eventsPerWait: Int = 32, nestingDepth: Int = 8
        ) {
            self.sources = sources
            self.timers = timers
            self.observers = observers
            self.modes = modes
            self.pendingPerforms = pendingPerforms
            self.eventsPerWait = eventsPerWait
            self.nestingDepth = nestingDepth
        }
    }
}
