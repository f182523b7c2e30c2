#if os(Linux)
import CacheSystem
import CacheTestSupport
import Glibc
import LoopbackOrigin

/// The soak's origin: `urls` resources `/r/0` … whose versions change while the soak runs,
/// each version's body generated from (index, version) so a client can check every byte it
/// gets. Now and then a response is sent wrong on purpose, in one of the ways ``Misbehaviour``
/// lists.
final class SoakOrigin: Sendable {
    /// How an origin gets a response's framing wrong (RFC 9112 §6).
    enum Misbehaviour: String, CaseIterable, Sendable {
        /// The response, then a second complete response (another URL's) in the same write.
        case secondResponseInSameWrite = "second response in the same write"
        /// The response, then 20 ms later, if the connection is still idle, another URL's
        /// response.
        case lateStrayResponse = "stray response 20 ms later"
        /// `Content-Length: 5` and `Transfer-Encoding: chunked` on the whole body.
        case contentLengthWithChunked = "Content-Length with chunked"
        /// Half the Content-Length body, then the connection closed.
        case shortBody = "body shorter than Content-Length"
        /// A chunked body cut in the middle of a chunk, then the connection closed.
        case cutMidChunk = "chunked body cut mid-chunk"
        /// Half the body, then the connection reset.
        case reset = "connection reset mid-body"
        /// For HEAD: the head, then another URL's response as if it were a body.
        case bodyAfterHead = "bytes after a HEAD response"
    }

    struct Counters: Sendable {
        var requests = 0
        var notModified = 0
        var bodyBytes: Int64 = 0
        var misbehaviours: [Misbehaviour: Int] = [:]
        /// Late stray responses made (numbered from 1 in their `Soak-Stray` field), and sent
        /// (the connection stayed quiet for 20 ms).
        var lateStraysMade = 0
        var lateStraysSent = 0
        /// For each late stray followed by another request on its connection (the cache did
        /// not see the stray before it sent that request): milliseconds from the stray to that
        /// request.
        var strayFollowUps: [Int: Double] = [:]
    }

    let urls: Int
    /// The size of the big resources (`/r/99`, `/r/199`, …).
    let bigSize: Int64
    /// The share of responses to small resources sent wrong, 0…1.
    let misbehaviourRate: Double
    private let versions: Locked<[UInt32]>
    private let counters = Locked(Counters())
    private let raw: Locked<RawOrigin?> = Locked(nil)
    var port: UInt16 { raw.withLock { $0?.port ?? 0 } }

    /// With `tls`, the origin serves HTTPS with the certificate `TestCertificates` makes for
    /// 127.0.0.1 (its CA in ``TestCertificates/caFile``), and a connection it cuts or resets
    /// on purpose ends without `close_notify`.
    init(urls: Int, bigSize: Int64, misbehaviourRate: Double, tls: Bool = false) throws {
        self.urls = urls
        self.bigSize = bigSize
        self.misbehaviourRate = misbehaviourRate
        versions = Locked([UInt32](repeating: 1, count: urls))
        let certificates = tls ? try TestCertificates.shared() : nil
        let context = try certificates.map { try $0.serverContext($0.localhost) }
        let origin = try RawOrigin(records: false, tls: context) { [unowned self] connection in
            self.serve(connection)
        }
        raw.withLock { $0 = origin }
    }

    func stop() { raw.withLock { $0?.stop() } }

    var counted: Counters { counters.withLock { $0 } }

    /// Moves a random resource on to its next version.
    func changeOneVersion() {
        let index = Int.random(in: 0..<urls)
        versions.withLock { $0[index] &+= 1 }
    }

    func currentVersion(_ index: Int) -> UInt32 { versions.withLock { $0[index] } }

    /// For the late stray whose `Soak-Stray` field is `field`: how long after it the next
    /// request on its connection came, if one did.
    ///
    /// Waits up to 2 s for the origin to read that request: the proxy had the stray in hand
    /// when it sent the request, so it may answer its client before the origin's thread (on a
    /// busy machine) gets to read the request it crossed.
    func followUp(ofStray field: String) -> Double? {
        guard let mark = field.lastIndex(of: "#"), let number = Int(field[field.index(after: mark)...]) else {
            return nil
        }
        let deadline = MonotonicClock.seconds() + 2
        while true {
            if let followUp = counters.withLock({ $0.strayFollowUps[number] }) { return followUp }
            if MonotonicClock.seconds() > deadline { return nil }
            usleep(5_000)
        }
    }

    static func isBig(_ index: Int) -> Bool { index % 100 == 99 }

