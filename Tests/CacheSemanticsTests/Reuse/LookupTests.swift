import CacheTestSupport
import Testing

@testable import CacheSemantics

@Suite("RFC 9111 §4 Constructing responses from caches: lookup")
struct LookupTests {
    @Test("§4, §4.2: a fresh stored response is served with its current age and remaining ttl")
    func freshResponseIsServed() throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100", "ETag": "\"v1\""])
        let use = try #require(Reuse.served(Reuse.lookup(candidates: [facts], at: 30)))
        #expect(use.candidate == 0)
        #expect(use.currentAge == 30)
        #expect(use.freshnessLifetime == 100)
        #expect(use.timeToLive == 70)
        #expect(use.isStale == false)
        #expect(use.notModified == false)
        #expect(use.reasons == [.fresh(age: 30, lifetime: 100)])
        #expect(use.ageFieldValue == "30")
    }

    @Test("§4.2.3: current_age counts the received Age, the response delay and the resident time")
    func currentAgeIncludesReceivedAgeAndDelay() throws {
        // Age 20 received, 2 s response delay: corrected_initial_age = 22; then 30 s resident.
        let facts = try Reuse.store(["Cache-Control": "max-age=100", "Age": "20"], at: 0, delay: 2)
        let use = try #require(Reuse.served(Reuse.lookup(candidates: [facts], at: 30)))
        #expect(use.currentAge == 52)
        #expect(use.timeToLive == 48)
        #expect(use.reasons == [.fresh(age: 52, lifetime: 100)])
        #expect(use.ageFieldValue == "52")
    }

    @Test("§4, §4.3.1: a stale stored response is forwarded as a validation request with reason stale")
    func staleResponseIsRevalidated() throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100", "ETag": "\"v1\""])
        let forwarding = try #require(Reuse.forwarded(Reuse.lookup(candidates: [facts], at: 130)))
        #expect(forwarding.isValidation)
        #expect(forwarding.reason == .stale)
        #expect(forwarding.candidate == 0)
        #expect(forwarding.validated == [0])
        #expect(forwarding.fields["If-None-Match"] == "\"v1\"")
        #expect(forwarding.reasons == [.stale(by: 30)])
    }

    @Test("§4.2: a response whose age equals its freshness lifetime is already stale")
    func ageEqualToLifetimeIsStale() throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100"])
        let forwarding = try #require(Reuse.forwarded(Reuse.lookup(candidates: [facts], at: 100)))
        #expect(forwarding.reason == .stale)
        #expect(forwarding.reasons == [.stale(by: 0)])
        let justFresh = try #require(Reuse.served(Reuse.lookup(candidates: [facts], at: 99)))
        #expect(justFresh.timeToLive == 1)
    }

    @Test(
        "§4: unsafe and other methods are written through to the origin (reason method)",
        arguments: ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "PURGE"])
    func otherMethodsAreForwarded(method: String) throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100", "ETag": "\"v1\""])
        let forwarding = try #require(Reuse.forwarded(Reuse.lookup(method: method, candidates: [facts], at: 10)))
        #expect(forwarding.reason == .method)
        #expect(forwarding.candidate == nil)
        #expect(forwarding.isValidation == false)
        #expect(forwarding.fields.isEmpty)
        #expect(forwarding.reasons == [.uncacheableMethod(method)])
    }

    @Test("§4, RFC 9110 §9.1: method names are case-sensitive, so 'get' is not answered from the cache")
    func methodIsCaseSensitive() throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100"])
        let forwarding = try #require(Reuse.forwarded(Reuse.lookup(method: "get", candidates: [facts], at: 10)))
        #expect(forwarding.reason == .method)
        #expect(forwarding.reasons == [.uncacheableMethod("get")])
    }

    @Test("§4, RFC 9110 §9.3.2: a HEAD request is answered from a stored GET response")
    func headIsServedFromStoredGet() throws {
        let other = try Reuse.store(["Cache-Control": "max-age=10"], at: -50)
        let facts = try Reuse.store(["Cache-Control": "max-age=100"])
        let use = try #require(Reuse.served(Reuse.lookup(method: "HEAD", candidates: [other, facts], at: 10)))
        #expect(use.candidate == 1)
        #expect(use.reasons == [.fresh(age: 10, lifetime: 100)])
    }

    @Test("§4: with nothing stored for the URI the request is forwarded as a uri-miss")
    func noCandidatesIsURIMiss() {
        let forwarding = Reuse.forwarded(Reuse.lookup(candidates: [], at: 0))
        #expect(forwarding?.reason == .uriMiss)
        #expect(forwarding?.candidate == nil)
        #expect(forwarding?.validated == [])
        #expect(forwarding?.fields.isEmpty == true)
        #expect(forwarding?.reasons == [.noStoredResponse])
    }

    @Test("§4, §5.2.2.4: a stored no-cache response is validated before every reuse, even when fresh")
    func responseNoCacheIsAlwaysRevalidated() throws {
        let facts = try Reuse.store(["Cache-Control": "no-cache, max-age=3600", "ETag": "\"v1\""])
        for offset in [0.0, 10, 3599] {
            let forwarding = try #require(Reuse.forwarded(Reuse.lookup(candidates: [facts], at: offset)))
            #expect(forwarding.isValidation)
            #expect(forwarding.validated == [0])
            #expect(forwarding.fields["If-None-Match"] == "\"v1\"")
            #expect(forwarding.reasons == [.responseNoCache])
        }
    }

    @Test("§5.2.2.4: no-cache is not overridden by the request's max-stale")
    func responseNoCacheIgnoresMaxStale() throws {
        let facts = try Reuse.store(["Cache-Control": "no-cache, max-age=100"])
        let forwarding = try #require(
            Reuse.forwarded(Reuse.lookup(fields: ["Cache-Control": "max-stale"], candidates: [facts], at: 10)))
        #expect(forwarding.isValidation)
        #expect(forwarding.reasons == [.responseNoCache])
    }

    @Test("§5.2.2.4: a qualified no-cache=\"Set-Cookie\" only limits the fields stored; the response is reused")
    func qualifiedNoCacheDoesNotForceValidation() throws {
        let stored = try Reuse.storeResponse([
            "Cache-Control": "no-cache=\"Set-Cookie\", max-age=100", "Set-Cookie": "a=b",
        ])
        #expect(stored.fields.contains("Set-Cookie") == false)
        let use = try #require(Reuse.served(Reuse.lookup(candidates: [stored.facts], at: 10)))
        #expect(use.reasons == [.fresh(age: 10, lifetime: 100)])
    }

    @Test("§4, §5.1: the Age field value is whole seconds of current_age")
    func ageFieldValueIsWholeSeconds() throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100"])
        let use = try #require(Reuse.served(Reuse.lookup(candidates: [facts], at: 42.75)))
        #expect(use.ageFieldValue == "42")
    }

    @Test("§1.2.2, §5.1: the Age field value is capped at 2147483648 (2^31)")
    func ageFieldValueIsCapped() throws {
        // A received Age beyond 2^31 is kept as 2^31; resident time then pushes current_age past it.
        let facts = try Reuse.store(["Cache-Control": "max-age=100", "Age": "99999999999"])
        #expect(facts.ageValue == 2_147_483_648)
        let use = try #require(
            Reuse.served(Reuse.lookup(policy: .returnCacheDataElseLoad, candidates: [facts], at: 1000)))
        #expect(use.currentAge == 2_147_484_648)
        #expect(use.ageFieldValue == "2147483648")
    }

    @Test("§5.1: Age is never negative, even for a current_age below zero")
    func ageFieldValueIsNeverNegative() {
        let use = CachedUse(candidate: 0, currentAge: -5, freshnessLifetime: 10, notModified: false, reasons: [])
        #expect(use.ageFieldValue == "0")
        #expect(use.timeToLive == 15)
    }

    @Test("§4.2.3: a clock that went backwards adds no resident time")
    func clockGoingBackwardsAddsNoAge() throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100"], at: 100)
        let use = try #require(Reuse.served(Reuse.lookup(candidates: [facts], at: 50)))
        #expect(use.currentAge == 0)
        #expect(use.ageFieldValue == "0")
    }
}
