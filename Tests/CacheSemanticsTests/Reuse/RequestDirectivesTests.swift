import CacheTestSupport
import Testing

@testable import CacheSemantics

@Suite("RFC 9111 §5.2.1 Request cache directives")
struct RequestDirectivesTests {
    /// A response fresh for 100 s, with an entity tag, stored at the epoch.
    static func stored() throws -> StoredResponseFacts {
        try Reuse.store(["Cache-Control": "max-age=100", "ETag": "\"v1\""])
    }

    // MARK: max-age (§5.2.1.1)

    @Test("§5.2.1.1: max-age below the response's age makes the cache validate it (reason request)")
    func maxAgeExceededRevalidates() throws {
        let decision = Reuse.lookup(fields: ["Cache-Control": "max-age=20"], candidates: [try Self.stored()], at: 30)
        let forwarding = try #require(Reuse.forwarded(decision))
        #expect(forwarding.reason == .request)
        #expect(forwarding.isValidation)
        #expect(forwarding.validated == [0])
        #expect(forwarding.fields["If-None-Match"] == "\"v1\"")
        #expect(forwarding.reasons == [.requestMaxAge(age: 30, maxAge: 20)])
    }

    @Test("§5.2.1.1: a response whose age is at most max-age is served", arguments: [10.0, 20.0])
    func maxAgeWithinServes(age: Double) throws {
        let decision = Reuse.lookup(fields: ["Cache-Control": "max-age=20"], candidates: [try Self.stored()], at: age)
        let use = try #require(Reuse.served(decision))
        #expect(use.reasons == [.fresh(age: age, lifetime: 100)])
    }

    @Test("§5.2.1.1: max-age=0 on a fresh response forces validation (reason request)")
    func maxAgeZeroRevalidatesFresh() throws {
        let decision = Reuse.lookup(fields: ["Cache-Control": "max-age=0"], candidates: [try Self.stored()], at: 10)
        let forwarding = try #require(Reuse.forwarded(decision))
        #expect(forwarding.reason == .request)
        #expect(forwarding.isValidation)
        #expect(forwarding.reasons == [.requestMaxAge(age: 10, maxAge: 0)])
    }

    @Test("§5.2.1.1: without max-stale a max-age above the age still does not accept a stale response")
    func maxAgeDoesNotAcceptStale() throws {
        let decision = Reuse.lookup(fields: ["Cache-Control": "max-age=500"], candidates: [try Self.stored()], at: 150)
        let forwarding = try #require(Reuse.forwarded(decision))
        #expect(forwarding.reason == .stale)
        #expect(forwarding.reasons == [.stale(by: 50)])
    }

    @Test("§5.2.1.1, §5.2.1.2: max-age together with max-stale accepts a stale response within both")
    func maxAgeWithMaxStale() throws {
        let candidates = [try Self.stored()]
        let fields: HeaderFields = ["Cache-Control": "max-age=200, max-stale=100"]
        let use = try #require(Reuse.served(Reuse.lookup(fields: fields, candidates: candidates, at: 150)))
        #expect(use.reasons == [.maxStaleAllows(by: 50)])
        // Older than max-age: validated, although max-stale would allow it.
        let forwarding = try #require(Reuse.forwarded(Reuse.lookup(fields: fields, candidates: candidates, at: 250)))
        #expect(forwarding.reason == .stale)
        #expect(forwarding.reasons == [.requestMaxAge(age: 250, maxAge: 200)])
    }

    // MARK: max-stale (§5.2.1.2)

    @Test("§5.2.1.2: max-stale=N serves a response stale by at most N seconds", arguments: [30.0, 60.0])
    func maxStaleWithinServes(staleness: Double) throws {
        let decision = Reuse.lookup(
            fields: ["Cache-Control": "max-stale=60"], candidates: [try Self.stored()], at: 100 + staleness)
        let use = try #require(Reuse.served(decision))
        #expect(use.isStale)
        #expect(use.timeToLive == -staleness)
        #expect(use.reasons == [.maxStaleAllows(by: staleness)])
    }

