import CacheTestSupport
import Testing

@testable import CacheSemantics

@Suite("RFC 9111 §4.2.4, RFC 5861, RFC 8246: serving stale responses")
struct StaleTests {
    static let maxStale: HeaderFields = ["Cache-Control": "max-stale"]

    // MARK: Directives that forbid stale reuse (§4.2.4, §5.2.2)

    @Test("§4.2.4, §5.2.2.2: must-revalidate forbids serving stale with max-stale, in any cache")
    func mustRevalidateForbidsMaxStale() throws {
        for engine in [Reuse.privateEngine, Reuse.sharedEngine] {
            let facts = try Reuse.store(
                ["Cache-Control": "max-age=100, must-revalidate", "ETag": "\"v1\""], engine: engine)
            let decision = Reuse.lookup(fields: Self.maxStale, candidates: [facts], at: 130, engine: engine)
            let forwarding = try #require(Reuse.forwarded(decision))
            #expect(forwarding.reason == .stale)
            #expect(forwarding.isValidation)
            #expect(forwarding.reasons == [.stale(by: 30), .mustRevalidate])
        }
    }

    @Test("§4.2.4, §5.2.2.10: s-maxage forbids a shared cache serving stale with max-stale")
    func sMaxAgeForbidsMaxStaleInSharedCache() throws {
        let engine = Reuse.sharedEngine
        let facts = try Reuse.store(["Cache-Control": "s-maxage=100"], engine: engine)
        let decision = Reuse.lookup(fields: Self.maxStale, candidates: [facts], at: 130, engine: engine)
        let forwarding = try #require(Reuse.forwarded(decision))
        #expect(forwarding.reason == .stale)
        #expect(forwarding.reasons == [.stale(by: 30), .sMaxAgeRevalidate])
    }

    @Test("§4.2.4, §5.2.2.8: proxy-revalidate forbids a shared cache serving stale with max-stale")
    func proxyRevalidateForbidsMaxStaleInSharedCache() throws {
        let engine = Reuse.sharedEngine
        let facts = try Reuse.store(["Cache-Control": "max-age=100, proxy-revalidate"], engine: engine)
        let decision = Reuse.lookup(fields: Self.maxStale, candidates: [facts], at: 130, engine: engine)
        let forwarding = try #require(Reuse.forwarded(decision))
        #expect(forwarding.reason == .stale)
        #expect(forwarding.reasons == [.stale(by: 30), .proxyRevalidate])
    }

    @Test(
        "§5.2.2.8, §5.2.2.10: a private cache ignores s-maxage and proxy-revalidate and serves stale with max-stale",
        arguments: ["max-age=100, s-maxage=100", "max-age=100, proxy-revalidate"])
    func privateCacheServesStaleDespiteSharedDirectives(cacheControl: String) throws {
        let facts = try Reuse.store(["Cache-Control": cacheControl])
        let use = try #require(Reuse.served(Reuse.lookup(fields: Self.maxStale, candidates: [facts], at: 130)))
        #expect(use.isStale)
        #expect(use.reasons == [.maxStaleAllows(by: 30)])
    }

