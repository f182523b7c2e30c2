@_spi(Fuzzing) import CachingProxy
import FuzzSupport
import Glibc

// The proxy's HTTP/2 server (RFC 9113) against any bytes a client may send after the connection
// preface: one connection per input to a server whose handler answers every way a handler can
// (on the loop, from another thread, streamed, short, aborted, with 103 first, never).
//
// Input: byte 0's high bit sends the rest as it is (frame parsing itself); otherwise the rest is
// frames, each [type][flags][stream id][length][payload], written with a correct 9-byte header.
// A HEADERS or CONTINUATION payload starting with a byte from 0xF0 up stands for a request's
// header block in HPACK (literal fields): the low nibble picks the path (and so the answer),
// the next byte the method, the rest follows raw. Byte 0's low bits choose the pieces the bytes
// are written in. The client then half-closes and reads until the server closes.
//
// Traps when the server crashes or hangs (no close within 5 s of the client's end), when what
// it sent is not whole frames beginning with its SETTINGS (RFC 9113 §3.4, §4.1), or when, every
// 64 inputs, a fresh connection's plain GET is not answered 200.

let paths = ["/s", "/b", "/h", "/i", "/a", "/n", "/r", "/t", "/x", "/s?q", "/b?b", "/t?t", "/i?i", "/", "*", ""]
let methods = ["GET", "HEAD", "POST", "PUT", "OPTIONS", "CONNECT", "DELETE", "GET"]
let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

/// The server, started once, and the inputs run so far.
enum Run {
    static let server: FuzzingHTTP2Server = {
        guard let server = FuzzingHTTP2Server() else { fatalError("the fuzzing server cannot listen on 127.0.0.1") }
        return server
    }()
    nonisolated(unsafe) static var inputs = 0
}

func fail(_ message: String, _ input: [UInt8]) -> Never {
    fatalError("\(message); input \(input.map { String($0) }.joined(separator: ","))")
}

/// One HPACK literal field without indexing (RFC 7541 §6.2.2), for names and values under 127 bytes.
func literal(_ name: String, _ value: String) -> [UInt8] {
    let name = Array(name.utf8.prefix(126))
    let value = Array(value.utf8.prefix(126))
    return [0x00, UInt8(name.count)] + name + [UInt8(value.count)] + value
}

func requestBlock(_ choice: UInt8, _ method: UInt8) -> [UInt8] {
    literal(":method", methods[Int(method & 7)]) + literal(":scheme", "http")
        + literal(":path", paths[Int(choice & 0x0F)]) + literal(":authority", "fuzz.test")
}

func frame(_ type: UInt8, _ flags: UInt8, _ stream: UInt32, _ payload: [UInt8]) -> [UInt8] {
    let length = payload.count
    return [UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), type, flags]
        + [UInt8(stream >> 24 & 0x7F), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)]
        + payload
}

/// The bytes the client sends after the preface.
func clientBytes(_ raw: [UInt8]) -> [UInt8] {
    guard let first = raw.first else { return [] }
    if first & 0x80 != 0 { return Array(raw.dropFirst()) }
    var bytes: [UInt8] = []
    var index = 1
    while index + 4 <= raw.count {
        let (type, flags, stream, length) = (raw[index], raw[index + 1], raw[index + 2], Int(raw[index + 3]))
        index += 4
        var payload = Array(raw[index..<min(raw.count, index + length)])
        index += length
        if (type == 1 || type == 9), let marker = payload.first, marker >= 0xF0 {
            payload = requestBlock(marker, payload.count > 1 ? payload[1] : 0) + payload.dropFirst(2)
        }
        bytes += frame(type, flags, UInt32(stream), payload)
    }
    return bytes
}

func connect() -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = Run.server.port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    if connected != 0 && errno == EINTR {
        // A signal (libFuzzer's -timeout alarm) interrupted the wait; the connection goes on being
        // made: wait for it rather than fail (connect(2): EINTR, then poll for writability).
        var ready = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        while poll(&ready, 1, 5000) < 0 && errno == EINTR {}
        var code: Int32 = 0
        var size = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &size)
        guard ready.revents & Int16(POLLOUT) != 0, code == 0 else {
            fatalError("cannot connect to the fuzzing server: errno \(code)")
        }
    } else {
        guard connected == 0 else { fatalError("cannot connect to the fuzzing server: errno \(errno)") }
    }
    var timeout = timeval(tv_sec: 5, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    return fd
}

/// Writes `bytes` in the pieces `choice` picks, half-closes, and reads until the server closes;
/// nil when it did not within the timeout.
func exchange(_ bytes: [UInt8], choice: UInt8) -> [UInt8]? {
    let fd = connect()
    defer { close(fd) }
    var start = 0
    for end in pieceEnds(bytes.count, choice: choice) {
        let sent = bytes[start..<end].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        // The server may close first (a GOAWAY, then the close): what it sent is still read.
        if sent < 0 { break }
        start = end
    }
    shutdown(fd, Int32(SHUT_WR))
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count > 0 {
            received += buffer[0..<count]
        } else if count == 0 || errno == ECONNRESET {
            return received
        } else if errno != EINTR {
            return nil
        }
    }
}

/// The frames in `bytes` as (type, stream, payload); nil when they do not end on a frame boundary.
func frames(_ bytes: [UInt8]) -> [(type: UInt8, stream: UInt32, payload: ArraySlice<UInt8>)]? {
    var result: [(UInt8, UInt32, ArraySlice<UInt8>)] = []
    var index = 0
    while index < bytes.count {
        guard index + 9 <= bytes.count else { return nil }
        let length = Int(bytes[index]) << 16 | Int(bytes[index + 1]) << 8 | Int(bytes[index + 2])
        let stream =
            UInt32(bytes[index + 5] & 0x7F) << 24 | UInt32(bytes[index + 6]) << 16
            | UInt32(bytes[index + 7]) << 8 | UInt32(bytes[index + 8])
        guard index + 9 + length <= bytes.count else { return nil }
        result.append((bytes[index + 3], stream, bytes[index + 9..<index + 9 + length]))
        index += 9 + length
    }
    return result
}

func checkAlive() {
    let request =
        preface + frame(4, 0, 0, []) + frame(1, 0x05, 1, requestBlock(0xF0, 0))
    guard let answer = exchange(request, choice: 0xFF), let parsed = frames(answer) else {
        fatalError("the server no longer answers a plain GET over HTTP/2")
    }
    let data = parsed.filter { $0.type == 0 && $0.stream == 1 }.flatMap(\.payload)
    guard parsed.contains(where: { $0.type == 1 && $0.stream == 1 }), data == Array("small".utf8) else {
        fatalError("a plain GET over HTTP/2 was answered \(parsed.map { ($0.type, $0.stream) }), body \(data)")
    }
}

runFuzzer { data, size in
    let raw = fuzzBytes(data, size)
    guard let choice = raw.first else { return 0 }
    guard let answer = exchange(preface + clientBytes(raw), choice: choice << 1) else {
        fail("the server neither closed nor answered within 5 s", raw)
    }
    guard let parsed = frames(answer) else { fail("the server's bytes do not end on a frame boundary", raw) }
    guard parsed.first?.type == 4 else { fail("the server did not open with SETTINGS (RFC 9113 §3.4)", raw) }
    Run.inputs += 1
    if Run.inputs % 64 == 0 { checkAlive() }
    return 0
}
