/// A run loop mode: a named set of sources, timers and observers. Running the
/// loop in a mode monitors only that mode's items; the others hold their
/// events until a mode they belong to runs again.
public struct RunLoopMode: Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    public let name: String

    public init(_ name: String) { self.name = name }
    public init(stringLiteral name: String) { self.name = name }

    /// The mode loops run in unless told otherwise (CF's `kCFRunLoopDefaultMode`).
    public static let `default` = RunLoopMode("kCFRunLoopDefaultMode")

    /// The common-modes pseudo-mode (CF's `kCFRunLoopCommonModes`): an item
    /// added to it is in every mode of the loop's common set, including modes
    /// added to that set later. It is never run itself.
    public static let common = RunLoopMode("kCFRunLoopCommonModes")

    public var description: String { name }
}

/// What a run call reports when it returns (CF's `CFRunLoopRunResult`).
public enum RunResult: Int32, Sendable, CustomStringConvertible {
    /// The mode has no sources or timers (nothing could ever wake it).
    case finished = 1
    /// `stop()` was called.
    case stopped = 2
    /// The time limit passed.
    case timedOut = 3
    /// A source was handled and the caller asked to return after one.
    case handledSource = 4

    public var description: String {
        switch self {
        case .finished: "finished"
        case .stopped: "stopped"
        case .timedOut: "timedOut"
        case .handledSource: "handledSource"
        }
    }
}
