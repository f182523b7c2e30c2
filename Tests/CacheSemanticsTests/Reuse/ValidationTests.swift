import CacheTestSupport
import Testing

@testable import CacheSemantics

@Suite("RFC 9111 §4.3 Validation")
struct ValidationTests {
    static let engine = Reuse.privateEngine

    // MARK: §4.3.1 Sending a validation request

    @Test("§4.3.1: If-None-Match lists the entity tags of every matching stored response, selected one first")
    func ifNoneMatchListsAllMatchingTags() throws {
        let response: HeaderFields = ["Cache-Control": "max-age=100", "Vary": "Accept-Encoding"]
        var older = response
        older["ETag"] = "\"a\""
        var newer = response
        newer["ETag"] = "W/\"b\""
        var otherVariant = response
        otherVariant["ETag"] = "\"c\""
        let candidates = [
            try Reuse.store(older, request: ["Accept-Encoding": "gzip"], at: 0),
            try Reuse.store(otherVariant, request: ["Accept-Encoding": "br"], at: 5),
            try Reuse.store(newer, request: ["Accept-Encoding": "gzip"], at: 10),
        ]
        let decision = Reuse.lookup(fields: ["Accept-Encoding": "gzip"], candidates: candidates, at: 200)
        let forwarding = try #require(Reuse.forwarded(decision))
        #expect(forwarding.candidate == 2)
        #expect(forwarding.validated == [2, 0])
        #expect(forwarding.fields["If-None-Match"] == "W/\"b\", \"a\"")
        #expect(forwarding.fields["If-Modified-Since"] == nil)
    }

    @Test("§4.3.1: If-Modified-Since is sent only when a single stored response is validated")
    func ifModifiedSinceOnlyForSingleResponse() throws {
        let lastModified = Fixtures.httpDate(-1000)
        let first = try Reuse.store(
            ["Cache-Control": "max-age=100", "ETag": "\"a\"", "Last-Modified": lastModified], at: 0)
        let second = try Reuse.store(
            ["Cache-Control": "max-age=100", "ETag": "\"b\"", "Last-Modified": lastModified], at: 10)

        let single = try #require(Reuse.forwarded(Reuse.lookup(candidates: [first], at: 200)))
        #expect(single.validated == [0])
        #expect(single.fields["If-None-Match"] == "\"a\"")
        #expect(single.fields["If-Modified-Since"] == lastModified)

        let both = try #require(Reuse.forwarded(Reuse.lookup(candidates: [first, second], at: 200)))
        #expect(both.validated == [1, 0])
        #expect(both.fields["If-None-Match"] == "\"b\", \"a\"")
        #expect(both.fields["If-Modified-Since"] == nil)
    }

