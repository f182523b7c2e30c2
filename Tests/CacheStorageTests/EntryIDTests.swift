import Foundation
import Testing

@testable import CacheStorage

// New identities take their random bits from a pool the kernel refills in bulk (one read for
// 256 identities on Linux), behind a lock: the pool is shared by every thread.
extension EntryIDTests {
    @Test("identities made on several threads at once, across many refills of their random bits, are all distinct")
    func distinctAcrossThreads() {
        let threads = 4
        let perThread = 2_000
        let results = UnsafeMutableBufferPointer<[EntryID]>.allocate(capacity: threads)
        results.initialize(repeating: [])
        defer { results.deallocate() }
        nonisolated(unsafe) let shared = results
        // Each thread writes its own slot only.
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            var ids: [EntryID] = []
            ids.reserveCapacity(perThread)
            for _ in 0..<perThread { ids.append(EntryID()) }
            shared[thread] = ids
        }
        let all = results.flatMap { $0 }
        #expect(all.count == threads * perThread)
        #expect(Set(all).count == all.count)
        // 80 random bits an identity: no two share their last 64 either.
        #expect(Set(all.map { $0.rawValue.suffix(16) }).count == all.count)
    }
}
