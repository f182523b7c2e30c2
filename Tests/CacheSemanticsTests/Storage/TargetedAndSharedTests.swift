import CacheTestSupport
import Testing

@testable import CacheSemantics

// Targeted cache-control fields (RFC 9213) in a shared cache whose target list is
// ["CDN-Cache-Control"] (`CacheEngine.Configuration.sharedCache`).

private let cdn = CacheEngine(configuration: .sharedCache)
private let plainShared = CacheEngine(configuration: .init(isShared: true))
private let personal = CacheEngine(configuration: .privateCache)

private func decide(_ engine: CacheEngine, status: Int = 200, _ pairs: [(String, String)]) -> StorageDecision {
    var fields = HeaderFields(pairs)
    if !fields.contains("Date") { fields.append(name: "Date", value: Fixtures.httpDate()) }
    return engine.storageDecision(
        for: RequestHead(uri: "https://cdn.example.com/asset.js"),
        response: ResponseHead(status: status, fields: fields),
        requestTime: Fixtures.epoch, responseTime: Fixtures.epoch)
}

private func stored(_ decision: StorageDecision) -> StorableResponse? {
    if case .store(let response) = decision { return response }
    return nil
}

@Suite("RFC 9213 §2.2 A valid targeted field replaces Cache-Control and Expires")
struct StorageTargetedOverrideTests {
    @Test("RFC 9213 §2.2: CDN-Cache-Control overrides Cache-Control max-age, with a note and the .targeted flag")
    func overridesCacheControl() throws {
        let response = try #require(
            stored(decide(cdn, [("Cache-Control", "max-age=60"), ("CDN-Cache-Control", "max-age=600")])))
        #expect(response.facts.freshnessLifetime == 600)
        #expect(response.facts.lifetimeSource == .maxAge)
        #expect(response.facts.flags.contains(.targeted))
        #expect(response.notes == [.targetedFieldUsed("CDN-Cache-Control")])
    }

    @Test("RFC 9213 §2.2, RFC 9111 §4.2.1: CDN-Cache-Control overrides Expires")
    func overridesExpires() throws {
        let response = try #require(
            stored(decide(cdn, [("Expires", Fixtures.httpDate(3600)), ("CDN-Cache-Control", "max-age=30")])))
        #expect(response.facts.freshnessLifetime == 30)
        #expect(response.facts.lifetimeSource == .maxAge)
        #expect(response.notes == [.targetedFieldUsed("CDN-Cache-Control")])
    }

    @Test("RFC 9213 §2.2: with a targeted field in force, a present Expires gives no lifetime; heuristics may apply")
    func expiresIgnoredWithoutTargetedLifetime() throws {
        let response = try #require(
            stored(
                decide(
                    cdn,
                    [
                        ("Expires", Fixtures.httpDate(3600)), ("CDN-Cache-Control", "must-revalidate"),
                        ("Last-Modified", Fixtures.httpDate(-10_000)),
                    ])))
        #expect(response.facts.lifetimeSource == .heuristic)
        #expect(response.facts.freshnessLifetime == 1_000)
        #expect(response.facts.flags.contains(.mustRevalidate))
    }

    @Test("RFC 9213 §2.2, RFC 9111 §3: an ignored Expires does not make a 302 explicitly cacheable")
    func ignoredExpiresDoesNotMarkCacheable() {
        let decision = decide(
            cdn, status: 302, [("Expires", Fixtures.httpDate(3600)), ("CDN-Cache-Control", "must-revalidate")])
        #expect(decision == .doNotStore([.notExplicitlyCacheable(302)]))
    }

    @Test("RFC 9213 §2.2: targeted no-store prevents storage even when Cache-Control allows it")
    func targetedNoStore() {
        let decision = decide(cdn, [("Cache-Control", "public, max-age=600"), ("CDN-Cache-Control", "no-store")])
        #expect(decision == .doNotStore([.responseNoStore]))
    }

    @Test("RFC 9213 §2.2, RFC 9111 §5.2.2.7: targeted private prevents storage in the shared cache")
    func targetedPrivate() {
        let decision = decide(cdn, [("Cache-Control", "public, max-age=600"), ("CDN-Cache-Control", "private")])
        #expect(decision == .doNotStore([.privateInSharedCache]))
    }

    @Test("RFC 9213 §2.1: a targeted qualified no-cache String names fields not to store (RFC 9111 §3.1)")
    func targetedQualifiedNoCache() throws {
        let response = try #require(
            stored(
                decide(
                    cdn, [("CDN-Cache-Control", "max-age=60, no-cache=\"Set-Cookie\""), ("Set-Cookie", "id=1")])))
        #expect(!response.fields.contains("Set-Cookie"))
        #expect(!response.facts.flags.contains(.noCache))
        #expect(response.facts.freshnessLifetime == 60)
    }

    @Test("RFC 9213 §2.1: parameters on targeted directives are ignored")
    func parametersIgnored() throws {
        let response = try #require(stored(decide(cdn, [("CDN-Cache-Control", "max-age=120;foo=bar")])))
        #expect(response.facts.freshnessLifetime == 120)
        #expect(response.facts.lifetimeSource == .maxAge)
    }

    @Test("RFC 9213 §2.1, RFC 9110 §5.3: targeted field lines are combined into one dictionary")
    func linesCombined() throws {
        let response = try #require(
            stored(decide(cdn, [("CDN-Cache-Control", "max-age=90"), ("CDN-Cache-Control", "must-revalidate")])))
        #expect(response.facts.freshnessLifetime == 90)
        #expect(response.facts.flags.contains(.mustRevalidate))
        #expect(response.facts.flags.contains(.targeted))
    }

    @Test("RFC 9213 §2.2: the targeted field is kept in the stored fields (passed through)")
    func targetedFieldStored() throws {
        let response = try #require(stored(decide(cdn, [("CDN-Cache-Control", "max-age=90")])))
        #expect(response.fields.values(named: "CDN-Cache-Control") == ["max-age=90"])
    }
}

