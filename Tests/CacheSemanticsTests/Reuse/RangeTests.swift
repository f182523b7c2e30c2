import CacheTestSupport
import Testing

@testable import CacheSemantics

@Suite("Range requests answered from a stored response (RFC 9110 §14.2, §13.1.5, §15.3.7)")
struct RangeAnswerTests {
    let engine = Reuse.privateEngine

    func stored(_ fields: HeaderFields = ["ETag": "\"v1\"", "Cache-Control": "max-age=60"]) throws
        -> StoredResponseFacts
    {
        try Reuse.store(fields)
    }

    @Test("§14.2: one range → 206 with that range; bytes=N- and suffix ranges clamp to the length")
    func singleRanges() throws {
        let facts = try stored()
        #expect(
            engine.rangeAnswer(method: "GET", request: ["Range": "bytes=0-9"], stored: facts, length: 100)
                == .partial([0...9]))
        #expect(
            engine.rangeAnswer(method: "GET", request: ["Range": "bytes=90-"], stored: facts, length: 100)
                == .partial([90...99]))
        #expect(
            engine.rangeAnswer(method: "GET", request: ["Range": "bytes=-10"], stored: facts, length: 100)
                == .partial([90...99]))
        #expect(
            engine.rangeAnswer(method: "GET", request: ["Range": "bytes=50-500"], stored: facts, length: 100)
                == .partial([50...99]))
    }

    @Test("§15.3.7.2: several ranges → multipart in the request's order, overlapping and adjacent ones coalesced")
    func multipleRanges() throws {
        let facts = try stored()
        #expect(
            engine.rangeAnswer(method: "GET", request: ["Range": "bytes=50-59, 0-9"], stored: facts, length: 100)
                == .partial([50...59, 0...9]))
        // A coalesced range goes where the first of its members was.
        #expect(
            engine.rangeAnswer(method: "GET", request: ["Range": "bytes=-3, 2-4, 0-1"], stored: facts, length: 100)
                == .partial([97...99, 0...4]))
        #expect(
            engine.rangeAnswer(method: "GET", request: ["Range": "bytes=90-95, 10-19, 0-9"], stored: facts, length: 100)
                == .partial([90...95, 0...19]))
        #expect(
            engine.rangeAnswer(method: "GET", request: ["Range": "bytes=0-9, 5-19, 20-29"], stored: facts, length: 100)
                == .partial([0...29]))
    }

    @Test("§15.5.17: no satisfiable range → 416 with the length")
    func unsatisfiable() throws {
        #expect(
            engine.rangeAnswer(method: "GET", request: ["Range": "bytes=100-"], stored: try stored(), length: 100)
                == .unsatisfiable(length: 100))
    }

    @Test("§14.2: a Range that is invalid, of another unit, on a non-GET, or on a non-200 is ignored")
    func ignored() throws {
        let facts = try stored()
        #expect(
            engine.rangeAnswer(method: "GET", request: ["Range": "items=0-9"], stored: facts, length: 100) == .whole)
        #expect(
            engine.rangeAnswer(method: "GET", request: ["Range": "bytes=9-0"], stored: facts, length: 100) == .whole)
        #expect(
            engine.rangeAnswer(method: "HEAD", request: ["Range": "bytes=0-9"], stored: facts, length: 100) == .whole)
        #expect(engine.rangeAnswer(method: "GET", request: [:], stored: facts, length: 100) == .whole)
        let notFound = try Reuse.store(["Cache-Control": "max-age=60"], status: 404)
        #expect(
            engine.rangeAnswer(method: "GET", request: ["Range": "bytes=0-9"], stored: notFound, length: 100) == .whole)
    }

    @Test("§13.1.5: If-Range with an entity tag holds only by strong comparison")
    func ifRangeEntityTag() throws {
        let facts = try stored()
        let range = "bytes=0-9"
        #expect(
            engine.rangeAnswer(
                method: "GET", request: ["Range": range, "If-Range": "\"v1\""], stored: facts, length: 100)
                == .partial([0...9]))
        #expect(
            engine.rangeAnswer(
                method: "GET", request: ["Range": range, "If-Range": "\"v2\""], stored: facts, length: 100) == .whole)
        #expect(
            engine.rangeAnswer(
                method: "GET", request: ["Range": range, "If-Range": "W/\"v1\""], stored: facts, length: 100) == .whole)
        let weak = try stored(["ETag": "W/\"v1\"", "Cache-Control": "max-age=60"])
        #expect(
            engine.rangeAnswer(
                method: "GET", request: ["Range": range, "If-Range": "\"v1\""], stored: weak, length: 100) == .whole)
    }

    @Test("§13.1.5, §8.8.2.2: If-Range with a date holds only when it equals a strong Last-Modified")
    func ifRangeDate() throws {
        let modified = Fixtures.httpDate(-3600)
        let facts = try stored(["Last-Modified": modified, "Cache-Control": "max-age=60"])
        #expect(
            engine.rangeAnswer(
                method: "GET", request: ["Range": "bytes=0-9", "If-Range": modified], stored: facts, length: 100)
                == .partial([0...9]))
        #expect(
            engine.rangeAnswer(
                method: "GET", request: ["Range": "bytes=0-9", "If-Range": Fixtures.httpDate(-60)], stored: facts,
                length: 100) == .whole)
        // Last-Modified equal to Date is weak: the condition is false.
        let weak = try stored(["Last-Modified": Fixtures.httpDate(0), "Cache-Control": "max-age=60"])
        #expect(
            engine.rangeAnswer(
                method: "GET", request: ["Range": "bytes=0-9", "If-Range": Fixtures.httpDate(0)], stored: weak,
                length: 100) == .whole)
    }
}

