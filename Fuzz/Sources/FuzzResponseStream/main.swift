import CacheSemantics
import CacheTLS
import Foundation
import FuzzSupport
@_spi(Fuzzing) import HTTPClient
import ResponseOracle

// Origin bytes through the upstream client's framing (RFC 9112 §6.3), then through the client
// itself over sockets, a sequence of requests long, both checked against ResponseOracle's
// reading of RFC 9112. The client runs twice: over plain sockets, and over TLS, the origin's
// answers sent in TLS records whose boundaries byte 0 chooses (one byte each, or pieces of up
// to 1,024 bytes) and the client reading at most byte 1's read size from TLS at a time, so
// that records split and join a response anywhere (RFC 8446 §5.1: record boundaries carry no
// meaning) and decrypted bytes wait inside TLS with nothing left on the socket; byte 0's bit 6
// makes the TLS origin close without close_notify, which must never complete a body delimited
// by the close.
//
// Input: byte 0 chooses the pieces the framer is fed; byte 1 the client's read size (low 7
// bits, 0 for 64 KiB) and small limits (high bit); then up to 8 requests, each a control byte
// (bits 0–2 the method, bits 3–4: 2 stop at the head, 3 stop after 1 + bits 5–7 body bytes),
// a length byte, and that many bytes: what the origin sends for the next request it reads.
// A byte from 0xF0 up stands for a piece of HTTP (`tokens`), so that mutations reach
// well-formed responses quickly; the others are themselves.
//
// Traps when
// - the framer reads a response differently in one piece, byte by byte or in other pieces, or
//   differently from the oracle (heads, body, end or error, bytes consumed, persistence);
// - the client, plain or over TLS, delivers anything but the oracle's response for a request (head, body; an error
//   of the right kind, `protocolError` for malformed bytes, `closed` for bytes cut short), or
//   makes a new connection when the oracle says the last one may be reused, or reuses one after
//   an error, excess bytes, a body delimited by the close or a receiver that stopped; or when an
//   idempotent request on a reused connection that closed unanswered is not sent again (and a
//   non-idempotent one is).

let methods = ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "GET"]
let idempotent: Set = ["GET", "HEAD", "PUT", "DELETE", "OPTIONS"]

/// What bytes 0xF0–0xFF stand for in a segment.
let tokens: [[UInt8]] =
    [
        "HTTP/1.1 200 OK\r\n", "HTTP/1.1 100 Continue\r\n\r\n", "HTTP/1.0 ", "\r\n", "Content-Length: ",
        "Transfer-Encoding: chunked\r\n", "Connection: close\r\n", "Connection: keep-alive\r\n", "0\r\n\r\n",
        "HTTP/1.1 204 No Content\r\n", "HTTP/1.1 304 Not Modified\r\n", "HTTP/1.1 ", "\r\n\r\n",
        "Content-Length: 5\r\n\r\nhello", "5\r\nhello\r\n",
    ].map { Array($0.utf8) } + [[0xFF]]

struct Request {
    var method: String
    var stopAtHead = false
    var stopAfterBodyBytes: Int?
}

struct Input {
    var pieceChoice: UInt8
    var readSize: Int
    var limits: UpstreamFuzzing.Limits
    var requests: [Request] = []
    /// What the origin sends for the 1st, 2nd… request it reads.
    var segments: [[UInt8]] = []

    init?(_ bytes: [UInt8]) {
        guard bytes.count >= 2 else { return nil }
        pieceChoice = bytes[0]
        readSize = bytes[1] & 0x7F == 0 ? 64 * 1024 : Int(bytes[1] & 0x7F)
        limits =
            bytes[1] & 0x80 == 0
            ? .standard : UpstreamFuzzing.Limits(maxHeadBytes: 64, maxFieldCount: 2, maxInterimResponses: 1)
        var position = 2
        while position + 2 <= bytes.count && requests.count < 8 {
            let control = bytes[position]
            let length = min(Int(bytes[position + 1]), bytes.count - position - 2)
            var request = Request(method: methods[Int(control & 7)])
            switch control >> 3 & 3 {
            case 2: request.stopAtHead = true
            case 3: request.stopAfterBodyBytes = 1 + Int(control >> 5)
            default: break
            }
            requests.append(request)
            segments.append(
                bytes[(position + 2)..<(position + 2 + length)].flatMap { $0 >= 0xF0 ? tokens[Int($0 - 0xF0)] : [$0] })
            position += 2 + length
        }
    }

