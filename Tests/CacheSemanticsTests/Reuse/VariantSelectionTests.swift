import CacheTestSupport
import Testing

@testable import CacheSemantics

@Suite("RFC 9111 §4.1 Vary and variant selection")
struct VariantSelectionTests {
    /// Three variants of one URL, negotiated on Accept-Encoding: gzip, br, and one for a
    /// request without the field.
    static func encodingVariants() throws -> [StoredResponseFacts] {
        let response: HeaderFields = ["Cache-Control": "max-age=100", "Vary": "Accept-Encoding"]
        return [
            try Reuse.store(response, request: ["Accept-Encoding": "gzip"]),
            try Reuse.store(response, request: ["Accept-Encoding": "br"]),
            try Reuse.store(response, request: [:]),
        ]
    }

    @Test(
        "§4.1: each request selects the variant stored for its Accept-Encoding",
        arguments: [("gzip", 0), ("br", 1)])
    func selectsByAcceptEncoding(encoding: String, expected: Int) throws {
        let candidates = try Self.encodingVariants()
        let decision = Reuse.lookup(fields: ["Accept-Encoding": encoding], candidates: candidates, at: 10)
        let use = try #require(Reuse.served(decision))
        #expect(use.candidate == expected)
        #expect(use.reasons == [.fresh(age: 10, lifetime: 100)])
    }