    @Test("§5.2.1.2: max-stale=N revalidates a response stale by more than N seconds")
    func maxStaleBeyondRevalidates() throws {
        let decision = Reuse.lookup(fields: ["Cache-Control": "max-stale=60"], candidates: [try Self.stored()], at: 161)
        let forwarding = try #require(Reuse.forwarded(decision))
        #expect(forwarding.reason == .stale)
        #expect(forwarding.isValidation)
        #expect(forwarding.reasons == [.stale(by: 61)])
    }

    @Test("§5.2.1.2: max-stale without a value accepts any staleness")
    func maxStaleWithoutValueServesAnyStaleness() throws {
        let decision = Reuse.lookup(
            fields: ["Cache-Control": "max-stale"], candidates: [try Self.stored()], at: 1_000_100)
        let use = try #require(Reuse.served(decision))
        #expect(use.reasons == [.maxStaleAllows(by: 1_000_000)])
    }

    @Test("§5.2.1.2: max-stale does not change how a fresh response is served")
    func maxStaleOnFreshServesFresh() throws {
        let decision = Reuse.lookup(fields: ["Cache-Control": "max-stale=60"], candidates: [try Self.stored()], at: 10)
        let use = try #require(Reuse.served(decision))
        #expect(use.reasons == [.fresh(age: 10, lifetime: 100)])
    }

    // MARK: min-fresh (§5.2.1.3)

    @Test("§5.2.1.3: min-fresh above the remaining freshness forces validation (reason request)")
    func minFreshNotMetRevalidates() throws {
        let decision = Reuse.lookup(fields: ["Cache-Control": "min-fresh=30"], candidates: [try Self.stored()], at: 80)
        let forwarding = try #require(Reuse.forwarded(decision))
        #expect(forwarding.reason == .request)
        #expect(forwarding.isValidation)
        #expect(forwarding.reasons == [.requestMinFresh(remaining: 20, minFresh: 30)])
    }

    @Test("§5.2.1.3: a response fresh for at least min-fresh more seconds is served", arguments: [60.0, 70.0])
    func minFreshMetServes(age: Double) throws {
        let decision = Reuse.lookup(fields: ["Cache-Control": "min-fresh=30"], candidates: [try Self.stored()], at: age)
        let use = try #require(Reuse.served(decision))
        #expect(use.reasons == [.fresh(age: age, lifetime: 100)])
    }

    // MARK: no-cache (§5.2.1.4) and Pragma (§5.4)

    @Test("§5.2.1.4: request no-cache validates a fresh stored response (reason request)")
    func requestNoCacheRevalidates() throws {
        let decision = Reuse.lookup(fields: ["Cache-Control": "no-cache"], candidates: [try Self.stored()], at: 10)
        let forwarding = try #require(Reuse.forwarded(decision))
        #expect(forwarding.reason == .request)
        #expect(forwarding.isValidation)
        #expect(forwarding.candidate == 0)
        #expect(forwarding.fields["If-None-Match"] == "\"v1\"")
        #expect(forwarding.reasons == [.requestNoCache])
    }

    @Test("§5.2.1.4, RFC 9211 §2.2: request no-cache on a stale response is forwarded with reason stale")
    func requestNoCacheOnStaleIsStale() throws {
        let decision = Reuse.lookup(fields: ["Cache-Control": "no-cache"], candidates: [try Self.stored()], at: 150)
        let forwarding = try #require(Reuse.forwarded(decision))
        #expect(forwarding.reason == .stale)
        #expect(forwarding.isValidation)
        #expect(forwarding.reasons == [.requestNoCache])
    }

    @Test("§5.4: Pragma: no-cache without Cache-Control is treated as no-cache")
    func pragmaNoCacheWithoutCacheControl() throws {
        let decision = Reuse.lookup(fields: ["Pragma": "no-cache"], candidates: [try Self.stored()], at: 10)
        let forwarding = try #require(Reuse.forwarded(decision))
        #expect(forwarding.reason == .request)
        #expect(forwarding.isValidation)
        #expect(forwarding.reasons == [.requestNoCache])
    }

