#if os(Linux)
import Foundation
import Glibc
import LoopbackOrigin

/// Why a response could not be read whole.
enum ReadFailure: Error {
    /// The connection ended (FIN or reset) before the response was complete: a cut the
    /// client can see, the right way to fail.
    case closed(after: String)
    /// Nothing arrived for the connection's timeout.
    case stalled
    /// Bytes that are not an HTTP/1.1 response.
    case malformed(String)
}

/// A response head from the proxy.
struct ResponseHead {
    var status: Int
    var fields: [(name: String, value: String)]

    func field(_ name: String) -> String? {
        fields.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// One keep-alive client connection to the proxy, used by one thread; bodies are handed to a
/// sink as they arrive and never held whole.
final class SoakConnection {
    private let fd: Int32
    private var buffer: [UInt8] = []
    private var start = 0
    private(set) var closed = false

    init(port: UInt16, timeoutSeconds: Int) throws(ReadFailure) {
        do {
            fd = try LoopbackOrigin.connect(port: port)
        } catch {
            throw .malformed("connect to the proxy: \(error)")
        }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { Glibc.close(fd) }

    func send(_ text: String) throws(ReadFailure) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent < 0 && errno == EINTR { continue }
            guard sent > 0 else { throw .closed(after: "sending the request") }
            bytes = bytes.dropFirst(sent)
        }
    }

    private var available: Int { buffer.count - start }

    private func receiveMore(_ what: String) throws(ReadFailure) {
        if start > 1 << 20 {
            buffer.removeFirst(start)
            start = 0
        }
        var chunk = [UInt8](repeating: 0, count: 256 << 10)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                buffer.append(contentsOf: chunk[..<count])
                return
            }
            if count < 0 && errno == EINTR { continue }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { throw .stalled }
            closed = true
            throw .closed(after: what)
        }
    }

    /// Reads a line ending in CRLF (without it).
    private func readLine(_ what: String) throws(ReadFailure) -> String {
        while true {
            if let end = buffer[start...].indices.dropLast().first(where: {
                buffer[$0] == 0x0D && buffer[$0 + 1] == 0x0A
            }) {
                let line = String(decoding: buffer[start..<end], as: UTF8.self)
                start = end + 2
                return line
            }
            guard available < 64 << 10 else { throw .malformed("a line longer than 64 KiB in \(what)") }
            try receiveMore(what)
        }
    }

    func readHead() throws(ReadFailure) -> ResponseHead {
        var head: ResponseHead
        repeat {
            let statusLine = try readLine("the status line")
            let words = statusLine.split(separator: " ", maxSplits: 2)
            guard words.count >= 2, words[0].hasPrefix("HTTP/1."), let status = Int(words[1]) else {
                throw .malformed("status line \(statusLine.prefix(80).debugDescription)")
            }
            head = ResponseHead(status: status, fields: [])
            while true {
                let line = try readLine("the head")
                if line.isEmpty { break }
                guard let colon = line.firstIndex(of: ":") else { throw .malformed("field line \(line.prefix(80))") }
                head.fields.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingSpaces()))
            }
        } while (100..<200).contains(head.status)
        return head
    }

    /// Reads the body `head` frames for a response to `method`, handing it to `sink` in pieces.
    func readBody(_ head: ResponseHead, method: String, _ sink: (ArraySlice<UInt8>) -> Void) throws(ReadFailure) {
        if method == "HEAD" || head.status == 204 || head.status == 304 { return }
        if head.field("Transfer-Encoding")?.lowercased().contains("chunked") == true {
            while true {
                let sizeLine = try readLine("a chunk size")
                guard let size = Int(sizeLine.prefix { $0 != ";" }.trimmingSpaces(), radix: 16), size >= 0 else {
                    throw .malformed("chunk size \(sizeLine.prefix(40).debugDescription)")
                }
                if size == 0 {
                    while try !readLine("the trailer").isEmpty {}
                    return
                }
                try readExactly(size, "a chunk", sink)
                guard try readLine("a chunk's end").isEmpty else { throw .malformed("no CRLF after a chunk") }
            }
        }
        if let text = head.field("Content-Length") {
            guard let length = Int(text), length >= 0 else { throw .malformed("Content-Length \(text)") }
            try readExactly(length, "a Content-Length body", sink)
            return
        }
        // Until the connection closes (RFC 9112 §6.3 item 8).
        while true {
            if available > 0 {
                sink(buffer[start...])
                start = buffer.count
            }
            do { try receiveMore("") } catch .closed(after: _) { return }
        }
    }

    /// Reads the body `head` frames and returns its first 300 bytes as text (a proxy's own
    /// short answers say why they failed).
    func readText(_ head: ResponseHead, method: String) throws(ReadFailure) -> String {
        var bytes: [UInt8] = []
        try readBody(head, method: method) { bytes += $0.prefix(max(0, 300 - bytes.count)) }
        return String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func readExactly(_ count: Int, _ what: String, _ sink: (ArraySlice<UInt8>) -> Void) throws(ReadFailure) {
        var remaining = count
        while remaining > 0 {
            if available == 0 { try receiveMore(what) }
            let take = min(remaining, available)
            sink(buffer[start..<start + take])
            start += take
            remaining -= take
        }
    }
}

/// Where the body of a response being checked comes from: read from an HTTP/1.1 connection
/// when asked for, or taken in as HTTP/2 DATA arrived (SoakHTTP2.swift).
protocol CheckedBody {
    /// Reads the body and drops it.
    func discard() throws(ReadFailure)
    /// The body's first 300 bytes as text (a proxy's own short answers say why they failed).
    func text() throws(ReadFailure) -> String
    /// The body compared with the generated bytes of `seed` from offset `first`.
    func compare(seed: UInt64, from first: Int64) throws(ReadFailure) -> GeneratedComparison
}

/// A body still to be read from an HTTP/1.1 connection, framed by its head.
struct HTTP1Body: CheckedBody {
    let connection: SoakConnection
    let head: ResponseHead
    let method: String

    func discard() throws(ReadFailure) { try connection.readBody(head, method: method) { _ in } }

    func text() throws(ReadFailure) -> String { try connection.readText(head, method: method) }

    func compare(seed: UInt64, from first: Int64) throws(ReadFailure) -> GeneratedComparison {
        var comparison = GeneratedComparison(seed: seed, from: first)
        try connection.readBody(head, method: "GET") { comparison.consume($0) }
        return comparison
    }
}

/// Compares bytes as they arrive with a generated resource from a given offset.
struct GeneratedComparison {
    let seed: UInt64
    private(set) var offset: Int64
    /// The offset of the first byte that differed, if one did.
    private(set) var firstMismatch: Int64?
    private var expected = [UInt8]()

    init(seed: UInt64, from offset: Int64) {
        self.seed = seed
        self.offset = offset
    }

    mutating func consume(_ bytes: ArraySlice<UInt8>) {
        defer { offset += Int64(bytes.count) }
        guard firstMismatch == nil else { return }
        if expected.count < bytes.count { expected = [UInt8](repeating: 0, count: bytes.count) }
        firstMismatch = bytes.withUnsafeBytes { actual in
            expected.withUnsafeMutableBytes { scratch in
                LoopbackOrigin.GeneratedBody.firstDifference(actual, at: offset, seed: seed, scratch: scratch)
            }
        }
    }
}
#endif
