import Testing

@testable import CacheSemantics

@Suite("RFC 9110 §5.3 HeaderFields: serialized for stores")
struct HeaderFieldsSerializationTests {
    @Test("order, spelling, repeated lines and non-ASCII values survive a round trip")
    func roundTrip() throws {
        let fields = HeaderFields([
            ("Content-Type", "text/html; charset=utf-8"), ("Set-Cookie", "a=1"), ("set-cookie", "b=2"),
            ("X-Empty", ""), ("X-Unicode", "caf\u{E9} \u{1F600}"),
        ])
        let decoded = try #require(HeaderFields(serialized: fields.serialized()))
        #expect(decoded == fields)
        #expect(decoded.values(named: "SET-COOKIE") == ["a=1", "b=2"])
        #expect(HeaderFields(serialized: HeaderFields().serialized()) == HeaderFields())
    }

    @Test(
        "the bytes are sized before they are written (a varint's size as written); long values and many lines survive")
    func sizedExactly() throws {
        for length in [0, 1, 127, 128, 16_383, 16_384, 70_000] {
            var writer = ByteWriter()
            writer.varint(UInt64(length))
            #expect(ByteWriter.varintSize(UInt64(length)) == writer.bytes.count, "varint of \(length)")
        }
        #expect(ByteWriter.varintSize(.max) == 10)
        let fields = HeaderFields((0..<200).map { ("X-\($0)", String(repeating: "v", count: $0 * 90)) })
        let bytes = fields.serialized()
        #expect(HeaderFields(serialized: bytes) == fields)
    }

    @Test("truncated or padded bytes are rejected, never misread")
    func malformedBytes() {
        let bytes = HeaderFields([("A", "1"), ("B", "22")]).serialized()
        for length in 0..<bytes.count {
            #expect(HeaderFields(serialized: bytes.prefix(length)) == nil, "prefix of \(length) bytes")
        }
        #expect(HeaderFields(serialized: bytes + [0]) == nil)
        #expect(HeaderFields(serialized: [0xFF, 0xFF, 0xFF, 0xFF, 0x0F]) == nil)
    }

    @Test("a name or value whose bytes are not UTF-8 (a damaged store) is rejected, not read with replacements")
    func invalidUTF8Rejected() {
        // One line: name "A", value "x" then a lone continuation byte, or a truncated sequence.
        for value: [UInt8] in [[0x78, 0x80], [0x78, 0xC3], [0xFF], [0xED, 0xA0, 0x80]] {
            let bytes: [UInt8] = [1, 1, 0x41, UInt8(value.count)] + value
            #expect(HeaderFields(serialized: bytes) == nil, "value \(value) was accepted")
        }
        #expect(HeaderFields(serialized: [1, 1, 0xC3, 0]) == nil, "a name of one lead byte was accepted")
        let valid: [UInt8] = [1, 1, 0x41, 2, 0xC3, 0xA9]
        #expect(HeaderFields(serialized: valid) == HeaderFields([("A", "\u{E9}")]))
    }
}
