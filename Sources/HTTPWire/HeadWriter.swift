// Writing what the parsers read: request and response heads (RFC 9112 §3, §4, §5) and the
// chunked coding (§7.1), into byte arrays. The proxy's server writes the same bytes into its
// output queue itself, without an array in between (Server/EventLoop+Responses.swift).

/// Appends the parts of an HTTP/1.1 message head to a byte array. It checks nothing: callers
/// check or clean names and values first (a token name, no CR, LF or NUL in a value).
@_spi(Wire) public enum HeadWriter {
    /// `method SP request-target SP HTTP/1.1 CRLF` (RFC 9112 §3).
    public static func appendRequestLine(method: String, target: Substring, to head: inout [UInt8]) {
        append(method, to: &head)
        head.append(HTTPBytes.space)
        var target = target
        target.withUTF8 { head.append(contentsOf: $0) }
        appendLiteral(" HTTP/1.1\r\n", to: &head)
    }

    /// `HTTP/1.1 SP status-code SP reason-phrase CRLF` (RFC 9112 §4): `reason`, else the one
    /// RFC 9110 §15 gives, else none (the SP stays, as §4 requires).
    public static func appendStatusLine(status: Int, reason: String? = nil, to head: inout [UInt8]) {
        appendLiteral("HTTP/1.1 ", to: &head)
        head += String(status).utf8
        head.append(HTTPBytes.space)
        if let reason {
            append(reason, to: &head)
        } else if let phrase = reasonPhrase(status) {
            appendLiteral(phrase, to: &head)
        }
        appendLiteral("\r\n", to: &head)
    }

    /// `name: value CRLF`, or `name: CRLF` for an empty value (RFC 9112 §5).
    public static func appendField(name: String, value: String, to head: inout [UInt8]) {
        append(name, to: &head)
        if value.isEmpty {
            appendLiteral(":\r\n", to: &head)
        } else {
            appendLiteral(": ", to: &head)
            append(value, to: &head)
            appendLiteral("\r\n", to: &head)
        }
    }

    /// `text`'s UTF-8 bytes, copied at once: appending a `String.UTF8View` goes through the
    /// general sequence path, about 200 instructions a call (callgrind) for a few bytes.
    @inline(__always)
    static func append(_ text: String, to head: inout [UInt8]) {
        var text = text
        text.withUTF8 { head.append(contentsOf: $0) }
    }

    /// `literal`'s bytes, copied at once (appending its `String`'s UTF-8 view costs as much).
    @inline(__always)
    static func appendLiteral(_ literal: StaticString, to head: inout [UInt8]) {
        head.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// The empty line that ends a head.
    public static func appendEnd(to head: inout [UInt8]) { appendLiteral("\r\n", to: &head) }
}

/// The chunked transfer coding (RFC 9112 §7.1), written.
@_spi(Wire) public enum ChunkedEncoder {
    /// Appends one chunk: its size in hex, CRLF, the data, CRLF. Nothing for no data (a chunk
    /// of size 0 is the last one).
    public static func appendChunk(_ data: some Collection<UInt8>, to body: inout [UInt8]) {
        guard !data.isEmpty else { return }
        appendSize(data.count, to: &body)
        body += data
        HeadWriter.appendLiteral("\r\n", to: &body)
    }

    /// `chunk-size CRLF`: the line before `count` bytes of chunk data.
    public static func appendSize(_ count: Int, to body: inout [UInt8]) {
        body += String(count, radix: 16).utf8
        HeadWriter.appendLiteral("\r\n", to: &body)
    }

    /// The last chunk and the empty trailer section: `0 CRLF CRLF`.
    public static func appendEnd(to body: inout [UInt8]) { HeadWriter.appendLiteral("0\r\n\r\n", to: &body) }
}
