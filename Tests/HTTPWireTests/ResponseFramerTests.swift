import CacheSemantics
@_spi(Wire) import HTTPWire
import Testing

/// `ResponseFramer` with no I/O: every framing rule of RFC 9112 §6.3, each fed in one piece,
/// byte by byte and in uneven pieces, which must all read alike.
@Suite("ResponseFramer (RFC 9112 §6.3)")
struct ResponseFramerTests {
    typealias Limits = ResponseFramer.Limits

    /// Frames `text` in one piece, byte by byte and in pieces of 1 to 7 bytes; all three must agree.
    static func frame(
        _ text: String, method: String = "GET", closed: Bool = false, limits: Limits = Limits(),
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> Framing {
        frame(Array(text.utf8), method: method, closed: closed, limits: limits, sourceLocation: sourceLocation)
    }

    static func frame(
        _ bytes: [UInt8], method: String = "GET", closed: Bool = false, limits: Limits = Limits(),
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> Framing {
        let whole = Framing(bytes, ends: [bytes.count], method: method, closed: closed, limits: limits)
        let single = Framing(
            bytes, ends: Array(bytes.indices.map { $0 + 1 }), method: method, closed: closed, limits: limits)
        var uneven: [Int] = []
        var end = 0
        while end < bytes.count {
            end = min(bytes.count, end + 1 + uneven.count % 7)
            uneven.append(end)
        }
        let pieces = Framing(bytes, ends: uneven, method: method, closed: closed, limits: limits)
        #expect(single == whole, "byte by byte", sourceLocation: sourceLocation)
        #expect(pieces == whole, "in pieces \(uneven)", sourceLocation: sourceLocation)
        return whole
    }

    static func head(_ status: Int, _ reason: String, _ fields: [(String, String)]) -> UpstreamResponseHead {
        UpstreamResponseHead(
            status: status, reason: reason, fields: HeaderFields(fields.map { HeaderField(name: $0.0, value: $0.1) }))
    }

    // MARK: Where the body ends (§6.3)

    @Test("Content-Length: that many bytes; what follows is not consumed (RFC 9112 §6.3 items 6, last paragraph)")
    func contentLength() {
        let message = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
        let framed = Self.frame(message + "HTTP/1.1 200 OK\r\n\r\n")
        #expect(
            framed.events == [.head(Self.head(200, "OK", [("Content-Length", "5")])), .body(Array("hello".utf8)), .end])
        #expect(framed.consumed == message.utf8.count)
        #expect(framed.keepsAlive)
    }

    @Test(
        "Content-Length: 0, and repeats of one number replaced with a single line (RFC 9110 §8.6, RFC 9112 §6.3 item 5)"
    )
    func contentLengthRepeats() {
        #expect(Self.frame("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").body == "")
        // The repeats are replaced with one line before the response goes on (item 5).
        for repeated in ["Content-Length: 2, 2", "Content-Length: 2\r\ncontent-length:02", "Content-Length: 2,2, 2"] {
            let framed = Self.frame("HTTP/1.1 200 OK\r\nX: 1\r\n\(repeated)\r\nY: 2\r\n\r\nok")
            #expect(framed.body == "ok")
            let expected = Self.head(200, "OK", [("X", "1"), ("Content-Length", "2"), ("Y", "2")])
            #expect(framed.head == expected, "\(repeated)")
        }
        let single = Self.frame("HTTP/1.1 200 OK\r\nContent-Length: 02\r\n\r\nok")
        #expect(single.head == Self.head(200, "OK", [("Content-Length", "02")]), "one valid line is left as it came")
    }

    @Test(
        "Content-Length that is not one decimal number is an error (RFC 9112 §6.3 item 5)",
        arguments: [
            "Content-Length: 5, 6", "Content-Length: 5\r\nContent-Length: 6", "Content-Length: -1", "Content-Length:",
            "Content-Length: 1e3", "Content-Length: +5", "Content-Length: 0x10", "Content-Length: 5,",
            "Content-Length: 99999999999999999999",
        ])
    func invalidContentLength(fields: String) {
        let framed = Self.frame("HTTP/1.1 200 OK\r\n\(fields)\r\n\r\nhello")
        #expect(framed.events.count == 1)
        #expect(framed.error?.contains("Content-Length") == true, "\(framed)")
    }

    @Test("Chunked: extensions ignored, trailer fields read and dropped (RFC 9112 §7.1)")
    func chunked() {
        let message =
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;name=\"v\"\r\nhello\r\n1 ; a\r\n!\r\n"
            + "0\r\nExpires: 0\r\nX: y\r\n\r\n"
        let framed = Self.frame(message + "next")
        #expect(framed.body == "hello!")
        #expect(framed.isComplete)
        #expect(framed.consumed == message.utf8.count)
        #expect(framed.keepsAlive)
    }

    @Test(
        "Broken chunked framing is an error (RFC 9112 §7.1)",
        arguments: [
            "zz\r\nhello\r\n0\r\n\r\n", "5\r\nhelloXX0\r\n\r\n", "fffffffffffffffff\r\n", "5 x\r\nhello\r\n0\r\n\r\n",
            "5\nhello\r\n0\r\n\r\n", "0\r\nbad trailer\r\n\r\n", "-5\r\nhello\r\n",
        ])
    func brokenChunked(body: String) {
        let framed = Self.frame("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body)
        #expect(framed.error?.hasPrefix("the chunked body is malformed") == true, "\(framed)")
        #expect(framed.head != nil)
    }

    @Test("Content-Length with Transfer-Encoding is an error, in either order (RFC 9112 §6.1, §6.3 item 3)")
    func lengthWithCoding() {
        for fields in [
            "Content-Length: 5\r\nTransfer-Encoding: chunked", "Transfer-Encoding: chunked\r\nContent-Length: 5",
        ] {
            let framed = Self.frame("HTTP/1.1 200 OK\r\n\(fields)\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
            #expect(framed.events.count == 1)
            #expect(framed.error?.contains("both Content-Length and Transfer-Encoding") == true)
        }
    }

    @Test(
        "A Transfer-Encoding other than one chunked is an error (RFC 9112 §6.1, §6.3 item 4)",
        arguments: [
            "Transfer-Encoding: gzip, chunked", "Transfer-Encoding: identity", "Transfer-Encoding: chunked, chunked",
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked", "Transfer-Encoding: gzip",
            "Transfer-Encoding:", "Transfer-Encoding: chunked;q=1",
        ])
    func otherCodings(fields: String) {
        let framed = Self.frame("HTTP/1.1 200 OK\r\n\(fields)\r\n\r\n0\r\n\r\n")
        #expect(framed.events.count == 1)
        #expect(framed.error?.contains("Transfer-Encoding") == true, "\(framed)")
        // Any case of chunked alone is chunked.
        #expect(Self.frame("HTTP/1.1 200 OK\r\nTransfer-Encoding:  ChunKed \r\n\r\n0\r\n\r\n").isComplete)
    }

    @Test("Transfer-Encoding in an HTTP/1.0 response is an error (RFC 9112 §6.1)")
    func codingInHTTP10() {
        #expect(Self.frame("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n").error != nil)
    }

    @Test(
        "No body after HEAD, 204 and 304, whatever the fields say (RFC 9112 §6.3 item 1)",
        arguments: [
            ("HEAD", 200), ("HEAD", 404), ("GET", 204), ("GET", 304), ("POST", 204),
        ])
    func noBody(method: String, status: Int) {
        let head = "HTTP/1.1 \(status) X\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
        let framed = Self.frame(head + "hello", method: method)
        // A 204's Content-Length goes (RFC 9110 §8.6); a 304's or a HEAD response's states the
        // length of a GET response (RFC 9110 §8.6) and stays.
        let fields = (status == 204 ? [] : [("Content-Length", "5")]) + [("Transfer-Encoding", "chunked")]
        #expect(framed.events == [.head(Self.head(status, "X", fields)), .end])
        // The body is not part of the response: the client sees it as excess.
        #expect(framed.consumed == head.utf8.count)
    }

    @Test("Without framing fields the body runs to the close, and the connection is not kept (RFC 9112 §6.3 item 8)")
    func untilClose() {
        let open = Self.frame("HTTP/1.1 200 OK\r\n\r\nall of it")
        #expect(open.events == [.head(Self.head(200, "OK", [])), .body(Array("all of it".utf8))])
        let closed = Self.frame("HTTP/1.1 200 OK\r\n\r\nall of it", closed: true)
        #expect(closed.events == [.head(Self.head(200, "OK", [])), .body(Array("all of it".utf8)), .end])
        #expect(!closed.keepsAlive)
    }

    @Test(
        "A response cut short by the close is an error, never complete (RFC 9112 §6.3, §8)",
        arguments: [
            "", "HTTP/1.1 200 OK\r\nContent-Le", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\na\r\nhello",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX: 1\r\n",
            "HTTP/1.1 100 Continue\r\n\r\n",
        ])
    func cutByClose(text: String) {
        let framed = Self.frame(text, closed: true)
        #expect(framed.error?.hasPrefix("the connection closed") == true, "\(framed)")
    }

    // MARK: Interim responses (RFC 9110 §15.2)

    @Test("1xx heads are interim events before the final head (RFC 9110 §15.2)")
    func interim() {
        let framed = Self.frame(
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
                + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        #expect(
            framed.events == [
                .interim(Self.head(100, "Continue", [])),
                .interim(Self.head(103, "Early Hints", [("Link", "</s.css>; rel=preload")])),
                .head(Self.head(200, "OK", [("Content-Length", "2")])), .body(Array("ok".utf8)), .end,
            ])
    }

    @Test("101 is an error: no upgrade is ever asked for (RFC 9110 §15.2.2)")
    func switchingProtocols() {
        let framed = Self.frame("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n")
        #expect(framed.error?.contains("101") == true)
    }

    @Test("More interim responses than the limit are an error")
    func tooManyInterim() {
        let limits = Limits(maxHeadBytes: 64 * 1024, maxFieldCount: 256, maxInterimResponses: 2)
        let three = String(repeating: "HTTP/1.1 102 Processing\r\n\r\n", count: 3) + "HTTP/1.1 204 No\r\n\r\n"
        #expect(Self.frame(three, limits: limits).error?.contains("interim") == true)
        let two = String(repeating: "HTTP/1.1 102 Processing\r\n\r\n", count: 2) + "HTTP/1.1 204 No\r\n\r\n"
        #expect(Self.frame(two, limits: limits).isComplete)
    }

    // MARK: Heads (RFC 9112 §2–§5)

    @Test(
        "The status line is HTTP/1.x, one SP, three digits from 100 (RFC 9112 §4, §2.3)",
        arguments: [
            ("HTTP/1.1 200 OK", true), ("HTTP/1.1 200", true), ("HTTP/1.1 200 ", true),
            ("HTTP/1.0 404 Not  Found", true),
            ("HTTP/1.9 200 OK", true), ("HTTP/1.1 2000 OK", false), ("HTTP/1.1 20 OK", false), ("ICY 200 OK", false),
            ("HTTP/1.1", false), ("HTTP/2 200", false), ("HTTP/2.0 200 OK", false), ("HTTP/1.1  200 OK", false),
            ("HTTP/1.1 099 Low", false), ("HTTP/1.1 abc Nope", false), ("HTTP/1.1 200OK", false),
            ("http/1.1 200 OK", false),
        ])
    func statusLine(line: String, valid: Bool) {
        let framed = Self.frame(line + "\r\nContent-Length: 0\r\n\r\n")
        #expect(framed.isComplete == valid, "\(framed)")
    }

    @Test("Bytes that cannot begin HTTP/ are refused at once, without waiting for the head's end (RFC 9112 §4)")
    func notHTTP() {
        let framed = Self.frame("hello there")
        #expect(framed.error?.contains("HTTP/") == true)
        // A prefix of HTTP/ waits for more.
        #expect(Self.frame("HTT").events.isEmpty)
    }

    @Test("Fields keep their order, repeats and spelling; white space around names and values goes (RFC 9112 §5)")
    func fields() {
        let framed = Self.frame(
            "HTTP/1.1 200 Fine Thanks\r\nSet-Cookie: a=1\r\nX-Z: z\r\nSet-Cookie: b=2\r\nX-Next :  n  \r\nx-z:again\r\n"
                + "Content-Length: 0\r\n\r\n")
        #expect(
            framed.head
                == Self.head(
                    200, "Fine Thanks",
                    [
                        ("Set-Cookie", "a=1"), ("X-Z", "z"), ("Set-Cookie", "b=2"), ("X-Next", "n"), ("x-z", "again"),
                        ("Content-Length", "0"),
                    ]))
    }

    @Test("An obs-fold continues only the field line right before it, joined with one SP (RFC 9112 §5.2)")
    func obsFold() {
        let framed = Self.frame(
            "HTTP/1.1 200\r\n orphan\r\nA: 1\r\n\t2\r\n  3  \r\nno colon here\r\n ignored\r\nB:\r\n b\r\nC: 3\r\n"
                + "Content-Length: 0\r\n\r\n")
        #expect(
            framed.head == Self.head(200, "", [("A", "1 2 3"), ("B", "b"), ("C", "3"), ("Content-Length", "0")]))
    }

    @Test("A bare CR or a NUL reads as SP (RFC 9110 §5.5, RFC 9112 §2.2)")
    func crAndNUL() {
        let framed = Self.frame(
            "HTTP/1.1 200 O\rK\r\nCache-Control: max-age=60\u{0}\r\r\nX-A: a\rb\r\nContent-Length: 0\r\n\r\n")
        #expect(
            framed.head
                == Self.head(200, "O K", [("Cache-Control", "max-age=60"), ("X-A", "a b"), ("Content-Length", "0")]))
    }

