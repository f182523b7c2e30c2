import CacheTestSupport
import Testing

@testable import CacheSemantics

// Freshness lifetime (RFC 9111 §4.2.1, §4.2.2, §5.3) and age (§4.2.3).

/// Facts as the engine computes them for a stored response.
private func facts(
    _ engine: CacheEngine, status: Int = 200, _ fields: HeaderFields, requestTime: Timestamp = Fixtures.epoch,
    responseTime: Timestamp = Fixtures.epoch
) -> (facts: StoredResponseFacts, notes: [Reason]) {
    engine.makeFacts(
        status: status, fields: fields, requestFields: [:], requestTime: requestTime, responseTime: responseTime)
}

private func facts(
    _ engine: CacheEngine, status: Int = 200, _ pairs: [(String, String)], requestTime: Timestamp = Fixtures.epoch,
    responseTime: Timestamp = Fixtures.epoch
) -> (facts: StoredResponseFacts, notes: [Reason]) {
    facts(engine, status: status, HeaderFields(pairs), requestTime: requestTime, responseTime: responseTime)
}

/// Facts computed by a private cache.
private func facts(
    status: Int = 200, _ fields: HeaderFields, requestTime: Timestamp = Fixtures.epoch,
    responseTime: Timestamp = Fixtures.epoch
) -> (facts: StoredResponseFacts, notes: [Reason]) {
    facts(CacheEngine(), status: status, fields, requestTime: requestTime, responseTime: responseTime)
}

private func facts(
    status: Int = 200, _ pairs: [(String, String)], requestTime: Timestamp = Fixtures.epoch,
    responseTime: Timestamp = Fixtures.epoch
) -> (facts: StoredResponseFacts, notes: [Reason]) {
    facts(CacheEngine(), status: status, HeaderFields(pairs), requestTime: requestTime, responseTime: responseTime)
}

private let shared = CacheEngine(configuration: CacheEngine.Configuration(isShared: true))
private let date: (String, String) = ("Date", Fixtures.httpDate())

@Suite("RFC 9111 §4.2.1 Calculating freshness lifetime")
struct StorageFreshnessLifetimeTests {
    @Test("§4.2.1: a shared cache uses s-maxage before max-age and Expires")
    func sMaxAgeFirstInSharedCache() {
        let fields = HeaderFields([
            date, ("Cache-Control", "max-age=60, s-maxage=30"), ("Expires", Fixtures.httpDate(3600)),
        ])
        let (result, notes) = facts(shared, fields)
        #expect(result.freshnessLifetime == 30)
        #expect(result.lifetimeSource == .sMaxAge)
        #expect(result.flags.contains(.hasSMaxAge))
        #expect(notes.isEmpty)
    }

    @Test("§4.2.1, §5.2.2.10: a private cache ignores s-maxage and uses max-age")
    func privateCacheIgnoresSMaxAge() {
        let fields = HeaderFields([
            date, ("Cache-Control", "max-age=60, s-maxage=30"), ("Expires", Fixtures.httpDate(3600)),
        ])
        let (result, _) = facts(fields)
        #expect(result.freshnessLifetime == 60)
        #expect(result.lifetimeSource == .maxAge)
    }

    @Test("§4.2.1, §5.3: with max-age present, Expires is ignored, even an invalid one")
    func maxAgeBeatsExpires() {
        for expires in [Fixtures.httpDate(3600), "0", "garbage"] {
            let (result, notes) = facts([date, ("Expires", expires), ("Cache-Control", "max-age=90")])
            #expect(result.freshnessLifetime == 90)
            #expect(result.lifetimeSource == .maxAge)
            #expect(notes.isEmpty, "Expires '\(expires)' was evaluated despite max-age")
        }
    }

    @Test("§5.3: with s-maxage present, a shared cache ignores Expires")
    func sMaxAgeBeatsExpiresInSharedCache() {
        let (result, notes) = facts(shared, [date, ("Expires", "0"), ("Cache-Control", "s-maxage=15")])
        #expect(result.freshnessLifetime == 15)
        #expect(result.lifetimeSource == .sMaxAge)
        #expect(notes.isEmpty)
    }

