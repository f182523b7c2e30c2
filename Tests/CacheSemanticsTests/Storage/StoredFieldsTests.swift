import CacheTestSupport
import Testing

@testable import CacheSemantics

// Which fields are stored (RFC 9111 §3.1) and how a newer response updates them (§3.2).

private func storedResponse(_ fields: HeaderFields, responseTime: Timestamp = Fixtures.epoch) -> StorableResponse? {
    storedResponse(CacheEngine(), fields, responseTime: responseTime)
}

private func storedResponse(
    _ engine: CacheEngine, _ fields: HeaderFields, responseTime: Timestamp = Fixtures.epoch
) -> StorableResponse? {
    let decision = engine.storageDecision(
        for: RequestHead(uri: "https://example.com/page"), response: ResponseHead(status: 200, fields: fields),
        requestTime: Fixtures.epoch, responseTime: responseTime)
    if case .store(let response) = decision { return response }
    return nil
}

private func lines(_ fields: HeaderFields) -> [String] {
    fields.map { "\($0.name): \($0.value)" }
}

@Suite("RFC 9111 §3.1 Storing header fields")
struct StorageStoredFieldsTests {
    @Test("§3.1, RFC 9110 §7.6.1: Connection, the fields it names and the proxy-specific fields are not stored")
    func connectionSpecificFieldsDropped() throws {
        let fields: HeaderFields = [
            "Date": Fixtures.httpDate(),
            "Connection": "close, X-Trace",
            "Cache-Control": "max-age=60",
            "X-Trace": "abc",
            "Keep-Alive": "timeout=5",
            "Transfer-Encoding": "chunked",
            "Upgrade": "h2c",
            "Proxy-Authenticate": "Basic realm=\"proxy\"",
            "Proxy-Authentication-Info": "nextnonce=\"x\"",
            "Proxy-Authorization": "Basic Zm9vOmJhcg==",
            "Content-Type": "text/html",
        ]
        let response = try #require(storedResponse(fields))
        #expect(
            lines(response.fields) == [
                "Date: \(Fixtures.httpDate())", "Cache-Control: max-age=60", "Content-Type: text/html",
            ])
        #expect(
            response.notes == [
                .fieldsNotStored([
                    "Connection", "X-Trace", "Keep-Alive", "Transfer-Encoding", "Upgrade", "Proxy-Authenticate",
                    "Proxy-Authentication-Info", "Proxy-Authorization",
                ])
            ])
    }

    @Test("§3.1, RFC 9110 §7.6.1: a Connection naming many fields drops each of them and keeps the rest")
    func manyConnectionNamedFieldsDropped() throws {
        let named = (1...12).map { "X-Hop-\($0)" }
        var fields = HeaderFields([
            ("Date", Fixtures.httpDate()), ("Connection", named.joined(separator: ", ")),
            ("Cache-Control", "max-age=60"),
        ])
        for name in named { fields.append(name: name.uppercased(), value: "1") }
        fields.append(name: "X-Kept", value: "2")
        let response = try #require(storedResponse(fields))
        #expect(lines(response.fields) == ["Date: \(Fixtures.httpDate())", "Cache-Control: max-age=60", "X-Kept: 2"])
        #expect(response.notes == [.fieldsNotStored(["Connection"] + named.map { $0.uppercased() })])
    }

    @Test(
        "§3.1: each connection-specific or proxy-specific field is dropped, whatever its case",
        arguments: [
            "Connection", "Keep-Alive", "Transfer-Encoding", "Upgrade", "Proxy-Authenticate",
            "Proxy-Authentication-Info", "Proxy-Authorization", "proxy-authorization", "KEEP-ALIVE",
            "Proxy-Connection", "TE",
        ])
    func singleFieldDropped(name: String) throws {
        let fields = HeaderFields([("Date", Fixtures.httpDate()), ("Cache-Control", "max-age=60"), (name, "x")])
        let response = try #require(storedResponse(fields))
        #expect(!response.fields.contains(name))
        #expect(response.fields.count == 2)
        #expect(response.notes == [.fieldsNotStored([name])])
    }

    @Test("§3.1, RFC 9110 §7.6.1: a field Connection names is dropped case-insensitively, every line of it")
    func connectionNamedFieldCaseInsensitive() throws {
        let fields = HeaderFields([
            ("Date", Fixtures.httpDate()), ("Connection", "x-custom-hop"), ("Cache-Control", "max-age=60"),
            ("X-Custom-Hop", "1"), ("x-custom-hop", "2"), ("X-Kept", "3"),
        ])
        let response = try #require(storedResponse(fields))
        #expect(lines(response.fields) == ["Date: \(Fixtures.httpDate())", "Cache-Control: max-age=60", "X-Kept: 3"])
    }

    @Test(
        "§3.1, §5.2.2.4: qualified no-cache=\"Set-Cookie\" keeps Set-Cookie out of private and shared caches",
        arguments: [CacheEngine.Configuration.privateCache, .sharedCache])
    func qualifiedNoCacheDropsField(configuration: CacheEngine.Configuration) throws {
        let fields = HeaderFields([
            ("Date", Fixtures.httpDate()), ("Cache-Control", "max-age=60, no-cache=\"Set-Cookie\""),
            ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2"), ("Content-Type", "text/plain"),
        ])
        let response = try #require(storedResponse(CacheEngine(configuration: configuration), fields))
        #expect(
            lines(response.fields) == [
                "Date: \(Fixtures.httpDate())", "Cache-Control: max-age=60, no-cache=\"Set-Cookie\"",
                "Content-Type: text/plain",
            ])
        #expect(response.notes == [.fieldsNotStored(["Set-Cookie", "Set-Cookie"])])
        // The qualified form does not require validation of the whole response (§5.2.2.4).
        #expect(!response.facts.flags.contains(.noCache))
    }

    @Test("§3.1, §5.2.2.7: qualified private=\"X-User\" drops X-User in a shared cache only")
    func qualifiedPrivateDropsFieldInSharedCacheOnly() throws {
        let fields = HeaderFields([
            ("Date", Fixtures.httpDate()), ("Cache-Control", "max-age=60, private=\"X-User\""), ("X-User", "alice"),
        ])
        let shared = try #require(storedResponse(CacheEngine(configuration: .sharedCache), fields))
        #expect(!shared.fields.contains("X-User"))
        #expect(shared.notes == [.fieldsNotStored(["X-User"])])

        let personal = try #require(storedResponse(CacheEngine(), fields))
        #expect(personal.fields.values(named: "X-User") == ["alice"])
        #expect(personal.notes.isEmpty)
    }

    @Test("§3.1: unrecognized fields are kept, with field order and repeated lines unchanged (RFC 9110 §5.3)")
    func unrecognizedFieldsKeptInOrder() throws {
        let fields = HeaderFields([
            ("Date", Fixtures.httpDate()), ("X-Zeta", "1"), ("Set-Cookie", "a=1; Path=/"),
            ("Cache-Control", "max-age=60"),
            ("x-zeta", "2"), ("Set-Cookie", "b=2, c=3"), ("X-New-Feature-2031", "?1"), ("Trailer-Like", "x"),
        ])
        let response = try #require(storedResponse(fields))
        #expect(response.fields == fields)
        #expect(response.notes.isEmpty)
    }

    @Test("§3.1, RFC 9110 §6.6.1: a missing Date is added from the response time, with a note")
    func missingDateAdded() throws {
        let received = Fixtures.epoch + 42
        let response = try #require(storedResponse(["Cache-Control": "max-age=60"], responseTime: received))
        #expect(lines(response.fields) == ["Cache-Control: max-age=60", "Date: \(Fixtures.httpDate(42))"])
        #expect(response.notes == [.dateAddedFromResponseTime])
        #expect(response.facts.date == received)
    }

    @Test("RFC 9110 §6.6.1: a present Date is kept as received and no note is added")
    func presentDateKept() throws {
        let response = try #require(
            storedResponse(
                ["Date": Fixtures.httpDate(-5), "Cache-Control": "max-age=60"], responseTime: Fixtures.epoch))
        #expect(response.fields["Date"] == Fixtures.httpDate(-5))
        #expect(response.notes.isEmpty)
        #expect(response.facts.date == Fixtures.epoch - 5)
    }
}