@Suite("Incomplete responses: resuming and combining (RFC 9111 §3.3, §3.4; RFC 9110 §15.3.7.3)")
struct CombiningTests {
    let engine = Reuse.privateEngine

    @Test("§3.3: resuming asks for the rest with Range and If-Range (a strong ETag, else a strong Last-Modified)")
    func resumption() throws {
        let tagged = try Reuse.store(["ETag": "\"v1\"", "Content-Length": "1000"])
        #expect(
            engine.resumptionFields(stored: tagged, storedLength: 400) == ["Range": "bytes=400-", "If-Range": "\"v1\""])
        let modified = Fixtures.httpDate(-3600)
        let dated = try Reuse.store(["Last-Modified": modified])
        #expect(engine.resumptionFields(stored: dated, storedLength: 5) == ["Range": "bytes=5-", "If-Range": modified])
        #expect(engine.resumptionFields(stored: try Reuse.store(["ETag": "W/\"v1\""]), storedLength: 5) == nil)
        #expect(
            engine.resumptionFields(stored: try Reuse.store(["Cache-Control": "max-age=5"]), storedLength: 5) == nil)
    }

    @Test(
        "§3.4: a 206 combines only when it starts where the stored part ends, runs to the end, and has the same strong validator"
    )
    func continuation() throws {
        let facts = try Reuse.store(["ETag": "\"v1\"", "Content-Length": "1000"])
        func continues(_ fields: HeaderFields, status: Int = 206) -> Bool {
            engine.continues(stored: facts, storedLength: 400, response: ResponseHead(status: status, fields: fields))
        }
        #expect(continues(["Content-Range": "bytes 400-999/1000", "ETag": "\"v1\""]))
        #expect(!continues(["Content-Range": "bytes 400-999/1000", "ETag": "\"v2\""]))
        #expect(!continues(["Content-Range": "bytes 400-999/1000"]))
        #expect(!continues(["Content-Range": "bytes 401-999/1000", "ETag": "\"v1\""]))
        #expect(!continues(["Content-Range": "bytes 400-499/1000", "ETag": "\"v1\""]))
        #expect(!continues(["Content-Range": "bytes 400-1099/1100", "ETag": "\"v1\""]))
        #expect(!continues(["Content-Range": "bytes 400-999/1000", "ETag": "\"v1\""], status: 200))
    }

    @Test(
        "§3.3: a 206 with no validator, or a weak one, is stored as an incomplete 200 and answers ranges within it; §3.4: it never combines",
        arguments: [[:], ["ETag": "W/\"w\""]] as [HeaderFields])
    func partWithoutStrongValidator(_ validator: HeaderFields) throws {
        var fields: HeaderFields = ["Cache-Control": "max-age=60", "Content-Range": "bytes 0-99/1000"]
        for field in validator { fields.append(name: field.name, value: field.value) }
        let decision = engine.storageDecision(
            for: RequestHead(uri: "https://example.com/r", fields: ["Range": "bytes=0-99"]),
            response: ResponseHead(status: 206, fields: fields), requestTime: Reuse.time(0),
            responseTime: Reuse.time(0))
        guard case .store(let part) = decision else {
            Issue.record("not stored: \(decision.reasons)")
            return
        }
        #expect(part.facts.status == 200 && part.facts.flags.has(.incomplete) && part.facts.contentLength == 1000)
        let request = CacheRequest(RequestHead(uri: "https://example.com/r", fields: ["Range": "bytes=10-19"]))
        #expect(engine.partialUse(request, candidates: [part.facts], held: [0...99], now: Reuse.time(30)) != nil)
        // Stale: nothing to validate it with, so it is not used (the request goes to the origin).
        #expect(engine.partialUse(request, candidates: [part.facts], held: [0...99], now: Reuse.time(61)) == nil)
        #expect(!engine.partsCombine(part.facts, part.facts))
        #expect(engine.resumptionFields(stored: part.facts, storedLength: 100) == nil)
    }

    @Test("RFC 9110 §14.4: a 206 whose Content-Length is not the size of its Content-Range is not stored")
    func partWithAMismatchedLengthIsNotStored() {
        // As cache-tests' partial-store-partial-reuse-partial sends it: bytes 4-9 (6 bytes) in 5 bytes.
        let request = RequestHead(uri: "https://example.com/r", fields: ["Range": "bytes=-5"])
        func decision(_ length: String) -> StorageDecision {
            engine.storageDecision(
                for: request,
                response: ResponseHead(
                    status: 206,
                    fields: [
                        "Cache-Control": "max-age=3600", "Content-Range": "bytes 4-9/10", "Content-Length": length,
                    ]), requestTime: Reuse.time(0), responseTime: Reuse.time(0))
        }
        guard case .doNotStore = decision("5") else {
            Issue.record("a 206 of 5 bytes for a 6-byte range was stored")
            return
        }
        guard case .store = decision("6") else {
            Issue.record("a 206 of 6 bytes for a 6-byte range was not stored")
            return
        }
    }

    @Test("§3.3: a request can resume the most recent incomplete variant that matches and has a strong validator")
    func resumableVariant() throws {
        var incomplete = try Reuse.store(["ETag": "\"v1\""], at: 10)
        incomplete.flags.formUnion(.incomplete)
        var older = try Reuse.store(["ETag": "\"v0\""], at: 0)
        older.flags.formUnion(.incomplete)
        var weak = try Reuse.store(["ETag": "W/\"w\""], at: 20)
        weak.flags.formUnion(.incomplete)
        let complete = try Reuse.store(["ETag": "\"c\""], at: 30)
        #expect(engine.resumableVariant([:], candidates: [older, incomplete, weak, complete]) == 1)
        #expect(engine.resumableVariant([:], candidates: [complete]) == nil)
    }
}