    @Test("A bare CR or a NUL anywhere in a head reads as SP, whatever its place in the eight-byte words scanned")
    func crAndNULAtEveryOffset() {
        for stray in ["\r", "\u{0}"] {
            for padding in 0..<17 {
                let value = String(repeating: "a", count: padding)
                let framed = Self.frame("HTTP/1.1 200 OK\r\nX: \(value)\(stray)b\r\nContent-Length: 0\r\n\r\n")
                #expect(
                    framed.head
                        == Self.head(200, "OK", [("X", padding == 0 ? "b" : value + " b"), ("Content-Length", "0")]),
                    "\(stray.unicodeScalars.first!.value) after \(padding) bytes")
            }
        }
    }

    @Test("Lines may end in a bare LF (RFC 9112 §2.2); chunk lines may not (§7.1)")
    func bareLF() {
        let framed = Self.frame("HTTP/1.1 200 OK\nA: 1\r\nContent-Length: 2\n\nok")
        #expect(framed.head == Self.head(200, "OK", [("A", "1"), ("Content-Length", "2")]))
        #expect(framed.body == "ok")
        #expect(Self.frame("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\n\n2\nok\n0\n\n").error != nil)
    }

    @Test("A field name that is not a token is ignored, not forwarded (RFC 9110 §5.1)")
    func nonTokenNames() {
        let framed = Self.frame(
            "HTTP/1.1 200 OK\r\nContent Length: 5\r\nX\u{1}: 1\r\n: empty\r\n\u{E9}: x\r\nOK: 1\r\n\r\nbody",
            closed: true)
        #expect(framed.head == Self.head(200, "OK", [("OK", "1")]))
        #expect(framed.body == "body")
    }

    @Test("Bytes that are not UTF-8 are kept as ISO 8859-1")
    func latin1() {
        let framed = Self.frame(
            Array("HTTP/1.1 200 OK\r\nX: ".utf8) + [0xE9] + Array("\r\nContent-Length: 0\r\n\r\n".utf8))
        #expect(framed.head == Self.head(200, "OK", [("X", "\u{E9}"), ("Content-Length", "0")]))
    }

    @Test("A head larger than the limit, or with more fields, is an error")
    func headLimits() {
        let limits = Limits(maxHeadBytes: 64, maxFieldCount: 2, maxInterimResponses: 16)
        let fits = "HTTP/1.1 200 OK\r\nA: 1\r\nContent-Length: 0\r\n\r\n"
        #expect(Self.frame(fits, limits: limits).isComplete)
        #expect(
            Self.frame("HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", limits: limits).error?.contains("fields")
                == true)
        let long = "HTTP/1.1 200 OK\r\nA: " + String(repeating: "a", count: 60)
        #expect(Self.frame(long, limits: limits).error?.contains("larger") == true)
        #expect(Self.frame(long + "\r\n\r\n", limits: limits).error?.contains("larger") == true)
    }

    // MARK: Persistence (RFC 9112 §9.3)

    @Test(
        "Whether the connection persists after the response (RFC 9112 §9.3)",
        arguments: [
            ("HTTP/1.1 200 OK\r\nContent-Length: 0", true),
            ("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0", false),
            ("HTTP/1.1 200 OK\r\nConnection: x, CLOSE\r\nContent-Length: 0", false),
            ("HTTP/1.0 200 OK\r\nContent-Length: 0", false),
            ("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0", true),
            ("HTTP/1.1 200 OK\r\nConnection: closed, \"close\"\r\nContent-Length: 0", true),
            ("HTTP/1.0 200 OK\r\nConnection: x\r\nConnection: y,keep-alive\r\nContent-Length: 0", true),
            ("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nConnection: Close\r\nContent-Length: 0", false),
        ])
    func persistence(head: String, keepsAlive: Bool) {
        let framed = Self.frame(head + "\r\n\r\n")
        #expect(framed.isComplete)
        #expect(framed.keepsAlive == keepsAlive)
    }
}

