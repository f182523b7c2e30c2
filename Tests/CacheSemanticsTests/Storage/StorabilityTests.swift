import CacheTestSupport
import Testing

@testable import CacheSemantics

// Storability (RFC 9111 §3, §3.5, §4.1, §5.2.1.5, §5.2.2.3, §5.2.2.5, §5.2.2.7).

private let privateCache = CacheEngine(configuration: .privateCache)
private let sharedCache = CacheEngine(configuration: .sharedCache)

private func decide(
    method: String = "GET", requestFields: HeaderFields = [:], status: Int = 200, _ fields: HeaderFields = [:]
) -> StorageDecision {
    decide(privateCache, method: method, requestFields: requestFields, status: status, fields)
}

private func decide(
    _ engine: CacheEngine, method: String = "GET", requestFields: HeaderFields = [:],
    status: Int = 200, _ fields: HeaderFields = [:]
) -> StorageDecision {
    engine.storageDecision(
        for: RequestHead(method: method, uri: "https://example.com/resource", fields: requestFields),
        response: ResponseHead(status: status, fields: fields), requestTime: Fixtures.epoch,
        responseTime: Fixtures.epoch)
}

/// The reasons of a refusal, or `nil` when the response is stored.
private func refusals(_ decision: StorageDecision) -> [Reason]? {
    if case .doNotStore(let reasons) = decision { return reasons }
    return nil
}

/// The prepared response when stored, or `nil` when refused.
private func stored(_ decision: StorageDecision) -> StorableResponse? {
    if case .store(let response) = decision { return response }
    return nil
}

private let dated: HeaderFields = ["Date": Fixtures.httpDate()]

private func with(_ fields: HeaderFields, _ extra: (String, String)...) -> HeaderFields {
    var result = fields
    for (name, value) in extra { result.append(name: name, value: value) }
    return result
}

@Suite("RFC 9111 §3 Storing responses: request method")
struct StorageMethodTests {
    @Test("§3: a 200 response to GET with max-age is stored with its facts")
    func getIsStored() throws {
        let response = try #require(stored(decide(with(dated, ("Cache-Control", "max-age=60")))))
        #expect(response.facts.status == 200)
        #expect(response.facts.freshnessLifetime == 60)
        #expect(response.facts.lifetimeSource == .maxAge)
        #expect(response.notes.isEmpty)
    }

    @Test(
        "§3: responses to methods other than GET are not stored (methods are case-sensitive, RFC 9110 §9.1)",
        arguments: ["HEAD", "PUT", "DELETE", "OPTIONS", "get"])
    func otherMethodsRefused(method: String) {
        let decision = decide(method: method, with(dated, ("Cache-Control", "public, max-age=60")))
        #expect(refusals(decision) == [.methodNotStored(method)])
    }
}

@Suite("RFC 9110 §9.3.3 Storing a response to POST for its target URI")
struct StoragePOSTTests {
    @Test(
        "RFC 9110 §9.3.3: explicit freshness and a Content-Location equal to the target URI: stored as for a GET",
        arguments: [
            ("Cache-Control", "max-age=60", "/resource"),
            ("Cache-Control", "max-age=60", "https://example.com/resource"),
            ("Cache-Control", "max-age=60", "https://EXAMPLE.com:443/resource"),
            ("Expires", "Fri, 31 Dec 2100 23:59:59 GMT", "resource"),
        ])
    func stored(field: String, value: String, location: String) throws {
        let decision = decide(method: "POST", with(dated, (field, value), ("Content-Location", location)))
        guard case .store(let response) = decision else {
            Issue.record("not stored: \(decision.reasons)")
            return
        }
        #expect(response.notes.contains(.postResponseStoredForTarget))
        #expect(response.facts.lifetimeSource != .heuristic)
    }

    @Test(
        "RFC 9110 §9.3.3: without explicit freshness or a Content-Location equal to the target, not stored",
        arguments: [
            [("Cache-Control", "max-age=60")], [("Cache-Control", "max-age=60"), ("Content-Location", "/other")],
            [("Cache-Control", "max-age=60"), ("Content-Location", "/resource?x=1")],
            [("Cache-Control", "max-age=60"), ("Content-Location", "http://example.com/resource")],
            [("Last-Modified", "Sun, 06 Nov 1994 08:49:37 GMT"), ("Content-Location", "/resource")],
            [("Content-Location", "/resource")],
        ])
    func refused(fields: [(String, String)]) {
        var all = dated
        for (name, value) in fields { all.append(name: name, value: value) }
        #expect(refusals(decide(method: "POST", all)) == [.postResponseNotReusable])
    }