@Suite("RFC 9213 §2.1 An invalid or empty targeted field is ignored")
struct StorageTargetedInvalidTests {
    @Test(
        "RFC 9213 §2.1: a targeted field that is empty or fails to parse falls back to Cache-Control",
        arguments: ["max-age=60,", "", "   ", "max-age=60, ,no-store", "Max-Age=60", "max-age=\"60", "max-age=(60"])
    func invalidFallsBack(value: String) throws {
        let response = try #require(
            stored(decide(cdn, [("Cache-Control", "max-age=45"), ("CDN-Cache-Control", value)])))
        #expect(response.facts.freshnessLifetime == 45)
        #expect(response.facts.lifetimeSource == .maxAge)
        #expect(!response.facts.flags.contains(.targeted))
        #expect(response.notes == [.invalidTargetedField("CDN-Cache-Control")])
    }

    @Test("RFC 9213 §2.1: an invalid targeted no-store is not obeyed; Cache-Control decides")
    func invalidTargetedNoStoreIgnored() throws {
        let response = try #require(
            stored(decide(cdn, [("Cache-Control", "max-age=45"), ("CDN-Cache-Control", "no-store,")])))
        #expect(response.facts.freshnessLifetime == 45)
    }

    @Test(
        "RFC 9213 §2.1: a value of the wrong type for a known directive makes the whole field ignored",
        arguments: [
            "max-age=1.5", "max-age=\"60\"", "max-age=-5", "max-age=?1", "max-age", "no-store=?0",
            "no-store=\"x\"", "must-revalidate=1", "max-age=600, no-cache=5", "private=tok",
            "max-age=(60 61)", "stale-if-error=\"10\"", "s-maxage=60.0",
        ])
    func wrongTypeIgnoresField(value: String) throws {
        let response = try #require(
            stored(decide(cdn, [("Cache-Control", "max-age=45"), ("CDN-Cache-Control", value)])))
        #expect(response.facts.freshnessLifetime == 45)
        #expect(!response.facts.flags.contains(.targeted))
        #expect(response.notes == [.invalidTargetedField("CDN-Cache-Control")])
    }

    @Test(
        "RFC 9213 §2.1: well-typed values are used; parameters and unknown extensions of any type are ignored",
        arguments: [
            ("max-age=60;x=1", 60.0), ("max-age=60, no-cache=\"set-cookie\"", 60), ("max-age=60, foo=1.5", 60),
            ("max-age=60, private=\"x-a\"", 60), ("max-age=60, ext=?0, ext2=(a b), ext3=\"v\"", 60),
        ])
    func wellTypedUsed(value: String, lifetime: Double) throws {
        let response = try #require(
            stored(decide(cdn, [("Cache-Control", "max-age=45"), ("CDN-Cache-Control", value)])))
        #expect(response.facts.freshnessLifetime == lifetime)
        #expect(response.facts.flags.contains(.targeted))
    }
}