/// What ``ResponseFramer`` reported for some bytes received in pieces: adjacent body pieces
/// joined, since splits move their borders.
struct Framing: Equatable {
    enum Event: Equatable {
        case interim(UpstreamResponseHead)
        case head(UpstreamResponseHead)
        case body([UInt8])
        case end
        case error(String)
    }

    var events: [Event] = []
    /// Bytes that belonged to the response (consumed by the framer).
    var consumed = 0
    var keepsAlive = false

    /// Frames the response to a `method` request in `bytes`, received in pieces that end at
    /// `ends`, then, when `closed`, the connection's end; stops at the end or an error.
    init(_ bytes: [UInt8], ends: [Int], method: String, closed: Bool, limits: ResponseFramer.Limits) {
        var framer = ResponseFramer(requestMethod: method, limits: limits)
        var pending: [UInt8] = []
        var stopped = false
        for (start, end) in zip([0] + ends, ends) where !stopped {
            pending += bytes[start..<end]
            var event = ResponseFramer.Event.needMore
            repeat {
                let consumedNow: Int
                (event, consumedNow) = pending.withUnsafeBytes { framer.parse($0) }
                if case .body(let range) = event { append(.body(Array(pending[range]))) }
                pending.removeFirst(consumedNow)
                consumed += consumedNow
                append(event)
            } while event != .needMore && event != .end && !isError(event)
            stopped = event == .end || isError(event)
        }
        if closed && !stopped { append(framer.finish()) }
        keepsAlive = framer.keepsAlive
    }

    private func isError(_ event: ResponseFramer.Event) -> Bool {
        if case .error = event { return true }
        return false
    }

    private mutating func append(_ event: ResponseFramer.Event) {
        switch event {
        case .needMore, .body: return
        case .interim(let head): events.append(.interim(head))
        case .head(let head): events.append(.head(head))
        case .end: events.append(.end)
        case .error(let error): events.append(.error(error.description))
        }
    }

    private mutating func append(_ body: Event) {
        if case .body(let more) = body, case .body(let earlier) = events.last {
            events[events.count - 1] = .body(earlier + more)
        } else {
            events.append(body)
        }
    }

    var head: UpstreamResponseHead? {
        for case .head(let head) in events { return head }
        return nil
    }
    /// The body as text; "" when the response ended without one, nil when there is none yet.
    var body: String? {
        for case .body(let body) in events { return String(decoding: body, as: UTF8.self) }
        return events.contains(.end) ? "" : nil
    }

    var isComplete: Bool { events.last == .end }

    var error: String? {
        guard case .error(let reason) = events.last else { return nil }
        return reason
    }
}