    @Test("§4.2.1: without max-age, the lifetime is Expires minus Date")
    func expiresMinusDate() {
        let (result, notes) = facts(
            [("Date", Fixtures.httpDate(-20)), ("Expires", Fixtures.httpDate(3580))], responseTime: Fixtures.epoch)
        #expect(result.freshnessLifetime == 3600)
        #expect(result.lifetimeSource == .expires)
        #expect(notes.isEmpty)
    }

    @Test("§4.2.1, RFC 9110 §6.6.1: without Date, Expires is measured from the response time")
    func expiresMinusResponseTimeWhenDateAbsent() {
        let received = Fixtures.epoch + 100
        let (result, _) = facts([("Expires", Fixtures.httpDate(400))], responseTime: received)
        #expect(result.freshnessLifetime == 300)
        #expect(result.date == received)
        #expect(result.lifetimeSource == .expires)
    }

    @Test("§4.2.1: an invalid Date is replaced by the response time, with a note")
    func invalidDateUsesResponseTime() {
        let received = Fixtures.epoch + 100
        let (result, notes) = facts(
            [("Date", "yesterday"), ("Expires", Fixtures.httpDate(400))], responseTime: received)
        #expect(result.date == received)
        #expect(result.freshnessLifetime == 300)
        #expect(notes == [.invalidDate("yesterday")])
    }

    @Test("§4.2.1 through storage: a stored response without Date measures Expires from the response time")
    func expiresThroughStorageWithoutDate() throws {
        let decision = CacheEngine().storageDecision(
            for: RequestHead(uri: "https://example.com/"),
            response: ResponseHead(status: 200, fields: ["Expires": Fixtures.httpDate(600)]),
            requestTime: Fixtures.epoch, responseTime: Fixtures.epoch + 10)
        guard case .store(let stored) = decision else {
            Issue.record("expected the response to be stored, got \(decision)")
            return
        }
        #expect(stored.facts.freshnessLifetime == 590)
        #expect(stored.notes == [.dateAddedFromResponseTime])
    }

    @Test("§4.2, §4.2.1: an Expires before Date gives a negative lifetime: stale on arrival")
    func expiresBeforeDate() {
        let (result, _) = facts([date, ("Expires", Fixtures.httpDate(-60))])
        #expect(result.freshnessLifetime == -60)
        #expect(result.lifetimeSource == .expires)
        #expect(!(result.freshnessLifetime > result.currentAge(at: Fixtures.epoch)))
    }

    @Test(
        "§5.3: an invalid Expires, especially \"0\", means already expired, with a note",
        arguments: ["0", "-1", "soon", "Thu, 01 Dec 1994 16:00:00 PST", "1994-12-01T16:00:00Z", ""])
    func invalidExpiresIsExpired(expires: String) {
        let (result, notes) = facts(
            [date, ("Expires", expires), ("Last-Modified", Fixtures.httpDate(-100_000))])
        #expect(result.freshnessLifetime == 0)
        #expect(result.lifetimeSource == .invalid)
        #expect(notes == [.invalidExpires(expires)])
    }

    @Test("§4.2.1: two different Expires lines make the response stale, with a note")
    func conflictingExpiresIsStale() {
        let (result, notes) = facts(
            [date, ("Expires", Fixtures.httpDate(60)), ("Expires", Fixtures.httpDate(120))])
        #expect(result.freshnessLifetime == 0)
        #expect(result.lifetimeSource == .invalid)
        #expect(notes == [.conflictingExpires])
    }

    @Test("§4.2.1: two identical Expires lines are one value")
    func repeatedIdenticalExpires() {
        let (result, notes) = facts(
            [date, ("Expires", Fixtures.httpDate(60)), ("Expires", Fixtures.httpDate(60))])
        #expect(result.freshnessLifetime == 60)
        #expect(result.lifetimeSource == .expires)
        #expect(notes.isEmpty)
    }

