// Writing what the parsers read: request and response heads (RFC 9112 §3, §4, §5) and the
// chunked coding (§7.1), into byte arrays. The proxy's server writes the same bytes into its
// output queue itself, without an array in between (Server/EventLoop+Responses.swift).

import CacheSemantics

/// Appends the parts of an HTTP/1.1 message head to a byte array, or writes them into a buffer
/// sized first (`TextWriter`, for a head written at once). It checks nothing: callers
/// check or clean names and values first (a token name, no CR, LF or NUL in a value).
@_spi(Wire) public enum HeadWriter {
    /// `method SP request-target SP HTTP/1.1 CRLF` (RFC 9112 §3).
    public static func appendRequestLine(method: String, target: Substring, to head: inout [UInt8]) {
        appendWritten(requestLineSize(method: method, target: target), to: &head) {
            writeRequestLine(method: method, target: target, to: &$0)
        }
    }

    /// The bytes ``writeRequestLine(method:target:to:)`` writes.
    package static func requestLineSize(method: String, target: Substring) -> Int {
        method.utf8.count + 1 + target.utf8.count + " HTTP/1.1\r\n".utf8.count
    }

    /// ``appendRequestLine(method:target:to:)`` into a writer with room for
    /// ``requestLineSize(method:target:)`` bytes: a head sized first, then written once.
    package static func writeRequestLine(method: String, target: Substring, to writer: inout TextWriter) {
        writer.append(method)
        writer.append(" " as StaticString)
        ASCII.withUTF8(target) { writer.append($0) }
        writer.append(" HTTP/1.1\r\n" as StaticString)
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
        appendWritten(fieldLineSize(name: name, value: value), to: &head) {
            writeField(name: name, value: value, to: &$0)
        }
    }

    /// The bytes ``writeField(name:value:to:)`` writes.
    package static func fieldLineSize(name: String, value: String) -> Int {
        fieldLineSize(nameCount: name.utf8.count, valueCount: value.utf8.count)
    }

    /// The bytes a field line with a name and a value of these many bytes takes.
    package static func fieldLineSize(nameCount: Int, valueCount: Int) -> Int {
        nameCount + (valueCount == 0 ? 3 : 4 + valueCount)
    }

    /// ``appendField(name:value:to:)`` into a writer with room for
    /// ``fieldLineSize(name:value:)`` bytes.
    package static func writeField(name: String, value: String, to writer: inout TextWriter) {
        ASCII.withUTF8(name) { name in ASCII.withUTF8(value) { writeField(name: name, value: $0, to: &writer) } }
    }

    /// ``writeField(name:value:to:)`` of the bytes of a name and a value, read where they are
    /// (a line of a field section, not copied: a copy costs a retain and a release of each
    /// string).
    package static func writeField(
        name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>, to writer: inout TextWriter
    ) {
        writer.append(name)
        guard !value.isEmpty else { return writer.append(":\r\n" as StaticString) }
        writer.append(": " as StaticString)
        writer.append(value)
        writer.append("\r\n" as StaticString)
    }

    /// Appends the `size` bytes `write` writes.
    private static func appendWritten(_ size: Int, to head: inout [UInt8], _ write: (inout TextWriter) -> Void) {
        head += [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            var writer = TextWriter(buffer)
            write(&writer)
            count = writer.count
        }
    }

    /// `text`'s UTF-8 bytes, copied at once: appending a `String.UTF8View` goes through the
    /// general sequence path, about 200 instructions a call (callgrind) for a few bytes.
    @inline(__always)
    static func append(_ text: String, to head: inout [UInt8]) {
        ASCII.withUTF8(text) { head.append(contentsOf: $0) }
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
