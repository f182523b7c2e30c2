#if os(Linux)
import CacheSystem
import CacheTestSupport
import Glibc

/// A blocking HTTP/1.1 client over a raw socket, for tests: it sends exactly the bytes it is
/// given (malformed ones included) and reads responses by their framing (Content-Length,
/// chunked or until close). Every wait has a deadline, so a test never hangs: a wait that
/// runs out throws ``ClientError/timeout(_:)``.
///
/// ```swift
/// let client = try RawHTTPClient(port: server.port)
/// try client.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
/// let response = try client.readResponse()
/// #expect(response.status == 200)
/// #expect(client.waitForClose() == false)  // still open: keep-alive
/// ```
final class RawHTTPClient {
    /// A response as received.
    struct Response {
        /// The status line's version, e.g. `HTTP/1.1`.
        var version: String
        var status: Int
        var reason: String
        /// Field lines in order, as received.
        var fields: [(name: String, value: String)]
        /// The head exactly as received, final CRLF CRLF included.
        var head: [UInt8]
        /// The body, de-chunked when it was chunked.
        var body: [UInt8]
        /// How the body was delimited.
        var framing: Framing
        /// The body exactly as received (chunk framing included).
        var rawBody: [UInt8]

        enum Framing: Equatable {
            case none
            case length
            case chunked
            case untilClose
        }

        /// The first value of the field `name` (compared ignoring case).
        func field(_ name: String) -> String? {
            fields.first { $0.name.lowercased() == name.lowercased() }?.value
        }

        /// Every value of the field `name`, in order.
        func values(_ name: String) -> [String] {
            fields.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
        }

        var headText: String { String(decoding: head, as: UTF8.self) }
        var bodyText: String { String(decoding: body, as: UTF8.self) }
    }

    enum ClientError: Error, CustomStringConvertible {
        case connect(Int32)
        case send(Int32)
        case timeout(String)
        /// The server closed (or reset) the connection before the response was complete.
        case closed(String)
        case malformed(String)

        var description: String {
            switch self {
            case .connect(let code): "connect failed: \(errnoText(code))"
            case .send(let code): "send failed: \(errnoText(code))"
            case .timeout(let what): "timed out waiting for \(what)"
            case .closed(let what): "connection closed while waiting for \(what)"
            case .malformed(let what): "malformed response: \(what)"
            }
        }
    }

    private(set) var fd: Int32
    /// Seconds any single wait may take.
    var timeout: Double
    /// Bytes received and not yet returned.
    private(set) var buffer: [UInt8] = []
    /// The server closed its side (EOF) or reset the connection.
    private(set) var peerClosed = false
    /// The connection was reset rather than closed.
    private(set) var wasReset = false

    /// Connects to 127.0.0.1:`port`.
    /// - Parameters:
    ///   - timeout: seconds any one wait may take.
    ///   - receiveBuffer: a small `SO_RCVBUF` makes a slow reader.
    init(port: UInt16, timeout: Double = 5, receiveBuffer: Int32? = nil) throws {
        try requireOffPool("RawHTTPClient(port:)")
        self.timeout = timeout
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        self.fd = fd
        guard fd >= 0 else { throw ClientError.connect(errno) }
        if var size = receiveBuffer {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr = in_addr(s_addr: UInt32(0x7F00_0001).bigEndian)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        // deinit closes fd even when init throws here.
        guard connected == 0 else { throw ClientError.connect(errno) }
    }

    deinit { close() }

    /// Closes the socket (unread bytes make it a reset).
    func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }

    // MARK: sending