    var oracleLimits: Limits {
        Limits(
            maxHeadBytes: limits.maxHeadBytes, maxFieldCount: limits.maxFieldCount,
            maxInterimResponses: limits.maxInterimResponses)
    }
}

func fail(_ message: String, _ input: [UInt8]) -> Never {
    fatalError("\(message); input \(input.map { String($0) }.joined(separator: ","))")
}

// MARK: - The framer alone

func head(_ head: ResponseOracle.Head) -> UpstreamFuzzing.Head {
    UpstreamFuzzing.Head(
        status: head.status, reason: head.reason,
        fields: head.fields.map { HeaderField(name: $0.name, value: $0.value) })
}

/// The framer's events as the oracle reads `bytes`, error reasons left out.
func expectedEvents(_ reading: ResponseReading) -> [UpstreamFuzzing.Event] {
    var events = reading.interim.map { UpstreamFuzzing.Event.interim(head($0)) }
    if let final = reading.head { events.append(.head(head(final))) }
    if !reading.body.isEmpty { events.append(.body(reading.body)) }
    switch reading.ending {
    case .complete: events.append(.end)
    case .malformed, .truncated: events.append(.error(""))
    case .incomplete: break
    }
    return events
}

func withoutReasons(_ events: [UpstreamFuzzing.Event]) -> [UpstreamFuzzing.Event] {
    events.map { if case .error = $0 { .error("") } else { $0 } }
}

func checkFramer(_ bytes: [UInt8], method: String, closed: Bool, _ input: Input, _ raw: [UInt8]) {
    let whole = UpstreamFuzzing.frame(bytes, ends: [bytes.count], method: method, closed: closed, limits: input.limits)
    for ends in [0, input.pieceChoice].map({ pieceEnds(bytes.count, choice: $0) }) {
        let split = UpstreamFuzzing.frame(bytes, ends: ends, method: method, closed: closed, limits: input.limits)
        guard split == whole else { fail("\(method): pieces \(ends) give \(split), one piece \(whole)", raw) }
    }
    let reading = ResponseReading(method: method, bytes: bytes, closed: closed, limits: input.oracleLimits)
    let expected = expectedEvents(reading)
    guard withoutReasons(whole.events) == expected else {
        fail("\(method) closed \(closed): the framer reads \(whole.events), the oracle \(expected)", raw)
    }
    if reading.ending == .complete {
        guard whole.consumed == reading.length, whole.keepsAlive == reading.persists else {
            fail(
                "\(method): the framer consumed \(whole.consumed) (keeps alive: \(whole.keepsAlive)), the oracle "
                    + "\(reading.length) (\(reading.persists))", raw)
        }
    }
}

// MARK: - The client over sockets

/// The certificate and key a TLS origin serves for `localhost`, made once per process with the
/// `openssl` command (self-signed, trusted by the client as its own authority).
let tlsFiles: (certificate: String, key: String) = {
    let directory = URL(fileURLWithPath: NSTemporaryDirectory() + "/fuzz-response-stream-\(getpid())")
    try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let certificate = directory.appendingPathComponent("localhost.pem").path
    let key = directory.appendingPathComponent("localhost.key").path
    let openssl = Process()
    openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    openssl.arguments = [
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "36500",
        "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost", "-keyout", key, "-out", certificate,
    ]
    openssl.standardError = FileHandle.nullDevice
    do {
        try openssl.run()
        openssl.waitUntilExit()
    } catch {
        fatalError("FuzzResponseStream needs the openssl command (apt-get install openssl): \(error)")
    }
    guard openssl.terminationStatus == 0 else { fatalError("openssl req failed: \(openssl.terminationStatus)") }
    atexit {
        try? FileManager.default.removeItem(atPath: NSTemporaryDirectory() + "/fuzz-response-stream-\(getpid())")
    }
    return (certificate, key)
}()

