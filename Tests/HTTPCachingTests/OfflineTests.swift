import CacheSemantics
import CacheStorage
import CacheSystem
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

@testable import HTTPCaching

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Serving stale: disconnected, stale-if-error, stale-while-revalidate (RFC 9111 §4.2.4, RFC 5861)")
struct OfflineTests {
    /// §4.2.4: a cache that cannot reach the origin may serve a stale response.
    @Test("Origin stopped: the stale entry is served (§4.2.4)")
    func originStoppedServesStale() async throws {
        let h = try Harness()
        h.serve("/s", [("Cache-Control", "max-age=60"), ("ETag", "\"1\"")], body: "offline copy")
        _ = try await h.get("/s")
        h.clock.advance(by: 600)
        h.origin.stop()
        let result = try await h.get("/s")
        #expect(result.outcome == .stale)
        #expect(result.text == "offline copy")
        #expect(result.cacheStatus.detail == "disconnected")
        #expect(result.reasons.contains { if case .disconnected = $0 { true } else { false } })
        #expect(result.field("Age").flatMap(Int.init) ?? 0 >= 600)
    }

    /// §4.2.4, §5.2.2.2: must-revalidate forbids serving stale: 504 when the origin is gone.
    @Test("Origin stopped and must-revalidate: 504 (§5.2.2.2)")
    func mustRevalidateGives504() async throws {
        let h = try Harness()
        h.serve("/m", [("Cache-Control", "max-age=60, must-revalidate")], body: "strict")
        _ = try await h.get("/m")
        h.clock.advance(by: 600)
        h.origin.stop()
        let result = try await h.get("/m")
        #expect(result.statusCode == 504)
        #expect(result.reasons.contains(.mustRevalidate))
    }

    /// With nothing stored, an unreachable origin is the transport's error.
    @Test func unreachableWithNothingStoredThrows() async throws {
        let h = try Harness()
        h.origin.stop()
        await #expect(throws: URLError.self) { try await h.get("/none") }
        #expect(h.cache.statistics.errors == 1)
    }

    /// A fresh entry is served while the origin is down without asking it at all.
    @Test func freshEntryNeedsNoOrigin() async throws {
        let h = try Harness()
        h.serve("/f", [("Cache-Control", "max-age=600")])
        _ = try await h.get("/f")
        h.origin.stop()
        #expect(try await h.get("/f").outcome == .hit)
    }

    /// RFC 5861 §4: within stale-if-error a 500 from the origin is replaced by the stale
    /// response; beyond it (or without it) the 500 is passed on.
    @Test("stale-if-error on a 500 (RFC 5861 §4)")
    func staleIfError() async throws {
        let h = try Harness()
        h.serve("/e", [("Cache-Control", "max-age=60, stale-if-error=300")], body: "good")
        h.serve("/n", [("Cache-Control", "max-age=60")], body: "good")
        _ = try await h.get("/e")
        _ = try await h.get("/n")
        h.clock.advance(by: 120)
        h.serve("/e", status: 500, body: "broken")
        h.serve("/n", status: 500, body: "broken")
        let within = try await h.get("/e")
        #expect(within.outcome == .stale && within.text == "good")
        #expect(within.cacheStatus.detail == "stale-if-error")
        let without = try await h.get("/n")
        #expect(without.statusCode == 500 && without.text == "broken")
        h.clock.advance(by: 600)
        let beyond = try await h.get("/e")
        #expect(beyond.statusCode == 500)
    }

