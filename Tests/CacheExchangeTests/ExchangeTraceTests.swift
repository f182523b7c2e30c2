import CacheExchange
import CacheSemantics
import CacheStorage
import CacheSystem
import CacheTestSupport
import Testing

/// The trace of `HTTPCACHE_TRACE=1`, written to a sink the test holds: each request's
/// (state, event, action) transitions, in order, through a real driver over a memory store.
@Suite("ExchangeTrace: every transition of an exchange, one line each, as Varnish's cnt_diag")
struct ExchangeTraceTests {
    static let url = "http://origin.test/a"

    /// A driver whose trace goes to `lines`, over a memory store, on a clock the test moves.
    final class TracedCache: Sendable {
        let clock = ManualClock()
        let lines = Locked<[String]>([])
        let driver: ExchangeDriver

        init() {
            var configuration = ExchangeDriver.Configuration(
                engine: CacheEngine(configuration: .sharedCache), name: "cache", clock: clock.function, log: { _ in })
            configuration.trace = ExchangeTrace { [lines] line in lines.withLock { $0.append(line) } }
            driver = ExchangeDriver(
                store: MemoryStore(capacity: 1 << 20, clock: clock.function), configuration: configuration)
        }

        /// A `GET` of `url` performed as a host performs it, the origin answering `origin`
        /// with `body` (`nil`: it cannot be reached); returns the lines the request wrote.
        func get(_ url: String = ExchangeTraceTests.url, origin: ResponseHead?, body: String = "hello") -> [String] {
            let before = lines.withLock { $0.count }
            var exchange = driver.exchange(
                for: ExchangeRequest(
                    head: RequestHead(uri: url), primaryKey: CacheKey(method: "GET", uri: url)?.primaryKey)
            )
            var work = driver.start(&exchange)
            while case .join(let identity) = work {
                let leads = driver.join(identity, waiter: { _ in })
                #expect(leads, "nothing else is in flight: this request leads")
                work = driver.joinedAsLeader(&exchange)
            }
            if case .forward = work {
                if let origin {
                    let sent = Timestamp(secondsSince1970: clock.now())
                    if case .relay(let relay) = driver.originResponded(&exchange, origin, requestTime: sent) {
                        relay.recorder?.record(Array(body.utf8))
                        relay.recorder?.finish()
                    }
                } else {
                    _ = driver.originFailed(&exchange)
                }
            }
            return lines.withLock { Array($0[before...]) }
        }
    }

    /// The lines request `number` writes: its request line, its start, then `transitions`.
    static func trace(_ number: Int, _ transitions: [String]) -> [String] {
        ["GET \(url)", "idle start → readCandidates"].map { "trace \(number) \($0)" }
            + transitions.map { "trace \(number) \($0)" }
    }

    static func response(status: Int = 200, _ fields: HeaderFields) -> ResponseHead {
        var fields = fields
        fields["Content-Length"] = status == 200 ? "5" : "0"
        return ResponseHead(status: status, fields: fields)
    }

    @Test("a miss: looked up, led, forwarded, relayed and stored (RFC 9111 §3, §4)")
    func miss() {
        let cache = TracedCache()
        let lines = cache.get(origin: Self.response(["Cache-Control": "max-age=60"]))
        #expect(
            lines
                == Self.trace(
                    1,
                    [
                        "lookingUp candidatesRead(0) → join",
                        "joining joinedAsLeader → forward(uri-miss)",
                        "forwarding originResponded(200) → relay(200, store)",
                    ]))
    }

    @Test("a hit: looked up and served without the origin (RFC 9111 §4.2)")
    func hit() {
        let cache = TracedCache()
        _ = cache.get(origin: Self.response(["Cache-Control": "max-age=60"]))
        cache.clock.advance(by: 10)
        let lines = cache.get(origin: nil)
        #expect(lines == Self.trace(2, ["lookingUp candidatesRead(1) → serveStored(hit)"]))
    }

    @Test(
        "a revalidation: a conditional request, a 304 applied, the freshened response served (RFC 9111 §4.3.1, §4.3.4)")
    func revalidation() {
        let cache = TracedCache()
        _ = cache.get(origin: Self.response(["Cache-Control": "max-age=60", "ETag": "\"v1\""]))
        cache.clock.advance(by: 120)
        let lines = cache.get(origin: Self.response(status: 304, ["Cache-Control": "max-age=60", "ETag": "\"v1\""]))
        #expect(
            lines
                == Self.trace(
                    2,
                    [
                        "lookingUp candidatesRead(1) → join",
                        "joining joinedAsLeader → forward(stale, conditional)",
                        "forwarding originResponded(304) → applyNotModified(1)",
                        "freshening notModifiedApplied(1) → serveStored(revalidated)",
                    ]))
    }

    @Test("stale-if-error: a 503 and an unreachable origin are answered with the stale response (RFC 5861 §4)")
    func staleIfError() {
        let cache = TracedCache()
        _ = cache.get(origin: Self.response(["Cache-Control": "max-age=60, stale-if-error=600"]))
        cache.clock.advance(by: 120)
        // Validated with its Date as If-Modified-Since (RFC 9111 §4.3.1), which a 503 does not answer.
        let afterError = cache.get(origin: Self.response(status: 503, [:]))
        #expect(
            afterError
                == Self.trace(
                    2,
                    [
                        "lookingUp candidatesRead(1) → join",
                        "joining joinedAsLeader → forward(stale, conditional)",
                        "forwarding originResponded(503) → serveStored(stale)",
                    ]))
        let unreachable = cache.get(origin: nil)
        #expect(
            unreachable
                == Self.trace(
                    3,
                    [
                        "lookingUp candidatesRead(1) → join",
                        "joining joinedAsLeader → forward(stale, conditional)",
                        "forwarding originFailed → serveStored(stale)",
                    ]))
    }
}