    @Test("§5.4: Pragma is ignored when the request also has Cache-Control")
    func pragmaIgnoredWithCacheControl() throws {
        let decision = Reuse.lookup(
            fields: ["Pragma": "no-cache", "Cache-Control": "max-age=1000"], candidates: [try Self.stored()], at: 10)
        let use = try #require(Reuse.served(decision))
        #expect(use.reasons == [.fresh(age: 10, lifetime: 100)])
    }

    // MARK: only-if-cached (§5.2.1.7)

    @Test("§5.2.1.7: only-if-cached with nothing stored answers 504")
    func onlyIfCachedMissIsGatewayTimeout() throws {
        let decision = Reuse.lookup(fields: ["Cache-Control": "only-if-cached"], candidates: [], at: 10)
        #expect(Reuse.gatewayTimeout(decision) == [.noStoredResponse, .onlyIfCached])
    }

    @Test("§5.2.1.7, §4.1: only-if-cached with no matching variant answers 504")
    func onlyIfCachedVaryMissIsGatewayTimeout() throws {
        let facts = try Reuse.store(
            ["Cache-Control": "max-age=100", "Vary": "Accept-Encoding"], request: ["Accept-Encoding": "gzip"])
        let decision = Reuse.lookup(
            fields: ["Cache-Control": "only-if-cached", "Accept-Encoding": "br"], candidates: [facts], at: 10)
        #expect(Reuse.gatewayTimeout(decision) == [.noVariantMatches, .onlyIfCached])
    }

    @Test("§5.2.1.7, §4.2.4: only-if-cached with a stale response that may not be served stale answers 504")
    func onlyIfCachedStaleIsGatewayTimeout() throws {
        let decision = Reuse.lookup(
            fields: ["Cache-Control": "only-if-cached"], candidates: [try Self.stored()], at: 150)
        #expect(Reuse.gatewayTimeout(decision) == [.stale(by: 50), .onlyIfCached])
    }

    @Test("§5.2.1.7: only-if-cached is answered from a fresh stored response")
    func onlyIfCachedFreshIsServed() throws {
        let decision = Reuse.lookup(
            fields: ["Cache-Control": "only-if-cached"], candidates: [try Self.stored()], at: 10)
        let use = try #require(Reuse.served(decision))
        #expect(use.reasons == [.fresh(age: 10, lifetime: 100)])
    }

    @Test("§5.2.1.7, §5.2.1.2: only-if-cached with max-stale serves a stale response")
    func onlyIfCachedWithMaxStaleServesStale() throws {
        let decision = Reuse.lookup(
            fields: ["Cache-Control": "only-if-cached, max-stale"], candidates: [try Self.stored()], at: 150)
        let use = try #require(Reuse.served(decision))
        #expect(use.reasons == [.maxStaleAllows(by: 50)])
    }

    @Test("§5.2.1.7, §5.2.1.4: only-if-cached with no-cache cannot validate, so it answers 504")
    func onlyIfCachedWithNoCacheIsGatewayTimeout() throws {
        let decision = Reuse.lookup(
            fields: ["Cache-Control": "only-if-cached, no-cache"], candidates: [try Self.stored()], at: 10)
        #expect(Reuse.gatewayTimeout(decision) == [.requestNoCache, .onlyIfCached])
    }

    // MARK: no-store (§5.2.1.5)

    @Test("§5.2.1.5: a response to a request with no-store is not stored")
    func requestNoStoreIsNotStored() {
        let decision = Reuse.privateEngine.storageDecision(
            for: RequestHead(uri: Reuse.uri, fields: ["Cache-Control": "no-store"]),
            response: ResponseHead(status: 200, fields: ["Cache-Control": "max-age=100", "Date": Fixtures.httpDate()]),
            requestTime: Fixtures.epoch, responseTime: Fixtures.epoch)
        #expect(decision == .doNotStore([.requestNoStore]))
    }

    @Test("§5.2.1.5: request no-store does not apply to an already stored response, which is reused")
    func requestNoStoreStillReusesStored() throws {
        let decision = Reuse.lookup(fields: ["Cache-Control": "no-store"], candidates: [try Self.stored()], at: 10)
        let use = try #require(Reuse.served(decision))
        #expect(use.reasons == [.fresh(age: 10, lifetime: 100)])
    }
}
