import CacheSemantics
import CacheStorage
import CacheSystem

/// What requests that waited for an identical one in flight are told about it: how its
/// response was obtained, once it is stored (collapsed forwarding). They then look up again
/// and are answered from the store.
public struct CollapsedResponse: Hashable, Sendable {
    /// How the leader's response was obtained (a miss stored, or a stored response revalidated).
    public var outcome: CacheOutcome
    /// Why the leader went forward (RFC 9211 `fwd`).
    public var reason: CacheStatus.ForwardReason
    /// What the origin answered (RFC 9211 `fwd-status`).
    public var status: Int
}

/// What a request that joined identical ones in flight is told when its turn comes.
public enum JoinTurn: Sendable {
    /// The leader is done: `collapsed` when its response is stored. Look up again.
    case leaderSettled(CollapsedResponse?)
    /// The leader, another cache sharing the store, vanished without ending its fetch; this
    /// request leads in its place (it looks up again first: the fetch may have been stored).
    case leaderLost
    /// The leader goes on, but at the pace of its own client, which holds it back: this request
    /// goes to the origin by itself (it looks up again first), and stores nothing (the leader
    /// stores its response once it has it all), as nginx's `proxy_cache_lock_timeout` does.
    case leaderHeldBack
}

/// Requests for the same key in flight share one origin request: the first leads, the others
/// wait until its response is stored (or is not going to be) and then look up again.
///
/// Over a ``CollapsingStore`` (a store other caches share) the leader of this process also
/// claims the key among those caches; when another cache holds it, this process's requests all
/// wait for that one (and are told `nil`: they look up again, then go on by themselves). When
/// that cache vanishes without ending its fetch, this process claims the key and the first of
/// its waiting requests leads instead (``JoinTurn/leaderLost``); the others wait for it.
final class CoalescingRegistry: Sendable {
    /// The requests waiting for one leader's fetch of a key. Numbered, so that a leader whose
    /// waiters were released early (``release(_:)``) settles nothing of a later fetch of the key.
    private struct Flight {
        let number: UInt64
        var waiters: [@Sendable (JoinTurn) -> Void] = []
    }

    private struct State {
        var flights: [String: Flight] = [:]
        var nextFlight: UInt64 = 0
        /// Keys this process claimed in the shared store, to give back when settled.
        var claimed: Set<String> = []
    }

    private let state = Locked(State())
    private let shared: (any CollapsingStore)?

    init(shared: (any CollapsingStore)?) { self.shared = shared }

    /// Joins the requests in flight for `identity`: `true` when this one leads (it must
    /// ``settle(_:_:)`` exactly once), `false` when `waiter` will be called when the leader settles.
    func join(_ identity: String, waiter: @escaping @Sendable (JoinTurn) -> Void) -> Bool {
        let leads = state.withLock { state in
            if state.flights[identity] != nil {
                state.flights[identity]!.waiters.append(waiter)
                return false
            }
            state.nextFlight += 1
            state.flights[identity] = Flight(number: state.nextFlight)
            return true
        }
        guard leads, let shared else { return leads }
        if shared.claimFill(identity) {
            state.withLock { _ = $0.claimed.insert(identity) }
            return true
        }
        // Nobody settles `identity` before `awaitFill` calls back: this process leads it.
        state.withLock { $0.flights[identity]!.waiters.append(waiter) }
        shared.awaitFill(identity) { [self] wait in
            switch wait {
            case .ended: settle(Leadership(identity: identity, flight: nil), nil)
            case .claimed: leaderLost(identity)
            }
        }
        return false
    }

    /// What the request that leads `identity` now (the one ``join(_:waiter:)`` just made
    /// leader, or the one told ``JoinTurn/leaderLost``) settles when done.
    func leadership(of identity: String) -> Leadership {
        Leadership(identity: identity, flight: state.withLock { $0.flights[identity]?.number })
    }

    /// The other cache's fetch of `identity` lapsed and this process claimed it: its first
    /// waiting request leads, the others go on waiting for it.
    private func leaderLost(_ identity: String) {
        let next = state.withLock { state -> (@Sendable (JoinTurn) -> Void)? in
            state.claimed.insert(identity)
            guard let first = state.flights[identity]?.waiters.first else { return nil }
            state.flights[identity]!.waiters.removeFirst()
            return first
        }
        guard let next else { return settle(Leadership(identity: identity, flight: nil), nil) }
        next(.leaderLost)
    }

    /// The leader of `leadership` is done: `collapsed` when its response is stored, `nil` when
    /// not. Nothing when its waiters were released already (a later fetch of the key may be
    /// in flight, with waiters of its own).
    func settle(_ leadership: Leadership, _ collapsed: CollapsedResponse?) {
        end(leadership, telling: .leaderSettled(collapsed))
    }

    /// The leader of `leadership` goes on, but no one waits for it any more: its waiters are
    /// told ``JoinTurn/leaderHeldBack``, later requests for the key do not join it, and its own
    /// ``settle(_:_:)`` then does nothing.
    func release(_ leadership: Leadership) {
        end(leadership, telling: .leaderHeldBack)
    }

    /// Ends the fetch of `leadership` (unless a later one is in flight) and tells its waiters `turn`.
    private func end(_ leadership: Leadership, telling turn: JoinTurn) {
        let (waiters, claimed) = state.withLock { state -> ([@Sendable (JoinTurn) -> Void], Bool) in
            guard let flight = state.flights[leadership.identity],
                leadership.flight == nil || leadership.flight == flight.number
            else { return ([], false) }
            state.flights[leadership.identity] = nil
            return (flight.waiters, state.claimed.remove(leadership.identity) != nil)
        }
        if claimed { shared?.endFill(leadership.identity) }
        for waiter in waiters { waiter(turn) }
    }

}

/// The fetch a request leads (``CoalescingRegistry``): the key, and which of its fetches.
struct Leadership: Hashable, Sendable {
    /// The coalescing identity: the primary cache key.
    let identity: String
    /// Which fetch of the key; `nil` settles whichever is in flight.
    let flight: UInt64?
}

/// Stale-while-revalidate validations running in the background (RFC 5861 §3): at most one
/// per key, and a way to wait until none runs.
final class BackgroundRevalidations: Sendable {
    private struct State {
        var running: Set<String> = []
        var whenIdle: [@Sendable () -> Void] = []
    }

    private let state = Locked(State())

    /// Marks `key` as being revalidated; `false` when it already is.
    func begin(_ key: String) -> Bool {
        state.withLock { $0.running.insert(key).inserted }
    }

    /// The revalidation of `key` is over.
    func end(_ key: String) {
        let waiters = state.withLock { state -> [@Sendable () -> Void] in
            state.running.remove(key)
            guard state.running.isEmpty else { return [] }
            defer { state.whenIdle = [] }
            return state.whenIdle
        }
        for waiter in waiters { waiter() }
    }

    /// Calls `action` once no revalidation runs (at once when none does).
    func whenIdle(_ action: @escaping @Sendable () -> Void) {
        let idle = state.withLock { state -> Bool in
            if state.running.isEmpty { return true }
            state.whenIdle.append(action)
            return false
        }
        if idle { action() }
    }

    /// How many run now.
    var count: Int { state.withLock { $0.running.count } }
}
