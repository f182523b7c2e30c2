#if os(Linux)
import CacheSemantics
import Foundation
import CacheTestSupport
import HTTPClient
import Testing

/// The content codings decoded for apps (RFC 9110 §8.4), on bodies made by python3's zlib and
/// gzip and by Debian's brotli command.
@Suite("Content decoding (RFC 9110 §8.4)")
struct ContentDecodingTests {
    static let body = CodedBodies.text(300_000)

    /// Feeds `coded` to a decoder for `codings` (with `dictionary` for dcz) in pieces of
    /// `pieceSize` bytes.
    static func decode(
        _ coded: [UInt8], _ codings: [ContentCoding], pieceSize: Int = 4096, dictionary: CompressionDictionary? = nil
    ) throws -> [UInt8] {
        let decoder = try ContentDecoder(codings, dictionary: dictionary)
        var output: [UInt8] = []
        var offset = 0
        while offset < coded.count {
            let end = min(coded.count, offset + pieceSize)
            _ = try coded[offset..<end].withUnsafeBytes { piece in
                try decoder.decode(piece) {
                    output += $0; return true
                }
            }
            offset = end
        }
        try decoder.finish {
            output += $0; return true
        }
        return output
    }

    static func fields(_ contentEncoding: [String]) -> HeaderFields {
        HeaderFields(contentEncoding.map { ("Content-Encoding", $0) })
    }

    // MARK: Which codings

    @Test(
        "Content-Encoding lists codings in the order applied; identity means none (RFC 9110 §8.4, §8.4.1)",
        arguments: [
            (["gzip"], [ContentCoding.gzip]), (["x-gzip"], [.gzip]), (["GZip"], [.gzip]), (["deflate"], [.deflate]),
            (["br"], [.brotli]), (["gzip, br"], [.gzip, .brotli]), (["deflate", "br"], [.deflate, .brotli]),
            (["identity"], []), ([], []), (["gzip,,identity"], [.gzip]),
        ])
    func codingsInOrderApplied(values: [String], expected: [ContentCoding]) {
        #expect(ContentCoding.applied(in: Self.fields(values)) == expected)
    }

    @Test(
        "Content in a coding not decoded here is left as it is, fields intact (RFC 9110 §8.4.1)",
        arguments: [["compress"], ["zstd"], ["gzip, zstd"], ["zstd", "gzip"], ["br, x-unknown"]])
    func unknownCodingLeavesAllEncoded(values: [String]) {
        #expect(ContentCoding.applied(in: Self.fields(values)) == nil)
    }

    // MARK: Decoding

    @Test("gzip, in pieces of any size (RFC 9110 §8.4.1.3)", arguments: [1, 7, 4096, 1 << 20])
    func gzip(pieceSize: Int) async throws {
        let coded = try await CodedBodies.python("gzip.compress(data)", Self.body)
        #expect(try Self.decode(coded, [.gzip], pieceSize: pieceSize) == Self.body)
    }

    @Test("A gzip body of several members is decoded whole (RFC 9110 §8.4.1.3, RFC 1952 §2.2)")
    func gzipMembers() async throws {
        let first = Array(Self.body.prefix(1000))
        let second = Array(Self.body.dropFirst(1000))
        let coded = try await CodedBodies.python("gzip.compress(data[:1000]) + gzip.compress(data[1000:])", Self.body)
        #expect(try Self.decode(coded, [.gzip]) == first + second)
    }

    @Test(
        "deflate: a zlib stream, or raw deflate as curl and browsers accept (RFC 9110 §8.4.1.2)",
        arguments: [
            "zlib.compress(data)",
            "(lambda c: c.compress(data) + c.flush())(zlib.compressobj(9, zlib.DEFLATED, -15))",
        ])
    func deflate(expression: String) async throws {
        let coded = try await CodedBodies.python(expression, Self.body)
        for pieceSize in [1, 2, 3, 4096] {
            #expect(try Self.decode(coded, [.deflate], pieceSize: pieceSize) == Self.body)
        }
    }

    @Test("br (RFC 7932; the br coding registered under RFC 9110 §8.4.1)", arguments: [1, 4096, 1 << 20])
    func brotli(pieceSize: Int) async throws {
        let coded = try await CodedBodies.brotli(Self.body)
        #expect(try Self.decode(coded, [.brotli], pieceSize: pieceSize) == Self.body)
    }

