import CacheSemantics
import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The six `URLRequest.CachePolicy` values on an empty, a fresh and a stale entry, against a
/// real origin (RFC 9111 §4 decides `useProtocolCachePolicy`; the others are what Apple
/// documents, which swift-corelibs-foundation never reads).
@Suite("Request cache policies (URLRequest.CachePolicy; RFC 9111 §4, §4.3)")
struct PolicyTests {
    enum State: String, CaseIterable, Sendable { case empty, fresh, stale }

    struct Expectation: Sendable, CustomTestStringConvertible {
        var policy: URLRequest.CachePolicy
        var state: State
        var outcome: CacheOutcome
        var status: Int
        var originRequests: Int
        var testDescription: String {
            "\(CachePolicy(policy)) on \(state) entry → \(outcome), \(originRequests) request(s)"
        }
    }

    static let cases: [Expectation] = [
        .init(policy: .useProtocolCachePolicy, state: .empty, outcome: .miss, status: 200, originRequests: 1),
        .init(policy: .useProtocolCachePolicy, state: .fresh, outcome: .hit, status: 200, originRequests: 0),
        .init(policy: .useProtocolCachePolicy, state: .stale, outcome: .revalidated, status: 200, originRequests: 1),
        .init(policy: .reloadIgnoringLocalCacheData, state: .empty, outcome: .miss, status: 200, originRequests: 1),
        .init(policy: .reloadIgnoringLocalCacheData, state: .fresh, outcome: .miss, status: 200, originRequests: 1),
        .init(policy: .reloadIgnoringLocalCacheData, state: .stale, outcome: .miss, status: 200, originRequests: 1),
        .init(
            policy: .reloadIgnoringLocalAndRemoteCacheData, state: .empty, outcome: .miss, status: 200,
            originRequests: 1),
        .init(
            policy: .reloadIgnoringLocalAndRemoteCacheData, state: .fresh, outcome: .miss, status: 200,
            originRequests: 1),
        .init(
            policy: .reloadIgnoringLocalAndRemoteCacheData, state: .stale, outcome: .miss, status: 200,
            originRequests: 1),
        .init(policy: .returnCacheDataElseLoad, state: .empty, outcome: .miss, status: 200, originRequests: 1),
        .init(policy: .returnCacheDataElseLoad, state: .fresh, outcome: .hit, status: 200, originRequests: 0),
        .init(policy: .returnCacheDataElseLoad, state: .stale, outcome: .stale, status: 200, originRequests: 0),
        .init(policy: .returnCacheDataDontLoad, state: .empty, outcome: .miss, status: 504, originRequests: 0),
        .init(policy: .returnCacheDataDontLoad, state: .fresh, outcome: .hit, status: 200, originRequests: 0),
        .init(policy: .returnCacheDataDontLoad, state: .stale, outcome: .stale, status: 200, originRequests: 0),
        .init(policy: .reloadRevalidatingCacheData, state: .empty, outcome: .miss, status: 200, originRequests: 1),
        .init(
            policy: .reloadRevalidatingCacheData, state: .fresh, outcome: .revalidated, status: 200, originRequests: 1),
        .init(
            policy: .reloadRevalidatingCacheData, state: .stale, outcome: .revalidated, status: 200, originRequests: 1),
    ]

    @Test(arguments: cases)
    func policy(_ expected: Expectation) async throws {
        let h = try Harness()
        h.serveValidated("/p", [("Cache-Control", "max-age=60")], body: "stored body")
        if expected.state != .empty {
            let first = try await h.get("/p")
            #expect(first.outcome == .miss)
        }
        if expected.state == .stale { h.clock.advance(by: 120) }
        h.origin.clearRecords()

        let result = try await h.get("/p", policy: expected.policy)

        #expect(result.outcome == expected.outcome)
        #expect(result.statusCode == expected.status)
        #expect(h.origin.count("/p") == expected.originRequests)
        if expected.status == 200 { #expect(result.text == "stored body") }
        #expect(result.field("Cache-Status") == result.cacheStatus.fieldValue)
        let sent = h.origin.requests(to: "/p").first
        switch expected.policy {
        case .reloadIgnoringLocalAndRemoteCacheData:
            // Asks caches on the way not to answer either.
            #expect(sent?.header("Cache-Control") == "no-cache")
            #expect(sent?.header("Pragma") == "no-cache")
        case .reloadIgnoringLocalCacheData:
            #expect(sent?.header("If-None-Match") == nil)
        case .reloadRevalidatingCacheData where expected.state != .empty:
            #expect(sent?.header("If-None-Match") == "\"v1\"")
        default:
            break
        }
    }

    /// `Configuration.defaultPolicy` applies to requests left at `.useProtocolCachePolicy`.
    /// `reloadIgnoringLocalCacheData` and `reloadIgnoringLocalAndRemoteCacheData` load from the
    /// origin (Apple: "the URL load should be loaded only from the originating source"): when it
    /// cannot be reached, the load fails with the transport's error even though a response is
    /// stored, fresh or stale. The default policy serves the same response.
    @Test(arguments: [URLRequest.CachePolicy.reloadIgnoringLocalCacheData, .reloadIgnoringLocalAndRemoteCacheData])
    func reloadPoliciesThrowTheTransportErrorWhenTheOriginIsUnreachable(
        policy: URLRequest.CachePolicy
    ) async throws {
        let h = try Harness()
        h.serve("/r", [("Cache-Control", "max-age=60")], body: "stored")
        _ = try await h.get("/r")
        h.origin.stop()
        await #expect(throws: URLError.self) { try await h.get("/r", policy: policy) }
        h.clock.advance(by: 120)
        await #expect(throws: URLError.self) { try await h.get("/r", policy: policy) }
        let fallback = try await h.get("/r")
        #expect(fallback.outcome == .stale && fallback.text == "stored")
    }

    @Test func defaultPolicyApplies() async throws {
        let h = try Harness { $0.defaultPolicy = .returnCacheDataElseLoad }
        h.serve("/d", [("Cache-Control", "max-age=1")], body: "x")
        _ = try await h.get("/d")
        h.clock.advance(by: 3600)
        let result = try await h.get("/d")
        #expect(result.outcome == .stale)
        #expect(h.origin.count("/d") == 1)
    }

    /// RFC 9111 §5.2.1.7: only-if-cached with nothing stored is a 504, and the origin is not asked.
    @Test func onlyIfCachedMissIs504() async throws {
        let h = try Harness()
        h.serve("/o", [("Cache-Control", "max-age=60")])
        let result = try await h.get("/o", headers: ["Cache-Control": "only-if-cached"])
        #expect(result.statusCode == 504)
        #expect(h.origin.count("/o") == 0)
    }
}
