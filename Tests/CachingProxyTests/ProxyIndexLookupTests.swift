#if os(Linux)
import CacheSystem
import CacheTestSupport
import CachingProxy
import Foundation
import LoopbackOrigin
import Testing

@testable import CacheStorage

/// A key beyond the disk index's head memo is looked up off the event loop
/// (``TieredStore/makeLookupChannel()``): the loop goes on serving while the index is read.
@Suite("Caching proxy: index lookups off the event loop")
struct ProxyIndexLookupTests {
    @Test(
        "A request whose key must be read from the index waits off the loop: a hit on the same loop is answered while another thread holds the index"
    )
    func hitWhileAnotherRequestWaitsForTheIndex() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.setDefault { request in
                .init(headers: [("Cache-Control", "max-age=600")], body: "stored \(request.path)")
            }
            let directory = TemporaryDirectory("index-lookups-proxy")
            let cache = directory.path + "/cache"
            let clock = ManualClock()
            let client = try TestClient()
            // One proxy stores /a and /b, and stops (its commits written).
            do {
                let first = try InProcessProxy(origin: origin.baseURL, clock: clock) { $0.cacheDirectory = cache }
                for path in ["/a", "/b"] { #expect(try client.send("GET", first.baseURL + path).status == 200) }
                first.terminate()
            }
            // Another, with a store of its own over the directory (a new process's: nothing
            // remembered) whose index has no reading connection, and one loop.
            var configuration = DiskStore.Configuration(directory: cache, log: { _ in })
            configuration.writesBehind = true
            configuration.readingConnections = 0
            let disk = try DiskStore(configuration, clock: clock.function)
            let proxy = try InProcessProxy(origin: origin.baseURL, clock: clock) {
                $0.store = TieredStore(memory: MemoryStore(capacity: 1 << 20), disk: disk)
                $0.loops = 1
            }
            #expect(try client.send("GET", proxy.baseURL + "/b").isHit)
            // Another thread holds the index until /b is answered again (or 20 s pass).
            let held = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            let released = Locked(false)
            Thread.detachNewThread {
                disk.state.withLock { _ in
                    held.signal()
                    let signalled = release.wait(timeout: .now() + 20) == .success
                    released.withLock { $0 = signalled }
                }
            }
            held.wait()
            let first = Locked<Received?>(nil)
            let firstDone = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                first.withLock { $0 = try? client.send("GET", proxy.baseURL + "/a") }
                firstDone.signal()
            }
            // /a reaches the loop and parks (were it read on the loop, the loop would wait for
            // the index, and /b with it, until the hold ends by its timeout).
            Thread.sleep(forTimeInterval: 0.3)
            let hit = try client.send("GET", proxy.baseURL + "/b")
            #expect(firstDone.wait(timeout: .now()) == .timedOut, "/a was answered while the index was held")
            release.signal()
            #expect(hit.isHit && hit.text == "stored /b")
            #expect(firstDone.wait(timeout: .now() + 20) == .success)
            #expect(released.withLock { $0 }, "/b waited for the index's lock")
            let answer = try #require(first.withLock { $0 })
            #expect(answer.isHit && answer.text == "stored /a")
            proxy.terminate()
        }
    }
}
#endif