    /// RFC 5861 §3: the stale body at once, then exactly one background request, after which
    /// the entry is fresh again.
    @Test("stale-while-revalidate (RFC 5861 §3)")
    func staleWhileRevalidate() async throws {
        let h = try Harness()
        h.serveValidated(
            "/swr", etag: "\"1\"", [("Cache-Control", "max-age=60, stale-while-revalidate=600")], body: "v1")
        _ = try await h.get("/swr")
        h.clock.advance(by: 120)
        // The origin holds its answer until the stale ones are in (at most 10 s): had they
        // waited for it, they would take 10 s.
        let released = Locked(false)
        h.origin.route("/swr") { [clock = h.clock] _ in
            let deadline = Date().addingTimeInterval(10)
            while !released.withLock({ $0 }) && Date() < deadline { usleep(5_000) }
            return LoopbackOrigin.Response(
                headers: [
                    ("Date", HTTPDate.format(Timestamp(secondsSince1970: clock.now()))),
                    ("Cache-Control", "max-age=60, stale-while-revalidate=600"), ("ETag", "\"2\""),
                ], body: "v2")
        }
        let started = Date()
        let stale = try await h.get("/swr")
        let again = try await h.get("/swr")
        #expect(Date().timeIntervalSince(started) < 5)
        released.withLock { $0 = true }
        #expect(stale.outcome == .stale && stale.text == "v1")
        #expect(stale.cacheStatus.detail == "stale-while-revalidate")
        #expect(again.outcome == .stale)
        await h.cache.waitForBackgroundWork()
        #expect(h.origin.count("/swr") == 2)
        let fresh = try await h.get("/swr")
        #expect(fresh.outcome == .hit && fresh.text == "v2")
    }

    /// `waitForBackgroundWork()` (which every `httpcache get` calls) returns once the
    /// revalidations are over, also when one ended and a second one for the same key started
    /// meanwhile (RFC 5861 §3: one at a time per key). The exchange registers a key before its
    /// revalidation starts and releases it when it ends, so no finished one stays registered.
    @Test(.timeLimit(.minutes(10)))
    func waitForBackgroundWorkReturnsAfterOverlappingRevalidations() async throws {
        let h = try Harness()
        let revalidations = Locked(0)
        h.origin.route("/swr") { [clock = h.clock] request in
            let headers = [
                ("Date", HTTPDate.format(Timestamp(secondsSince1970: clock.now()))),
                ("Cache-Control", "max-age=0, stale-while-revalidate=60"), ("ETag", "\"w\""),
            ]
            guard request.header("If-None-Match") == "\"w\"" else {
                return LoopbackOrigin.Response(headers: headers, body: "swr")
            }
            let count = revalidations.withLock { count in
                count += 1
                return count
            }
            // The first revalidation ends at once; the second is still running when waited for.
            return LoopbackOrigin.Response(status: 304, headers: headers, delay: count == 1 ? 0 : 0.5)
        }
        _ = try await h.get("/swr")
        #expect(try await h.get("/swr").outcome == .stale)
        await h.cache.waitForBackgroundWork()
        #expect(try await h.get("/swr").outcome == .stale)

        let returned = Locked(false)
        Task {
            await h.cache.waitForBackgroundWork()
            returned.withLock { $0 = true }
        }
        // It returns (the second revalidation takes 0.5 s); the bound only stops a hang, with room
        // for a machine busy with the whole suite (10 s was not, once).
        let deadline = ContinuousClock.now + .seconds(60)
        while !returned.withLock({ $0 }), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(returned.withLock { $0 }, "waitForBackgroundWork() had not returned after 60 s")
        #expect(revalidations.withLock { $0 } == 2)
        #expect(h.origin.count("/swr") == 3)
    }

    /// Counters and events follow every outcome.
    @Test func countersAndEvents() async throws {
        let events = EventLog()
        let h = try Harness { $0.onEvent = { events.append($0) } }
        h.serveValidated("/c", [("Cache-Control", "max-age=60")], body: "12345")
        _ = try await h.get("/c")
        _ = try await h.get("/c")
        h.clock.advance(by: 120)
        _ = try await h.get("/c")
        h.origin.stop()
        h.clock.advance(by: 120)
        _ = try await h.get("/c")
        let stats = h.cache.statistics
        #expect(stats.misses == 1 && stats.hits == 1 && stats.revalidated == 1 && stats.stale == 1)
        #expect(stats.bytesServedFromCache == 15)
        #expect(stats.bytesSavedByRevalidation == 5)
        #expect(stats.hitRatio == 0.75)
        #expect(events.all.map(\.outcome) == [.miss, .hit, .revalidated, .stale])
        #expect(events.all.first?.description.contains("GET http://127.0.0.1") == true)
    }
}

final class EventLog: Sendable {
    private let events = Locked<[CacheEvent]>([])
    func append(_ event: CacheEvent) { events.withLock { $0.append(event) } }
    var all: [CacheEvent] { events.withLock { $0 } }
}