    @Test("§4.3.1: a response with only Last-Modified is validated with If-Modified-Since alone")
    func lastModifiedOnly() throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100", "Last-Modified": Fixtures.httpDate(-500)])
        #expect(Self.engine.conditionalFields([facts]) == ["If-Modified-Since": Fixtures.httpDate(-500)])
    }

    @Test(
        "§4.3.1, RFC 9110 §13.1.3: a response without any validator is validated with If-Modified-Since from its Date")
    func noValidatorUsesDate() throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100", "Date": Fixtures.httpDate(-3)], at: 0)
        #expect(Self.engine.conditionalFields([facts]) == ["If-Modified-Since": Fixtures.httpDate(-3)])
        let forwarding = try #require(Reuse.forwarded(Reuse.lookup(candidates: [facts], at: 200)))
        #expect(forwarding.isValidation)
        #expect(forwarding.fields == ["If-Modified-Since": Fixtures.httpDate(-3)])
    }

    @Test("§4.3.1: an entity tag shared by several stored responses is listed once")
    func duplicateTagsListedOnce() throws {
        let a = try Reuse.store(["Cache-Control": "max-age=100", "ETag": "\"same\""], at: 0)
        let b = try Reuse.store(["Cache-Control": "max-age=100", "ETag": "\"same\""], at: 10)
        #expect(Self.engine.conditionalFields([a, b]) == ["If-None-Match": "\"same\""])
    }

    @Test("§4.3.1: a response with an entity tag but no Last-Modified gets no If-Modified-Since")
    func etagOnlyHasNoIfModifiedSince() throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100", "ETag": "W/\"x\""])
        #expect(Self.engine.conditionalFields([facts]) == ["If-None-Match": "W/\"x\""])
    }

    // MARK: §4.3.2 Handling a received validation request

    static func freshWithValidators() throws -> StoredResponseFacts {
        try Reuse.store([
            "Cache-Control": "max-age=100", "ETag": "\"v1\"", "Last-Modified": Fixtures.httpDate(-1000),
        ])
    }

    @Test(
        "§4.3.2, RFC 9110 §13.1.2: the client's If-None-Match is evaluated with weak comparison against a fresh response",
        arguments: [
            ("\"v1\"", true), ("W/\"v1\"", true), ("\"v0\", \"v1\"", true), ("*", true), ("\"v2\"", false),
        ])
    func clientIfNoneMatch(value: String, notModified: Bool) throws {
        let decision = Reuse.lookup(
            fields: ["If-None-Match": value], candidates: [try Self.freshWithValidators()], at: 10)
        let use = try #require(Reuse.served(decision))
        #expect(use.notModified == notModified)
        #expect(use.reasons == [.fresh(age: 10, lifetime: 100)])
    }

    @Test(
        "§4.3.2, RFC 9110 §13.1.3: the client's If-Modified-Since is evaluated against Last-Modified",
        arguments: [(-1000.0, true), (-10.0, true), (-1001.0, false)])
    func clientIfModifiedSince(offset: Double, notModified: Bool) throws {
        let decision = Reuse.lookup(
            fields: ["If-Modified-Since": Fixtures.httpDate(offset)], candidates: [try Self.freshWithValidators()],
            at: 10)
        let use = try #require(Reuse.served(decision))
        #expect(use.notModified == notModified)
    }

    @Test("§4.3.2: without Last-Modified, If-Modified-Since is evaluated against the stored Date")
    func clientIfModifiedSinceUsesDate() throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100", "Date": Fixtures.httpDate(0)])
        let same = Reuse.lookup(fields: ["If-Modified-Since": Fixtures.httpDate(0)], candidates: [facts], at: 10)
        #expect(Reuse.served(same)?.notModified == true)
        let earlier = Reuse.lookup(fields: ["If-Modified-Since": Fixtures.httpDate(-1)], candidates: [facts], at: 10)
        #expect(Reuse.served(earlier)?.notModified == false)
    }

    @Test("§4.3.2, RFC 9110 §13.2.2: If-None-Match takes precedence over If-Modified-Since")
    func ifNoneMatchTakesPrecedence() throws {
        let decision = Reuse.lookup(
            fields: ["If-None-Match": "\"v2\"", "If-Modified-Since": Fixtures.httpDate(0)],
            candidates: [try Self.freshWithValidators()], at: 10)
        #expect(Reuse.served(decision)?.notModified == false)
    }

    @Test("§4.3.2, RFC 9110 §13.2.1: preconditions are evaluated only for a stored 200, never turning a 404 into a 304")
    func preconditionsOnlyForStored200() throws {
        let facts = try Reuse.store(["Cache-Control": "max-age=100", "ETag": "\"gone\""], status: 404)
        let decision = Reuse.lookup(fields: ["If-None-Match": "\"gone\""], candidates: [facts], at: 10)
        let use = try #require(Reuse.served(decision))
        #expect(use.notModified == false)
    }

    @Test("§4.3.2: a conditional request that must go forward carries the client's validators, not the cache's")
    func conditionalClientRequestForwardedWithoutCacheValidators() throws {
        let decision = Reuse.lookup(
            fields: ["If-None-Match": "\"client\""], candidates: [try Self.freshWithValidators()], at: 150)
        let forwarding = try #require(Reuse.forwarded(decision))
        #expect(forwarding.reason == .stale)
        #expect(forwarding.candidate == 0)
        #expect(forwarding.validated == [])
        #expect(forwarding.isValidation == false)
        #expect(forwarding.fields.isEmpty)
        #expect(forwarding.reasons == [.stale(by: 50)])
    }

    // MARK: §4.3.4 Freshening stored responses upon validation

    /// Three responses without Vary: two with the strong tag "a" (dated 0 and 10), one with "c".
    static func taggedCandidates() throws -> [StoredResponseFacts] {
        [
            try Reuse.store(["Cache-Control": "max-age=100", "ETag": "\"a\""], at: 0),
            try Reuse.store(["Cache-Control": "max-age=100", "ETag": "\"a\""], at: 10),
            try Reuse.store(["Cache-Control": "max-age=100", "ETag": "\"c\""], at: 20),
        ]
    }

    @Test("§4.3.4: a strong ETag in the 304 selects every stored response with that strong tag")
    func strongETagSelectsAllMatching() throws {
        let candidates = try Self.taggedCandidates()
        #expect(
            Self.engine.responsesToUpdate(notModified: ["ETag": "\"a\""], request: [:], candidates: candidates) == [
                0, 1,
            ])
        #expect(
            Self.engine.responsesToUpdate(notModified: ["ETag": "\"c\""], request: [:], candidates: candidates) == [2])
    }

    @Test("§4.3.4: when no stored response has the 304's strong tag, nothing is updated")
    func strongETagWithoutMatchUpdatesNothing() throws {
        let candidates = try Self.taggedCandidates()
        #expect(
            Self.engine.responsesToUpdate(
                notModified: ["ETag": "\"z\""], request: [:], candidates: candidates, validated: [2]) == [])
        // A weak stored tag does not match a strong one under strong comparison.
        let weak = try Reuse.store(["Cache-Control": "max-age=100", "ETag": "W/\"a\""])
        #expect(Self.engine.responsesToUpdate(notModified: ["ETag": "\"a\""], request: [:], candidates: [weak]) == [])
    }

    @Test("§4.3.4: only responses the request could have selected (the initial set) are updated")
    func onlyInitialSetIsUpdated() throws {
        let response: HeaderFields = ["Cache-Control": "max-age=100", "Vary": "Accept-Encoding", "ETag": "\"a\""]
        let candidates = [
            try Reuse.store(response, request: ["Accept-Encoding": "gzip"]),
            try Reuse.store(response, request: ["Accept-Encoding": "br"]),
        ]
        #expect(
            Self.engine.responsesToUpdate(
                notModified: ["ETag": "\"a\""], request: ["Accept-Encoding": "br"], candidates: candidates) == [1])
    }

    @Test("§4.3.4: a weak ETag in the 304 selects only the most recent matching response")
    func weakETagSelectsMostRecent() throws {
        let candidates = [
            try Reuse.store(["Cache-Control": "max-age=100", "ETag": "W/\"a\""], at: 0),
            try Reuse.store(["Cache-Control": "max-age=100", "ETag": "\"a\""], at: 10),
            try Reuse.store(["Cache-Control": "max-age=100", "ETag": "W/\"b\""], at: 20),
        ]
        #expect(
            Self.engine.responsesToUpdate(notModified: ["ETag": "W/\"a\""], request: [:], candidates: candidates) == [1]
        )
        #expect(
            Self.engine.responsesToUpdate(notModified: ["ETag": "W/\"z\""], request: [:], candidates: candidates) == [])
    }

    @Test("§4.3.4: a Last-Modified-only 304 selects the most recent response with that Last-Modified")
    func lastModifiedSelectsMostRecentEqual() throws {
        let t1 = Fixtures.httpDate(-1000)
        let candidates = [
            try Reuse.store(["Cache-Control": "max-age=100", "Last-Modified": t1], at: 10),
            try Reuse.store(["Cache-Control": "max-age=100", "Last-Modified": t1], at: 0),
            try Reuse.store(["Cache-Control": "max-age=100", "Last-Modified": Fixtures.httpDate(-500)], at: 20),
        ]
        #expect(
            Self.engine.responsesToUpdate(notModified: ["Last-Modified": t1], request: [:], candidates: candidates) == [
                0
            ])
        #expect(
            Self.engine.responsesToUpdate(
                notModified: ["Last-Modified": Fixtures.httpDate(-1)], request: [:], candidates: candidates) == [])
    }

    @Test("§4.3.4: a 304 without validators updates the single stored response that has none")
    func noValidatorsSingleResponse() throws {
        let plain = try Reuse.store(["Cache-Control": "max-age=100"])
        #expect(Self.engine.responsesToUpdate(notModified: [:], request: [:], candidates: [plain]) == [0])

        let another = try Reuse.store(["Cache-Control": "max-age=100"], at: 10)
        #expect(Self.engine.responsesToUpdate(notModified: [:], request: [:], candidates: [plain, another]) == [])

        let tagged = try Reuse.store(["Cache-Control": "max-age=100", "ETag": "\"a\""])
        #expect(Self.engine.responsesToUpdate(notModified: [:], request: [:], candidates: [tagged]) == [])
    }

    @Test("§4.3.4: a 304 without validators after validating exactly one response updates that one")
    func noValidatorsAfterValidatingOne() throws {
        let candidates = try Self.taggedCandidates()
        #expect(
            Self.engine.responsesToUpdate(notModified: [:], request: [:], candidates: candidates, validated: [2]) == [2]
        )
        #expect(
            Self.engine.responsesToUpdate(notModified: [:], request: [:], candidates: candidates, validated: [2, 1])
                == [])
        // The validated response must still be in the initial set.
        let response: HeaderFields = ["Cache-Control": "max-age=100", "Vary": "Accept-Encoding", "ETag": "\"a\""]
        let variants = [try Reuse.store(response, request: ["Accept-Encoding": "gzip"])]
        #expect(
            Self.engine.responsesToUpdate(
                notModified: [:], request: ["Accept-Encoding": "br"], candidates: variants, validated: [0]) == [])
    }

    @Test(
        "§3.2, §4.3.4: freshen makes a stale response fresh with the 304's fields and times, Content-Length untouched")
    func freshenAfter304() throws {
        let stored = try Reuse.storeResponse([
            "Cache-Control": "max-age=100", "ETag": "\"v1\"", "Content-Length": "1432", "Age": "5",
            "X-Old": "kept",
        ])
        let stale = try #require(Reuse.forwarded(Reuse.lookup(candidates: [stored.facts], at: 150)))
        #expect(stale.isValidation)

        let notModified: HeaderFields = [
            "Date": Fixtures.httpDate(150), "Cache-Control": "max-age=200", "ETag": "\"v1\"", "Content-Length": "0",
            "X-New": "1",
        ]
        let updates = Self.engine.responsesToUpdate(
            notModified: notModified, request: [:], candidates: [stored.facts], validated: stale.validated)
        #expect(updates == [0])

        let freshened = Self.engine.freshen(
            storedFields: stored.fields, storedFacts: stored.facts, with: notModified, request: [:],
            requestTime: Reuse.time(149), responseTime: Reuse.time(150))
        let (fields, facts) = (freshened.fields, freshened.facts)
        #expect(freshened.mayStayStored)
        #expect(fields["Cache-Control"] == "max-age=200")
        #expect(fields["Date"] == Fixtures.httpDate(150))
        #expect(fields["Content-Length"] == "1432")
        #expect(fields["X-New"] == "1")
        #expect(fields["X-Old"] == "kept")
        #expect(fields["Age"] == nil)
        #expect(facts.freshnessLifetime == 200)
        #expect(facts.date == Reuse.time(150))
        #expect(facts.requestTime == Reuse.time(149))
        #expect(facts.responseTime == Reuse.time(150))
        #expect(facts.contentLength == 1432)
        #expect(facts.ageValue == 0)

        // corrected_initial_age = 1 s response delay; 10 s resident.
        let use = try #require(Reuse.served(Reuse.lookup(candidates: [facts], at: 160)))
        #expect(use.reasons == [.fresh(age: 11, lifetime: 200)])
    }

    @Test("§3.2, §4.3.4: freshening clears the invalidated mark but keeps the incomplete one")
    func freshenClearsInvalidated() throws {
        let stored = try Reuse.storeResponse(["Cache-Control": "max-age=100", "ETag": "\"v1\""])
        var facts = stored.facts
        facts.flags.formUnion([.invalidated, .incomplete])
        let freshened = Self.engine.freshen(
            storedFields: stored.fields, storedFacts: facts, with: ["ETag": "\"v1\""], request: [:],
            requestTime: Reuse.time(50), responseTime: Reuse.time(50)
        ).facts
        #expect(freshened.flags.contains(.invalidated) == false)
        #expect(freshened.flags.contains(.incomplete))
    }

    @Test("§4.3.4, RFC 9530: freshening keeps what was checked of the stored body's digests")
    func freshenKeepsIntegrity() throws {
        let stored = try Reuse.storeResponse(["Cache-Control": "max-age=100", "ETag": "\"v1\""])
        var facts = stored.facts
        facts.integrity = "sha-256 verified when stored (Repr-Digest)"
        let freshened = Self.engine.freshen(
            storedFields: stored.fields, storedFacts: facts, with: ["ETag": "\"v1\""], request: [:],
            requestTime: Reuse.time(50), responseTime: Reuse.time(50)
        ).facts
        #expect(freshened.integrity == "sha-256 verified when stored (Repr-Digest)")
    }

    @Test("§3.1, §3.2: hop-by-hop fields of a 304 and those named by its Connection are not stored")
    func freshenSkipsHopByHop() throws {
        let stored = try Reuse.storeResponse(["Cache-Control": "max-age=100", "ETag": "\"v1\""])
        let notModified: HeaderFields = [
            "Connection": "X-Secret", "X-Secret": "1", "Keep-Alive": "timeout=5", "Cache-Control": "max-age=300",
        ]
        let (fields, facts) = Self.engine.freshen(
            storedFields: stored.fields, storedFacts: stored.facts, with: notModified, request: [:],
            requestTime: Reuse.time(150), responseTime: Reuse.time(150)
        ).fieldsAndFacts
        #expect(fields.contains("X-Secret") == false)
        #expect(fields.contains("Keep-Alive") == false)
        #expect(fields.contains("Connection") == false)
        #expect(fields["Date"] == Fixtures.httpDate(150))
        #expect(facts.freshnessLifetime == 300)
    }

    /// A `304`'s directives, whether the cache is shared, and whether the response it updates
    /// may stay stored, for ``freshenedResponseMayStayStored(_:)``.
    struct KeepingCase: Sendable, CustomTestStringConvertible {
        var cacheControl: String?
        var shared: Bool
        var staysStored: Bool
        var testDescription: String {
            "\(cacheControl.map { "Cache-Control: \($0)" } ?? "no Cache-Control") in a \(shared ? "shared" : "private") cache"
        }
    }

    static let keepingCases: [KeepingCase] = [
        .init(cacheControl: "max-age=600", shared: true, staysStored: true),
        .init(cacheControl: nil, shared: true, staysStored: true),
        // §5.2.2.7: private is for a private cache alone; qualified, it only keeps fields out.
        .init(cacheControl: "private, max-age=600", shared: true, staysStored: false),
        .init(cacheControl: "private, max-age=600", shared: false, staysStored: true),
        .init(cacheControl: "private=\"Set-Cookie\", max-age=600", shared: true, staysStored: true),
        // §5.2.2.5: no-store in either; §5.2.2.3: must-understand with an understood status overrides it.
        .init(cacheControl: "no-store", shared: true, staysStored: false),
        .init(cacheControl: "no-store", shared: false, staysStored: false),
        .init(cacheControl: "must-understand, no-store, max-age=60", shared: true, staysStored: true),
    ]

    @Test(
        "§3, §4.3.4, §5.2.2.5, §5.2.2.7: a 304 that brings no-store, or private to a shared cache, leaves a response that may not stay stored",
        arguments: keepingCases)
    func freshenedResponseMayStayStored(_ example: KeepingCase) throws {
        let engine = example.shared ? Reuse.sharedEngine : Self.engine
        let stored = try Reuse.storeResponse(["Cache-Control": "max-age=0", "ETag": "\"v1\""], engine: engine)
        var notModified: HeaderFields = ["ETag": "\"v1\""]
        if let cacheControl = example.cacheControl { notModified["Cache-Control"] = cacheControl }
        let freshened = engine.freshen(
            storedFields: stored.fields, storedFacts: stored.facts, with: notModified, request: [:],
            requestTime: Reuse.time(10), responseTime: Reuse.time(10))
        #expect(freshened.mayStayStored == example.staysStored)
        #expect(freshened.fields["Cache-Control"] == example.cacheControl ?? "max-age=0")
    }

    /// A stored response's fields, a `304`'s fields, and whether the cache is shared (obeying
    /// `CDN-Cache-Control`, RFC 9213), for ``freshenedFactsAreThoseOfTheUpdatedFields(_:)``.
    struct FresheningCase: Sendable, CustomTestStringConvertible {
        var stored: HeaderFields
        var notModified: HeaderFields
        var shared: Bool = false
        var testDescription: String { "\(stored) ← \(notModified)\(shared ? " (shared)" : "")" }
    }

    static let fresheningCases: [FresheningCase] = [
        // The 304 brings its own Cache-Control: the directives parsed from it are those in force.
        .init(
            stored: ["Cache-Control": "max-age=100", "ETag": "\"v1\""], notModified: ["Cache-Control": "max-age=300"]),
        // None: the stored ones stay in force, and keep out the Set-Cookie it names (§5.2.2.7).
        .init(
            stored: ["Cache-Control": "private=\"Set-Cookie\", max-age=50", "ETag": "\"v1\""],
            notModified: ["Set-Cookie": "a=1", "ETag": "\"v1\""]),
        // The 304's no-cache names Cache-Control itself: its own line is not stored (§3.1).
        .init(
            stored: ["Cache-Control": "max-age=100", "ETag": "\"v1\""],
            notModified: ["Cache-Control": "no-cache=\"Cache-Control\", max-age=30"]),
        // The directives in force after the update (the stored targeted field's) name the
        // Cache-Control the 304 brought: dropping it changes what is in force.
        .init(
            stored: ["CDN-Cache-Control": "no-cache=\"Cache-Control\", max-age=100", "ETag": "\"v1\""],
            notModified: ["Cache-Control": "max-age=10"], shared: true),
        // A stored targeted field outlives a 304 with Cache-Control only (RFC 9213 §2.2).
        .init(
            stored: ["CDN-Cache-Control": "max-age=500", "Cache-Control": "max-age=5"],
            notModified: ["Cache-Control": "max-age=10"], shared: true),
        .init(
            stored: ["Cache-Control": "max-age=5", "Age": "3"],
            notModified: [
                "CDN-Cache-Control": "max-age=20", "Cache-Control": "max-age=10, private=\"X-A\"", "X-A": "1",
            ],
            shared: true),
        // Repeated lines, kept in order after the stored lines the 304 does not replace.
        .init(
            stored: ["Cache-Control": "max-age=5", "Vary": "Accept", "X-Old": "kept", "Link": "</a>"],
            notModified: ["Link": "</b>", "Cache-Control": "max-age=7", "Link": "</c>", "Content-Length": "0"]),
    ]

    @Test(
        "§3.2, §4.3.4: the fields updated by a 304, and facts that are those of the updated fields",
        arguments: fresheningCases)
    func freshenedFactsAreThoseOfTheUpdatedFields(_ example: FresheningCase) throws {
        let engine = example.shared ? Reuse.sharedEngine : Self.engine
        let stored = try Reuse.storeResponse(example.stored, engine: engine)
        let (fields, facts) = engine.freshen(
            storedFields: stored.fields, storedFacts: stored.facts, with: example.notModified, request: [:],
            requestTime: Reuse.time(149), responseTime: Reuse.time(150)
        ).fieldsAndFacts
        #expect(
            fields
                == engine.updatedFields(stored: stored.fields, with: example.notModified, responseTime: Reuse.time(150))
        )
        let (expected, _) = engine.makeFacts(
            status: 200, fields: fields, requestFields: [:], requestTime: Reuse.time(149),
            responseTime: Reuse.time(150))
        #expect(facts == expected)
        // The fields themselves, per §3.2: each name the 304 has replaces the stored lines of that
        // name; the stored lines of other names keep their order, the 304's follow in theirs.
        let (directives, _, _) = engine.effectiveDirectives(example.notModified)
        var excluded = fieldNamesNeverStored + engine.namedFieldsNotStored(example.notModified, directives: directives)
        excluded += ["content-length", "content-range", "content-digest"]
        let replacing = Set(example.notModified.map(\.lowercasedName)).subtracting(excluded)
        var lines = stored.fields.filter { !replacing.contains($0.lowercasedName) && $0.lowercasedName != "age" }
        lines += example.notModified.filter { replacing.contains($0.lowercasedName) }
        let inForce = engine.effectiveDirectives(HeaderFields(lines)).directives
        let named = Set(
            (inForce.noCacheFieldNames + (engine.configuration.isShared ? inForce.privateFieldNames : []))
                .map { $0.lowercased() })
        let remaining = lines.filter { !named.contains($0.lowercasedName) }
        #expect(fields.map(\.lowercasedName) == remaining.map(\.lowercasedName))
    }

    // MARK: §4.3.5 Freshening responses with HEAD

    static func storedForHead() throws -> StoredResponseFacts {
        try Reuse.store([
            "Cache-Control": "max-age=100", "ETag": "\"v1\"", "Last-Modified": Fixtures.httpDate(-1000),
            "Content-Length": "1432",
        ])
    }

    @Test(
        "§4.3.5: a HEAD response whose validators and Content-Length match updates the stored response",
        arguments: [
            HeaderFields([
                ("ETag", "\"v1\""), ("Last-Modified", Fixtures.httpDate(-1000)), ("Content-Length", "1432"),
            ]),
            HeaderFields([("ETag", "\"v1\"")]),
            HeaderFields([("Content-Length", "1432")]),
            HeaderFields(),
        ])
    func headMatchUpdates(head: HeaderFields) throws {
        #expect(Self.engine.headFreshening(head: head, stored: try Self.storedForHead()) == .update)
    }

    @Test(
        "§4.3.5: a HEAD response with a different ETag, Last-Modified or Content-Length marks the stored response stale",
        arguments: [
            HeaderFields([("ETag", "\"v2\"")]),
            HeaderFields([("ETag", "W/\"v1\"")]),
            HeaderFields([("Last-Modified", Fixtures.httpDate(-999))]),
            HeaderFields([("ETag", "\"v1\""), ("Content-Length", "1433")]),
        ])
    func headMismatchMarksStale(head: HeaderFields) throws {
        #expect(Self.engine.headFreshening(head: head, stored: try Self.storedForHead()) == .markStale)
    }

    @Test("§4.3.5: a HEAD response with a validator the stored response lacks marks it stale")
    func headValidatorMissingFromStored() throws {
        let plain = try Reuse.store(["Cache-Control": "max-age=100"])
        #expect(Self.engine.headFreshening(head: ["ETag": "\"v1\""], stored: plain) == .markStale)
        #expect(Self.engine.headFreshening(head: ["Last-Modified": Fixtures.httpDate(-5)], stored: plain) == .markStale)
    }

    @Test("§4.3.5, §4.4: a response marked invalidated is validated before reuse even while fresh")
    func invalidatedIsRevalidated() throws {
        var facts = try Self.storedForHead()
        facts.flags.insert(.invalidated)
        let forwarding = try #require(Reuse.forwarded(Reuse.lookup(candidates: [facts], at: 10)))
        #expect(forwarding.reason == .stale)
        #expect(forwarding.isValidation)
        #expect(forwarding.validated == [0])
        #expect(forwarding.fields["If-None-Match"] == "\"v1\"")
        #expect(forwarding.fields["If-Modified-Since"] == Fixtures.httpDate(-1000))
        #expect(forwarding.reasons == [.invalidated])
        // max-stale does not allow skipping the validation.
        let withMaxStale = Reuse.lookup(fields: ["Cache-Control": "max-stale"], candidates: [facts], at: 10)
        #expect(Reuse.forwarded(withMaxStale)?.reasons == [.invalidated])
    }
}

extension FreshenedResponse {
    /// The fields and facts, to take apart as a tuple.
    fileprivate var fieldsAndFacts: (HeaderFields, StoredResponseFacts) { (fields, facts) }
}