    @Test("§5.2.2.1: max-age=0 is an explicit zero lifetime, unlike no freshness information at all")
    func maxAgeZeroVersusAbsent() {
        let zero = facts([date, ("Cache-Control", "max-age=0")]).facts
        #expect(zero.freshnessLifetime == 0)
        #expect(zero.lifetimeSource == .maxAge)

        let absent = facts([date]).facts
        #expect(absent.freshnessLifetime == 0)
        #expect(absent.lifetimeSource == .none)
    }

    @Test("§5.2, §5.2.2.1: a quoted max-age=\"60\" is accepted as 60")
    func quotedMaxAge() {
        let (result, notes) = facts([date, ("Cache-Control", "max-age=\"60\"")])
        #expect(result.freshnessLifetime == 60)
        #expect(result.lifetimeSource == .maxAge)
        #expect(notes.isEmpty)
    }

    @Test("§4.2.1: conflicting max-age values make the response stale with source .invalid")
    func conflictingMaxAge() {
        let fields = HeaderFields([date, ("Cache-Control", "max-age=60"), ("Cache-Control", "max-age=120")])
        let result = facts(fields).facts
        #expect(result.freshnessLifetime == 0)
        #expect(result.lifetimeSource == .invalid)
        #expect(
            ResponseCacheControl(fields: fields).notes == [
                .conflictingDirective(field: "Cache-Control", directive: "max-age")
            ])
    }

    @Test("§4.2.1: a repeated max-age with the same value is not a conflict")
    func repeatedSameMaxAge() {
        let result = facts([date, ("Cache-Control", "max-age=60, max-age=60")]).facts
        #expect(result.freshnessLifetime == 60)
        #expect(result.lifetimeSource == .maxAge)
    }

    @Test(
        "§4.2.1, §1.2.2: a max-age that is not delta-seconds makes the response stale",
        arguments: ["max-age=abc", "max-age=-1", "max-age=1.5", "max-age", "max-age=\"\""])
    func invalidMaxAge(cacheControl: String) {
        let result = facts([date, ("Cache-Control", cacheControl), ("Expires", Fixtures.httpDate(600))]).facts
        #expect(result.freshnessLifetime == 0)
        #expect(result.lifetimeSource == .invalid)
    }

    @Test("§4.2.1: an invalid s-maxage makes a shared cache's copy stale, but not a private cache's")
    func invalidSMaxAge() {
        let fields = HeaderFields([date, ("Cache-Control", "s-maxage=x, max-age=60")])
        let sharedFacts = facts(shared, fields).facts
        #expect(sharedFacts.freshnessLifetime == 0)
        #expect(sharedFacts.lifetimeSource == .invalid)

        let privateFacts = facts(fields).facts
        #expect(privateFacts.freshnessLifetime == 60)
        #expect(privateFacts.lifetimeSource == .maxAge)
    }

    @Test("§1.2.2: a max-age above 2^31 is clamped to 2^31")
    func hugeMaxAgeClamped() {
        let result = facts([date, ("Cache-Control", "max-age=99999999999999999999")]).facts
        #expect(result.freshnessLifetime == 2_147_483_648)
        #expect(result.lifetimeSource == .maxAge)
    }
}

@Suite("RFC 9111 §4.2.2 Calculating heuristic freshness")
struct StorageHeuristicFreshnessTests {
    @Test("§4.2.2: the heuristic lifetime is 10% of Date minus Last-Modified")
    func tenPercent() {
        let (result, notes) = facts([date, ("Last-Modified", Fixtures.httpDate(-100_000))])
        #expect(result.freshnessLifetime == 10_000)
        #expect(result.lifetimeSource == .heuristic)
        #expect(result.lastModified == Fixtures.epoch - 100_000)
        #expect(notes.isEmpty)
    }

    @Test("§4.2.2: the heuristic lifetime is capped by maximumHeuristicLifetime")
    func capped() {
        let old = HeaderFields([date, ("Last-Modified", Fixtures.httpDate(-100 * 86_400))])
        #expect(facts(old).facts.freshnessLifetime == 86_400)

        let engine = CacheEngine(configuration: .init(maximumHeuristicLifetime: 3_600))
        let result = facts(engine, old).facts
        #expect(result.freshnessLifetime == 3_600)
        #expect(result.lifetimeSource == .heuristic)
    }