    /// The body size of `/r/index`, the same for every version: the big ones `bigSize`, every
    /// tenth 1 MiB, the rest 1 byte to 64 KiB.
    func size(_ index: Int) -> Int64 {
        if Self.isBig(index) { return bigSize }
        if index % 10 == 5 { return 1 << 20 }
        return Int64((UInt64(index) &* 0x9E37_79B9_7F4A_7C15) >> 48) + 1
    }

    static func seed(_ index: Int, _ version: UInt32) -> UInt64 { UInt64(index) << 32 | UInt64(version) }
    static func etag(_ index: Int, _ version: UInt32) -> String { "\"\(index)-\(version)\"" }

    /// `(index, version)` from an ETag this origin made; nil for anything else.
    static func parse(etag: String) -> (index: Int, version: UInt32)? {
        let inner = etag.trimmingQuotes()
        let parts = inner.split(separator: "-")
        guard parts.count == 2, let index = Int(parts[0]), let version = UInt32(parts[1]) else { return nil }
        return (index, version)
    }

    /// Freshness: 1, 2, 5 or 30 s by index; every seventh also allows 5 s stale-while-revalidate.
    static func cacheControl(_ index: Int) -> String {
        let maxAge = [1, 2, 5, 30][index % 4]
        return index % 7 == 0 ? "max-age=\(maxAge), stale-while-revalidate=5" : "max-age=\(maxAge)"
    }

    /// Small resources alternate Content-Length and chunked framing; big ones use Content-Length.
    static func isChunked(_ index: Int) -> Bool { index % 3 == 1 && !isBig(index) }

    // MARK: Serving

