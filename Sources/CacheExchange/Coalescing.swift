import CacheLocking
import CacheSemantics
import CacheStorage

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

/// Requests for the same key in flight share one origin request: the first leads, the others
/// wait until its response is stored (or is not going to be) and then look up again.
final class CoalescingRegistry: Sendable {
    private let waiting = Locked<[String: [@Sendable (CollapsedResponse?) -> Void]]>([:])

    /// Joins the requests in flight for `identity`: `true` when this one leads (it must
    /// ``settle(_:_:)`` exactly once), `false` when `waiter` will be called when the leader settles.
    func join(_ identity: String, waiter: @escaping @Sendable (CollapsedResponse?) -> Void) -> Bool {
        waiting.withLock { waiting in
            if waiting[identity] != nil {
                waiting[identity]!.append(waiter)
                return false
            }
            waiting[identity] = []
            return true
        }
    }

    /// The leader for `identity` is done: `collapsed` when its response is stored, `nil` when not.
    func settle(_ identity: String, _ collapsed: CollapsedResponse?) {
        let waiters = waiting.withLock { $0.removeValue(forKey: identity) ?? [] }
        for waiter in waiters { waiter(collapsed) }
    }
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
