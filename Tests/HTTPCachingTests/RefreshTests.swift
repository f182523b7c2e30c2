import CacheSemantics
import CacheSystem
import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Apps told when a stale-while-revalidate refresh lands (RFC 5861 §3): `updates(for:)`,
/// `CachedResponse.refreshed`, and CachingURLProtocol's notification.
@Suite("Refreshes that land: updates(for:), refreshed (RFC 5861 §3)", .timeLimit(.minutes(2)))
struct RefreshTests {
    static let lifetime = [("Cache-Control", "max-age=60, stale-while-revalidate=600")]

    /// A harness whose origin serves `/u` with `body` and `etag` (none for `nil`), answering a
    /// matching `If-None-Match` with `304` unless it ignores validators; `respond` changes what
    /// it serves from then on.
    final class Origin: Sendable {
        let h: Harness
        private let current: Locked<(etag: String?, body: String, validates: Bool)>

        init(etag: String?, body: String) throws {
            h = try Harness(memoryOnly: true)
            current = Locked((etag, body, true))
            h.origin.route("/u") { [clock = h.clock, current] request in
                let (etag, body, validates) = current.withLock { $0 }
                let date = ("Date", HTTPDate.format(Timestamp(secondsSince1970: clock.now())))
                let headers = [date] + RefreshTests.lifetime + (etag.map { [("ETag", $0)] } ?? [])
                if validates, let etag, request.header("If-None-Match") == etag {
                    return LoopbackOrigin.Response(status: 304, headers: headers, body: "")
                }
                return LoopbackOrigin.Response(headers: headers, body: body)
            }
        }

        func respond(etag: String?, body: String, validates: Bool = true) {
            current.withLock { $0 = (etag, body, validates) }
        }

        /// Stores `/u`, then lets it go stale within stale-while-revalidate.
        func storeAndAge() async throws {
            #expect(try await h.get("/u").outcome == .miss)
            h.clock.advance(by: 120)
        }
    }

    /// What `updates` yields until the task reading it is cancelled.
    static func collect(_ updates: AsyncStream<CachedResponse>) -> Task<[String], Never> {
        Task {
            var texts: [String] = []
            for await update in updates { texts.append(update.text) }
            return texts
        }
    }

