import CacheSystem
import CacheTLS

/// The origin of the misbehaving-origin tests, for `HTTPCache` and for the proxy alike: `/a` is
/// answered with a script that gets the response's framing wrong (RFC 9112 §6) the first time
/// and with a plain `A` afterwards; `/b` always with `B`. A cache that took stray bytes for the
/// next response would store them under `/b`, which a test can then see.
///
/// The scripts it is tested with are here too, so both caches face the same bytes.
public final class PoisonedOrigin: Sendable {
    /// What makes every response here storable, for a day: the proxy's tests run a real
    /// `httpcache serve` on the real clock, and its hits must not depend on how long a loaded
    /// machine takes between requests.
    public static let cacheable = "Cache-Control: max-age=86400\r\n"

    /// A complete, storable response with `body`.
    public static func response(_ body: String) -> String {
        "HTTP/1.1 200 OK\r\n\(cacheable)Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
    }

    // MARK: Scripts

    /// `/a`'s response, then a second complete response in the same write.
    public static let secondResponseInSameWrite: [RawOrigin.Step] = [.send(response("A") + response("stray"))]

    /// `/a`'s response, then 50 ms later another complete response on the idle connection.
    public static let lateStrayResponse: [RawOrigin.Step] = [
        .send(response("A")), .pause(0.05), .send(response("stray")),
    ]

    /// For a HEAD: the head announces the 1,000 bytes a GET would get; what follows is another
    /// response, which a HEAD response never has (RFC 9112 §6.3 item 1).
    public static let bodyAfterHeadResponse: [RawOrigin.Step] = [
        .send("HTTP/1.1 200 OK\r\n\(cacheable)Content-Length: 1000\r\n\r\n" + response("stray"))
    ]

    /// `Content-Length: 5` beside `Transfer-Encoding: chunked`, in both orders (RFC 9112 §6.1).
    public static let contentLengthWithChunked = [
        "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
    ]

    /// A response with `framingFields` and the chunked body `hello world`.
    public static func chunkedHelloWorld(framingFields: String) -> [RawOrigin.Step] {
        [.send("HTTP/1.1 200 OK\r\n\(cacheable)\(framingFields)\r\nb\r\nhello world\r\n0\r\n\r\n")]
    }

    /// Bodies cut short (RFC 9112 §6.3, §8): a Content-Length body closed early, a chunked body
    /// closed mid-chunk and before its last chunk, a Content-Length body reset.
    public static let cutBodies: [[RawOrigin.Step]] = [
        [.send("HTTP/1.1 200 OK\r\n\(cacheable)Content-Length: 10\r\n\r\nshort"), .close],
        [.send("HTTP/1.1 200 OK\r\n\(cacheable)Transfer-Encoding: chunked\r\n\r\na\r\nhello"), .close],
        [.send("HTTP/1.1 200 OK\r\n\(cacheable)Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"), .close],
        [.send("HTTP/1.1 200 OK\r\n\(cacheable)Content-Length: 10\r\n\r\nshort"), .pause(0.05), .reset],
    ]

    // MARK: The origin

    private let raw: RawOrigin

    /// An origin that answers `/a` with `poisoned` once, then with `A`; `/b` with `B`; over
    /// HTTPS with `tls`.
    public init(poisoned: [RawOrigin.Step], tls: TLSServerContext? = nil) throws(LoopbackOrigin.SocketError) {
        let answeredA = Locked(0)
        raw = try RawOrigin(tls: tls) { request in
            guard request.target == "/a" else { return [.send(PoisonedOrigin.response("B"))] }
            let first = answeredA.withLock { count in
                count += 1
                return count == 1
            }
            return first ? poisoned : [.send(PoisonedOrigin.response("A"))]
        }
    }

    deinit { raw.stop() }

    /// `http://127.0.0.1:PORT` (`https://` over HTTPS) followed by `path`.
    public func url(_ path: String) -> String { raw.url(path) }

    /// How many requests for `path` reached the origin.
    public func count(_ path: String) -> Int {
        raw.received.filter { $0.text.contains(" \(path) HTTP/1.1") }.count
    }
}