    func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// Sends all of `bytes`; throws if the server has closed or reset the connection.
    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 {
                if errno == EINTR { continue }
                throw ClientError.send(errno)
            }
            offset += sent
        }
    }

    /// Half-closes: the server reads EOF, the client can still read.
    func shutdownWrite() { Glibc.shutdown(fd, Int32(SHUT_WR)) }

    // MARK: receiving

    /// Waits for more bytes; `false` when the server closed or reset the connection.
    private func receiveMore(_ what: @autoclosure () -> String, timeout: Double? = nil) throws -> Bool {
        guard !peerClosed else { return false }
        let deadline = MonotonicClock.seconds() + (timeout ?? self.timeout)
        while true {
            let left = deadline - MonotonicClock.seconds()
            guard left > 0 else { throw ClientError.timeout(what()) }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(min(left, 3600) * 1000) + 1)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let received = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if received > 0 {
                buffer += chunk[..<received]
                return true
            }
            if received < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            wasReset = received < 0
            peerClosed = true
            return false
        }
    }

    /// Exactly `count` bytes (waiting for them).
    func receive(count: Int) throws -> [UInt8] {
        while buffer.count < count {
            guard try receiveMore("\(count) bytes") else {
                throw ClientError.closed("\(count) bytes, got \(buffer.count)")
            }
        }
        defer { buffer.removeFirst(count) }
        return Array(buffer[..<count])
    }

    /// Whatever arrives within `seconds` (or until the server closes), without failing.
    func receiveAvailable(within seconds: Double) -> [UInt8] {
        let deadline = MonotonicClock.seconds() + seconds
        while MonotonicClock.seconds() < deadline,
            (try? receiveMore("data", timeout: max(0.001, deadline - MonotonicClock.seconds()))) == true
        {}
        defer { buffer.removeAll() }
        return buffer
    }

    /// Everything until the server closes the connection.
    func readUntilClosed() throws -> [UInt8] {
        while try receiveMore("the connection to close") {}
        defer { buffer.removeAll() }
        return buffer
    }

    /// Whether the server closes (or resets) the connection within `seconds` (default: the
    /// client's timeout); bytes arriving meanwhile are kept in ``buffer``.
    func waitForClose(within seconds: Double? = nil) -> Bool {
        let deadline = MonotonicClock.seconds() + (seconds ?? timeout)
        while true {
            let left = deadline - MonotonicClock.seconds()
            guard left > 0 else { return peerClosed }
            do {
                if try !receiveMore("close", timeout: left) { return true }
            } catch {
                return peerClosed
            }
        }
    }

    /// Reads one response head (no body).
    func readHead() throws -> Response {
        var searchFrom = 0
        while true {
            if buffer.count >= 4 {
                var index = max(0, searchFrom - 3)
                while index + 4 <= buffer.count {
                    if buffer[index] == 13 && buffer[index + 1] == 10 && buffer[index + 2] == 13
                        && buffer[index + 3] == 10
                    {
                        let head = Array(buffer[..<(index + 4)])
                        buffer.removeFirst(index + 4)
                        return try Self.parseHead(head)
                    }
                    index += 1
                }
                searchFrom = buffer.count
            }
            guard try receiveMore("a response head") else {
                throw ClientError.closed(
                    "a response head (received \(buffer.count) bytes: \(String(decoding: buffer, as: UTF8.self)))")
            }
        }
    }

    /// Reads one final response: interim `1xx` responses are skipped unless `interim` is set
    /// (then a `100 Continue` is returned as it is). `method` says whether a body can follow
    /// (none after HEAD).
    func readResponse(method: String = "GET", interim: Bool = false) throws -> Response {
        while true {
            var response = try readHead()
            if (100..<200).contains(response.status) && response.status != 101 {
                if interim { return response }
                continue
            }
            try readBody(into: &response, method: method)
            return response
        }
    }

    /// Reads the body that `response`'s head announces (RFC 9112 §6.3).
    func readBody(into response: inout Response, method: String = "GET") throws {
        let transferEncoding = response.values("Transfer-Encoding").joined(separator: ",").lowercased()
        if method == "HEAD" || (100..<200).contains(response.status) || response.status == 204
            || response.status == 304
        {
            response.framing = .none
        } else if transferEncoding.contains("chunked") {
            response.framing = .chunked
            try readChunked(into: &response)
        } else if let length = response.field("Content-Length") {
            guard let count = Int(length) else { throw ClientError.malformed("Content-Length \(length)") }
            response.framing = .length
            response.body = try receive(count: count)
            response.rawBody = response.body
        } else {
            response.framing = .untilClose
            response.body = try readUntilClosed()
            response.rawBody = response.body
        }
    }

    private func readLine() throws -> [UInt8] {
        while true {
            if let index = buffer.indices.dropLast().first(where: { buffer[$0] == 13 && buffer[$0 + 1] == 10 }) {
                let line = Array(buffer[..<index])
                buffer.removeFirst(index + 2)
                return line
            }
            guard try receiveMore("a line") else { throw ClientError.closed("a chunked body line") }
        }
    }

    private func readChunked(into response: inout Response) throws {
        while true {
            let line = try readLine()
            response.rawBody += line + [13, 10]
            let sizeText = String(decoding: line.prefix { $0 != UInt8(ascii: ";") }, as: UTF8.self)
            guard let size = Int(sizeText, radix: 16) else { throw ClientError.malformed("chunk size \(sizeText)") }
            if size == 0 {
                while true {
                    let trailer = try readLine()
                    response.rawBody += trailer + [13, 10]
                    if trailer.isEmpty { return }
                }
            }
            let data = try receive(count: size + 2)
            guard data[size] == 13, data[size + 1] == 10 else { throw ClientError.malformed("chunk without CRLF") }
            response.body += data[..<size]
            response.rawBody += data
        }
    }

    static func parseHead(_ head: [UInt8]) throws -> Response {
        let text = String(decoding: head.dropLast(4), as: UTF8.self)
        var lines = text.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        guard !lines.isEmpty else { throw ClientError.malformed("empty head") }
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/"), let status = Int(parts[1]) else {
            throw ClientError.malformed("status line \(statusLine)")
        }
        var fields: [(name: String, value: String)] = []
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { throw ClientError.malformed("field line \(line)") }
            let value = line[line.index(after: colon)...].drop { $0 == " " || $0 == "\t" }
            fields.append((String(line[..<colon]), String(value)))
        }
        return Response(
            version: parts[0], status: status, reason: parts.count > 2 ? parts[2] : "", fields: fields, head: head,
            body: [], framing: .none, rawBody: [])
    }
}
#endif
