import CacheTestSupport
import Testing

@testable import CacheSemantics

// QUERY (RFC 10008): what its content puts in the cache key (§2.7), and the engine treating the
// method as safe (§2) and cacheable (§2.7).

private func keyed(_ content: String, _ fields: HeaderFields) -> QueryContent {
    QueryContent(content: Array(content.utf8), fields: fields)
}

private func text(_ content: QueryContent) -> String { String(decoding: content.bytes, as: UTF8.self) }

@Suite("QUERY content in the cache key (RFC 10008)")
struct QueryContentTests {
    /// §2.7: JSON that differs only in white space outside strings is one query; strings,
    /// member order and numbers are kept as sent.
    @Test func rfc10008Section2_7JSONWhiteSpaceOutsideStringsIsRemoved() {
        let json: HeaderFields = ["Content-Type": "application/json"]
        let spaced = keyed("{ \"q\" : \"a b\",\n\t\"limit\": [1, 2.5e3 , -0] }\r\n", json)
        #expect(spaced.normalization == .json)
        #expect(text(spaced) == #"{"q":"a b","limit":[1,2.5e3,-0]}"#)
        #expect(spaced.bytes == keyed(#"{"q":"a b","limit":[1,2.5e3,-0]}"#, json).bytes)
        #expect(spaced.bytes != keyed(#"{"limit":[1,2.5e3,-0],"q":"a b"}"#, json).bytes)
        #expect(text(keyed(#" "tab\tin \"quoted\" \u0041" "#, json)) == #""tab\tin \"quoted\" \u0041""#)
        #expect(
            text(keyed("[ true, false, null, { } ]", ["Content-Type": "application/geo+json"]))
                == "[true,false,null,{}]")
    }

    /// Content that is not one valid JSON text is keyed as sent: removing its spaces could make
    /// two different texts equal (`1 2` and `12`).
    @Test(arguments: [
        "1 2", "{\"a\" 1}", "[1,]", "{\"a\":1,}", "\"open", "01", "1.", "-", "tru", "[1] [2]", "\"\u{1}\"", "\"\\x\"",
        "\"\\u12\"", "{1:2}", "", "  ", "\u{FEFF}{}", "[1}", "{]",
    ])
    func contentThatIsNotJSONIsKeyedAsSent(content: String) {
        let sent = keyed(content, ["Content-Type": "application/json"])
        #expect(sent.normalization == .none)
        #expect(sent.bytes == Array(content.utf8))
    }

    /// §2.7 with the form of RFC 10008 §1's example: percent-encoding is normalized (RFC 3986
    /// §6.2.2.1–6.2.2.2), field order and `+` are kept. A `%` without two hex digits after it
    /// leaves the content as sent: `%4%41` is not `%4A`.
    @Test func rfc10008Section2_7FormPercentEncodingIsNormalized() {
        let form: HeaderFields = ["Content-Type": "application/x-www-form-urlencoded"]
        let sent = keyed("select=surname%2cgivenname&limit=10&match=%22email%3d*%40example.*%22&x=%7e%41%2B+", form)
        #expect(sent.normalization == .formURLEncoded)
        #expect(text(sent) == "select=surname%2Cgivenname&limit=10&match=%22email%3D*%40example.*%22&x=~A%2B+")
        #expect(keyed("q=foo&limit=10", form).bytes != keyed("limit=10&q=foo", form).bytes)
        let stray = keyed("q=%4%41", form)
        #expect(stray.normalization == .none && text(stray) == "q=%4%41")
        #expect(text(keyed("q=%4A", form)) == "q=J")
    }

    /// §2.7 "related metadata": the media type is part of what is keyed, normalized as RFC 9110
    /// §8.3.1 makes its four examples equal; another type or parameter is another query.
    @Test func rfc10008Section2_7MediaTypeIsKeyedNormalized() {
        let spellings = [
            "text/html;charset=utf-8", "Text/HTML;Charset=\"utf-8\"", "text/html; charset=\"utf-8\"",
            "text/html;charset=UTF-8",
        ]
        let keys = Set(spellings.map { keyed("x", ["Content-Type": $0]).mediaType })
        #expect(keys == ["text/html;charset=utf-8"])
        #expect(keyed("x", ["Content-Type": "text/plain"]).mediaType == "text/plain")
        #expect(keyed("x", ["Content-Type": "text/plain; a=\"b c\";"]).mediaType == "text/plain;a=\"b c\"")
        #expect(keyed("x", ["Content-Type": " not a type "]).mediaType == "not a type")
        #expect(keyed("x", [:]).mediaType == "")
        #expect(
            keyed("x", ["Content-Type": "application/sql"]).mediaType
                != keyed("x", ["Content-Type": "text/sql"]).mediaType)
    }

    /// Coded content is keyed as sent, under its codings (RFC 9110 §8.4); `identity` is none.
    /// `no-transform` (RFC 9111 §5.2.1.6) keeps the content as sent.
    @Test func codedContentAndNoTransformAreKeyedAsSent() {
        let gzip = keyed("{ }", ["Content-Type": "application/json", "Content-Encoding": "GZIP , br"])
        #expect(gzip.contentCoding == "gzip,br" && gzip.normalization == .none && text(gzip) == "{ }")
        let identity = keyed("{ }", ["Content-Type": "application/json", "Content-Encoding": "identity"])
        #expect(identity.contentCoding == "" && text(identity) == "{}")
        let kept = keyed("{ }", ["Content-Type": "application/json", "Cache-Control": "no-transform"])
        #expect(kept.normalization == .none && text(kept) == "{ }")
    }

    /// Other media types are keyed as sent.
    @Test func otherContentIsKeyedAsSent() {
        let sql = keyed("select  * ", ["Content-Type": "application/sql"])
        #expect(sql.normalization == .none && text(sql) == "select  * ")
    }

    /// §2: QUERY is safe, so a response to it invalidates nothing (RFC 9111 §4.4); §2.7: its
    /// response is stored and answers a later QUERY (RFC 9111 §3, §4).
    @Test func rfc10008Section2QueryIsSafeAndItsResponsesAreStoredAndReused() throws {
        let engine = CacheEngine(configuration: .sharedCache)
        let request = RequestHead(method: "QUERY", uri: "https://example.com/contacts")
        let response = ResponseHead(
            status: 200,
            fields: ["Cache-Control": "max-age=60", "Location": "/contacts/q1", "Date": Fixtures.httpDate(0)])
        #expect(engine.invalidatedURIs(request: request, response: response).isEmpty)
        let decision = engine.storageDecision(
            for: request, response: response, requestTime: Fixtures.epoch, responseTime: Fixtures.epoch)
        guard case .store(let stored) = decision else {
            Issue.record("a QUERY response with max-age was not stored: \(decision)")
            return
        }
        let lookup = engine.lookup(CacheRequest(request), candidates: [stored.facts], now: Fixtures.epoch + 10)
        guard case .serve = lookup else {
            Issue.record("a fresh stored QUERY response was not served: \(lookup)")
            return
        }
    }

    /// §2.6: a conditional QUERY with `If-Modified-Since` is answered `304` from a stored response
    /// not modified since (RFC 9110 §13.1.3 ignores the field only for other methods).
    @Test func rfc10008Section2_6IfModifiedSinceIsEvaluatedForQuery() {
        let request = CacheRequest(
            RequestHead(
                method: "QUERY", uri: "https://example.com/q", fields: ["If-Modified-Since": Fixtures.httpDate(0)]))
        #expect(request.ifModifiedSince == Fixtures.epoch)
        let post = CacheRequest(
            RequestHead(
                method: "POST", uri: "https://example.com/q", fields: ["If-Modified-Since": Fixtures.httpDate(0)]))
        #expect(post.ifModifiedSince == nil)
    }
}