@Suite("RFC 9213 §2.2 Target lists")
struct StorageTargetListTests {
    @Test("RFC 9213 §2.2: a private cache (empty target list) ignores CDN-Cache-Control")
    func privateCacheIgnoresTargetedField() throws {
        let response = try #require(
            stored(decide(personal, [("Cache-Control", "max-age=60"), ("CDN-Cache-Control", "max-age=600")])))
        #expect(response.facts.freshnessLifetime == 60)
        #expect(!response.facts.flags.contains(.targeted))
        #expect(response.notes.isEmpty)
        #expect(response.fields.values(named: "CDN-Cache-Control") == ["max-age=600"])
    }

    @Test("RFC 9213 §2.2: a targeted no-store not on the target list changes nothing")
    func offListNoStoreIgnored() {
        let fields = [("Cache-Control", "max-age=60"), ("CDN-Cache-Control", "no-store")]
        #expect(stored(decide(personal, fields)) != nil)
        #expect(stored(decide(plainShared, fields)) != nil)
    }

    @Test("RFC 9213 §2.2: with [ExampleCDN-Cache-Control, CDN-Cache-Control], the first valid field wins")
    func customTargetListOrder() throws {
        let engine = CacheEngine(
            configuration: .init(isShared: true, targetedFieldNames: ["ExampleCDN-Cache-Control", "CDN-Cache-Control"]))
        let both = try #require(
            stored(
                decide(
                    engine,
                    [
                        ("Cache-Control", "max-age=10"), ("CDN-Cache-Control", "max-age=20"),
                        ("ExampleCDN-Cache-Control", "max-age=30"),
                    ])))
        #expect(both.facts.freshnessLifetime == 30)
        #expect(both.notes == [.targetedFieldUsed("ExampleCDN-Cache-Control")])

        let firstInvalid = try #require(
            stored(
                decide(
                    engine,
                    [
                        ("Cache-Control", "max-age=10"), ("CDN-Cache-Control", "max-age=20"),
                        ("ExampleCDN-Cache-Control", "max-age=30,"),
                    ])))
        #expect(firstInvalid.facts.freshnessLifetime == 20)
        #expect(
            firstInvalid.notes == [
                .invalidTargetedField("ExampleCDN-Cache-Control"), .targetedFieldUsed("CDN-Cache-Control"),
            ])

        let secondOnly = try #require(
            stored(decide(engine, [("Cache-Control", "max-age=10"), ("CDN-Cache-Control", "max-age=20")])))
        #expect(secondOnly.facts.freshnessLifetime == 20)
        #expect(secondOnly.notes == [.targetedFieldUsed("CDN-Cache-Control")])

        let bothInvalid = try #require(
            stored(
                decide(
                    engine,
                    [
                        ("Cache-Control", "max-age=10"), ("CDN-Cache-Control", ""),
                        ("ExampleCDN-Cache-Control", "max-age=30,"),
                    ])))
        #expect(bothInvalid.facts.freshnessLifetime == 10)
        #expect(!bothInvalid.facts.flags.contains(.targeted))
        #expect(
            bothInvalid.notes == [
                .invalidTargetedField("ExampleCDN-Cache-Control"), .invalidTargetedField("CDN-Cache-Control"),
            ])
    }

    @Test("RFC 9213 §2.2: targeted field names are matched case-insensitively (RFC 9110 §5.1)")
    func caseInsensitiveName() throws {
        let response = try #require(stored(decide(cdn, [("cdn-cache-control", "max-age=77")])))
        #expect(response.facts.freshnessLifetime == 77)
        #expect(response.facts.flags.contains(.targeted))
    }
}

@Suite("RFC 9213 §3.1 CDN-Cache-Control examples")
struct StorageTargetedExampleTests {
    @Test("RFC 9213 §3.1: max-age=60, s-maxage=120 with CDN-Cache-Control max-age=600 gives 600, 120 and 60")
    func threeAudiences() throws {
        let fields = [("Cache-Control", "max-age=60, s-maxage=120"), ("CDN-Cache-Control", "max-age=600")]
        let viaCDN = try #require(stored(decide(cdn, fields)))
        #expect(viaCDN.facts.freshnessLifetime == 600)
        #expect(viaCDN.facts.lifetimeSource == .maxAge)
        let viaShared = try #require(stored(decide(plainShared, fields)))
        #expect(viaShared.facts.freshnessLifetime == 120)
        #expect(viaShared.facts.lifetimeSource == .sMaxAge)
        let viaPrivate = try #require(stored(decide(personal, fields)))
        #expect(viaPrivate.facts.freshnessLifetime == 60)
        #expect(viaPrivate.facts.lifetimeSource == .maxAge)
    }