    @Test("§4.2.2: a custom fraction is applied")
    func customFraction() {
        let engine = CacheEngine(configuration: .init(heuristicFraction: 0.25))
        let result = facts(engine, [date, ("Last-Modified", Fixtures.httpDate(-10_000))]).facts
        #expect(result.freshnessLifetime == 2_500)
        #expect(result.lifetimeSource == .heuristic)
    }

    @Test(
        "§4.2.2, RFC 9110 §15.1: heuristics apply to heuristically cacheable statuses only",
        arguments: [
            (200, true), (203, true), (301, true), (404, true), (410, true), (501, true),
            (302, false), (307, false), (500, false), (201, false),
        ])
    func onlyHeuristicallyCacheableStatuses(status: Int, heuristic: Bool) {
        let result = facts(status: status, [date, ("Last-Modified", Fixtures.httpDate(-10_000))]).facts
        #expect(result.freshnessLifetime == (heuristic ? 1_000 : 0))
        #expect(result.lifetimeSource == (heuristic ? .heuristic : .none))
    }

    @Test("§4.2.2, §5.2.2.9: public makes any status heuristically cacheable")
    func publicAllowsHeuristic() {
        let result = facts(
            status: 302, [date, ("Cache-Control", "public"), ("Last-Modified", Fixtures.httpDate(-10_000))]
        )
        .facts
        #expect(result.freshnessLifetime == 1_000)
        #expect(result.lifetimeSource == .heuristic)
    }

    @Test("§4.2.2, §5.2.2.7: private allows heuristics in a private cache only")
    func privateAllowsHeuristicInPrivateCache() {
        let fields = HeaderFields([date, ("Cache-Control", "private"), ("Last-Modified", Fixtures.httpDate(-10_000))])
        let personal = facts(status: 302, fields).facts
        #expect(personal.freshnessLifetime == 1_000)
        #expect(personal.lifetimeSource == .heuristic)

        let sharedFacts = facts(shared, status: 302, fields).facts
        #expect(sharedFacts.freshnessLifetime == 0)
        #expect(sharedFacts.lifetimeSource == .none)
    }

    @Test(
        "§4.2.2: heuristics are never used when an explicit expiration time is present",
        arguments: [
            (HeaderFields([("Cache-Control", "max-age=0")]), 0.0, LifetimeSource.maxAge),
            (HeaderFields([("Expires", Fixtures.httpDate(-30))]), -30.0, LifetimeSource.expires),
            (HeaderFields([("Expires", Fixtures.httpDate(5))]), 5.0, LifetimeSource.expires),
            (HeaderFields([("Expires", "0")]), 0.0, LifetimeSource.invalid),
        ])
    func neverWithExplicitExpiration(explicit: HeaderFields, lifetime: Double, source: LifetimeSource) {
        var fields = explicit
        fields.append(name: "Date", value: Fixtures.httpDate())
        fields.append(name: "Last-Modified", value: Fixtures.httpDate(-1_000_000))
        let result = facts(fields).facts
        #expect(result.freshnessLifetime == lifetime)
        #expect(result.lifetimeSource == source)
    }

    @Test("§4.2.2: without Last-Modified the heuristic lifetime is zero")
    func zeroWithoutLastModified() {
        let result = facts([date, ("ETag", "\"x\"")]).facts
        #expect(result.freshnessLifetime == 0)
        #expect(result.lifetimeSource == .none)
    }

    @Test("§4.2.2: a Last-Modified at or after Date gives no heuristic lifetime")
    func lastModifiedNotBeforeDate() {
        for offset in [0.0, 60.0] {
            let result = facts([date, ("Last-Modified", Fixtures.httpDate(offset))]).facts
            #expect(result.freshnessLifetime == 0)
            #expect(result.lifetimeSource == .none)
        }
    }

