import CacheStorage
import CacheSystem
import CacheTestSupport
import Foundation
import Testing

@testable import CacheStorageRedis

/// Claims on a key's origin request among caches sharing one real Redis: a lease its holder
/// renews, released only by its holder, taken over when its holder vanished.
@Suite("SharedStore: claims on origin requests across caches", .serialized)
struct CollapseClaimTests {
    /// Two stores (two caches) on the shared test Redis under one key prefix of their own.
    static func stores(lease: Double) throws -> (SharedStore, SharedStore, RedisConfiguration) {
        var redis = try RedisConfiguration(url: try RedisServer.shared().url)
        redis.keyPrefix = "claim-\(UInt64.random(in: 0...UInt64.max)):"
        redis.commandTimeout = 1
        redis.connectTimeout = 1
        func store() -> SharedStore {
            SharedStore(redis: RedisStore(redis), localCapacity: 0, listens: true, claimLease: lease)
        }
        return (store(), store(), redis)
    }

    /// What `awaitFill` said, and when (seconds after the wait began).
    final class Wait: Sendable {
        let result = Locked<(FillWait, Double)?>(nil)
        let started = Date()

        func callback() -> @Sendable (FillWait) -> Void {
            { [self] wait in result.withLock { $0 = (wait, Date().timeIntervalSince(started)) } }
        }

        func wait(upTo seconds: Double) -> (FillWait, Double)? {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if let done = result.withLock({ $0 }) { return done }
                usleep(10_000)
            }
            return result.withLock { $0 }
        }
    }

    @Test("a claim expires after its lease, not after the whole collapse timeout")
    func claimIsALease() async throws {
        try await offPool {
            let (first, second, redis) = try Self.stores(lease: 1.5)
            defer {
                first.close()
                second.close()
            }
            #expect(first.claimFill("k"))
            let ttl = try RedisServer.shared().command([Array("PTTL".utf8), first.redis.lockKey("k")])
            let milliseconds = Int(ttl.dropFirst()) ?? -1
            #expect(milliseconds > 0 && milliseconds <= 1_500, "PTTL \(ttl) under \(redis.keyPrefix)")
            #expect(!second.claimFill("k"))
            first.endFill("k")
            #expect(second.claimFill("k"))
            second.endFill("k")
        }
    }

    @Test(
        "a lock no cache could have set (no expiry, or far longer than a lease) is taken over at once, not waited for",
        arguments: [[], ["PX", "3600000"]])
    func lockWithoutALeaseIsTakenOver(expiry: [String]) async throws {
        try await offPool {
            let (first, second, _) = try Self.stores(lease: 1.5)
            defer {
                first.close()
                second.close()
            }
            try RedisServer.shared().command(
                [Array("SET".utf8), first.redis.lockKey("k"), Array("junk".utf8)] + expiry.map { Array($0.utf8) })
            #expect(first.claimFill("k"), "a lock with \(expiry) held the key")
            let ttl = try RedisServer.shared().command([Array("PTTL".utf8), first.redis.lockKey("k")])
            let milliseconds = Int(ttl.dropFirst()) ?? -1
            #expect(milliseconds > 0 && milliseconds <= 1_500, "PTTL \(ttl): now the claimant's lease")
            #expect(!second.claimFill("k"))
            first.endFill("k")
        }
    }

    @Test("a holder that vanished stops renewing: its claim lapses and one waiting cache takes the key over")
    func vanishedHolderIsTakenOver() async throws {
        try await offPool {
            let (first, second, _) = try Self.stores(lease: 1.5)
            defer {
                first.close()
                second.close()
            }
            // A holder that died: its lock stays until its lease lapses, and no one releases it.
            try RedisServer.shared().command([
                Array("SET".utf8), first.redis.lockKey("k"), Array("dead".utf8), Array("PX".utf8), Array("1500".utf8),
            ])
            #expect(!second.claimFill("k"))
            let waited = Wait()
            second.awaitFill("k", waited.callback())
            let result = try #require(waited.wait(upTo: 8), "the waiting cache was never told")
            guard case .claimed = result.0 else {
                Issue.record("the lapsed claim was not taken over: \(result.0)"); return
            }
            #expect(result.1 < 5, "taken over after \(result.1) s")
            // The new holder holds it now, and releases it.
            #expect(!first.claimFill("k"))
            second.endFill("k")
            #expect(first.claimFill("k"))
            first.endFill("k")
        }
    }

    @Test("a live holder renews its claim past the lease: the waiting cache waits, and is told when it ends")
    func liveHolderKeepsItsClaim() async throws {
        try await offPool {
            let (first, second, _) = try Self.stores(lease: 1.5)
            defer {
                first.close()
                second.close()
            }
            #expect(first.claimFill("k"))
            let waited = Wait()
            second.awaitFill("k", waited.callback())
            #expect(waited.wait(upTo: 4) == nil, "the claim was taken from a live holder")
            first.endFill("k")
            let result = try #require(waited.wait(upTo: 5), "the end was not seen")
            guard case .ended = result.0 else { Issue.record("not told of the end: \(result.0)"); return }
        }
    }

    @Test("a claim is released only by its holder (compare-and-set in a Lua script)")
    func releasedOnlyByItsHolder() async throws {
        try await offPool {
            let (first, second, _) = try Self.stores(lease: 1.5)
            defer {
                first.close()
                second.close()
            }
            #expect(first.claimFill("k"))
            // The second cache never claimed it: its end releases nothing.
            second.endFill("k")
            #expect(!second.claimFill("k"))
            first.endFill("k")
        }
    }
}
