import CacheTestSupport
import Testing

@testable import CacheSemantics

// The worked examples and literal field values of RFC 9111 (and the RFC 9110 example date).

private func store(
    status: Int = 200, _ pairs: [(String, String)], requestTime: Timestamp = Fixtures.epoch,
    responseTime: Timestamp = Fixtures.epoch
) -> StorageDecision {
    store(CacheEngine(), status: status, pairs, requestTime: requestTime, responseTime: responseTime)
}

private func store(
    _ engine: CacheEngine, status: Int = 200, _ pairs: [(String, String)],
    requestTime: Timestamp = Fixtures.epoch, responseTime: Timestamp = Fixtures.epoch
) -> StorageDecision {
    engine.storageDecision(
        for: RequestHead(uri: "https://www.example.com/"),
        response: ResponseHead(status: status, fields: HeaderFields(pairs)),
        requestTime: requestTime, responseTime: responseTime)
}

private func stored(_ decision: StorageDecision) -> StorableResponse? {
    if case .store(let response) = decision { return response }
    return nil
}

/// Thu, 01 Dec 1994 16:00:00 GMT, the date of RFC 9111 §5.3's example.
private let december1994 = Timestamp(secondsSince1970: 786_297_600)

@Suite("RFC 9111 worked examples")
struct StorageRFC9111ExampleTests {
    @Test("RFC 9110 §5.6.7, §6.6.1: the example Date 'Sun, 06 Nov 1994 08:49:37 GMT' becomes date_value")
    func exampleDate() throws {
        let response = try #require(
            stored(store([("Date", "Sun, 06 Nov 1994 08:49:37 GMT"), ("Cache-Control", "max-age=60")])))
        #expect(response.facts.date == Fixtures.epoch)
        #expect(response.facts.date.secondsSince1970 == 784_111_777)
    }

    @Test("§5.3: 'Expires: Thu, 01 Dec 1994 16:00:00 GMT' one hour after Date gives a 3600 s lifetime")
    func expiresExample() throws {
        let received = december1994 - 3_600
        let response = try #require(
            stored(
                store(
                    [("Date", "Thu, 01 Dec 1994 15:00:00 GMT"), ("Expires", "Thu, 01 Dec 1994 16:00:00 GMT")],
                    requestTime: received, responseTime: received)))
        #expect(response.facts.freshnessLifetime == 3_600)
        #expect(response.facts.lifetimeSource == .expires)
        #expect(response.facts.freshnessLifetime > response.facts.currentAge(at: december1994 - 1))
        #expect(!(response.facts.freshnessLifetime > response.facts.currentAge(at: december1994)))
    }

    @Test("§5.3: the example Expires measured from the fixture epoch (Nov 6) gives 2,185,823 s")
    func expiresExampleFromEpoch() throws {
        let response = try #require(
            stored(store([("Date", Fixtures.httpDate()), ("Expires", "Thu, 01 Dec 1994 16:00:00 GMT")])))
        #expect(response.facts.freshnessLifetime == december1994 - Fixtures.epoch)
        #expect(response.facts.freshnessLifetime == 2_185_823)
    }

    @Test("§5.3: 'Expires: 0' is an invalid date, so the response is already expired")
    func expiresZero() throws {
        let response = try #require(stored(store([("Date", Fixtures.httpDate()), ("Expires", "0")])))
        #expect(response.facts.freshnessLifetime == 0)
        #expect(response.facts.lifetimeSource == .invalid)
        #expect(response.notes == [.invalidExpires("0")])
    }

    @Test("§5.2.2.1: 'max-age=5' and the quoted 'max-age=\"5\"' both mean 5 seconds")
    func maxAgeForms() throws {
        for value in ["max-age=5", "max-age=\"5\""] {
            let response = try #require(stored(store([("Date", Fixtures.httpDate()), ("Cache-Control", value)])))
            #expect(response.facts.freshnessLifetime == 5)
            #expect(response.facts.lifetimeSource == .maxAge)
        }
    }

    @Test("§5.2.2.10: 's-maxage=10' is the lifetime for a shared cache and ignored by a private one")
    func sMaxAgeExample() throws {
        let fields = [("Date", Fixtures.httpDate()), ("Cache-Control", "s-maxage=10")]
        let shared = try #require(stored(store(CacheEngine(configuration: .sharedCache), fields)))
        #expect(shared.facts.freshnessLifetime == 10)
        #expect(shared.facts.lifetimeSource == .sMaxAge)
        let personal = try #require(stored(store(fields)))
        #expect(personal.facts.lifetimeSource == .none)
    }

    @Test(
        "§4.2.3: current_age = max(apparent_age, age_value + response_delay) + resident_time",
        arguments: [
            // (request offset, response offset, Date offset, Age, now offset, expected current_age)
            (0.0, 0.0, 0.0, 0, 0.0, 0.0),
            (0.0, 1.0, 0.0, 0, 1.0, 1.0),  // apparent_age 1 = corrected_age_value 1
            (0.0, 2.0, -10.0, 0, 2.0, 12.0),  // apparent_age 12 wins
            (0.0, 2.0, 0.0, 60, 2.0, 62.0),  // corrected_age_value 62 wins
            (0.0, 2.0, 0.0, 60, 102.0, 162.0),  // plus resident_time 100
            (0.0, 3.0, 30.0, 0, 13.0, 13.0),  // Date ahead: apparent_age 0, response_delay 3
            (-5.0, 0.0, -1.0, 4, 0.0, 9.0),  // corrected_age_value 9 > apparent_age 1
        ] as [(Double, Double, Double, Int, Double, Double)])
    func ageFormulas(
        request: Double, response: Double, date: Double, age: Int, now: Double, expected: Double
    ) throws {
        let result = try #require(
            stored(
                store(
                    [("Date", Fixtures.httpDate(date)), ("Age", String(age)), ("Cache-Control", "max-age=3600")],
                    requestTime: Fixtures.epoch + request, responseTime: Fixtures.epoch + response)))
        #expect(result.facts.currentAge(at: Fixtures.epoch + now) == expected)
    }

    @Test("§4.2: response_is_fresh = freshness_lifetime > current_age, so a response is stale at exactly its lifetime")
    func freshnessBoundary() throws {
        let facts = try #require(
            stored(store([("Date", Fixtures.httpDate()), ("Cache-Control", "max-age=60")]))
        ).facts
        #expect(facts.freshnessLifetime > facts.currentAge(at: Fixtures.epoch + 59))
        #expect(!(facts.freshnessLifetime > facts.currentAge(at: Fixtures.epoch + 60)))
    }

    @Test("§4.2.1: two Expires lines, or two different max-age directives, make the response stale")
    func multipleValuesExample() throws {
        let expires = try #require(
            stored(
                store([
                    ("Date", Fixtures.httpDate()), ("Expires", Fixtures.httpDate(100)),
                    ("Expires", Fixtures.httpDate(200)),
                ])))
        #expect(expires.facts.lifetimeSource == .invalid)
        #expect(expires.notes == [.conflictingExpires])

        let maxAge = try #require(
            stored(
                store([
                    ("Date", Fixtures.httpDate()), ("Cache-Control", "max-age=100"), ("Cache-Control", "max-age=200"),
                ])))
        #expect(maxAge.facts.lifetimeSource == .invalid)
        #expect(maxAge.facts.freshnessLifetime == 0)
    }

    @Test("§4.2.1: 'both max-age and no-cache are present': the most restrictive, no-cache, is recorded")
    func maxAgeWithNoCache() throws {
        let response = try #require(
            stored(store([("Date", Fixtures.httpDate()), ("Cache-Control", "max-age=600, no-cache")])))
        #expect(response.facts.freshnessLifetime == 600)
        #expect(response.facts.flags.contains(.noCache))
    }

    @Test("§5.2.2.4: a qualified no-cache field-name list drops every listed field, case-insensitively")
    func noCacheFieldNameList() throws {
        let response = try #require(
            stored(
                store([
                    ("Date", Fixtures.httpDate()),
                    ("Cache-Control", "max-age=60, no-cache=\"set-cookie, X-Session\""),
                    ("Set-Cookie", "a=1"), ("x-session", "s"), ("X-Other", "kept"),
                ])))
        #expect(!response.fields.contains("Set-Cookie"))
        #expect(!response.fields.contains("X-Session"))
        #expect(response.fields["X-Other"] == "kept")
        #expect(response.notes == [.fieldsNotStored(["Set-Cookie", "x-session"])])
        #expect(!response.facts.flags.contains(.noCache))
    }

    @Test("§5.2.2.4: the token form no-cache=Set-Cookie, which senders should not generate, is still honoured")
    func noCacheTokenForm() throws {
        let response = try #require(
            stored(
                store([
                    ("Date", Fixtures.httpDate()), ("Cache-Control", "max-age=60, no-cache=Set-Cookie"),
                    ("Set-Cookie", "a=1"),
                ])))
        #expect(!response.fields.contains("Set-Cookie"))
    }

    @Test("§5.2.2.7: a qualified private field-name list drops the listed fields in a shared cache")
    func privateFieldNameList() throws {
        let fields = [
            ("Date", Fixtures.httpDate()), ("Cache-Control", "max-age=60, private=\"X-User, x-account\""),
            ("X-User", "alice"), ("X-Account", "42"), ("X-Public", "p"),
        ]
        let shared = try #require(stored(store(CacheEngine(configuration: .sharedCache), fields)))
        #expect(shared.notes == [.fieldsNotStored(["X-User", "X-Account"])])
        #expect(shared.fields.map(\.name) == ["Date", "Cache-Control", "X-Public"])

        let personal = try #require(stored(store(fields)))
        #expect(personal.fields.map(\.name) == ["Date", "Cache-Control", "X-User", "X-Account", "X-Public"])
    }

    @Test("§5.2.3: 'private, community=\"UCI\"' is treated as private and the extension is kept")
    func communityExtension() throws {
        let fields = [("Date", Fixtures.httpDate()), ("Cache-Control", "private, community=\"UCI\"")]
        #expect(store(CacheEngine(configuration: .sharedCache), fields) == .doNotStore([.privateInSharedCache]))

        let personal = try #require(stored(store(status: 302, fields)))
        #expect(personal.facts.flags.contains(.isPrivate))
        #expect(personal.fields["Cache-Control"] == "private, community=\"UCI\"")
        let parsed = CacheControl(fields: personal.fields)
        #expect(parsed.first("community")?.argument == "UCI")
        #expect(parsed.directives.map(\.name) == ["private", "community"])
        #expect(parsed.fieldValue == "private, community=UCI")
    }

    @Test("§5.2.2.8: proxy-revalidate on its own does not make a response cacheable; with public it does")
    func proxyRevalidateExample() throws {
        let alone = store(
            CacheEngine(configuration: .sharedCache), status: 302,
            [("Date", Fixtures.httpDate()), ("Cache-Control", "proxy-revalidate")])
        #expect(alone == .doNotStore([.notExplicitlyCacheable(302)]))
        let withPublic = try #require(
            stored(
                store(
                    CacheEngine(configuration: .sharedCache), status: 302,
                    [("Date", Fixtures.httpDate()), ("Cache-Control", "public, proxy-revalidate")])))
        #expect(withPublic.facts.flags.isSuperset(of: [.isPublic, .proxyRevalidate]))
    }
}
