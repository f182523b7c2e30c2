import CacheSemantics
import Testing

@Suite("RFC 9111 §5.2 Cache-Control parsing")
struct CacheControlParsingTests {
    @Test("RFC 9111 §5.2: directives with token and quoted-string arguments, in order")
    func tokenAndQuotedArguments() {
        let cc = CacheControl(#"public, max-age=60, no-cache="Set-Cookie", ext="a \"b\" c\\d""#)
        #expect(
            cc.directives == [
                CacheDirective(name: "public"),
                CacheDirective(name: "max-age", argument: "60"),
                CacheDirective(name: "no-cache", argument: "Set-Cookie"),
                CacheDirective(name: "ext", argument: #"a "b" c\d"#),
            ])
        #expect(cc.notes.isEmpty)
    }

    @Test("RFC 9111 §5.2: directive names are case-insensitive and stored lowered")
    func namesAreCaseInsensitive() {
        let cc = CacheControl("MAX-AGE=10, No-Store, Private=\"X-A\"")
        #expect(cc.directives.map(\.name) == ["max-age", "no-store", "private"])
        #expect(cc.first("Max-Age")?.argument == "10")
        #expect(cc.contains("NO-STORE"))
        #expect(!cc.contains("no-cache"))
        #expect(cc.first("private")?.argument == "X-A")
        #expect(CacheDirective(name: "S-MaxAge", argument: "1").name == "s-maxage")
    }

    @Test("RFC 9111 §5.2: arguments keep their case")
    func argumentsKeepCase() {
        let cc = CacheControl("x-ext=MixedCase")
        #expect(cc.first("x-ext")?.argument == "MixedCase")
    }

    @Test("RFC 9111 §5.2: several Cache-Control field lines are combined in order")
    func severalLinesCombined() {
        let fields: HeaderFields = [
            HeaderField(name: "Cache-Control", value: "public"),
            HeaderField(name: "Content-Type", value: "text/plain"),
            HeaderField(name: "cache-control", value: "max-age=30, must-revalidate"),
        ]
        let cc = CacheControl(fields: fields)
        #expect(cc.directives.map(\.name) == ["public", "max-age", "must-revalidate"])
        let response = ResponseCacheControl(fields: fields)
        #expect(response.isPublic)
        #expect(response.maxAge == 30)
        #expect(response.mustRevalidate)
        #expect(response.notes.isEmpty)
    }

    @Test("RFC 9213 §2: another field name can be parsed with the same syntax")
    func otherFieldName() {
        let fields: HeaderFields = ["CDN-Cache-Control": "max-age=5", "Cache-Control": "max-age=9"]
        let cc = CacheControl(fields: fields, name: "CDN-Cache-Control")
        #expect(cc.directives == [CacheDirective(name: "max-age", argument: "5")])
    }

    @Test("RFC 9111 §5.2.3: unknown extension directives are kept in directives")
    func extensionsAreKept() {
        let cc = CacheControl(#"community="UCI", foo, max-age=5, bar=baz"#)
        #expect(cc.directives.count == 4)
        #expect(cc.first("community")?.argument == "UCI")
        #expect(cc.first("foo") == CacheDirective(name: "foo"))
        #expect(cc.first("bar")?.argument == "baz")
    }

    @Test("RFC 9111 §5.2.3: unknown extensions are otherwise ignored")
    func extensionsAreIgnored() {
        let response = ResponseCacheControl(CacheControl(#"community="UCI", max-age=5, foo=bar"#))
        var expected = ResponseCacheControl()
        expected.maxAge = 5
        #expect(response == expected)
        let request = RequestCacheControl(CacheControl("foo, bar=1"))
        #expect(request == RequestCacheControl())
    }

    @Test("RFC 9111 §5.2: the directives serialize back to a field value")
    func fieldValue() {
        let cc = CacheControl(#"max-age=60, no-cache="Set-Cookie, X-A", private"#)
        #expect(cc.fieldValue == #"max-age=60, no-cache="Set-Cookie, X-A", private"#)
        let escaped = CacheControl(directives: [CacheDirective(name: "x", argument: #"a"b\c"#)])
        #expect(escaped.fieldValue == #"x="a\"b\\c""#)
        #expect(CacheControl(escaped.fieldValue).directives == escaped.directives)
        #expect(CacheControl(directives: [CacheDirective(name: "x", argument: "")]).fieldValue == #"x="""#)
    }
}

@Suite("RFC 9111 §5.2 Cache-Control: malformed and hostile input is skipped, never crashes")
struct CacheControlMalformedTests {
    @Test("RFC 9111 §5.2: members that are not token [= token / quoted-string] are skipped with a note")
    func malformedMembersSkipped() {
        let cc = CacheControl(#"max-age=5, "quoted", =x, a b, no-store"#)
        #expect(cc.directives == [CacheDirective(name: "max-age", argument: "5"), CacheDirective(name: "no-store")])
        #expect(
            cc.notes == [
                .malformedDirective(field: "Cache-Control", text: #""quoted""#),
                .malformedDirective(field: "Cache-Control", text: "=x"),
                .malformedDirective(field: "Cache-Control", text: "a b"),
            ])
    }

    @Test("RFC 9111 §5.2: notes name the field the member came from")
    func notesNameTheField() {
        let cc = CacheControl("=", field: "CDN-Cache-Control")
        #expect(cc.directives.isEmpty)
        #expect(cc.notes == [.malformedDirective(field: "CDN-Cache-Control", text: "=")])
    }

    @Test("RFC 9111 §5.2: an unterminated quoted argument is skipped with a note")
    func unterminatedQuote() {
        let cc = CacheControl(#"no-store, no-cache="Set-Cookie, max-age=5"#)
        #expect(cc.directives == [CacheDirective(name: "no-store")])
        #expect(cc.notes == [.malformedDirective(field: "Cache-Control", text: #"no-cache="Set-Cookie, max-age=5"#)])
    }

    @Test("RFC 9111 §5.2: an argument with text after the closing quote is malformed")
    func textAfterClosingQuote() {
        let cc = CacheControl(#"private="a"b, public"#)
        #expect(cc.directives == [CacheDirective(name: "public")])
        #expect(cc.notes == [.malformedDirective(field: "Cache-Control", text: #"private="a"b"#)])
    }

    @Test(
        "RFC 9111 §5.2: hostile values parse to the documented directives and notes",
        arguments: [
            ("", 0, 0),
            (",,, ,", 0, 0),
            ("\"", 0, 1),
            ("\\", 0, 1),
            (#"a="\"#, 0, 1),
            (#"a="x\"#, 0, 1),
            ("a=\"", 0, 1),
            ("=", 0, 1),
            ("é=1", 0, 1),
            ("max-âge", 0, 1),
            ("a=é", 1, 0),
            ("a=\"é\"", 1, 0),
            ("a=", 1, 0),
        ])
    func hostileValues(value: String, directiveCount: Int, noteCount: Int) {
        let cc = CacheControl(value)
        #expect(cc.directives.count == directiveCount)
        #expect(cc.notes.count == noteCount)
        #expect(ResponseCacheControl(cc).notes.count == noteCount)
    }

    @Test("RFC 9111 §5.2: parse notes are carried into the interpreted response and request directives")
    func notesCarried() {
        let cc = CacheControl("\"x\", max-age=1")
        #expect(ResponseCacheControl(cc).notes == [.malformedDirective(field: "Cache-Control", text: "\"x\"")])
        #expect(RequestCacheControl(cc).notes == [.malformedDirective(field: "Cache-Control", text: "\"x\"")])
        #expect(RequestCacheControl(cc).maxAge == 1)
    }
}

@Suite("RFC 9111 §5.2, RFC 9110 §5.5: fields are bytes, not Characters")
struct CacheControlByteSemanticsTests {
    @Test("§5.2: a quoted argument whose first character is a combining mark is still a quoted-string")
    func quoteFollowedByCombiningMark() {
        // Found by FuzzCacheControl: `"` + U+06D8 is one Character, so a Character check missed the quote.
        let parsed = CacheControl(".=\t\t\u{06D8}~")
        #expect(parsed.directives == [CacheDirective(name: ".", argument: "\u{06D8}~")])
        #expect(CacheControl(parsed.fieldValue).directives == parsed.directives)
        #expect(CacheControl("x=\"\u{0301}a\"").directives == [CacheDirective(name: "x", argument: "\u{0301}a")])
    }

    @Test("§5.2: an '=' followed by a combining mark still separates name and argument")
    func equalsFollowedByCombiningMark() {
        #expect(CacheControl("x=\u{0301}1").directives == [CacheDirective(name: "x", argument: "\u{0301}1")])
    }
}

@Suite("RFC 9111 §5.2.2 response Cache-Control directives")
struct ResponseCacheControlTests {
    @Test("RFC 9111 §5.2.2: every known response directive is recognised")
    func allResponseDirectives() {
        let response = ResponseCacheControl(
            CacheControl(
                "max-age=1, s-maxage=2, no-cache, no-store, private, public, must-revalidate, proxy-revalidate, "
                    + "must-understand, no-transform, immutable, stale-while-revalidate=3, stale-if-error=4"))
        #expect(response.maxAge == 1)
        #expect(response.sMaxAge == 2)
        #expect(response.noCache)
        #expect(response.noStore)
        #expect(response.isPrivate)
        #expect(response.isPublic)
        #expect(response.mustRevalidate)
        #expect(response.proxyRevalidate)
        #expect(response.mustUnderstand)
        #expect(response.noTransform)
        #expect(response.immutable)
        #expect(response.staleWhileRevalidate == 3)
        #expect(response.staleIfError == 4)
        #expect(response.notes.isEmpty)
    }

    @Test("RFC 9111 §5.2.2.1: max-age=\"60\" in quoted-string form is accepted")
    func quotedMaxAge() {
        let response = ResponseCacheControl(CacheControl(#"max-age="60", s-maxage="120""#))
        #expect(response.maxAge == 60)
        #expect(response.sMaxAge == 120)
        #expect(response.notes.isEmpty)
    }

    @Test("RFC 9111 §4.2.1: a repeated max-age with the same value is fine")
    func duplicateSameValue() {
        let response = ResponseCacheControl(CacheControl("max-age=60, max-age=\"60\""))
        #expect(response.maxAge == 60)
        #expect(response.notes.isEmpty)
    }

    @Test("RFC 9111 §4.2.1: conflicting max-age values make the response stale with a note")
    func conflictingMaxAge() {
        let response = ResponseCacheControl(CacheControl("max-age=60, max-age=120"))
        #expect(response.maxAge == 0)
        #expect(response.notes == [.conflictingDirective(field: "Cache-Control", directive: "max-age")])
    }

    @Test("RFC 9111 §4.2.1: conflicting max-age across field lines is detected")
    func conflictingMaxAgeAcrossLines() {
        let fields: HeaderFields = [
            HeaderField(name: "Cache-Control", value: "max-age=60"),
            HeaderField(name: "Cache-Control", value: "MAX-AGE=30"),
        ]
        let response = ResponseCacheControl(fields: fields)
        #expect(response.maxAge == 0)
        #expect(response.notes == [.conflictingDirective(field: "Cache-Control", directive: "max-age")])
    }

    @Test("RFC 9111 §4.2.1: conflicting s-maxage values make it 0 with a note")
    func conflictingSMaxAge() {
        let response = ResponseCacheControl(CacheControl("s-maxage=10, max-age=5, s-maxage=11"))
        #expect(response.sMaxAge == 0)
        #expect(response.maxAge == 5)
        #expect(response.notes == [.conflictingDirective(field: "Cache-Control", directive: "s-maxage")])
    }

    @Test(
        "RFC 9111 §4.2.1: an invalid max-age makes the response stale (0) with a note",
        arguments: [
            ("max-age=abc", "abc" as String?),
            ("max-age=-1", "-1"),
            ("max-age=1.5", "1.5"),
            ("max-age= 5 0", "5 0"),
            ("max-age=", ""),
            ("max-age=\"\"", ""),
            ("max-age", nil),
            ("max-age=+5", "+5"),
            ("max-age=٣", "٣"),
        ])
    func invalidMaxAge(value: String, argument: String?) {
        let response = ResponseCacheControl(CacheControl(value))
        #expect(response.maxAge == 0)
        #expect(
            response.notes == [.invalidDirectiveValue(field: "Cache-Control", directive: "max-age", value: argument)])
    }

    @Test("RFC 9111 §4.2.1: notes name the field passed in")
    func notesUseFieldName() {
        let response = ResponseCacheControl(CacheControl("max-age=x"), field: "CDN-Cache-Control")
        #expect(
            response.notes == [.invalidDirectiveValue(field: "CDN-Cache-Control", directive: "max-age", value: "x")])
    }

    @Test(
        "RFC 9111 §1.2.2: delta-seconds beyond 2^31 clamp to 2147483648",
        arguments: [
            ("max-age=2147483647", 2_147_483_647),
            ("max-age=2147483648", 2_147_483_648),
            ("max-age=2147483649", 2_147_483_648),
            ("max-age=99999999999999999999999999999999999999", 2_147_483_648),
            ("max-age=000000000000000000000000000000000000007", 7),
            ("max-age=\"99999999999999999999\"", 2_147_483_648),
        ])
    func overflowClamps(value: String, expected: Int) {
        let response = ResponseCacheControl(CacheControl(value))
        #expect(response.maxAge == expected)
        #expect(response.notes.isEmpty)
        #expect(deltaSecondsLimit == 2_147_483_648)
    }

    @Test("RFC 9111 §1.2.2: a huge max-age repeated is the same clamped value, not a conflict")
    func clampedDuplicatesAgree() {
        let response = ResponseCacheControl(CacheControl("max-age=3000000000, max-age=4000000000"))
        #expect(response.maxAge == 2_147_483_648)
        #expect(response.notes.isEmpty)
    }

    @Test("RFC 5861 §3, §4: repeated stale-while-revalidate and stale-if-error keep the smallest")
    func staleAllowancesKeepSmallest() {
        let response = ResponseCacheControl(
            CacheControl("stale-while-revalidate=30, stale-while-revalidate=10, stale-if-error=5, stale-if-error=50"))
        #expect(response.staleWhileRevalidate == 10)
        #expect(response.staleIfError == 5)
        #expect(response.notes.isEmpty)
    }

    @Test("RFC 5861 §3: an invalid stale-while-revalidate is ignored with a note")
    func invalidStaleAllowanceIgnored() {
        let response = ResponseCacheControl(CacheControl("stale-while-revalidate=soon, stale-if-error=-1"))
        #expect(response.staleWhileRevalidate == nil)
        #expect(response.staleIfError == nil)
        #expect(
            response.notes == [
                .invalidDirectiveValue(field: "Cache-Control", directive: "stale-while-revalidate", value: "soon"),
                .invalidDirectiveValue(field: "Cache-Control", directive: "stale-if-error", value: "-1"),
            ])
    }

    @Test("RFC 9111 §5.2.2.4: qualified no-cache lists lowered field names")
    func qualifiedNoCache() {
        let response = ResponseCacheControl(CacheControl(#"no-cache="Set-Cookie, X-Trace-ID", no-cache=ETag"#))
        #expect(!response.noCache)
        #expect(response.noCacheFieldNames == ["set-cookie", "x-trace-id", "etag"])
    }

    @Test("RFC 9111 §5.2.2.7: qualified private lists lowered field names")
    func qualifiedPrivate() {
        let response = ResponseCacheControl(CacheControl(#"private="Authorization-Info,  X-User""#))
        #expect(!response.isPrivate)
        #expect(response.privateFieldNames == ["authorization-info", "x-user"])
    }

    @Test("RFC 9111 §5.2.2.4, §5.2.2.7: an unqualified form wins over qualified forms")
    func unqualifiedWins() {
        let response = ResponseCacheControl(CacheControl(#"no-cache="Set-Cookie", no-cache, private, private="X""#))
        #expect(response.noCache)
        #expect(response.noCacheFieldNames.isEmpty)
        #expect(response.isPrivate)
        #expect(response.privateFieldNames.isEmpty)
    }

    @Test("RFC 9111 §5.2.2.4: a qualified no-cache with no valid field name acts unqualified")
    func emptyQualifiedNoCache() {
        let response = ResponseCacheControl(CacheControl(#"no-cache="", private=", ,""#))
        #expect(response.noCache)
        #expect(response.noCacheFieldNames.isEmpty)
        #expect(response.isPrivate)
        #expect(response.privateFieldNames.isEmpty)
    }

    @Test("RFC 9111 §5.2.2.4: non-token members of a qualified field list are dropped")
    func qualifiedListDropsNonTokens() {
        let response = ResponseCacheControl(CacheControl(#"no-cache="a b, Valid, \"q\"""#))
        #expect(response.noCacheFieldNames == ["valid"])
    }
}

@Suite("RFC 9111 §5.2.1 request Cache-Control directives")
struct RequestCacheControlTests {
    @Test("RFC 9111 §5.2.1: every known request directive is recognised")
    func allRequestDirectives() {
        let request = RequestCacheControl(
            CacheControl(
                "max-age=5, max-stale=7, min-fresh=9, no-cache, no-store, no-transform, only-if-cached, "
                    + "stale-if-error=11"))
        #expect(request.maxAge == 5)
        #expect(request.maxStale == .seconds(7))
        #expect(request.minFresh == 9)
        #expect(request.noCache)
        #expect(request.noStore)
        #expect(request.noTransform)
        #expect(request.onlyIfCached)
        #expect(request.staleIfError == 11)
        #expect(request.notes.isEmpty)
    }

    @Test("RFC 9111 §5.2.1.2: max-stale without a value accepts any staleness")
    func maxStaleWithoutValue() {
        #expect(RequestCacheControl(CacheControl("max-stale")).maxStale == .any)
        #expect(RequestCacheControl(CacheControl("MAX-STALE")).maxStale == .any)
    }

    @Test("RFC 9111 §5.2.1.2: max-stale with a value limits staleness; quoted form accepted")
    func maxStaleWithValue() {
        #expect(RequestCacheControl(CacheControl("max-stale=60")).maxStale == .seconds(60))
        #expect(RequestCacheControl(CacheControl(#"max-stale="0""#)).maxStale == .seconds(0))
        #expect(RequestCacheControl(CacheControl("max-stale=30, max-stale=10")).maxStale == .seconds(10))
        // A bounded max-stale is more restrictive than an unbounded one, in either order.
        #expect(RequestCacheControl(CacheControl("max-stale=10, max-stale")).maxStale == .seconds(10))
        #expect(RequestCacheControl(CacheControl("max-stale, max-stale=10")).maxStale == .seconds(10))
    }

    @Test("RFC 9111 §5.2.1.2: an invalid max-stale value is ignored with a note")
    func invalidMaxStale() {
        let request = RequestCacheControl(CacheControl("max-stale=-5"))
        #expect(request.maxStale == nil)
        #expect(request.notes == [.invalidDirectiveValue(field: "Cache-Control", directive: "max-stale", value: "-5")])
    }

    @Test("RFC 9111 §5.2.1.3: min-fresh is parsed; an invalid one is ignored with a note")
    func minFresh() {
        #expect(RequestCacheControl(CacheControl("min-fresh=30")).minFresh == 30)
        let invalid = RequestCacheControl(CacheControl("min-fresh=soon"))
        #expect(invalid.minFresh == nil)
        #expect(
            invalid.notes == [.invalidDirectiveValue(field: "Cache-Control", directive: "min-fresh", value: "soon")])
    }

    @Test("RFC 9111 §5.2.1.1: an invalid request max-age is ignored, a valid repeat keeps the smallest")
    func requestMaxAge() {
        let request = RequestCacheControl(CacheControl("max-age=x, max-age=100, max-age=20"))
        #expect(request.maxAge == 20)
        #expect(request.notes == [.invalidDirectiveValue(field: "Cache-Control", directive: "max-age", value: "x")])
    }

    @Test("RFC 9111 §1.2.2: request delta-seconds overflow clamps to 2147483648")
    func requestOverflowClamps() {
        let request = RequestCacheControl(
            CacheControl("max-age=99999999999999999999, max-stale=1e9, min-fresh=4294967296"))
        #expect(request.maxAge == 2_147_483_648)
        #expect(request.maxStale == nil)
        #expect(request.minFresh == 2_147_483_648)
    }

    @Test("RFC 9111 §5.2.1.7: only-if-cached is recognised case-insensitively")
    func onlyIfCached() {
        #expect(RequestCacheControl(CacheControl("Only-If-Cached")).onlyIfCached)
        #expect(!RequestCacheControl(CacheControl("only-if-cached-ish")).onlyIfCached)
    }

    @Test("RFC 9111 §5.4: Pragma: no-cache is honoured when Cache-Control is absent")
    func pragmaWithoutCacheControl() {
        #expect(RequestCacheControl(fields: ["Pragma": "no-cache"]).noCache)
        #expect(RequestCacheControl(fields: ["pragma": "foo, NO-CACHE"]).noCache)
        #expect(!RequestCacheControl(fields: ["Pragma": "foo"]).noCache)
        #expect(!RequestCacheControl(fields: ["Pragma": "no-cache-please"]).noCache)
        #expect(!RequestCacheControl(fields: [:]).noCache)
    }

    @Test("RFC 9111 §5.4: Pragma is ignored when Cache-Control is present")
    func pragmaIgnoredWithCacheControl() {
        let request = RequestCacheControl(fields: ["Pragma": "no-cache", "Cache-Control": "max-age=60"])
        #expect(!request.noCache)
        #expect(request.maxAge == 60)
    }

    @Test("RFC 9111 §5.2.1: request fields are parsed across Cache-Control lines")
    func requestFieldsAcrossLines() {
        let fields: HeaderFields = [
            HeaderField(name: "Cache-Control", value: "max-stale"),
            HeaderField(name: "CACHE-CONTROL", value: "only-if-cached"),
        ]
        let request = RequestCacheControl(fields: fields)
        #expect(request.maxStale == .any)
        #expect(request.onlyIfCached)
        #expect(!request.noCache)
    }
}