    @Test("RFC 9110 §9.3.3, RFC 9111 §3: a no-store POST response reports both reasons")
    func noStoreStillRefused() {
        let fields = with(dated, ("Cache-Control", "no-store, max-age=60"), ("Content-Location", "/resource"))
        #expect(refusals(decide(method: "POST", fields)) == [.postResponseNotReusable, .responseNoStore])
    }
}

@Suite("RFC 9111 §3 Storing responses: status codes")
struct StorageStatusTests {
    @Test("§3: a non-final (1xx) status is refused (RFC 9110 §15.2)", arguments: [100, 101, 102, 103])
    func informationalRefused(status: Int) {
        let decision = decide(status: status, with(dated, ("Cache-Control", "max-age=60")))
        #expect(refusals(decision) == [.statusNotFinal(status)])
    }

    @Test("§3, §3.3: 206 and 304 are never stored as complete responses", arguments: [206, 304])
    func partialAndNotModifiedRefused(status: Int) {
        let decision = decide(status: status, with(dated, ("Cache-Control", "public, max-age=60")))
        #expect(refusals(decision) == [.statusNotStoredAsComplete(status)])
    }

    @Test(
        "§3; RFC 9110 §15.5.13, §15.5.17: a 412 or 416, the outcome of the request's own preconditions or Range (not in the key), is never stored",
        arguments: [412, 416])
    func requestOutcomeRefused(status: Int) {
        let decision = decide(status: status, with(dated, ("Cache-Control", "public, max-age=60")))
        #expect(refusals(decision) == [.statusAnswersOnlyThisRequest(status)])
    }

    @Test(
        "§3: a final status with explicit freshness but no heuristic cacheability is stored",
        arguments: [201, 302, 500, 299])
    func explicitFreshnessMakesAnyFinalStatusStorable(status: Int) throws {
        let response = try #require(stored(decide(status: status, with(dated, ("Cache-Control", "max-age=60")))))
        #expect(response.facts.status == status)
        #expect(response.facts.freshnessLifetime == 60)
    }
}

@Suite("RFC 9111 §5.2.2.5, §5.2.1.5 no-store prevents storage")
struct StorageNoStoreTests {
    @Test(
        "§5.2.2.5: no-store in the response is refused even with max-age (names are case-insensitive)",
        arguments: ["no-store", "max-age=60, no-store", "NO-STORE, public"])
    func responseNoStore(cacheControl: String) {
        let decision = decide(with(dated, ("Cache-Control", cacheControl)))
        #expect(refusals(decision) == [.responseNoStore])
    }

    @Test("§5.2.2.5: no-store binds shared caches too")
    func responseNoStoreShared() {
        let decision = decide(sharedCache, with(dated, ("Cache-Control", "s-maxage=60, no-store")))
        #expect(refusals(decision) == [.responseNoStore])
    }

    @Test("§5.2.1.5: no-store in the request prevents storing the response")
    func requestNoStore() {
        let decision = decide(
            requestFields: ["Cache-Control": "no-store"], with(dated, ("Cache-Control", "max-age=60")))
        #expect(refusals(decision) == [.requestNoStore])
    }

    @Test("§5.2.1.5, §5.2.2.5: no-store in both request and response gives both reasons")
    func bothNoStore() {
        let decision = decide(
            requestFields: ["Cache-Control": "no-store"], with(dated, ("Cache-Control", "no-store")))
        #expect(refusals(decision) == [.responseNoStore, .requestNoStore])
    }
}

@Suite("RFC 9111 §5.2.2.3 must-understand")
struct StorageMustUnderstandTests {
    @Test("§5.2.2.3: must-understand with an understood status overrides no-store", arguments: [200, 301, 404, 410])
    func understoodStatusOverridesNoStore(status: Int) throws {
        let fields = with(dated, ("Cache-Control", "max-age=60, must-understand, no-store"))
        let response = try #require(stored(decide(status: status, fields)))
        #expect(response.facts.freshnessLifetime == 60)
        #expect(response.facts.status == status)
    }

    @Test("§5.2.2.3: must-understand overrides no-store in a shared cache as well")
    func understoodStatusOverridesNoStoreShared() {
        let fields = with(dated, ("Cache-Control", "s-maxage=60, must-understand, no-store"))
        #expect(stored(decide(sharedCache, fields)) != nil)
    }

    @Test("§3, §5.2.2.3: must-understand with an unknown status (299) is refused, with no-store still counted")
    func unknownStatusRefused() {
        let fields = with(dated, ("Cache-Control", "max-age=60, must-understand, no-store"))
        #expect(refusals(decide(status: 299, fields)) == [.mustUnderstandUnknownStatus(299), .responseNoStore])
    }

    @Test("§3, §5.2.2.3: must-understand alone with an unknown status is refused even when otherwise storable")
    func unknownStatusRefusedWithoutNoStore() {
        let fields = with(dated, ("Cache-Control", "max-age=60, must-understand"))
        #expect(refusals(decide(status: 299, fields)) == [.mustUnderstandUnknownStatus(299)])
    }

