import CacheSemantics
import CacheStorage
import CacheTestSupport
import Testing

@testable import CacheExchange

/// `QUERY` (RFC 10008) in the exchange: its key and its way, without I/O.
@Suite("QUERY in the exchange (RFC 10008)")
struct QueryExchangeTests {
    static let url = "http://origin.test/contacts"
    static let json: HeaderFields = ["Content-Type": "application/json"]

    static func key(_ content: String, _ fields: HeaderFields = json) -> String {
        QueryContentKey(content: Array(content.utf8), fields: fields)
            .primaryKey(for: CacheKey(method: "QUERY", uri: url)!)
    }

    /// §2.7: the key is the method, the URI and the SHA-256 of the media type, the codings and
    /// the normalized content.
    @Test func rfc10008Section2_7KeyHoldsTheDigestOfTheNormalizedContent() {
        #expect(
            Self.key("{ \"q\": 1 }")
                == "QUERY \(Self.url) content=sha-256:7a3d3d726510a580c8903e3b699bfc6b2e06cab49a642a91de9215752289a6cf")
        #expect(Self.key(#"{"q":1}"#) == Self.key("\n{\"q\" :1}\t"))
        #expect(Self.key(#"{"q":1}"#) != Self.key(#"{"q":2}"#))
        #expect(Self.key(#"{"q":1}"#) != Self.key(#"{"q":1}"#, ["Content-Type": "text/plain"]))
        #expect(
            Self.key(#"{"q":1}"#)
                != Self.key(#"{"q":1}"#, ["Content-Type": "application/json", "Content-Encoding": "gzip"]))
        let described = QueryContentKey(content: Array("{ }".utf8), fields: Self.json).description
        #expect(
            described.hasSuffix(
                "of 2 of 3 bytes (application/json; JSON without white space outside strings) (RFC 10008 §2.7)"))
    }

    /// §2.7: a QUERY miss joins others making the same query, and its response is stored under
    /// the QUERY's key; §2: it invalidates nothing (RFC 9111 §4.4).
    @Test func rfc10008Section2_7MissJoinsAndItsResponseIsStoredUnderTheQueryKey() {
        let key = Self.key("{}")
        var machine = ExchangeStateMachine(
            ExchangeRequest(head: RequestHead(method: "QUERY", uri: Self.url, fields: Self.json), primaryKey: key),
            engine: CacheEngine(configuration: .sharedCache), name: "cache")
        _ = machine.start()
        guard case .join(let identity) = machine.candidatesRead([], now: Fixtures.epoch) else {
            Issue.record("a QUERY miss should join")
            return
        }
        #expect(identity == key)
        _ = machine.joinedAsLeader()
        guard
            case .relay(let relay) = machine.originResponded(
                ResponseHead(status: 200, fields: ["Cache-Control": "max-age=60", "Content-Location": "/contacts/r1"]),
                requestTime: Fixtures.epoch, responseTime: Fixtures.epoch, now: Fixtures.epoch)
        else {
            Issue.record("not relayed")
            return
        }
        #expect(relay.storage?.head?.primaryKey == key)
        #expect(relay.invalidated.isEmpty)
    }

    /// A bypassed request's `Cache-Status` carries the host's `detail` (RFC 9211 §2.8).
    @Test func bypassDetailIsInCacheStatus() {
        var request = ExchangeRequest(head: RequestHead(method: "QUERY", uri: Self.url), primaryKey: nil)
        request.bypassDetail = "query-content-too-large"
        var machine = ExchangeStateMachine(request, engine: CacheEngine(configuration: .sharedCache), name: "cache")
        _ = machine.start()
        guard
            case .relay(let relay) = machine.originResponded(
                ResponseHead(status: 200, fields: [:]), requestTime: Fixtures.epoch, responseTime: Fixtures.epoch,
                now: Fixtures.epoch)
        else {
            Issue.record("not relayed")
            return
        }
        #expect(relay.cacheStatus.fieldValue == "cache; fwd=bypass; fwd-status=200; detail=query-content-too-large")
    }
}
