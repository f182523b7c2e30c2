import CacheTestSupport
import Foundation
import Testing

/// The cooperative pool has one thread per core and every async test of a run shares it: the
/// helpers that block refuse to run there (``requireOffPool(_:)``), so a test that would stall
/// the run fails at once, naming the call.
@Suite("Test support: blocking work is refused on the cooperative pool")
struct BlockingWorkTests {
    @Test("requireOffPool throws on the pool, saying what blocked and what to do; offPool and a thread of its own pass")
    func requireOffPoolRefusesOnlyThePool() async throws {
        let error = #expect(throws: BlockingCallOnPool.self) { try requireOffPool("RedisServer.start()") }
        #expect(error?.description.hasPrefix("RedisServer.start() blocks its thread") == true)
        #expect(error?.description.contains("`try await offPool { ... }`") == true)

        try await offPool { try requireOffPool("in offPool") }
        // Still on the executor's thread after a suspension inside offPool.
        try await offPool { () async throws in
            try await Task.sleep(for: .milliseconds(1))
            try requireOffPool("in offPool, after a suspension")
        }
        // A thread that runs no task (an origin's connection thread) may block.
        let allowed = await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: (try? requireOffPool("on a thread")) != nil) }.start()
        }
        #expect(allowed)
    }
}
