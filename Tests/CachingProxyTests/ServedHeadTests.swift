#if os(Linux)
import CacheSemantics
import CacheSystem
import CacheTestSupport
import LoopbackOrigin
import Testing

@testable import CachingProxy

/// A hit's head is written from the bytes kept for its stored entry, plus what each answer
/// adds: what the client sees must be what writing it field by field gave.
@Suite("The head of a hit, kept serialized")
struct ServedHeadTests {
    /// The kept bytes leave out what the server writes itself (RFC 9112 §6.1, §7.6.1) and any
    /// field that could not be sent safely, as the field-by-field writer does.
    @Test func serializedFieldsLeaveOutFramingAndUnsafeFields() {
        let fields = HeaderFields([
            ("Content-Type", "text/plain"), ("Content-Length", "5"), ("Connection", "close"),
            ("Transfer-Encoding", "chunked"), ("Keep-Alive", "timeout=5"), ("X-Bad", "a\rb"), ("Bad Name", "x"),
            ("Via", "1.1 httpcache"), ("X-Twice", "1"), ("X-Twice", "2"),
        ])
        #expect(
            String(decoding: EventLoop.serializedFields(fields), as: UTF8.self)
                == "Content-Type: text/plain\r\nVia: 1.1 httpcache\r\nX-Twice: 1\r\nX-Twice: 2\r\n")
    }

    @Test("Every hit of one stored head carries its current Age; the Date the origin sent stays (RFC 9111 §4, §5.1)")
    func ageIsCurrentOnEveryHit() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            let date = HTTPDate.format(Timestamp(secondsSince1970: harness.clock.now() - 5))
            harness.serve(
                "/h",
                [
                    ("Cache-Control", "max-age=600"), ("Date", date),
                    ("Content-Type", "text/plain"), ("X-Twice", "1"), ("X-Twice", "2"),
                ],
                body: "hello")
            _ = try harness.get("/h")
            let first = try harness.get("/h")
            harness.clock.advance(by: 7)
            let second = try harness.get("/h")
            harness.clock.advance(by: 30)
            let third = try harness.get("/h")
            #expect([first, second, third].allSatisfy { $0.isHit && $0.text == "hello" })
            let ages = try [first, second, third].map { try #require($0["Age"].flatMap { Int($0) }) }
            #expect(ages[1] - ages[0] == 7 && ages[2] - ages[1] == 30, "\(ages)")
            for hit in [second, third] {
                #expect(hit["Date"] == date)
                #expect(hit.fields.values(named: "X-Twice") == ["1", "2"])
                #expect(hit.fields.values(named: "Content-Length") == ["5"])
                #expect(hit.fields.values(named: "Via") == ["1.1 httpcache"])
                #expect(hit.fields.values(named: "Age").count == 1)
                #expect(hit.fields.values(named: "Cache-Status").count == 1)
            }
            #expect(harness.origin.count("/h") == 1)
        }
    }

    @Test(
        "A stored head a 304 changed is served changed, never from the bytes kept for it before (RFC 9111 §3.2, §4.3.4)"
    )
    func aFreshenedHeadIsNotServedFromOldBytes() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            let version = Locked(1)
            let clock = harness.clock
            harness.origin.route("/r") { request in
                let current = version.withLock { $0 }
                let headers = [
                    ("Cache-Control", "max-age=10"), ("ETag", "\"e\""), ("X-Version", String(current)),
                    ("Date", HTTPDate.format(Timestamp(secondsSince1970: clock.now()))),
                ]
                if request.header("If-None-Match") == "\"e\"" {
                    return LoopbackOrigin.Response(status: 304, headers: headers)
                }
                return LoopbackOrigin.Response(headers: headers, body: "same body")
            }
            _ = try harness.get("/r")
            let before = try harness.get("/r")
            #expect(before.isHit && before["X-Version"] == "1")
            version.withLock { $0 = 2 }
            harness.clock.advance(by: 20)
            let revalidated = try harness.get("/r")
            #expect(revalidated["X-Version"] == "2")
            let after = try harness.get("/r")
            #expect(after.isHit, "\(after.fields)")
            #expect(after["X-Version"] == "2")
            #expect(after.fields.values(named: "X-Version").count == 1)
            #expect(after.text == "same body")
            #expect(harness.origin.count("/r") == 2)
        }
    }
}
#endif