/// The TLS contexts both ends share across inputs (so sessions resume, as on a pooled client).
let tlsContexts: (server: TLSServerContext, client: TLSClientContext) = {
    do {
        return (
            try TLSServerContext(default: .init(certificateFile: tlsFiles.certificate, keyFile: tlsFiles.key)),
            try TLSClientContext(.init(extraTrustRoots: [tlsFiles.certificate]))
        )
    } catch {
        fatalError("the fuzzer's TLS contexts: \(error)")
    }
}()

/// An origin on the other ends of socketpairs: answers the n-th request it reads, on whatever
/// connection, with `segments[n]`, then shuts its side down when `closeAfter[n]`. With TLS,
/// each connection is a TLS server, its answers sent in records `pieceEnds` chooses, and it
/// closes with `close_notify` or, to cut, without.
final class ScriptedOrigin: @unchecked Sendable {
    private let lock = NSLock()
    private var peers: [Int32] = []
    /// With TLS: each peer's connection, and whether its handshake is done.
    private var tlsPeers: [Int32: (connection: TLSConnection, ready: Bool)] = [:]
    private let tls: TLSScript?
    /// The last 3 bytes read from each peer, to find "\r\n\r\n" across reads.
    private var tails: [Int32: [UInt8]] = [:]
    private var answered = 0
    private var stopping = false
    private(set) var connections = 0
    private let segments: [[UInt8]]
    private let closeAfter: [Bool]
    private let wake: (read: Int32, write: Int32)
    private let done = DispatchSemaphore(value: 0)

    /// How a TLS origin sends its answers.
    struct TLSScript {
        /// `pieceEnds`' choice for the records.
        var recordChoice: UInt8
        /// Where the response in each answer ends, by the oracle: the bytes after it go in the
        /// same record as its end, so that they arrive with it, as they do from one `send` on a
        /// plain socket (bytes the origin sends later are a race no client can win).
        var responseEnds: [Int]
        /// Whether closing sends `close_notify` first.
        var closeNotify: Bool
    }

    /// - Parameter tls: Serve TLS so; nil: plain.
    init(segments: [[UInt8]], closeAfter: [Bool], tls: TLSScript? = nil) {
        self.segments = segments
        self.closeAfter = closeAfter
        self.tls = tls
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { fatalError("pipe: \(errno)") }
        wake = (pipeEnds[0], pipeEnds[1])
        Thread.detachNewThread { [self] in
            run()
            done.signal()
        }
    }

    /// A new connection: the client's end, non-blocking.
    func connect() -> Int32? {
        var ends: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0 else {
            fatalError("socketpair: \(errno)")
        }
        _ = fcntl(ends[0], F_SETFL, fcntl(ends[0], F_GETFL) | O_NONBLOCK)
        lock.withLock {
            peers.append(ends[1])
            connections += 1
            if tls != nil {
                _ = fcntl(ends[1], F_SETFL, fcntl(ends[1], F_GETFL) | O_NONBLOCK)
                do {
                    tlsPeers[ends[1]] = (try tlsContexts.server.connection(fd: ends[1]), false)
                } catch {
                    fatalError("a TLS server connection: \(error)")
                }
            }
        }
        poke()
        return ends[0]
    }

    func stop() {
        lock.withLock { stopping = true }
        poke()
        done.wait()
        tlsPeers = [:]
        for fd in peers { close(fd) }
        close(wake.read)
        close(wake.write)
    }

    private func poke() {
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
    }