    @Test("§4.2.4: a stale response without permission to serve it stale is validated")
    func staleWithoutPermissionIsValidated() throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100"])
        let forwarding = try #require(Reuse.forwarded(Reuse.lookup(candidates: [facts], at: 101)))
        #expect(forwarding.reason == .stale)
        #expect(forwarding.reasons == [.stale(by: 1)])
    }

    // MARK: stale-while-revalidate (RFC 5861 §3)

    @Test(
        "RFC 5861 §3: within stale-while-revalidate the stale response is served and validated in the background",
        arguments: [1.0, 30.0, 60.0])
    func staleWhileRevalidateWithinWindow(staleness: Double) throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100, stale-while-revalidate=60", "ETag": "\"v1\""])
        let decision = Reuse.lookup(candidates: [facts], at: 100 + staleness)
        let (use, revalidation) = try #require(Reuse.staleWhileRevalidate(decision))
        #expect(use.candidate == 0)
        #expect(use.isStale)
        #expect(use.currentAge == 100 + staleness)
        #expect(use.reasons == [.staleWhileRevalidate(by: staleness, allowance: 60)])
        #expect(revalidation.reason == .stale)
        #expect(revalidation.isValidation)
        #expect(revalidation.validated == [0])
        #expect(revalidation.fields["If-None-Match"] == "\"v1\"")
        #expect(decision.reasons == use.reasons)
    }

    @Test("RFC 5861 §3: beyond stale-while-revalidate the response is validated before use")
    func staleWhileRevalidateBeyondWindow() throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100, stale-while-revalidate=60", "ETag": "\"v1\""])
        let forwarding = try #require(Reuse.forwarded(Reuse.lookup(candidates: [facts], at: 161)))
        #expect(forwarding.reason == .stale)
        #expect(forwarding.isValidation)
        #expect(forwarding.reasons == [.stale(by: 61)])
    }

    @Test("§4.2.4, RFC 5861 §3: must-revalidate overrides stale-while-revalidate")
    func mustRevalidateOverridesStaleWhileRevalidate() throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100, must-revalidate, stale-while-revalidate=60"])
        let forwarding = try #require(Reuse.forwarded(Reuse.lookup(candidates: [facts], at: 110)))
        #expect(forwarding.reasons == [.stale(by: 10), .mustRevalidate])
    }

    @Test("RFC 5861 §3: a fresh response with stale-while-revalidate is simply served")
    func staleWhileRevalidateOnFresh() throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100, stale-while-revalidate=60"])
        let use = try #require(Reuse.served(Reuse.lookup(candidates: [facts], at: 50)))
        #expect(use.reasons == [.fresh(age: 50, lifetime: 100)])
    }

    // MARK: fallback after a failed forward (§4.2.4, §4.3.3, RFC 5861 §4)

    static func fallback(
        _ failure: OriginFailure, facts: StoredResponseFacts, at offset: Double, request: HeaderFields = [:],
        policy: CachePolicy = .useProtocolCachePolicy, engine: CacheEngine = Reuse.privateEngine
    ) -> FallbackDecision {
        engine.fallback(
            after: failure, request: CacheRequest(RequestHead(uri: Reuse.uri, fields: request), policy: policy),
            candidate: (index: 0, facts: facts), now: Reuse.time(offset))
    }

    @Test(
        "the reload policies promise a load from the origin: after a failure the stored response is never served",
        arguments: [CachePolicy.reloadIgnoringLocalCacheData, .reloadIgnoringLocalAndRemoteCacheData])
    func reloadPoliciesPassFailuresOn(policy: CachePolicy) throws {
        // Fresh, or stale within stale-if-error: either would be served under the default policy.
        let facts = try Reuse.store(["Cache-Control": "max-age=100, stale-if-error=600"])
        for failure in [OriginFailure.unreachable, .serverError(status: 503)] {
            for offset in [10.0, 150] {
                #expect(
                    Self.fallback(failure, facts: facts, at: offset, policy: policy) == .passThrough([.policy(policy)]),
                    "\(failure) at \(offset) s")
            }
        }
        #expect(Reuse.served(Self.fallback(.unreachable, facts: facts, at: 150)) != nil)
    }

    @Test("§4.2.4: a disconnected cache serves the stale response when the origin is unreachable")
    func unreachableServesStale() throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100"])
        let use = try #require(Reuse.served(Self.fallback(.unreachable, facts: facts, at: 150)))
        #expect(use.candidate == 0)
        #expect(use.isStale)
        #expect(use.reasons == [.disconnected(by: 50)])
    }

    @Test("§4.2.4, §5.2.2.2: must-revalidate answers 504 when the origin is unreachable")
    func mustRevalidateUnreachableIsGatewayTimeout() throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100, must-revalidate"])
        #expect(
            Self.fallback(.unreachable, facts: facts, at: 150) == .gatewayTimeout([.stale(by: 50), .mustRevalidate]))
        #expect(
            Self.fallback(.serverError(status: 503), facts: facts, at: 150)
                == .passThrough([.stale(by: 50), .mustRevalidate]))
    }

    @Test("§4.2.4, §5.2.2.8: proxy-revalidate answers 504 in a shared cache but not in a private one")
    func proxyRevalidateUnreachable() throws {
        let fields: HeaderFields = ["Cache-Control": "max-age=100, proxy-revalidate"]
        let shared = try Reuse.store(fields, engine: Reuse.sharedEngine)
        #expect(
            Self.fallback(.unreachable, facts: shared, at: 150, engine: Reuse.sharedEngine)
                == .gatewayTimeout([.stale(by: 50), .proxyRevalidate]))
        let privateFacts = try Reuse.store(fields)
        let use = try #require(Reuse.served(Self.fallback(.unreachable, facts: privateFacts, at: 150)))
        #expect(use.reasons == [.disconnected(by: 50)])
    }

    @Test("§4.2.4, §5.2.2.4: a no-cache response is never served without validation, even when disconnected")
    func noCacheUnreachableIsGatewayTimeout() throws {
        let facts = try Reuse.store(["Cache-Control": "no-cache, max-age=100"])
        #expect(Self.fallback(.unreachable, facts: facts, at: 10) == .gatewayTimeout([.responseNoCache]))
        #expect(Self.fallback(.serverError(status: 500), facts: facts, at: 10) == .passThrough([.responseNoCache]))
    }

    @Test("§4.4: an invalidated response needs validation, so an unreachable origin gives 504")
    func invalidatedUnreachableIsGatewayTimeout() throws {
        var facts = try Reuse.store(["Cache-Control": "max-age=100"])
        facts.flags.insert(.invalidated)
        #expect(Self.fallback(.unreachable, facts: facts, at: 150) == .gatewayTimeout([.invalidated]))
        #expect(Self.fallback(.serverError(status: 503), facts: facts, at: 150) == .passThrough([.invalidated]))
    }

    @Test(
        "RFC 5861 §4: within the response's stale-if-error a 500, 502, 503 or 504 serves the stale response",
        arguments: [500, 502, 503, 504])
    func staleIfErrorServesAfterServerError(status: Int) throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100, stale-if-error=60"])
        let use = try #require(Reuse.served(Self.fallback(.serverError(status: status), facts: facts, at: 130)))
        #expect(use.isStale)
        #expect(use.reasons == [.staleIfError(by: 30, allowance: 60)])
    }

    @Test("RFC 5861 §4: stale-if-error also covers an unreachable origin")
    func staleIfErrorServesWhenUnreachable() throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100, stale-if-error=60"])
        let use = try #require(Reuse.served(Self.fallback(.unreachable, facts: facts, at: 130)))
        #expect(use.reasons == [.staleIfError(by: 30, allowance: 60)])
    }

    @Test("RFC 5861 §4: the request's stale-if-error allows serving stale after a 502")
    func requestStaleIfErrorServes() throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100"])
        let decision = Self.fallback(
            .serverError(status: 502), facts: facts, at: 130, request: ["Cache-Control": "stale-if-error=60"])
        let use = try #require(Reuse.served(decision))
        #expect(use.reasons == [.staleIfError(by: 30, allowance: 60)])
    }

    @Test("RFC 5861 §4: a 5xx other than 500, 502, 503, 504 is passed on", arguments: [501, 505])
    func staleIfErrorIgnoresOtherStatuses(status: Int) throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100, stale-if-error=60"])
        #expect(
            Self.fallback(.serverError(status: status), facts: facts, at: 130)
                == .passThrough([.stale(by: 30), .staleNotAllowed]))
    }

    @Test("RFC 5861 §4: beyond the stale-if-error window the error is passed on")
    func staleIfErrorBeyondWindowPassesThrough() throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100, stale-if-error=60"])
        #expect(
            Self.fallback(.serverError(status: 503), facts: facts, at: 161)
                == .passThrough([.stale(by: 61), .staleNotAllowed]))
    }

    @Test("§4.2.4, §4.3.3: without stale-if-error a 500 is passed on, not answered with the stale response")
    func serverErrorWithoutStaleIfErrorPassesThrough() throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100"])
        #expect(
            Self.fallback(.serverError(status: 500), facts: facts, at: 150)
                == .passThrough([.stale(by: 50), .staleNotAllowed]))
    }

    @Test("§4.2.4, RFC 5861 §4: must-revalidate overrides stale-if-error")
    func mustRevalidateOverridesStaleIfError() throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100, must-revalidate, stale-if-error=60"])
        #expect(
            Self.fallback(.serverError(status: 503), facts: facts, at: 130)
                == .passThrough([.stale(by: 30), .mustRevalidate]))
        #expect(
            Self.fallback(.unreachable, facts: facts, at: 130) == .gatewayTimeout([.stale(by: 30), .mustRevalidate]))
    }

    // MARK: immutable (RFC 8246)

    @Test(
        "RFC 8246 §2: a private cache serves a fresh immutable response despite the request's reload directives",
        arguments: ["no-cache", "max-age=0"])
    func immutableIgnoresReloadWhenFresh(requestCacheControl: String) throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100, immutable"])
        let decision = Reuse.lookup(fields: ["Cache-Control": requestCacheControl], candidates: [facts], at: 10)
        let use = try #require(Reuse.served(decision))
        #expect(use.reasons == [.fresh(age: 10, lifetime: 100), .immutable])
    }

    @Test(
        "RFC 8246 §2.1: a shared cache answers a reload (request max-age) from a fresh immutable response but validates it on request no-cache"
    )
    func immutableInSharedCache() throws {
        let engine = Reuse.sharedEngine
        let facts = try Reuse.store(["Cache-Control": "max-age=100, immutable"], engine: engine)
        let noCache = Reuse.lookup(fields: ["Cache-Control": "no-cache"], candidates: [facts], at: 10, engine: engine)
        let forwarding = try #require(Reuse.forwarded(noCache))
        #expect(forwarding.reason == .request)
        #expect(forwarding.reasons == [.requestNoCache])
        let maxAgeZero = Reuse.lookup(
            fields: ["Cache-Control": "max-age=0"], candidates: [facts], at: 10, engine: engine)
        let use = try #require(Reuse.served(maxAgeZero))
        #expect(use.reasons == [.fresh(age: 10, lifetime: 100), .immutable])
        // Stale, it is validated like any other (RFC 8246 §2 applies during the freshness lifetime).
        let stale = Reuse.lookup(fields: ["Cache-Control": "max-age=0"], candidates: [facts], at: 150, engine: engine)
        #expect(Reuse.forwarded(stale)?.reasons == [.requestMaxAge(age: 150, maxAge: 0)])
    }

    @Test("RFC 8246 §2: once stale, an immutable response is validated like any other")
    func immutableNotAppliedWhenStale() throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100, immutable"])
        let plain = try #require(Reuse.forwarded(Reuse.lookup(candidates: [facts], at: 150)))
        #expect(plain.reasons == [.stale(by: 50)])
        let noCache = try #require(
            Reuse.forwarded(Reuse.lookup(fields: ["Cache-Control": "no-cache"], candidates: [facts], at: 150)))
        #expect(noCache.reason == .stale)
        #expect(noCache.reasons == [.requestNoCache])
        let maxAgeZero = try #require(
            Reuse.forwarded(Reuse.lookup(fields: ["Cache-Control": "max-age=0"], candidates: [facts], at: 150)))
        #expect(maxAgeZero.reasons == [.requestMaxAge(age: 150, maxAge: 0)])
    }

    @Test("RFC 8246 §2: a fresh immutable response without reload directives is served with reason fresh only")
    func immutableWithoutReloadIsPlainFresh() throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100, immutable"])
        let use = try #require(Reuse.served(Reuse.lookup(candidates: [facts], at: 10)))
        #expect(use.reasons == [.fresh(age: 10, lifetime: 100)])
    }
}