    @Test(
        "§4.1: a request repeating the original bytes matches at once; one differing in white space or member order matches too"
    )
    func rawAndNormalizedMatching() throws {
        let response: HeaderFields = ["Cache-Control": "max-age=100", "Vary": "Accept-Encoding"]
        let stored = try Reuse.store(response, request: ["Accept-Encoding": "gzip, deflate"])
        #expect(stored.varyRawValues == ["gzip, deflate"])
        #expect(stored.varyValues == ["deflate,gzip"])
        let engine = Reuse.privateEngine
        #expect(engine.selectVariant(["Accept-Encoding": "gzip, deflate"], candidates: [stored]) == 0)
        #expect(engine.selectVariant(["accept-encoding": "gzip ,deflate "], candidates: [stored]) == 0)
        #expect(
            engine.selectVariant(
                HeaderFields([("Accept-Encoding", "gzip"), ("Accept-Encoding", "deflate")]),
                candidates: [stored]) == 0)
        #expect(engine.selectVariant(["Accept-Encoding": "gzip, deflate, br"], candidates: [stored]) == nil)
        #expect(engine.selectVariant(["Accept-Encoding": "deflate, gzip"], candidates: [stored]) == 0)
    }

    @Test("§4.1: variants negotiated on two fields need both to match")
    func selectsByEncodingAndLanguage() throws {
        let response: HeaderFields = ["Cache-Control": "max-age=100", "Vary": "Accept-Encoding, Accept-Language"]
        let candidates = [
            try Reuse.store(response, request: ["Accept-Encoding": "gzip", "Accept-Language": "en"]),
            try Reuse.store(response, request: ["Accept-Encoding": "gzip", "Accept-Language": "fr"]),
            try Reuse.store(response, request: ["Accept-Encoding": "br", "Accept-Language": "fr"]),
        ]
        let engine = Reuse.privateEngine
        #expect(
            engine.selectVariant(["Accept-Encoding": "gzip", "Accept-Language": "fr"], candidates: candidates) == 1)
        #expect(
            engine.selectVariant(["Accept-Language": "en", "Accept-Encoding": "gzip"], candidates: candidates) == 0)
        #expect(engine.selectVariant(["Accept-Encoding": "br", "Accept-Language": "fr"], candidates: candidates) == 2)
        #expect(
            engine.selectVariant(["Accept-Encoding": "br", "Accept-Language": "en"], candidates: candidates) == nil)
    }

    @Test(
        "§4.1: whitespace around list members does not prevent a match",
        arguments: ["gzip,deflate", "gzip ,  deflate", "  gzip,\tdeflate  "])
    func whitespaceDifferencesMatch(value: String) throws {
        let facts = try Reuse.store(
            ["Cache-Control": "max-age=100", "Vary": "Accept-Encoding"], request: ["Accept-Encoding": "gzip, deflate"])
        let use = try #require(
            Reuse.served(Reuse.lookup(fields: ["Accept-Encoding": value], candidates: [facts], at: 10)))
        #expect(use.candidate == 0)
    }

    @Test("§4.1: a field split over several lines matches the same members on one line")
    func combinedLinesMatch() throws {
        let facts = try Reuse.store(
            ["Cache-Control": "max-age=100", "Vary": "Accept-Encoding"], request: ["Accept-Encoding": "gzip, deflate"])
        let split = HeaderFields([("Accept-Encoding", "gzip"), ("accept-encoding", "deflate")])
        let use = try #require(Reuse.served(Reuse.lookup(fields: split, candidates: [facts], at: 10)))
        #expect(use.candidate == 0)

        // And the other way round: stored from split lines, requested on one line.
        let fromSplit = try Reuse.store(["Cache-Control": "max-age=100", "Vary": "Accept-Encoding"], request: split)
        let oneLine = try #require(
            Reuse.served(Reuse.lookup(fields: ["Accept-Encoding": "gzip, deflate"], candidates: [fromSplit], at: 10)))
        #expect(oneLine.candidate == 0)
    }

    @Test("§4.1, RFC 9110 §5.1: Vary field names match request fields whatever their case")
    func fieldNameCaseIsIgnored() throws {
        let facts = try Reuse.store(
            ["Cache-Control": "max-age=100", "Vary": "ACCEPT-ENCODING"], request: ["accept-encoding": "gzip"])
        #expect(Reuse.privateEngine.selectVariant(["Accept-Encoding": "gzip"], candidates: [facts]) == 0)
        #expect(Reuse.privateEngine.selectVariant(["Accept-Encoding": "br"], candidates: [facts]) == nil)
    }

    @Test("§4.1: a field absent from the original request only matches a request where it is also absent")
    func absentFieldMatchesOnlyAbsent() throws {
        let response: HeaderFields = ["Cache-Control": "max-age=100", "Vary": "Accept-Language"]
        let withoutField = try Reuse.store(response, request: [:])
        let withField = try Reuse.store(response, request: ["Accept-Language": "en"])
        let engine = Reuse.privateEngine

        #expect(engine.selectVariant([:], candidates: [withoutField]) == 0)
        #expect(engine.selectVariant(["Accept-Language": "en"], candidates: [withoutField]) == nil)
        #expect(engine.selectVariant(["Accept-Language": ""], candidates: [withoutField]) == nil)
        #expect(engine.selectVariant([:], candidates: [withField]) == nil)
    }

    @Test("§4.1: an absent field and an empty one are different variants, with different variant keys")
    func absentAndEmptyHaveDifferentVariantKeys() throws {
        let response: HeaderFields = ["Cache-Control": "max-age=100", "Vary": "X-Flag, X-Other"]
        let absent = try Reuse.store(response, request: ["X-Other": "1"])
        let empty = try Reuse.store(response, request: ["X-Flag": "", "X-Other": "1"])
        #expect(Reuse.privateEngine.selectVariant(["X-Other": "1"], candidates: [empty, absent]) == 1)
        #expect(Reuse.privateEngine.selectVariant(["X-Flag": "", "X-Other": "1"], candidates: [absent, empty]) == 1)
        #expect(absent.variantKey != empty.variantKey)
        // Plain text: no U+0000, which a C string (SQLite's text) would end at.
        #expect(!absent.variantKey.contains("\u{0}") && !empty.variantKey.contains("\u{0}"))
    }

    @Test(
        "§4.1, RFC 9110 §12.4.3: Accept-Language members that exclude nothing else excluded are normalised away",
        arguments: [
            ("en, fr;q=0", true), ("fr;q=0, EN", true), ("en, *;q=0", true), ("en, en", true),
            ("en, en-gb;q=0", false), ("*, fr;q=0", false), ("en, fr;q=0.5", false), ("fr;q=0", false),
        ])
    func voidLanguageExclusions(_ value: String, _ sameAsEnglish: Bool) throws {
        let english = try Reuse.store(
            ["Cache-Control": "max-age=100", "Vary": "Accept-Language"], request: ["Accept-Language": "en"])
        let selected = Reuse.privateEngine.selectVariant(["Accept-Language": value], candidates: [english])
        #expect((selected == 0) == sameAsEnglish)
    }

    @Test("§4.1: a stored variant is not chosen by its Content-Language for another Accept-Language")
    func contentLanguageDoesNotWidenTheMatch() throws {
        // cache-tests vary-normalise-lang-select expects this to match; "en, de" and
        // "fr;q=0.5, de;q=1.0" do not have identical semantics, so §4.1 forbids it.
        let german = try Reuse.store(
            ["Cache-Control": "max-age=100", "Vary": "Accept-Language", "Content-Language": "de"],
            request: ["Accept-Language": "en, de"])
        #expect(
            Reuse.privateEngine.selectVariant(["Accept-Language": "fr;q=0.5, de;q=1.0"], candidates: [german]) == nil)
        #expect(Reuse.privateEngine.selectVariant(["Accept-Language": "de;q=1.0, EN"], candidates: [german]) == 0)
    }

    @Test("§4.1: when no stored variant matches, the request is forwarded as a vary-miss")
    func noMatchIsVaryMiss() throws {
        let candidates = try Self.encodingVariants()
        let decision = Reuse.lookup(fields: ["Accept-Encoding": "zstd"], candidates: candidates, at: 10)
        let forwarding = try #require(Reuse.forwarded(decision))
        #expect(forwarding.reason == .varyMiss)
        #expect(forwarding.candidate == nil)
        #expect(forwarding.isValidation == false)
        #expect(forwarding.reasons == [.noVariantMatches])
    }

    @Test("§4.1: a stored response with Vary: * never matches")
    func varyStarNeverMatches() throws {
        let facts = StoredResponseFacts(
            status: 200, requestTime: Fixtures.epoch, responseTime: Fixtures.epoch, date: Fixtures.epoch,
            freshnessLifetime: 100, lifetimeSource: .maxAge, vary: Vary(fieldNames: [], isAny: true))
        #expect(Reuse.privateEngine.selectVariant([:], candidates: [facts]) == nil)
        let forwarding = try #require(Reuse.forwarded(Reuse.lookup(candidates: [facts], at: 10)))
        #expect(forwarding.reason == .varyMiss)
        #expect(forwarding.reasons == [.noVariantMatches])

        // Vary: * alongside named fields matches nothing either, even with identical requests.
        let mixed = StoredResponseFacts(
            status: 200, requestTime: Fixtures.epoch, responseTime: Fixtures.epoch, date: Fixtures.epoch,
            freshnessLifetime: 100, lifetimeSource: .maxAge,
            vary: Vary(fieldNames: ["Accept-Encoding"], isAny: true), varyValues: ["gzip"])
        #expect(Reuse.privateEngine.selectVariant(["Accept-Encoding": "gzip"], candidates: [mixed]) == nil)
    }

    @Test("§4.1: a response with Vary: * is not stored, since it could never be reused")
    func varyStarIsNotStored() {
        let decision = Reuse.privateEngine.storageDecision(
            for: RequestHead(uri: Reuse.uri),
            response: ResponseHead(
                status: 200, fields: ["Cache-Control": "max-age=100", "Vary": "Accept-Encoding, *"]),
            requestTime: Fixtures.epoch, responseTime: Fixtures.epoch)
        #expect(decision == .doNotStore([.varyStar]))
    }

    @Test("§4, §4.1: among several matching responses the most recent by Date is used")
    func mostRecentDateWins() throws {
        let older = try Reuse.store(["Cache-Control": "max-age=100", "ETag": "\"old\""], at: 0)
        let newer = try Reuse.store(["Cache-Control": "max-age=100", "ETag": "\"new\""], at: 10)
        let first = try #require(Reuse.served(Reuse.lookup(candidates: [older, newer], at: 20)))
        #expect(first.candidate == 1)
        #expect(first.currentAge == 10)
        let second = try #require(Reuse.served(Reuse.lookup(candidates: [newer, older], at: 20)))
        #expect(second.candidate == 0)
    }

    @Test("§4: the Date field, not the time of receipt, decides which response is most recent")
    func dateFieldDecidesRecency() throws {
        // Received later, but the origin dated it earlier.
        let datedEarlier = try Reuse.store(
            ["Cache-Control": "max-age=100", "Date": Fixtures.httpDate(-30)], at: 10)
        let datedLater = try Reuse.store(["Cache-Control": "max-age=100", "Date": Fixtures.httpDate(0)], at: 0)
        #expect(Reuse.privateEngine.selectVariant([:], candidates: [datedEarlier, datedLater]) == 1)
    }

    @Test("§4.1: a response with a Vary field is preferred over a more recent one without")
    func responseWithVaryPreferred() throws {
        let withVary = try Reuse.store(
            ["Cache-Control": "max-age=100", "Vary": "Accept-Encoding"], request: ["Accept-Encoding": "gzip"], at: 0)
        let withoutVary = try Reuse.store(
            ["Cache-Control": "max-age=100"], request: ["Accept-Encoding": "gzip"], at: 10)
        let engine = Reuse.privateEngine
        #expect(engine.selectVariant(["Accept-Encoding": "gzip"], candidates: [withoutVary, withVary]) == 1)
        #expect(engine.selectVariant(["Accept-Encoding": "gzip"], candidates: [withVary, withoutVary]) == 0)
        // When the Vary response does not match, the one without Vary is still usable.
        #expect(engine.selectVariant(["Accept-Encoding": "br"], candidates: [withVary, withoutVary]) == 1)
    }

    @Test("§3.3, §4.1: an incomplete stored response is never selected")
    func incompleteNeverSelected() throws {
        var incomplete = try Reuse.store(["Cache-Control": "max-age=100"], at: 10)
        incomplete.flags.insert(.incomplete)
        let complete = try Reuse.store(["Cache-Control": "max-age=100"], at: 0)

        #expect(Reuse.privateEngine.selectVariant([:], candidates: [incomplete, complete]) == 1)
        let use = try #require(Reuse.served(Reuse.lookup(candidates: [incomplete, complete], at: 20)))
        #expect(use.candidate == 1)
    }

    @Test("§3.3, RFC 9211 §2.2: when only an incomplete response matches, the request is forwarded as partial")
    func onlyIncompleteIsPartialMiss() throws {
        var incomplete = try Reuse.store(
            ["Cache-Control": "max-age=100", "Vary": "Accept-Encoding"], request: ["Accept-Encoding": "gzip"])
        incomplete.flags.insert(.incomplete)

        let forwarding = try #require(
            Reuse.forwarded(Reuse.lookup(fields: ["Accept-Encoding": "gzip"], candidates: [incomplete], at: 10)))
        #expect(forwarding.reason == .partial)
        #expect(forwarding.candidate == nil)
        #expect(forwarding.reasons == [.incompleteStoredResponse])

        // A request the incomplete variant would not match anyway is a plain vary-miss.
        let other = try #require(
            Reuse.forwarded(Reuse.lookup(fields: ["Accept-Encoding": "br"], candidates: [incomplete], at: 10)))
        #expect(other.reason == .varyMiss)
        #expect(other.reasons == [.noVariantMatches])
    }
}
