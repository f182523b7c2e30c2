import CacheSystem
import Testing

@testable import CacheExchange

/// Collapsed forwarding: requests for a key in flight wait for the one that leads.
@Suite("Collapsed forwarding: leaders, waiters and fetches of a key")
struct CoalescingTests {
    /// What each waiter was told, by name.
    private final class Turns: Sendable {
        private let told = Locked<[String: [JoinTurn]]>([:])
        func waiter(_ name: String) -> @Sendable (JoinTurn) -> Void {
            { turn in self.told.withLock { $0[name, default: []].append(turn) } }
        }
        func count(_ name: String) -> Int { told.withLock { $0[name]?.count ?? 0 } }
        /// Whether `name` was told once, that its leader is held back.
        func heldBack(_ name: String) -> Bool {
            told.withLock { told in
                guard let turns = told[name], turns.count == 1, case .leaderHeldBack = turns[0] else { return false }
                return true
            }
        }
    }

    @Test("waiters released before their leader ends go on; the leader's end then settles nothing of a later fetch")
    func releasedLeaderSettlesNoLaterFetch() {
        let registry = CoalescingRegistry(shared: nil)
        let turns = Turns()
        #expect(registry.join("k", waiter: turns.waiter("first")))
        let first = registry.leadership(of: "k")
        #expect(!registry.join("k", waiter: turns.waiter("a")))
        // The first leader's client stalls: those waiting for it are let go.
        registry.release(first)
        #expect(turns.heldBack("a"))
        // A later request leads a new fetch of the key, and another waits for it.
        #expect(registry.join("k", waiter: turns.waiter("second")))
        let second = registry.leadership(of: "k")
        #expect(second != first)
        #expect(!registry.join("k", waiter: turns.waiter("b")))
        // The first leader ends: the second fetch's waiter is not told.
        registry.settle(first, nil)
        #expect(turns.count("b") == 0)
        registry.settle(second, nil)
        #expect(turns.count("b") == 1)
        #expect(turns.count("first") == 0 && turns.count("second") == 0, "a leader is never told")
        // Settled: the next request leads again.
        #expect(registry.join("k", waiter: turns.waiter("third")))
    }
}
