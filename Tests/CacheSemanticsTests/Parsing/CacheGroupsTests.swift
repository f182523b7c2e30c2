import Testing

@testable import CacheSemantics

@Suite("RFC 9875 Cache groups")
struct CacheGroupsTests {
    @Test("RFC 9875 §2: the example Cache-Groups: \"scripts\" lists one group")
    func exampleScripts() {
        let fields: HeaderFields = [
            "Content-Type": "application/javascript", "Cache-Control": "max-age=3600", "Cache-Groups": "\"scripts\"",
        ]
        #expect(CacheGroups.groups(fields) == ["scripts"])
        #expect(
            CacheGroups.tags(uri: "https://example.com/app.js", fields: fields) == [
                CacheGroups.tag("scripts", origin: "https://example.com"), CacheGroups.tag("scripts"),
            ])
    }

    @Test("RFC 9875 §3: the example Cache-Group-Invalidation after a POST invalidates both groups in its origin")
    func exampleInvalidation() {
        let engine = CacheEngine(configuration: .sharedCache)
        let response = ResponseHead(
            status: 200,
            fields: ["Content-Type": "text/html", "Cache-Group-Invalidation": "\"eurovision-results\", \"australia\""])
        let tags = engine.invalidatedGroupTags(
            request: RequestHead(method: "POST", uri: "https://example.com/vote"), response: response)
        #expect(
            tags == [
                CacheGroups.tag("eurovision-results", origin: "https://example.com"),
                CacheGroups.tag("australia", origin: "https://example.com"),
            ])
    }

    @Test(
        "RFC 9875 §3: Cache-Group-Invalidation is ignored after a safe method; and after an error, as every invalidation (RFC 9111 §4.4)",
        arguments: [("GET", 200), ("HEAD", 200), ("OPTIONS", 200), ("POST", 500), ("DELETE", 404)])
    func ignored(method: String, status: Int) {
        let response = ResponseHead(status: status, fields: ["Cache-Group-Invalidation": "\"a\""])
        #expect(
            CacheEngine().invalidatedGroupTags(
                request: RequestHead(method: method, uri: "https://example.com/x"), response: response
            ).isEmpty)
    }

    @Test(
        "RFC 9875 §2: a List of Strings, order not significant, parameters ignored, case-sensitive; other members skipped",
        arguments: [
            ("\"a\", \"b\"", ["a", "b"]), ("\"a\";p=1, \"B\"", ["a", "B"]), ("\"a\", token, 1, (\"x\")", ["a"]),
            ("\"a\", \"a\"", ["a"]), ("\"a\" \"b\"", []), ("a", []), ("", []), ("\"unterminated", []),
            ("\"with \\\"quote\\\"\"", ["with \"quote\""]),
        ])
    func parsing(value: String, groups: [String]) {
        #expect(CacheGroups.groups(["Cache-Groups": value]) == groups)
    }

    @Test("RFC 9651 §4.1.1: a list of groups written as a field value parses back to the same groups")
    func fieldValueRoundTrip() {
        let groups = ["news", "with \"quote\" and \\", "Sport"]
        #expect(CacheGroups.fieldValue(groups) == #""news", "with \"quote\" and \\", "Sport""#)
        #expect(
            CacheGroups.groups(
                ["Cache-Group-Invalidation": CacheGroups.fieldValue(groups)], name: "Cache-Group-Invalidation")
                == groups)
    }

    @Test("RFC 9875 §2: several field lines are one list")
    func lines() {
        #expect(
            CacheGroups.groups(HeaderFields([("Cache-Groups", "\"a\""), ("Cache-Groups", "\"b\"")])) == ["a", "b"])
    }

    @Test("RFC 9875 §2: at least 32 groups of 32 characters are kept; past the bounds nothing more")
    func bounds() {
        let names = (0..<100).map { String(repeating: "n", count: 29) + String(1000 + $0) }
        let field = names.map { "\"\($0)\"" }.joined(separator: ", ")
        #expect(CacheGroups.groups(["Cache-Groups": field]) == Array(names.prefix(CacheGroups.maximumGroups)))
        let long = String(repeating: "x", count: CacheGroups.maximumLength + 1)
        #expect(CacheGroups.groups(["Cache-Groups": "\"\(long)\", \"short\""]) == ["short"])
    }

    @Test("RFC 9875 §2.1: groups are per origin: scheme, host and port (RFC 9110 §4.3.1)")
    func perOrigin() {
        let fields: HeaderFields = ["Cache-Groups": "\"g\""]
        let https = CacheGroups.tags(uri: "https://EXAMPLE.com:443/a", fields: fields)
        #expect(https == CacheGroups.tags(uri: "https://example.com/b", fields: fields))
        #expect(https[0] != CacheGroups.tags(uri: "http://example.com/a", fields: fields)[0])
        #expect(https[0] != CacheGroups.tags(uri: "https://example.com:8443/a", fields: fields)[0])
        #expect(https[1] == CacheGroups.tag("g"))
    }
}