    @Test("§4.2.2, RFC 9110 §8.8.2: an invalid Last-Modified is ignored with a note")
    func invalidLastModified() {
        let (result, notes) = facts([date, ("Last-Modified", "last tuesday")])
        #expect(result.lastModified == nil)
        #expect(result.lifetimeSource == .none)
        #expect(notes == [.invalidLastModified("last tuesday")])
    }
}

@Suite("RFC 9111 §4.2.3 Calculating age")
struct StorageAgeTests {
    @Test("§4.2.3: apparent_age, corrected_age_value, corrected_initial_age and resident time, exactly")
    func exactNumbers() {
        // request_time = T, response_time = T+2, date_value = T-3, age_value = 10.
        let (result, _) = facts(
            [("Date", Fixtures.httpDate(-3)), ("Age", "10"), ("Cache-Control", "max-age=100")],
            requestTime: Fixtures.epoch, responseTime: Fixtures.epoch + 2)
        #expect(result.ageValue == 10)
        #expect(result.date == Fixtures.epoch - 3)
        // apparent_age = 5; corrected_age_value = 10 + 2 = 12; corrected_initial_age = 12.
        #expect(result.correctedInitialAge == 12)
        // resident_time = 30.
        #expect(result.currentAge(at: Fixtures.epoch + 32) == 42)
    }

    @Test("§4.2.3: corrected_initial_age takes apparent_age when it is larger")
    func apparentAgeWins() {
        let (result, _) = facts(
            [("Date", Fixtures.httpDate(-50)), ("Age", "1"), ("Cache-Control", "max-age=100")],
            requestTime: Fixtures.epoch, responseTime: Fixtures.epoch + 4)
        // apparent_age = 54; corrected_age_value = 1 + 4 = 5.
        #expect(result.correctedInitialAge == 54)
        #expect(result.currentAge(at: Fixtures.epoch + 10) == 60)
    }

    @Test("§4.2.3: a Date in the future gives an apparent age of zero")
    func futureDate() {
        let (result, _) = facts(
            [("Date", Fixtures.httpDate(300)), ("Cache-Control", "max-age=100")],
            requestTime: Fixtures.epoch, responseTime: Fixtures.epoch)
        #expect(result.correctedInitialAge == 0)
        #expect(result.currentAge(at: Fixtures.epoch + 10) == 10)
    }

    @Test("§4.2.3: a response with Age above max-age is stale as soon as it is received")
    func ageAboveMaxAgeIsStale() {
        let (result, _) = facts([date, ("Age", "100"), ("Cache-Control", "max-age=60")])
        let age = result.currentAge(at: Fixtures.epoch)
        #expect(age == 100)
        #expect(!(result.freshnessLifetime > age))  // §4.2: response_is_fresh is false
    }

    @Test("§4.2.3: a clock that went backwards adds no resident time")
    func clockGoingBackwards() {
        let (result, _) = facts(
            [date, ("Age", "7"), ("Cache-Control", "max-age=60")], requestTime: Fixtures.epoch,
            responseTime: Fixtures.epoch + 1)
        #expect(result.correctedInitialAge == 8)
        #expect(result.currentAge(at: Fixtures.epoch - 1_000) == 8)
        #expect(result.currentAge(at: Fixtures.epoch + 1) == 8)
    }

    @Test("§4.2.3: a response_time before request_time counts as no response delay")
    func negativeResponseDelay() {
        let result = StoredResponseFacts(
            status: 200, requestTime: Fixtures.epoch + 5, responseTime: Fixtures.epoch, date: Fixtures.epoch,
            ageValue: 3, freshnessLifetime: 60, lifetimeSource: .maxAge)
        #expect(result.correctedInitialAge == 3)
    }

    @Test("§5.1: a list-based Age uses its first member; an invalid Age is ignored with a note")
    func ageFieldParsing() {
        #expect(facts([date, ("Age", "10, 20")]).facts.ageValue == 10)
        let (invalid, notes) = facts([date, ("Age", "-5")])
        #expect(invalid.ageValue == 0)
        #expect(notes == [.invalidAge("-5")])
    }
}
