#if os(Linux)
import CacheSemantics
import CacheSystem

/// Lets at most one line of each kind per second through to the log: an origin that is down
/// under load would otherwise write a line per request. The next line of a kind that goes
/// through says how many were held back since the last one.
final class LogLimiter: Sendable {
    /// What a line is about; one line per second each. A kind never carries what a client
    /// chooses (a destination, a URL): a client varying it would get a line per request.
    enum Kind: Hashable, Sendable {
        /// An origin request that got no response, by what went wrong.
        case origin(ProxyStatusMember.ErrorType)
        /// A response cut off after its head.
        case cutOff
        /// The store failed to read or write.
        case store
        /// A destination the allow-list refuses, whichever it is.
        case refusedDestination
        /// A request the server's parser refused (a malformed or oversized head or body).
        case rejectedRequest
    }

    private let log: @Sendable (String) -> Void
    private let interval: Double
    private let clock: @Sendable () -> Double
    /// Per kind: when its last line went out, and how many were held back since.
    private let state = Locked<[Kind: (last: Double, heldBack: Int)]>([:])

    /// - Parameter clock: seconds; the proxy's clock (a test's manual one). A clock set back
    ///   lets the next line through rather than holding lines back until it catches up.
    init(
        interval: Double = 1, clock: @escaping @Sendable () -> Double = MonotonicClock.seconds,
        _ log: @escaping @Sendable (String) -> Void
    ) {
        self.log = log
        self.interval = interval
        self.clock = clock
    }

    /// Writes `message` unless a line of `kind` went out less than a second ago.
    func callAsFunction(_ kind: Kind, _ message: @autoclosure () -> String) {
        let now = clock()
        let heldBack = state.withLock { state -> Int? in
            if let entry = state[kind], now >= entry.last, now - entry.last < interval {
                state[kind] = (entry.last, entry.heldBack + 1)
                return nil
            }
            defer { state[kind] = (now, 0) }
            return state[kind]?.heldBack ?? 0
        }
        guard let heldBack else { return }
        let more = heldBack == 0 ? "" : " (\(heldBack) more like it since the last such line, not logged)"
        log(message() + more)
    }
}
#endif
