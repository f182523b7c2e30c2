// Byte classes of the HTTP/1.1 grammar, as bit tables in constants (no lazy globals on the
// hot path). Everything here works on wire bytes: no Character or String operations.
import CacheSemantics

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Public only as SPI (`@_spi(Wire) import HTTPWire`), for the proxy's server: Swift 6.3
/// inlines an `@inlinable` function across modules when it is public, not when it is
/// `package`, and these run once per byte of every response head.
@_spi(Wire) public enum HTTPBytes {
    @inlinable public static var cr: UInt8 { 0x0D }
    @inlinable public static var lf: UInt8 { 0x0A }
    @inlinable public static var space: UInt8 { 0x20 }
    @inlinable public static var tab: UInt8 { 0x09 }
    @inlinable public static var colon: UInt8 { 0x3A }
    @inlinable public static var comma: UInt8 { 0x2C }
    @inlinable public static var semicolon: UInt8 { 0x3B }

    /// `tchar` (RFC 9110 §5.6.2): bits for bytes 0–63 and 64–127.
    @inlinable static var tokenLow: UInt64 { 0x03FF_6CFA_0000_0000 }
    @inlinable static var tokenHigh: UInt64 { 0x57FF_FFFF_C7FF_FFFE }
    /// Bytes of `uri-host [":" port]` (RFC 3986 §3.2.2: unreserved, pct-encoded, sub-delims, IP-literal).
    @inlinable static var hostLow: UInt64 { 0x2FFF_7FF2_0000_0000 }
    @inlinable static var hostHigh: UInt64 { 0x47FF_FFFE_AFFF_FFFE }

    @inlinable @inline(__always)
    public static func isToken(_ byte: UInt8) -> Bool {
        let bits = byte < 64 ? tokenLow : tokenHigh
        return byte < 128 && (bits &>> UInt64(byte & 63)) & 1 != 0
    }

    @inlinable @inline(__always)
    public static func isHost(_ byte: UInt8) -> Bool {
        let bits = byte < 64 ? hostLow : hostHigh
        return byte < 128 && (bits &>> UInt64(byte & 63)) & 1 != 0
    }

    /// A byte of a request-target: visible ASCII, no white space or control (RFC 9112 §3.2).
    @inlinable @inline(__always)
    public static func isTarget(_ byte: UInt8) -> Bool { byte > 0x20 && byte < 0x7F }

    /// `field-vchar`, SP or HTAB: what a field value may contain (RFC 9110 §5.5, obs-text allowed).
    @inlinable @inline(__always)
    public static func isFieldValue(_ byte: UInt8) -> Bool { byte >= 0x20 ? byte != 0x7F : byte == tab }

    @inlinable @inline(__always)
    public static func isOWS(_ byte: UInt8) -> Bool { byte == space || byte == tab }

    @inlinable @inline(__always)
    public static func lower(_ byte: UInt8) -> UInt8 { byte &- 0x41 < 26 ? byte | 0x20 : byte }

    /// Whether `count` bytes at `bytes` equal `lowercase` (already lower case) ignoring ASCII case.
    @inlinable @inline(__always)
    public static func equalsLowercase(_ bytes: UnsafePointer<UInt8>, _ count: Int, _ lowercase: StaticString) -> Bool {
        guard count == lowercase.utf8CodeUnitCount else { return false }
        let expected = lowercase.utf8Start
        for index in 0..<count where lower(bytes[index]) != expected[index] { return false }
        return true
    }