    @Test("§3, §5.2.2.3: must-understand does not make a 206 storable; no-store stays in force")
    func partialContentNotUnderstood() {
        let fields = with(dated, ("Cache-Control", "max-age=60, must-understand, no-store"))
        #expect(refusals(decide(status: 206, fields)) == [.statusNotStoredAsComplete(206), .responseNoStore])
    }
}

@Suite("RFC 9111 §5.2.2.7 private and §3.5 Authorization")
struct StoragePrivateAndAuthorizationTests {
    @Test("§5.2.2.7: a shared cache refuses a private response")
    func sharedRefusesPrivate() {
        let decision = decide(sharedCache, with(dated, ("Cache-Control", "private, max-age=60")))
        #expect(refusals(decision) == [.privateInSharedCache])
    }

    @Test("§5.2.2.7: a private cache stores a private response")
    func privateStoresPrivate() throws {
        let response = try #require(stored(decide(with(dated, ("Cache-Control", "private, max-age=60")))))
        #expect(response.facts.flags.contains(.isPrivate))
        #expect(response.facts.freshnessLifetime == 60)
    }

    @Test("§5.2.2.7: a qualified private does not stop a shared cache storing the rest of the response")
    func qualifiedPrivateStoredByShared() throws {
        let fields = with(dated, ("Cache-Control", "private=\"X-User\", max-age=60"), ("X-User", "alice"))
        let response = try #require(stored(decide(sharedCache, fields)))
        #expect(!response.facts.flags.contains(.isPrivate))
        #expect(!response.fields.contains("X-User"))
    }

    @Test(
        "§3.5: a shared cache refuses an authorized response lacking public, must-revalidate and s-maxage"
    )
    func sharedRefusesAuthorized() {
        let decision = decide(
            sharedCache, requestFields: ["Authorization": "Bearer abc"], with(dated, ("Cache-Control", "max-age=60")))
        #expect(refusals(decision) == [.authorizationInSharedCache])
    }

    @Test(
        "§3.5, §5.2.2.2, §5.2.2.9, §5.2.2.10: public, must-revalidate or s-maxage allow a shared cache to store it",
        arguments: ["public", "must-revalidate", "s-maxage=60", "max-age=60, must-revalidate"])
    func sharedStoresAuthorizedWithPermission(cacheControl: String) {
        let decision = decide(
            sharedCache, requestFields: ["Authorization": "Basic dXNlcjpwYXNz"],
            with(dated, ("Cache-Control", cacheControl)))
        #expect(stored(decision) != nil)
    }

    @Test("§3.5: a private cache stores a response to a request with Authorization")
    func privateStoresAuthorized() {
        let decision = decide(
            requestFields: ["Authorization": "Bearer abc"], with(dated, ("Cache-Control", "max-age=60")))
        #expect(stored(decision) != nil)
    }

    @Test("§3.5: the Authorization field name is matched case-insensitively (RFC 9110 §5.1)")
    func authorizationCaseInsensitive() {
        let decision = decide(
            sharedCache, requestFields: ["authorization": "Bearer abc"], with(dated, ("Cache-Control", "max-age=60")))
        #expect(refusals(decision) == [.authorizationInSharedCache])
    }
}