    private func run() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let watched: [Int32]? = lock.withLock { stopping ? nil : peers }
            guard let watched else { return }
            var pollers = ([wake.read] + watched).map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            guard poll(&pollers, nfds_t(pollers.count), -1) > 0 else { continue }
            if pollers[0].revents != 0 { _ = read(wake.read, &buffer, buffer.count) }
            for poller in pollers.dropFirst() where poller.revents != 0 {
                guard let received = receive(poller.fd, &buffer) else { continue }
                guard !received.isEmpty else {
                    // The client closed (or reset) its end.
                    lock.withLock {
                        peers.removeAll { $0 == poller.fd }
                        tlsPeers[poller.fd] = nil
                    }
                    close(poller.fd)
                    continue
                }
                let seen = (tails[poller.fd] ?? []) + received
                tails[poller.fd] = Array(seen.suffix(3))
                var requests = 0
                for index in 0..<max(0, seen.count - 3)
                where seen[index] == 0x0D && seen[index + 1] == 0x0A && seen[index + 2] == 0x0D
                    && seen[index + 3] == 0x0A
                {
                    requests += 1
                }
                for _ in 0..<requests { answer(poller.fd) }
            }
        }
    }

    /// What arrived on `fd`: bytes, empty when the client closed, nil when a TLS handshake
    /// goes on (or TLS has nothing decrypted yet).
    private func receive(_ fd: Int32, _ buffer: inout [UInt8]) -> [UInt8]? {
        guard let peer = lock.withLock({ tlsPeers[fd] }) else {
            let count = recv(fd, &buffer, buffer.count, 0)
            return count > 0 ? Array(buffer[..<count]) : []
        }
        if !peer.ready {
            switch peer.connection.handshake() {
            case .done: lock.withLock { tlsPeers[fd]?.ready = true }
            case .wantRead, .wantWrite: return nil
            case .failed: return []
            }
        }
        // Everything decrypted so far: TLS may hold more than one read takes.
        var received: [UInt8] = []
        while true {
            switch buffer.withUnsafeMutableBytes({ peer.connection.read(into: $0) }) {
            case .bytes(let count): received += buffer[..<count]
            case .wantRead, .wantWrite: return received.isEmpty ? nil : received
            case .closed, .closedWithoutNotify, .failed: return received
            }
        }
    }

    private func answer(_ fd: Int32) {
        let index = answered
        answered += 1
        if let peer = lock.withLock({ tlsPeers[fd] }), let tls {
            if index < segments.count {
                let segment = segments[index]
                let responseEnd = index < tls.responseEnds.count ? tls.responseEnds[index] : segment.count
                var ends = pieceEnds(responseEnd, choice: tls.recordChoice)
                if responseEnd < segment.count { ends = ends.dropLast() + [segment.count] }
                var start = 0
                for end in ends {
                    let failure = segment[start..<end].withUnsafeBytes {
                        peer.connection.send($0, stallTimeout: 5)
                    }
                    guard failure == nil else { break }
                    start = end
                }
            }
            if index >= closeAfter.count || closeAfter[index] {
                if tls.closeNotify { peer.connection.shutdown(stallTimeout: 5) }
                shutdown(fd, Int32(SHUT_WR))
            }
            return
        }
        if index < segments.count {
            var offset = 0
            let segment = segments[index]
            while offset < segment.count {
                let sent = segment[offset...].withUnsafeBytes {
                    send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
                }
                guard sent > 0 else { break }
                offset += sent
            }
        }
        if index >= closeAfter.count || closeAfter[index] { shutdown(fd, Int32(SHUT_WR)) }
    }
}

/// What one request should end with.
struct Expected {
    var head: UpstreamFuzzing.Head?
    var body: [UInt8] = []
    /// `closed`, `protocolError`, `aborted`; nil for success.
    var error: String?
    var receivedHead = false
    /// Connections made so far, this request's included.
    var connections = 0
}