    @Test("Several codings are decoded in the reverse of the order applied (RFC 9110 §8.4)")
    func severalCodings() async throws {
        // Content-Encoding: gzip, br — gzip applied first, then br.
        let coded = try await CodedBodies.brotli(try await CodedBodies.python("gzip.compress(data)", Self.body))
        let codings = try #require(ContentCoding.applied(in: Self.fields(["gzip, br"])))
        #expect(try Self.decode(coded, codings) == Self.body)
        // Decoded in the wrong order it is not the body: the order is what makes it work.
        #expect(throws: ContentDecodingError.self) { try Self.decode(coded, [.brotli, .gzip]) }
    }

    @Test("An empty body in a coding decodes to nothing (RFC 9110 §8.4)")
    func emptyBody() throws {
        for coding in [ContentCoding.gzip, .deflate, .brotli] {
            #expect(try Self.decode([], [coding]).isEmpty)
        }
    }

    // MARK: Never a short body that looks complete

    static func expectFailure(
        _ coded: [UInt8], _ codings: [ContentCoding], _ kind: ContentDecodingError.Kind,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        do {
            let decoded = try decode(coded, codings)
            Issue.record("decoded to \(decoded.count) bytes instead of failing", sourceLocation: sourceLocation)
        } catch {
            #expect((error as? ContentDecodingError)?.kind == kind, "\(error)", sourceLocation: sourceLocation)
        }
    }

    @Test("A coded body cut short is an error, never a shorter body (RFC 9110 §8.4)")
    func truncated() async throws {
        let gzip = try await CodedBodies.python("gzip.compress(data)", Self.body)
        let zlib = try await CodedBodies.python("zlib.compress(data)", Self.body)
        let br = try await CodedBodies.brotli(Self.body)
        for (coded, coding) in [(gzip, ContentCoding.gzip), (zlib, .deflate), (br, .brotli)] {
            // Cut inside the data, and just before the end (gzip's CRC-32 and length, zlib's Adler-32).
            for cut in [1, coded.count / 2, coded.count - 1] {
                Self.expectFailure(Array(coded.prefix(cut)), [coding], .truncated)
            }
        }
    }

    @Test("A corrupt coded body is an error: bad data, a failed check, bytes after the end (RFC 9110 §8.4)")
    func corrupt() async throws {
        let gzip = try await CodedBodies.python("gzip.compress(data)", Self.body)
        var badCRC = gzip
        badCRC[badCRC.count - 6] ^= 0xFF
        Self.expectFailure(badCRC, [.gzip], .corrupt)
        Self.expectFailure(Array("this is not gzip at all".utf8), [.gzip], .corrupt)
        Self.expectFailure(gzip + Array("trailing".utf8), [.gzip], .corrupt)
        let zlib = try await CodedBodies.python("zlib.compress(data)", Self.body)
        Self.expectFailure(zlib + [0], [.deflate], .corrupt)
        var badAdler = zlib
        badAdler[badAdler.count - 1] ^= 0x01
        Self.expectFailure(badAdler, [.deflate], .corrupt)
        let br = try await CodedBodies.brotli(Self.body)
        Self.expectFailure(br + [0], [.brotli], .corrupt)
        Self.expectFailure(Array(repeating: 0xFF, count: 64), [.brotli], .corrupt)
    }

    // MARK: Bounded memory

    @Test(
        "A decompression bomb comes out in bounded pieces, and stops when the reader stops (RFC 9110 §8.4)",
        arguments: ["gzip", "br"])
    func bombInBoundedPieces(coding: String) async throws {
        let size = 32 << 20
        let coded: [UInt8]
        let codings: [ContentCoding]
        if coding == "gzip" {
            coded = try await CodedBodies.pythonZeros(size, compressor: "zlib.compressobj(9, zlib.DEFLATED, 31)")
            codings = [.gzip]
        } else {
            coded = try await CodedBodies.brotli([UInt8](repeating: 0, count: size))
            codings = [.brotli]
        }
        #expect(coded.count < size / 500)
        // Read whole: every piece at most pieceSize bytes, all of it there.
        let decoder = try ContentDecoder(codings)
        var total = 0
        var largest = 0
        _ = try coded.withUnsafeBytes { bytes in
            try decoder.decode(bytes) { piece in
                total += piece.count
                largest = max(largest, piece.count)
                return true
            }
        }
        try decoder.finish {
            total += $0.count; return true
        }
        #expect(total == size)
        #expect(largest <= ContentDecoder.pieceSize)
        // A reader that stops after the first piece gets no more.
        let stopping = try ContentDecoder(codings)
        var pieces = 0
        let wentOn = try coded.withUnsafeBytes { bytes in
            try stopping.decode(bytes) { _ in
                pieces += 1
                return false
            }
        }
        #expect(!wentOn)
        #expect(pieces == 1)
    }
}
#endif
