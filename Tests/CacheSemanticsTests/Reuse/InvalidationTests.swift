import CacheTestSupport
import Testing

@testable import CacheSemantics

@Suite("RFC 9111 §4.4 Invalidating stored responses")
struct InvalidationTests {
    static let engine = Reuse.privateEngine
    static let target = "https://example.com/items/list"

    static func invalidated(
        method: String = "POST", uri: String = target, status: Int = 200, response: HeaderFields = [:]
    ) -> [String] {
        engine.invalidatedURIs(
            request: RequestHead(method: method, uri: uri), response: ResponseHead(status: status, fields: response))
    }

    @Test(
        "§4.4: a non-error response to an unsafe or unknown method invalidates the target URI",
        arguments: ["POST", "PUT", "DELETE", "PATCH", "PURGE", "X-CUSTOM"], [200, 201, 204, 301, 303, 307, 399])
    func unsafeMethodWithNonErrorInvalidatesTarget(method: String, status: Int) {
        #expect(Self.invalidated(method: method, status: status) == [Self.target])
    }

    @Test(
        "§4.4: an error status (4xx, 5xx) or an interim response invalidates nothing",
        arguments: [100, 199, 400, 404, 409, 412, 500, 503])
    func errorStatusInvalidatesNothing(status: Int) {
        #expect(Self.invalidated(status: status, response: ["Location": "/items/42"]) == [])
    }

    @Test(
        "§4.4, RFC 9110 §9.2.1: safe methods never invalidate",
        arguments: ["GET", "HEAD", "OPTIONS", "TRACE"])
    func safeMethodsNeverInvalidate(method: String) {
        #expect(
            Self.invalidated(
                method: method, response: ["Location": "/items/42", "Content-Location": "/items/43"]) == [])
    }

    @Test("§4.4, RFC 9110 §9.1: methods are case-sensitive, so lower-case 'get' is an unknown method")
    func lowerCaseGetIsUnknown() {
        #expect(Self.invalidated(method: "get") == [Self.target])
    }

    @Test(
        "§4.4, RFC 3986 §5.2: same-origin Location references, absolute or relative, are invalidated",
        arguments: [
            ("https://example.com/items/42", "https://example.com/items/42"),
            ("/items/42", "https://example.com/items/42"),
            ("42", "https://example.com/items/42"),
            ("../users/7", "https://example.com/users/7"),
            ("./new?x=1", "https://example.com/items/new?x=1"),
            ("?page=2", "https://example.com/items/list?page=2"),
            ("//example.com/other", "https://example.com/other"),
            ("https://EXAMPLE.com:443/items/42#frag", "https://example.com/items/42"),
            // userinfo is not part of the origin (RFC 9110 §4.3.1)
            ("https://user@example.com/items/42", "https://user@example.com/items/42"),
        ])
    func sameOriginLocationInvalidated(reference: String, resolved: String) {
        #expect(Self.invalidated(response: ["Location": reference]) == [Self.target, resolved])
    }

    @Test("§4.4: same-origin Content-Location is invalidated too, after Location")
    func contentLocationInvalidated() {
        let uris = Self.invalidated(
            status: 201, response: ["Location": "/items/42", "Content-Location": "/items/42.json"])
        #expect(uris == [Self.target, "https://example.com/items/42", "https://example.com/items/42.json"])
        #expect(
            Self.invalidated(method: "PUT", response: ["Content-Location": "list?v=2"])
                == [Self.target, "https://example.com/items/list?v=2"])
    }

    @Test(
        "§4.4, RFC 9110 §4.3.1: a Location or Content-Location of another origin is not invalidated",
        arguments: [
            "https://other.example/items/42",
            "http://example.com/items/42",
            "https://example.com:8443/items/42",
            "//evil.example/items/42",
            "https://sub.example.com/items/42",
        ])
    func crossOriginNotInvalidated(reference: String) {
        #expect(Self.invalidated(response: ["Location": reference]) == [Self.target])
        #expect(Self.invalidated(response: ["Content-Location": reference]) == [Self.target])
    }

    @Test("§4.4: a Location equal to the target URI is listed once")
    func duplicatesListedOnce() {
        #expect(
            Self.invalidated(response: ["Location": "list", "Content-Location": Self.target]) == [Self.target])
    }

    @Test("§4.4, RFC 9110 §4.2.3: invalidated URIs are normalized like cache keys")
    func resultsAreNormalized() throws {
        // Only scheme, host and port are normalized; the path and query stay as sent (RFC 9110
        // §7.7), and a Location is resolved against the target (RFC 3986 §5.2), which removes
        // the target's dot segments from the result.
        let target = "HTTPS://Example.COM:443/a/./b/../c?q=%7euser"
        let uris = Self.invalidated(uri: target, response: ["Location": "D/%7Ex"])
        let normalizedTarget = try #require(CacheKey.normalize(target))
        #expect(normalizedTarget == "https://example.com/a/./b/../c?q=%7euser")
        #expect(uris == [normalizedTarget, "https://example.com/a/D/%7Ex"])
        #expect(uris[0] == CacheKey(method: "GET", uri: target)?.uri)
    }

    @Test("§4.4: a request target that is not an absolute URI invalidates nothing")
    func invalidTargetInvalidatesNothing() {
        #expect(Self.invalidated(uri: "/relative/only") == [])
    }

    @Test("§4.4: a stored response marked invalid is validated before it is reused")
    func invalidatedStoredResponseIsValidated() throws {
        var facts = try Reuse.store(["Cache-Control": "max-age=100", "ETag": "\"v1\""])
        let uris = Self.invalidated(uri: Reuse.uri, status: 204)
        #expect(uris == [CacheKey.normalize(Reuse.uri)])
        facts.flags.insert(.invalidated)
        let forwarding = try #require(Reuse.forwarded(Reuse.lookup(candidates: [facts], at: 10)))
        #expect(forwarding.isValidation)
        #expect(forwarding.reasons == [.invalidated])
    }
}