    /// Waits (at most 10 s) until `condition` holds.
    static func eventually(_ condition: () throws -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while try !condition() {
            if ContinuousClock.now > deadline { return false }
            try await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    @Test("RFC 5861 §3: a refresh that stores another representation reaches refreshed and every subscriber")
    func newRepresentationIsYielded() async throws {
        let o = try Origin(etag: "\"1\"", body: "v1")
        try await o.storeAndAge()
        let first = Self.collect(try o.h.cache.updates(for: o.h.request("/u")))
        let second = Self.collect(try o.h.cache.updates(for: o.h.request("/u")))
        #expect(try o.h.cache.updateSubscriberCount(for: FetchRequest(fetching: o.h.request("/u"))) == 2)
        o.respond(etag: "\"2\"", body: "v2")

        let stale = try await o.h.get("/u")
        #expect(stale.outcome == .stale && stale.text == "v1")
        let refreshed = try #require(await stale.refreshed)
        #expect(refreshed.text == "v2")
        #expect(refreshed.fields["ETag"] == "\"2\"")
        await o.h.cache.waitForBackgroundWork()
        first.cancel()
        second.cancel()
        #expect(await first.value == ["v2"])
        #expect(await second.value == ["v2"])
        #expect(o.h.origin.count("/u") == 2)
    }

    @Test("RFC 5861 §3: a 304 only freshens: nothing is yielded and refreshed is nil")
    func notModifiedYieldsNothing() async throws {
        let o = try Origin(etag: "\"1\"", body: "v1")
        try await o.storeAndAge()
        let updates = Self.collect(try o.h.cache.updates(for: o.h.request("/u")))
        let stale = try await o.h.get("/u")
        #expect(stale.outcome == .stale)
        #expect(await stale.refreshed == nil)
        await o.h.cache.waitForBackgroundWork()
        #expect(o.h.origin.count("/u") == 2)
        #expect(try await o.h.get("/u").outcome == .hit)
        updates.cancel()
        #expect(await updates.value == [])
    }

    /// Without validators on both sides the bodies are compared byte for byte; with them, the
    /// `ETag`s decide (weak comparison, RFC 9110 §8.8.3.2): a full `200` from an origin that
    /// ignores `If-None-Match`, with a tag that matches, is the same representation.
    @Test(
        "RFC 5861 §3: a full response lands only when it is another representation",
        arguments: [
            (nil, nil, "v1", "v1", false), (nil, nil, "v1", "v2", true), (nil, nil, "v1", "v1 and more", true),
            (nil, nil, "v1 and more", "v1", true), ("W/\"1\"", "\"1\"", "v1", "v1 changed", false),
            ("\"1\"", "\"2\"", "v1", "v1", true),
        ] as [(String?, String?, String, String, Bool)])
    func comparison(etag: String?, newETag: String?, before: String, after: String, lands: Bool) async throws {
        let o = try Origin(etag: etag, body: before)
        try await o.storeAndAge()
        o.respond(etag: newETag, body: after, validates: false)
        let stale = try await o.h.get("/u")
        #expect(stale.text == before)
        #expect(await stale.refreshed?.text == (lands ? after : nil))
        #expect(try await o.h.get("/u").text == after)
    }

    /// A client's own `If-Modified-Since` is answered `304` from the stale response (RFC 9111
    /// §4.3.2), so no body is served: the refresh compares with the one stored.
    @Test(
        "RFC 5861 §3: after a 304 to the client's own validators, the refresh compares with the stored body",
        arguments: [("v1", false), ("v2", true)])
    func comparisonAfterNotModified(after: String, lands: Bool) async throws {
        let h = try Harness(memoryOnly: true)
        let lastModified = HTTPDate.format(Timestamp(secondsSince1970: h.clock.now() - 3600))
        let body = Locked("v1")
        h.origin.route("/m") { [clock = h.clock] _ in
            let date = ("Date", HTTPDate.format(Timestamp(secondsSince1970: clock.now())))
            return LoopbackOrigin.Response(
                headers: [date, ("Last-Modified", lastModified)] + Self.lifetime, body: body.withLock { $0 })
        }
        #expect(try await h.get("/m").outcome == .miss)
        h.clock.advance(by: 120)
        body.withLock { $0 = after }
        let notModified = try await h.get("/m", headers: ["If-Modified-Since": lastModified])
        #expect(notModified.statusCode == 304 && notModified.outcome == .stale)
        #expect(await notModified.refreshed?.text == (lands ? after : nil))
    }

    @Test("RFC 5861 §3: a response served stale while another's refresh runs gets that refresh")
    func staleWhileRefreshRuns() async throws {
        let o = try Origin(etag: "\"1\"", body: "v1")
        try await o.storeAndAge()
        let released = Locked(false)
        o.h.origin.route("/u") { [clock = o.h.clock] _ in
            let deadline = Date().addingTimeInterval(10)
            while !released.withLock({ $0 }) && Date() < deadline { usleep(5_000) }
            return LoopbackOrigin.Response(
                headers: [("Date", HTTPDate.format(Timestamp(secondsSince1970: clock.now())))] + Self.lifetime
                    + [("ETag", "\"2\"")], body: "v2")
        }
        let first = try await o.h.get("/u")
        let second = try await o.h.get("/u")
        #expect(first.outcome == .stale && second.outcome == .stale)
        released.withLock { $0 = true }
        #expect(await first.refreshed?.text == "v2")
        #expect(await second.refreshed?.text == "v2")
        #expect(o.h.origin.count("/u") == 2)
    }

    @Test("A fresh hit and a miss have no refresh")
    func noRefreshWithoutStaleness() async throws {
        let o = try Origin(etag: "\"1\"", body: "v1")
        let miss = try await o.h.get("/u")
        let hit = try await o.h.get("/u")
        #expect(await miss.refreshed == nil)
        #expect(await hit.refreshed == nil)
    }

    @Test("Cancelling the task that reads updates(for:) ends the sequence and removes the subscriber")
    func cancellationRemovesTheSubscriber() async throws {
        let o = try Origin(etag: "\"1\"", body: "v1")
        try await o.storeAndAge()
        let request = try FetchRequest(fetching: o.h.request("/u"))
        let reader = Self.collect(try o.h.cache.updates(for: request))
        #expect(try o.h.cache.updateSubscriberCount(for: request) == 1)
        reader.cancel()
        #expect(await reader.value == [])
        #expect(try await Self.eventually { try o.h.cache.updateSubscriberCount(for: request) == 0 })
        // A refresh that lands with no one subscribed stores all the same.
        o.respond(etag: "\"2\"", body: "v2")
        #expect(try await o.h.get("/u").text == "v1")
        await o.h.cache.waitForBackgroundWork()
        #expect(try await o.h.get("/u").text == "v2")
    }

    @Test("A subscriber that never reads holds the newest update only")
    func unreadSubscriberKeepsTheNewest() async throws {
        let o = try Origin(etag: "\"1\"", body: "v1")
        try await o.storeAndAge()
        let updates = try o.h.cache.updates(for: o.h.request("/u"))
        for version in 2...4 {
            o.respond(etag: "\"\(version)\"", body: "v\(version)")
            _ = try await o.h.get("/u")
            await o.h.cache.waitForBackgroundWork()
            o.h.clock.advance(by: 120)
        }
        var iterator = updates.makeAsyncIterator()
        #expect(await iterator.next()?.text == "v4")
    }

    @Test("A request the cache does not store gets a sequence that ends at once")
    func uncachedRequestEnds() async throws {
        let h = try Harness(memoryOnly: true) { $0.keyForRequest = { _ in nil } }
        var iterator = try h.cache.updates(for: h.request("/u")).makeAsyncIterator()
        #expect(await iterator.next() == nil)
    }
}

extension URLProtocolTests {
    @Test("CachingURLProtocol's cache posts didRefreshNotification when a refresh lands (RFC 5861 §3)")
    func refreshNotification() async throws {
        let o = try RefreshTests.Origin(etag: "\"1\"", body: "v1")
        let session = session(o.h)
        let posted = Locked<[(URL?, String?, Bool)]>([])
        let observer = NotificationCenter.default.addObserver(
            forName: HTTPCache.didRefreshNotification, object: nil, queue: nil
        ) { [cache = o.h.cache] notification in
            let response = notification.userInfo?[HTTPCache.refreshedResponseKey] as? CachedResponse
            posted.withLock {
                $0.append(
                    (
                        notification.userInfo?[HTTPCache.refreshedURLKey] as? URL, response?.text,
                        notification.object as? HTTPCache === cache
                    ))
            }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        #expect(try await fetch(session, o.h.request("/u")).0 == "v1")
        o.h.clock.advance(by: 120)
        #expect(try await fetch(session, o.h.request("/u")).0 == "v1")
        await o.h.cache.waitForBackgroundWork()
        #expect(posted.withLock { $0.isEmpty })  // a 304: nothing landed
        o.h.clock.advance(by: 120)
        o.respond(etag: "\"2\"", body: "v2")
        #expect(try await fetch(session, o.h.request("/u")).0 == "v1")
        await o.h.cache.waitForBackgroundWork()
        let notes = posted.withLock { $0 }
        #expect(notes.count == 1)
        #expect(notes.first?.0 == o.h.origin.url("/u"))
        #expect(notes.first?.1 == "v2")
        #expect(notes.first?.2 == true)
    }
}
