import CacheSemantics
@_spi(Wire) import HTTPWire
import Testing

/// Field names as the parsers make them: the name as sent and its lower-case form, which every
/// lookup compares (RFC 9110 §5.1: names are case-insensitive).
@Suite("Field names read from the wire (RFC 9110 §5.1)")
struct FieldNameTests {
    static func fieldName(_ text: String) -> (name: String, lowercased: String) {
        var text = text
        return text.withUTF8 { HTTPBytes.fieldName($0.baseAddress!, $0.count) }
    }

    @Test("Every name known in advance, and any other, comes out as sent with its lower-case form")
    func asSentAndLowered() {
        let common = [
            "Age", "Via", "Date", "ETag", "Host", "Vary", "Range", "Accept", "Cookie", "Server", "Expires", "Referer",
            "Location", "Connection", "Keep-Alive", "Set-Cookie", "User-Agent", "Content-Type", "Accept-Ranges",
            "Authorization", "Cache-Control", "If-None-Match", "Last-Modified", "Content-Length", "Accept-Encoding",
            "Accept-Language", "Content-Encoding", "If-Modified-Since", "Transfer-Encoding", "If-Match", "Pragma",
        ]
        for name in common + ["content-length", "CONTENT-LENGTH", "X-Custom", "x-lower", "ETAG", "A", "Vary2"] {
            let read = Self.fieldName(name)
            #expect(read.name == name)
            #expect(read.lowercased == ASCII.lowercased(name), "\(name)")
        }
    }

    @Test("Parsed heads carry those forms: a lookup in any case finds the line")
    func parsedHeads() throws {
        let bytes = Array("HTTP/1.1 200 OK\r\nCONTENT-type: text/plain\r\nETag: \"x\"\r\nX-Odd: 1\r\n\r\n".utf8)
        let head = try bytes.withUnsafeBytes { try ResponseHeadParser.parse($0, maxFieldCount: 10).get() }
        #expect(head.head.fields["content-type"] == "text/plain")
        #expect(head.head.fields["etag"] == "\"x\"" && head.head.fields["x-odd"] == "1")
        #expect(head.head.fields.map(\.name) == ["CONTENT-type", "ETag", "X-Odd"])
    }
}