    /// The bytes as a String: a literal for the most common methods (no decoding, no
    /// allocation), else decoded as UTF-8 (invalid sequences become U+FFFD). Field names go
    /// through ``fieldName(_:_:)``.
    public static func string(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> String {
        switch count {
        case 3:
            if equals(bytes, count, "GET") { return "GET" }
            if equals(bytes, count, "PUT") { return "PUT" }
        case 4:
            if equals(bytes, count, "HEAD") { return "HEAD" }
            if equals(bytes, count, "POST") { return "POST" }
        default:
            break
        }
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }

    /// A field name's bytes (a token: ASCII) as a field line's name and its lower-case form:
    /// literals for the most common names of requests and responses (no decoding, no
    /// allocation, no lowering), else decoded, and lowered only when it has an upper-case
    /// letter. Lowered from a string on every line, a response head's names cost some 2,500
    /// instructions.
    public static func fieldName(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> (name: String, lowercased: String) {
        switch count {
        case 3:
            if equals(bytes, count, "Age") { return ("Age", "age") }
            if equals(bytes, count, "Via") { return ("Via", "via") }
        case 4:
            if equals(bytes, count, "Date") { return ("Date", "date") }
            if equals(bytes, count, "ETag") { return ("ETag", "etag") }
            if equals(bytes, count, "Host") { return ("Host", "host") }
            if equals(bytes, count, "Vary") { return ("Vary", "vary") }
        case 5:
            if equals(bytes, count, "Range") { return ("Range", "range") }
        case 6:
            if equals(bytes, count, "Accept") { return ("Accept", "accept") }
            if equals(bytes, count, "Cookie") { return ("Cookie", "cookie") }
            if equals(bytes, count, "Server") { return ("Server", "server") }
        case 7:
            if equals(bytes, count, "Expires") { return ("Expires", "expires") }
            if equals(bytes, count, "Referer") { return ("Referer", "referer") }
        case 8:
            if equals(bytes, count, "Location") { return ("Location", "location") }
        case 10:
            if equals(bytes, count, "Connection") { return ("Connection", "connection") }
            if equals(bytes, count, "Keep-Alive") { return ("Keep-Alive", "keep-alive") }
            if equals(bytes, count, "Set-Cookie") { return ("Set-Cookie", "set-cookie") }
            if equals(bytes, count, "User-Agent") { return ("User-Agent", "user-agent") }
        case 12:
            if equals(bytes, count, "Content-Type") { return ("Content-Type", "content-type") }
        case 13:
            if equals(bytes, count, "Accept-Ranges") { return ("Accept-Ranges", "accept-ranges") }
            if equals(bytes, count, "Authorization") { return ("Authorization", "authorization") }
            if equals(bytes, count, "Cache-Control") { return ("Cache-Control", "cache-control") }
            if equals(bytes, count, "If-None-Match") { return ("If-None-Match", "if-none-match") }
            if equals(bytes, count, "Last-Modified") { return ("Last-Modified", "last-modified") }
        case 14:
            if equals(bytes, count, "Content-Length") { return ("Content-Length", "content-length") }
        case 15:
            if equals(bytes, count, "Accept-Encoding") { return ("Accept-Encoding", "accept-encoding") }
            if equals(bytes, count, "Accept-Language") { return ("Accept-Language", "accept-language") }
        case 16:
            if equals(bytes, count, "Content-Encoding") { return ("Content-Encoding", "content-encoding") }
        case 17:
            if equals(bytes, count, "If-Modified-Since") { return ("If-Modified-Since", "if-modified-since") }
            if equals(bytes, count, "Transfer-Encoding") { return ("Transfer-Encoding", "transfer-encoding") }
        default:
            break
        }
        let text = UnsafeBufferPointer(start: bytes, count: count)
        let name = String(decoding: text, as: UTF8.self)
        return (name, ASCII.lowercased(text) ?? name)
    }

    @inline(__always)
    private static func equals(_ bytes: UnsafePointer<UInt8>, _ count: Int, _ text: StaticString) -> Bool {
        memcmp(bytes, text.utf8Start, count) == 0
    }

    /// Whether a field value holds a byte it may not: a control other than HTAB, or DEL
    /// (RFC 9110 §5.5). Eight bytes at a time; values are checked on every response.
    public static func hasInvalidFieldValueByte(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        var index = 0
        while index + 8 <= count {
            let word = UnsafeRawPointer(bytes + index).loadUnaligned(as: UInt64.self)
            let delete = word ^ (ones &* 0x7F)
            // A byte below 0x20, or a byte equal to 0x7F (exact existence tests).
            let suspect = (((word &- (ones &* 0x20)) & ~word) | ((delete &- ones) & ~delete)) & highs
            if suspect != 0 {
                for offset in index..<index + 8 where !isFieldValue(bytes[offset]) { return true }
            }
            index += 8
        }
        while index < count {
            if !isFieldValue(bytes[index]) { return true }
            index += 1
        }
        return false
    }

    /// How a byte that is not allowed somewhere is named in a rejection.
    public static func describe(_ byte: UInt8) -> String {
        switch byte {
        case 0: "a NUL byte"
        case cr: "a bare CR"
        case lf: "a bare LF"
        case tab: "a tab"
        case space: "a space"
        case 0..<0x20, 0x7F: "the control byte 0x" + hex(byte)
        case 0x80...: "the non-ASCII byte 0x" + hex(byte)
        default: "the character '" + String(UnicodeScalar(byte)) + "'"
        }
    }

    private static func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        return String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 15)]], as: UTF8.self)
    }

    /// The value of a hex digit, or `nil`.
    @inlinable @inline(__always)
    public static func hexValue(_ byte: UInt8) -> UInt64? {
        switch byte {
        case 0x30...0x39: UInt64(byte - 0x30)
        case 0x41...0x46: UInt64(byte - 0x41 + 10)
        case 0x61...0x66: UInt64(byte - 0x61 + 10)
        default: nil
        }
    }
}
