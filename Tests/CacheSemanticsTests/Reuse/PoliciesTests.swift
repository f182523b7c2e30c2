import CacheTestSupport
import Testing

@testable import CacheSemantics

@Suite("RFC 9111 §4 and §6: the six cache policies")
struct PoliciesTests {
    /// What is stored when the request is looked up.
    enum State: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// A response fresh for 100 s, looked up at age 10.
        case fresh
        /// The same response at age 150: stale by 50, and must-revalidate forbids serving it stale.
        case stale
        /// Nothing stored.
        case miss

        var testDescription: String { rawValue }
        var age: Double { self == .fresh ? 10 : 150 }
    }

    static let noCacheFields: HeaderFields = ["Cache-Control": "no-cache", "Pragma": "no-cache"]

    static func candidates(_ state: State) throws -> [StoredResponseFacts] {
        state == .miss
            ? [] : [try Reuse.store(["Cache-Control": "max-age=100, must-revalidate", "ETag": "\"v1\""])]
    }

    static func use(_ state: State, _ reasons: [Reason]) -> LookupDecision {
        .serve(
            CachedUse(candidate: 0, currentAge: state.age, freshnessLifetime: 100, notModified: false, reasons: reasons)
        )
    }

    static func validation(_ reason: CacheStatus.ForwardReason, _ reasons: [Reason]) -> LookupDecision {
        .forward(
            Forwarding(
                reason: reason, candidate: 0, validated: [0], fields: ["If-None-Match": "\"v1\""], reasons: reasons))
    }

    /// The whole table: what each policy decides for each state.
    static func expected(_ policy: CachePolicy, _ state: State) -> LookupDecision {
        let uriMiss = LookupDecision.forward(Forwarding(reason: .uriMiss, reasons: [.noStoredResponse]))
        switch (policy, state) {
        case (.useProtocolCachePolicy, .fresh):
            return use(state, [.fresh(age: 10, lifetime: 100)])
        case (.useProtocolCachePolicy, .stale):
            return validation(.stale, [.stale(by: 50), .mustRevalidate])
        case (.reloadIgnoringLocalCacheData, .fresh), (.reloadIgnoringLocalCacheData, .stale):
            return .forward(Forwarding(reason: .request, candidate: 0, reasons: [.policy(policy)]))
        case (.reloadIgnoringLocalAndRemoteCacheData, .fresh), (.reloadIgnoringLocalAndRemoteCacheData, .stale):
            return .forward(
                Forwarding(reason: .request, candidate: 0, fields: noCacheFields, reasons: [.policy(policy)]))
        case (.reloadIgnoringLocalAndRemoteCacheData, .miss):
            return .forward(Forwarding(reason: .uriMiss, fields: noCacheFields, reasons: [.noStoredResponse]))
        case (.returnCacheDataElseLoad, .fresh), (.returnCacheDataElseLoad, .stale),
            (.returnCacheDataDontLoad, .fresh), (.returnCacheDataDontLoad, .stale):
            return use(state, [.policyServesAnyStoredResponse(policy)])
        case (.returnCacheDataDontLoad, .miss):
            return .gatewayTimeout([.noStoredResponse, .policy(policy)])
        case (.reloadRevalidatingCacheData, .fresh), (.reloadRevalidatingCacheData, .stale):
            return validation(.request, [.policy(policy)])
        case (.useProtocolCachePolicy, .miss), (.reloadIgnoringLocalCacheData, .miss),
            (.returnCacheDataElseLoad, .miss), (.reloadRevalidatingCacheData, .miss):
            return uriMiss
        }
    }

    @Test(
        "§4, §5.2.1: each cache policy decides as its table row says for a fresh, stale or missing response",
        arguments: CachePolicy.allCases, State.allCases)
    func policyTable(policy: CachePolicy, state: State) throws {
        let decision = Reuse.lookup(policy: policy, candidates: try Self.candidates(state), at: state.age)
        #expect(decision == Self.expected(policy, state))
    }

    @Test("§4: useProtocolCachePolicy serves fresh, validates stale and forwards a miss")
    func useProtocolCachePolicy() throws {
        let fresh = try #require(Reuse.served(Reuse.lookup(candidates: try Self.candidates(.fresh), at: 10)))
        #expect(fresh.reasons == [.fresh(age: 10, lifetime: 100)])
        let stale = try #require(Reuse.forwarded(Reuse.lookup(candidates: try Self.candidates(.stale), at: 150)))
        #expect(stale.isValidation)
        #expect(stale.reason == .stale)
        #expect(Reuse.forwarded(Reuse.lookup(candidates: [], at: 0))?.reason == .uriMiss)
    }

    @Test("§4: reloadIgnoringLocalCacheData forwards without preconditions even when fresh (reason request)")
    func reloadIgnoringLocalCacheData() throws {
        let decision = Reuse.lookup(
            policy: .reloadIgnoringLocalCacheData, candidates: try Self.candidates(.fresh), at: 10)
        let forwarding = try #require(Reuse.forwarded(decision))
        #expect(forwarding.reason == .request)
        #expect(forwarding.isValidation == false)
        #expect(forwarding.fields.isEmpty)
        #expect(forwarding.fields["If-None-Match"] == nil)
        #expect(forwarding.reasons == [.policy(.reloadIgnoringLocalCacheData)])
    }

    @Test("§5.2.1.4, §5.4: reloadIgnoringLocalAndRemoteCacheData asks caches on the way not to answer")
    func reloadIgnoringLocalAndRemoteCacheData() throws {
        for state in [State.fresh, .miss] {
            let decision = Reuse.lookup(
                policy: .reloadIgnoringLocalAndRemoteCacheData, candidates: try Self.candidates(state), at: 10)
            let forwarding = try #require(Reuse.forwarded(decision))
            #expect(forwarding.isValidation == false)
            #expect(forwarding.fields["Cache-Control"] == "no-cache")
            #expect(forwarding.fields["Pragma"] == "no-cache")
            #expect(forwarding.fields["If-None-Match"] == nil)
        }
    }

    @Test("§4.2.4: returnCacheDataElseLoad serves even a stale must-revalidate response, and loads on a miss")
    func returnCacheDataElseLoad() throws {
        let decision = Reuse.lookup(policy: .returnCacheDataElseLoad, candidates: try Self.candidates(.stale), at: 150)
        let use = try #require(Reuse.served(decision))
        #expect(use.isStale)
        #expect(use.reasons == [.policyServesAnyStoredResponse(.returnCacheDataElseLoad)])
        let miss = Reuse.lookup(policy: .returnCacheDataElseLoad, candidates: [], at: 0)
        #expect(Reuse.forwarded(miss)?.reason == .uriMiss)
    }

    @Test("§5.2.1.7: returnCacheDataDontLoad serves any stored response and answers a miss with 504")
    func returnCacheDataDontLoad() throws {
        let decision = Reuse.lookup(
            policy: .returnCacheDataDontLoad, candidates: try Self.candidates(.stale), at: 1_000_000)
        let use = try #require(Reuse.served(decision))
        #expect(use.currentAge == 1_000_000)
        let miss = Reuse.lookup(policy: .returnCacheDataDontLoad, candidates: [], at: 0)
        #expect(Reuse.gatewayTimeout(miss) == [.noStoredResponse, .policy(.returnCacheDataDontLoad)])
    }

    @Test("§4.3.1: reloadRevalidatingCacheData always sends a validation request, even for a fresh response")
    func reloadRevalidatingCacheData() throws {
        let decision = Reuse.lookup(
            policy: .reloadRevalidatingCacheData, candidates: try Self.candidates(.fresh), at: 0)
        let forwarding = try #require(Reuse.forwarded(decision))
        #expect(forwarding.isValidation)
        #expect(forwarding.validated == [0])
        #expect(forwarding.fields["If-None-Match"] == "\"v1\"")
        #expect(forwarding.reasons == [.policy(.reloadRevalidatingCacheData)])
    }

    @Test("§4: a policy never makes an unsafe method answerable from the cache")
    func policyDoesNotServeUnsafeMethods() throws {
        let decision = Reuse.lookup(
            method: "POST", policy: .returnCacheDataDontLoad, candidates: try Self.candidates(.fresh), at: 10)
        let forwarding = try #require(Reuse.forwarded(decision))
        #expect(forwarding.reason == .method)
    }
}