    private func serve(_ connection: RawConnection) {
        var lateStray: (number: Int, sentAt: Double)?
        while let text = connection.readRequest() {
            if let sent = lateStray {
                let milliseconds = (MonotonicClock.seconds() - sent.sentAt) * 1000
                counters.withLock { $0.strayFollowUps[sent.number] = milliseconds }
                lateStray = nil
            }
            let lines = text.split(separator: "\r\n")
            let words = (lines.first ?? "").split(separator: " ")
            let method = words.first.map(String.init) ?? ""
            let target = words.dropFirst().first.map(String.init) ?? ""
            guard target.hasPrefix("/r/"), let index = Int(target.dropFirst(3)), index >= 0, index < urls else {
                connection.send("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                continue
            }
            let version = currentVersion(index)
            let etag = Self.etag(index, version)
            let conditional = lines.first { $0.lowercased().hasPrefix("if-none-match:") }
                .map { $0.dropFirst("if-none-match:".count).trimmingSpaces() }
            counters.withLock { $0.requests += 1 }
            if let conditional, conditional.split(separator: ",").contains(where: { $0.trimmingSpaces() == etag }) {
                counters.withLock { $0.notModified += 1 }
                connection.send(
                    "HTTP/1.1 304 Not Modified\r\nCache-Control: \(Self.cacheControl(index))\r\nETag: \(etag)\r\n\r\n")
                continue
            }
            if let misbehaviour = chooseMisbehaviour(index: index, method: method) {
                counters.withLock { $0.misbehaviours[misbehaviour, default: 0] += 1 }
                guard misbehave(misbehaviour, connection, index: index, version: version, lateStray: &lateStray)
                else { return }
                continue
            }
            connection.send(head(index, version, framing: Self.isChunked(index) ? .chunked : .length(size(index))))
            guard method != "HEAD" else { continue }
            if Self.isChunked(index) {
                sendChunked(connection, index, version, upTo: size(index))
            } else {
                sendBody(connection, index, version, upTo: size(index))
            }
        }
    }

    private func chooseMisbehaviour(index: Int, method: String) -> Misbehaviour? {
        guard !Self.isBig(index), Double.random(in: 0..<1) < misbehaviourRate else { return nil }
        if method == "HEAD" { return .bodyAfterHead }
        return Misbehaviour.allCases.filter { $0 != .bodyAfterHead }.randomElement()
    }

    /// Sends `misbehaviour` for `/r/index`; false when the connection is finished with. A late
    /// stray that went out is noted in `lateStray`.
    private func misbehave(
        _ misbehaviour: Misbehaviour, _ connection: RawConnection, index: Int, version: UInt32,
        lateStray: inout (number: Int, sentAt: Double)?
    ) -> Bool {
        let size = size(index)
        switch misbehaviour {
        case .secondResponseInSameWrite:
            connection.send(whole(index, version) + stray(besides: index, misbehaviour))
            return true
        case .lateStrayResponse:
            connection.send(whole(index, version))
            // Bytes that arrive after the cache sent its next request are, on HTTP/1.1, that
            // request's response: no cache can tell them apart. The stray goes out only while
            // the connection is idle, which is the case a cache must catch. It is made before
            // the wait, so that nothing but the send comes between the check and the stray.
            let number = counters.withLock { counters in
                counters.lateStraysMade += 1
                return counters.lateStraysMade
            }
            let late = stray(besides: index, .lateStrayResponse, number: number)
            if connection.staysQuiet(milliseconds: 20) {
                connection.send(late)
                lateStray = (number, MonotonicClock.seconds())
                counters.withLock { $0.lateStraysSent += 1 }
            }
            return true
        case .contentLengthWithChunked:
            var head = head(index, version, framing: .chunked)
            head.insert(contentsOf: Array("Content-Length: 5\r\n".utf8), at: head.count - 2)
            connection.send(head)
            sendChunked(connection, index, version, upTo: size)
            return true
        case .shortBody:
            connection.send(head(index, version, framing: .length(size + 10)))
            sendBody(connection, index, version, upTo: size / 2)
            return false
        case .cutMidChunk:
            connection.send(head(index, version, framing: .chunked))
            connection.send(Array("\(String(size, radix: 16))\r\n".utf8))
            sendBody(connection, index, version, upTo: size / 2)
            return false
        case .reset:
            connection.send(head(index, version, framing: .length(size + 10)))
            sendBody(connection, index, version, upTo: size / 2)
            connection.resetOnClose()
            return false
        case .bodyAfterHead:
            connection.send(head(index, version, framing: .length(size)) + stray(besides: index, misbehaviour))
            return true
        }
    }

    private enum Framing {
        case length(Int64)
        case chunked
    }

    private func head(_ index: Int, _ version: UInt32, framing: Framing) -> [UInt8] {
        let framingField =
            switch framing {
            case .length(let length): "Content-Length: \(length)"
            case .chunked: "Transfer-Encoding: chunked"
            }
        return Array(
            ("HTTP/1.1 200 OK\r\nCache-Control: \(Self.cacheControl(index))\r\nETag: \(Self.etag(index, version))\r\n"
                + "Content-Type: application/octet-stream\r\n\(framingField)\r\n\r\n").utf8)
    }

    /// A whole response for `/r/index`, in memory (small resources only).
    private func whole(_ index: Int, _ version: UInt32) -> [UInt8] {
        head(index, version, framing: .length(size(index)))
            + LoopbackOrigin.GeneratedBody.bytes(seed: Self.seed(index, version), count: Int(size(index)))
    }

    /// Another small resource's whole response, cacheable for a minute: what a cache that
    /// took it for the next response would store under the wrong URL. `Soak-Stray` names the
    /// misbehaviour (and the late stray's number), for the report.
    private func stray(besides index: Int, _ misbehaviour: Misbehaviour, number: Int? = nil) -> [UInt8] {
        var other = Int.random(in: 0..<urls)
        while other == index || Self.isBig(other) { other = Int.random(in: 0..<urls) }
        let version = currentVersion(other)
        return Array(
            ("HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nETag: \(Self.etag(other, version))\r\n"
                + "Soak-Stray: \(misbehaviour.rawValue)\(number.map { " #\($0)" } ?? "")\r\nContent-Length: \(size(other))\r\n\r\n")
                .utf8)
            + LoopbackOrigin.GeneratedBody.bytes(seed: Self.seed(other, version), count: Int(size(other)))
    }

    private static let block = 256 << 10

    private func sendBody(_ connection: RawConnection, _ index: Int, _ version: UInt32, upTo end: Int64) {
        var offset: Int64 = 0
        while offset < end {
            let count = Int(min(Int64(Self.block), end - offset))
            connection.send(
                LoopbackOrigin.GeneratedBody.bytes(seed: Self.seed(index, version), from: offset, count: count))
            offset += Int64(count)
        }
        counters.withLock { $0.bodyBytes += end }
    }

    /// The body in chunks of 1 byte to 64 KiB, then the last chunk.
    private func sendChunked(_ connection: RawConnection, _ index: Int, _ version: UInt32, upTo end: Int64) {
        var offset: Int64 = 0
        while offset < end {
            let count = Int(min(Int64(Int.random(in: 1...(64 << 10))), end - offset))
            let data = LoopbackOrigin.GeneratedBody.bytes(seed: Self.seed(index, version), from: offset, count: count)
            connection.send(Array("\(String(count, radix: 16))\r\n".utf8) + data + [0x0D, 0x0A])
            offset += Int64(count)
        }
        connection.send("0\r\n\r\n")
        counters.withLock { $0.bodyBytes += end }
    }
}

extension StringProtocol {
    func trimmingSpaces() -> String {
        String(drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }

    func trimmingQuotes() -> String {
        var text = trimmingSpaces()
        if text.hasPrefix("W/") { text.removeFirst(2) }
        if text.hasPrefix("\""), text.hasSuffix("\""), text.count >= 2 { text = String(text.dropFirst().dropLast()) }
        return text
    }
}
#endif