@Suite("RFC 9111 §3.2 Updating stored header fields")
struct StorageUpdatedFieldsTests {
    let engine = CacheEngine()
    let stored = HeaderFields([
        ("Date", Fixtures.httpDate(-100)), ("Cache-Control", "max-age=60"), ("ETag", "\"v1\""),
        ("Content-Length", "1024"), ("Content-Range", "bytes 0-1023/2048"), ("Age", "30"), ("X-Old", "kept"),
        ("Set-Cookie", "old=1"),
    ])

    @Test("§3.2: each field of the newer response replaces all stored lines of that name; others are kept")
    func newerValuesReplace() {
        let newer = HeaderFields([
            ("Date", Fixtures.httpDate()), ("Cache-Control", "max-age=120"), ("Set-Cookie", "a=1"),
            ("Set-Cookie", "b=2"), ("X-New", "added"), ("Age", "3"),
        ])
        let result = engine.updatedFields(stored: stored, with: newer, responseTime: Fixtures.epoch)
        #expect(
            lines(result) == [
                "ETag: \"v1\"", "Content-Length: 1024", "Content-Range: bytes 0-1023/2048", "X-Old: kept",
                "Date: \(Fixtures.httpDate())", "Cache-Control: max-age=120", "Set-Cookie: a=1", "Set-Cookie: b=2",
                "X-New: added", "Age: 3",
            ])
    }

    @Test("§3.2: Content-Length and Content-Range of the newer response are not taken")
    func contentLengthAndRangeNotUpdated() {
        let newer = HeaderFields([
            ("Date", Fixtures.httpDate()), ("Content-Length", "0"), ("content-range", "bytes */2048"), ("Age", "0"),
        ])
        let result = engine.updatedFields(stored: stored, with: newer, responseTime: Fixtures.epoch)
        #expect(result.values(named: "Content-Length") == ["1024"])
        #expect(result.values(named: "Content-Range") == ["bytes 0-1023/2048"])
    }

    @Test("§3.2, RFC 9530 §2: a 304's Content-Digest (of its own, empty content) is not taken; its Repr-Digest is")
    func contentDigestNotUpdated() {
        var withDigest = stored
        withDigest.append(name: "Content-Digest", value: "sha-256=:stored:")
        let newer = HeaderFields([
            ("Date", Fixtures.httpDate()), ("Content-Digest", "sha-256=:empty:"), ("Repr-Digest", "sha-256=:same:"),
        ])
        let result = engine.updatedFields(stored: withDigest, with: newer, responseTime: Fixtures.epoch)
        #expect(result.values(named: "Content-Digest") == ["sha-256=:stored:"])
        #expect(result.values(named: "Repr-Digest") == ["sha-256=:same:"])
    }

    @Test("§3.2, §3.1: connection-specific, Connection-named and proxy-specific fields are not taken")
    func hopByHopNotTaken() {
        let newer = HeaderFields([
            ("Date", Fixtures.httpDate()), ("Connection", "keep-alive, X-Hop"), ("Keep-Alive", "timeout=5"),
            ("X-Hop", "1"), ("Transfer-Encoding", "chunked"), ("Upgrade", "h2c"), ("Proxy-Authenticate", "Basic"),
            ("Proxy-Authentication-Info", "x"), ("Proxy-Authorization", "Basic eA=="), ("ETag", "\"v1\""),
        ])
        let result = engine.updatedFields(stored: stored, with: newer, responseTime: Fixtures.epoch)
        for name in [
            "Connection", "Keep-Alive", "X-Hop", "Transfer-Encoding", "Upgrade", "Proxy-Authenticate",
            "Proxy-Authentication-Info", "Proxy-Authorization",
        ] {
            #expect(!result.contains(name), "\(name) was taken from the newer response")
        }
        #expect(result.values(named: "ETag") == ["\"v1\""])
        #expect(result["Date"] == Fixtures.httpDate())
    }

    @Test("§3.2, §4.2.3: a stored Age is removed when the newer response has none")
    func ageRemovedWhenAbsent() {
        let newer = HeaderFields([("Date", Fixtures.httpDate())])
        let result = engine.updatedFields(stored: stored, with: newer, responseTime: Fixtures.epoch)
        #expect(!result.contains("Age"))
        #expect(result.values(named: "X-Old") == ["kept"])
    }

    @Test("§3.2, RFC 9110 §6.6.1: when the newer response has no Date, Date becomes its response time")
    func dateAddedWhenMissing() {
        let newer = HeaderFields([("ETag", "\"v1\"")])
        let received = Fixtures.epoch + 7
        let result = engine.updatedFields(stored: stored, with: newer, responseTime: received)
        #expect(result.values(named: "Date") == [Fixtures.httpDate(7)])

        let withoutDate = engine.updatedFields(stored: ["ETag": "\"v1\""], with: newer, responseTime: received)
        #expect(lines(withoutDate) == ["ETag: \"v1\"", "Date: \(Fixtures.httpDate(7))"])
    }

    @Test(
        "§3.2, §3.1, §5.2.2.4, §5.2.2.7: a newer response does not bring fields the stored no-cache= or private= names"
    )
    func storedQualifiedDirectivesStayInForce() {
        let stored = HeaderFields([
            ("Date", Fixtures.httpDate(-100)),
            ("Cache-Control", "max-age=60, private=\"Set-Cookie\", no-cache=\"X-Secret\""),
            ("ETag", "\"v1\""),
        ])
        let newer = HeaderFields([
            ("Date", Fixtures.httpDate()), ("ETag", "\"v1\""), ("Set-Cookie", "session=bob"), ("X-Secret", "s"),
            ("X-Other", "o"),
        ])
        let shared = CacheEngine(configuration: .sharedCache).updatedFields(
            stored: stored, with: newer, responseTime: Fixtures.epoch)
        #expect(!shared.contains("Set-Cookie"))
        #expect(!shared.contains("X-Secret"))
        #expect(shared["X-Other"] == "o")
        #expect(shared["Cache-Control"] == "max-age=60, private=\"Set-Cookie\", no-cache=\"X-Secret\"")
        // no-cache="field" binds every cache; private="field" only shared ones.
        let own = engine.updatedFields(stored: stored, with: newer, responseTime: Fixtures.epoch)
        #expect(own.values(named: "Set-Cookie") == ["session=bob"])
        #expect(!own.contains("X-Secret"))
    }

    @Test("§3.2, §3.1: a field the newer response's qualified no-cache names is not taken into the stored response")
    func qualifiedNoCacheOfNewerResponseNotTaken() {
        let newer = HeaderFields([
            ("Date", Fixtures.httpDate()), ("Cache-Control", "max-age=60, no-cache=\"Set-Cookie\""),
            ("Set-Cookie", "session=secret"),
        ])
        let result = engine.updatedFields(stored: stored, with: newer, responseTime: Fixtures.epoch)
        #expect(!result.values(named: "Set-Cookie").contains("session=secret"))
        #expect(result.values(named: "Cache-Control") == ["max-age=60, no-cache=\"Set-Cookie\""])
    }
}