    @Test("RFC 9213 §3.1: CDN-Cache-Control max-age=600 with Cache-Control no-store: only the CDN stores it")
    func onlyCDNStores() throws {
        let fields = [("CDN-Cache-Control", "max-age=600"), ("Cache-Control", "no-store")]
        let viaCDN = try #require(stored(decide(cdn, fields)))
        #expect(viaCDN.facts.freshnessLifetime == 600)
        #expect(decide(plainShared, fields) == .doNotStore([.responseNoStore]))
        #expect(decide(personal, fields) == .doNotStore([.responseNoStore]))
    }

    @Test("RFC 9213 §3.1: Cache-Control no-store alone prevents every cache, the CDN included")
    func noStoreEverywhere() {
        #expect(decide(cdn, [("Cache-Control", "no-store")]) == .doNotStore([.responseNoStore]))
    }

    @Test("RFC 9213 §3.1: Cache-Control no-store with CDN-Cache-Control: none lets only the CDN store it")
    func noneDirective() throws {
        let fields = [("Cache-Control", "no-store"), ("CDN-Cache-Control", "none")]
        let viaCDN = try #require(stored(decide(cdn, fields)))
        #expect(viaCDN.notes == [.targetedFieldUsed("CDN-Cache-Control")])
        #expect(decide(personal, fields) == .doNotStore([.responseNoStore]))
    }

    @Test(
        "RFC 9213 §2.3: with Age 1800, the CDN copy (max-age=3600) is fresh, the others' (max-age=600) stale"
    )
    func agePenalty() throws {
        let fields = [("Age", "1800"), ("Cache-Control", "max-age=600"), ("CDN-Cache-Control", "max-age=3600")]
        let viaCDN = try #require(stored(decide(cdn, fields))).facts
        let viaPrivate = try #require(stored(decide(personal, fields))).facts
        #expect(viaCDN.currentAge(at: Fixtures.epoch) == 1800)
        #expect(viaCDN.freshnessLifetime > viaCDN.currentAge(at: Fixtures.epoch))
        #expect(!(viaPrivate.freshnessLifetime > viaPrivate.currentAge(at: Fixtures.epoch)))
    }
}

@Suite("RFC 9213 §2.2 A cache's own targeted field")
struct StorageOwnTargetedFieldTests {
    @Test("RFC 9213 §2.2: a shared cache named edge-1 obeys Edge-1-Cache-Control before CDN-Cache-Control")
    func ownFieldFirst() throws {
        let engine = CacheEngine(configuration: .sharedCache(named: "edge-1"))
        #expect(engine.configuration.targetedFieldNames == ["edge-1-Cache-Control", "CDN-Cache-Control"])
        let fields = [
            ("Cache-Control", "max-age=10"), ("CDN-Cache-Control", "max-age=20"),
            ("Edge-1-Cache-Control", "max-age=30"),
        ]
        let response = try #require(stored(decide(engine, fields)))
        #expect(response.facts.freshnessLifetime == 30)
        #expect(response.notes == [.targetedFieldUsed("edge-1-Cache-Control")])
        let invalidOwn = try #require(
            stored(decide(engine, fields.dropLast() + [("edge-1-cache-control", "Max-Age=1")])))
        #expect(invalidOwn.facts.freshnessLifetime == 20)
        let other = CacheEngine(configuration: .sharedCache(named: "edge-2"))
        #expect(try #require(stored(decide(other, fields))).facts.freshnessLifetime == 20)
    }

    @Test("RFC 9213 §2.2: a name that cannot be a field name adds no field of its own")
    func invalidNameAddsNothing() {
        #expect(CacheEngine.Configuration.sharedCache(named: "my cache").targetedFieldNames == ["CDN-Cache-Control"])
        #expect(CacheEngine.Configuration.sharedCache(named: "CDN").targetedFieldNames == ["CDN-Cache-Control"])
    }
}