/// The oracle's account of the whole sequence: what each request gets, on which connection,
/// and after which answers the origin closes its side. `cutsWithoutNotify`: the origin closes
/// TLS connections without `close_notify`, so a body delimited by the close is cut short, never
/// complete (RFC 8446 §6.1, RFC 9112 §9.8).
func simulate(_ input: Input, cutsWithoutNotify: Bool = false) -> (
    expected: [Expected], closeAfter: [Bool], responseEnds: [Int]
) {
    var closeAfter: [Bool] = []
    var responseEnds: [Int] = []
    var expected: [Expected] = []
    var connections = 0
    var reusable = false
    /// The oracle's reading of the next answer, and whether the origin closes after it.
    func nextAnswer(_ method: String) -> (ResponseReading, [UInt8]) {
        let segment = closeAfter.count < input.segments.count ? input.segments[closeAfter.count] : []
        let open = ResponseReading(method: method, bytes: segment, closed: false, limits: input.oracleLimits)
        let closes = open.ending == .incomplete
        closeAfter.append(closes)
        let reading =
            closes ? ResponseReading(method: method, bytes: segment, closed: true, limits: input.oracleLimits) : open
        responseEnds.append(reading.ending == .complete ? reading.length : segment.count)
        return (reading, segment)
    }
    for request in input.requests {
        var reused = reusable
        reusable = false
        if !reused { connections += 1 }
        var (reading, segment) = nextAnswer(request.method)
        if segment.isEmpty && reused && idempotent.contains(request.method) {
            // Closed before any byte on a reused connection: sent once more on a new one.
            reused = false
            connections += 1
            (reading, segment) = nextAnswer(request.method)
        }
        var outcome = Expected(head: reading.head.map(head), connections: connections)
        outcome.receivedHead = reading.head != nil
        defer { expected.append(outcome) }
        if segment.isEmpty {
            outcome.error = "closed"
            continue
        }
        outcome.body = reading.body
        switch reading.ending {
        case .complete where cutsWithoutNotify && closeAfter.last == true: outcome.error = "closed"
        case .complete: break
        case .malformed: outcome.error = "protocolError"
        case .truncated: outcome.error = "closed"
        case .incomplete: preconditionFailure("the origin closes after an incomplete answer")
        }
        if reading.head != nil
            && (request.stopAtHead || (request.stopAfterBodyBytes.map { reading.body.count >= $0 } ?? false))
        {
            outcome.error = "aborted"
            outcome.body = request.stopAtHead ? [] : reading.body
            continue
        }
        reusable =
            outcome.error == nil && reading.ending == .complete && reading.persists && segment.count == reading.length
    }
    return (expected, closeAfter, responseEnds)
}

func checkClient(_ input: Input, _ raw: [UInt8], tls: Bool) {
    let cuts = tls && input.pieceChoice & 0x40 != 0
    let (expected, closeAfter, responseEnds) = simulate(input, cutsWithoutNotify: cuts)
    let origin = ScriptedOrigin(
        segments: input.segments, closeAfter: closeAfter,
        tls: tls ? .init(recordChoice: input.pieceChoice, responseEnds: responseEnds, closeNotify: !cuts) : nil)
    defer { origin.stop() }
    let client = UpstreamFuzzing.Client(
        limits: input.limits, readSize: input.readSize, stallTimeout: 5, tls: tls ? tlsContexts.client : nil
    ) {
        origin.connect()
    }
    for (index, (request, want)) in zip(input.requests, expected).enumerated() {
        let got = client.perform(
            method: request.method, stopAtHead: request.stopAtHead, stopAfterBodyBytes: request.stopAfterBodyBytes)
        let what = "request \(index) (\(request.method))\(tls ? " over TLS" : "")"
        guard got.error == want.error, got.head == want.head, got.receivedHead == want.receivedHead || want.error == nil
        else {
            fail("\(what) got \(got), the oracle expects \(want)", raw)
        }
        // A receiver that stops gets a prefix of the body, at least as much as it asked for.
        let bodyMatches =
            want.error == "aborted"
            ? got.body.count >= (request.stopAfterBodyBytes ?? 0) && want.body.starts(with: got.body)
            : got.body == want.body
        guard bodyMatches else { fail("\(what) got a body of \(got.body), the oracle \(want.body)", raw) }
        guard origin.connections == want.connections else {
            fail("\(what) went out on connection \(origin.connections), the oracle expects \(want.connections)", raw)
        }
    }
}

runFuzzer { data, size in
    let raw = fuzzBytes(data, size)
    guard let input = Input(raw) else { return 0 }
    for (request, segment) in zip(input.requests, input.segments) {
        checkFramer(segment, method: request.method, closed: false, input, raw)
        checkFramer(segment, method: request.method, closed: true, input, raw)
    }
    checkClient(input, raw, tls: false)
    checkClient(input, raw, tls: true)
    return 0
}