@Suite("RFC 9111 §3 \"at least one of\": explicit cacheability or a heuristically cacheable status")
struct StorageExplicitlyCacheableTests {
    /// RFC 9110 §15.1: "200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, and 501".
    static let rfc9110HeuristicallyCacheable: Set<Int> = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]

    @Test("RFC 9110 §15.1: the engine's heuristically cacheable statuses are exactly the RFC's list")
    func heuristicTableMatchesRFC() {
        #expect(heuristicallyCacheableStatuses == Self.rfc9110HeuristicallyCacheable)
    }

    @Test(
        "§3, RFC 9110 §15.1: without freshness information, only heuristically cacheable statuses are stored",
        arguments: [
            (200, true), (203, true), (204, true), (300, true), (301, true), (308, true), (404, true), (405, true),
            (410, true), (414, true), (501, true),
            (201, false), (202, false), (205, false), (302, false), (303, false), (307, false), (400, false),
            (401, false), (403, false), (500, false), (502, false), (503, false), (504, false),
        ])
    func statusTable(status: Int, storable: Bool) {
        let decision = decide(status: status, dated)
        if storable {
            #expect(stored(decision) != nil)
        } else {
            #expect(refusals(decision) == [.notExplicitlyCacheable(status)])
        }
    }

    @Test(
        "§3: public, Expires or max-age make a 302 storable in either kind of cache",
        arguments: [
            HeaderFields([("Cache-Control", "public")]),
            HeaderFields([("Cache-Control", "max-age=0")]),
            HeaderFields([("Expires", Fixtures.httpDate(60))]),
            HeaderFields([("Expires", "0")]),  // an invalid Expires is still "an Expires header field"
        ])
    func explicitMarkersStore(fields: HeaderFields) {
        let all = with(fields, ("Date", Fixtures.httpDate()))
        #expect(stored(decide(status: 302, all)) != nil)
        #expect(stored(decide(sharedCache, status: 302, all)) != nil)
    }

    @Test("§3, §5.2.2.7: private makes a 307 storable only in a private cache")
    func privateMarksCacheableForPrivateCache() {
        let fields = with(dated, ("Cache-Control", "private"))
        #expect(stored(decide(status: 307, fields)) != nil)
        #expect(
            refusals(decide(sharedCache, status: 307, fields)) == [.privateInSharedCache, .notExplicitlyCacheable(307)])
    }

    @Test("§3, §5.2.2.10: s-maxage makes a 302 storable only in a shared cache")
    func sMaxAgeMarksCacheableForSharedCache() {
        let fields = with(dated, ("Cache-Control", "s-maxage=60"))
        #expect(stored(decide(sharedCache, status: 302, fields)) != nil)
        #expect(refusals(decide(status: 302, fields)) == [.notExplicitlyCacheable(302)])
    }

    @Test("§3, §5.2.3: an unknown extension directive does not make a response explicitly cacheable")
    func unknownExtensionDoesNotMarkCacheable() {
        let fields = with(dated, ("Cache-Control", "community=\"UCI\""))
        #expect(refusals(decide(status: 500, fields)) == [.notExplicitlyCacheable(500)])
    }
}

@Suite("RFC 9111 §4.1 Vary: * is never stored")
struct StorageVaryTests {
    @Test(
        "§4.1: a Vary containing * is refused, alone, in a list or on a second line",
        arguments: [
            HeaderFields([("Vary", "*")]),
            HeaderFields([("Vary", "Accept-Encoding, *")]),
            HeaderFields([("Vary", "Accept-Encoding"), ("Vary", "*")]),
        ])
    func varyStarRefused(vary: HeaderFields) {
        let fields = with(vary, ("Date", Fixtures.httpDate()), ("Cache-Control", "max-age=60"))
        #expect(refusals(decide(fields)) == [.varyStar])
    }

    @Test("§4.1: a Vary naming fields is stored with the request's values of those fields")
    func varyFieldsStored() throws {
        let fields = with(dated, ("Cache-Control", "max-age=60"), ("Vary", "Accept-Encoding, Accept-Language"))
        let decision = privateCache.storageDecision(
            for: RequestHead(uri: "https://example.com/", fields: ["Accept-Encoding": "gzip"]),
            response: ResponseHead(status: 200, fields: fields), requestTime: Fixtures.epoch,
            responseTime: Fixtures.epoch)
        let response = try #require(stored(decision))
        #expect(response.facts.vary.fieldNames == ["accept-encoding", "accept-language"])
        #expect(response.facts.varyValues == ["gzip", nil])
    }
}

@Suite("RFC 9111 §3 A refusal lists every reason")
struct StorageAllReasonsTests {
    @Test("§3, §3.5, §4.1, §5.2.1.5, §5.2.2.5, §5.2.2.7: a shared cache reports all seven violations in order")
    func everyReasonShared() {
        let fields = with(dated, ("Cache-Control", "private, no-store"), ("Vary", "*"))
        let decision = decide(
            sharedCache, method: "POST", requestFields: ["Authorization": "Bearer x", "Cache-Control": "no-store"],
            status: 302, fields)
        #expect(
            refusals(decision) == [
                .postResponseNotReusable, .responseNoStore, .requestNoStore, .privateInSharedCache,
                .authorizationInSharedCache, .notExplicitlyCacheable(302), .varyStar,
            ])
    }

    @Test("§3: a 1xx response to POST reports the method, the status and the missing cacheability")
    func everyReasonInformational() {
        #expect(
            refusals(decide(method: "POST", status: 100, [:]))
                == [.postResponseNotReusable, .statusNotFinal(100), .notExplicitlyCacheable(100)])
    }

    @Test("§3, §5.2.2.3: an unknown status with must-understand reports must-understand, no-store and cacheability")
    func everyReasonMustUnderstand() {
        let fields = with(dated, ("Cache-Control", "must-understand, no-store"))
        #expect(
            refusals(decide(method: "HEAD", status: 299, fields))
                == [
                    .methodNotStored("HEAD"), .mustUnderstandUnknownStatus(299), .responseNoStore,
                    .notExplicitlyCacheable(299),
                ])
    }
}
