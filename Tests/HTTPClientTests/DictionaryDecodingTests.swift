#if os(Linux)
import CacheSemantics
import CacheTestSupport
import HTTPClient
import Testing

/// The `dcz` coding (RFC 9842 §5) as HTTPClient decodes it, on bodies made by PyPI's
/// zstandard, and the dictionaries it keeps (§2.2).
@Suite("Dictionary-compressed content (RFC 9842 §5)")
struct DictionaryDecodingTests {
    static let dictionary = CodedBodies.text(40_000)
    static let content = dictionary + Array("and a new line\n".utf8) + dictionary.prefix(5_000)
    static let url = "https://example.com/app/v2/main.js"

    /// `content` kept as a dictionary for `/app/*` of example.com, as a client keeps it.
    static func kept(_ content: [UInt8] = dictionary) throws -> CompressionDictionary {
        let store = CompressionDictionaryStore(maxCount: 4, maxBytes: 1 << 20, maxContentBytes: 1 << 20)
        store.record(
            url: "https://example.com/app/v1/main.js", fields: ["Use-As-Dictionary": "match=\"/app/*\""],
            content: content, expires: 100)
        return try #require(store.best(for: url, now: 0))
    }

    @Test("RFC 9842 §5: a dcz body decodes with its dictionary, in pieces of any size")
    func decodes() async throws {
        let coded = try await CodedBodies.zstandardCompressed(Self.content, dictionary: Self.dictionary)
        let dictionary = try Self.kept()
        for pieceSize in [1, 7, 40, 41, 4096, coded.count] {
            let decoded = try ContentDecodingTests.decode(
                coded, [.dictionaryZstandard], pieceSize: pieceSize, dictionary: dictionary)
            #expect(decoded == Self.content, "pieces of \(pieceSize)")
        }
    }

    @Test(
        "RFC 9842 §5: a body cut short, one with another dictionary's hash, without the dcz magic or with bytes after its frame is an error; without a dictionary none is made",
        arguments: ["truncated", "header cut", "other hash", "no magic", "trailing"])
    func refused(_ damage: String) async throws {
        var coded = try await CodedBodies.zstandardCompressed(Self.content, dictionary: Self.dictionary)
        switch damage {
        case "truncated": coded.removeLast(10)
        case "header cut": coded = Array(coded.prefix(20))
        case "other hash": coded[20] ^= 0x01
        case "no magic": coded[0] = 0x28
        default: coded += [0]
        }
        let dictionary = try Self.kept()
        let error = #expect(throws: ContentDecodingError.self) {
            try ContentDecodingTests.decode(coded, [.dictionaryZstandard], dictionary: dictionary)
        }
        #expect(error?.kind == (damage.contains("cut") || damage == "truncated" ? .truncated : .corrupt), "\(damage)")
        #expect(throws: ContentDecodingError.self) { try ContentDecoder([.dictionaryZstandard]) }
    }

    @Test("RFC 9842 §2.2.1, §2.2.3: the freshest longest match is offered; an expired dictionary never is")
    func bestDictionary() throws {
        let store = CompressionDictionaryStore(maxCount: 4, maxBytes: 1 << 20, maxContentBytes: 1 << 20)
        let v1 = "https://example.com/app/v1/main.js"
        store.record(url: v1, fields: ["Use-As-Dictionary": "match=\"/app/*\""], content: [1], expires: 100)
        store.record(url: v1, fields: ["Use-As-Dictionary": "match=\"/app/*/main.js\""], content: [2], expires: 100)
        store.record(url: v1, fields: ["Use-As-Dictionary": "match=\"/app/*/main.js\""], content: [3], expires: 50)
        #expect(store.best(for: Self.url, now: 10)?.content == [3], "the longest match, then the most recent")
        #expect(store.best(for: Self.url, now: 60)?.content == [2], "[3] expired")
        #expect(store.best(for: "https://example.com/app/v2/other.js", now: 10)?.content == [1])
        #expect(store.best(for: "https://other.example/app/v2/main.js", now: 10) == nil, "another origin")
        #expect(store.best(for: Self.url, now: 200) == nil)
        store.record(
            url: v1, fields: ["Use-As-Dictionary": "match=\"/*\""], content: [UInt8](repeating: 0, count: 2 << 20))
        #expect(store.best(for: "https://example.com/x", now: 10) == nil, "larger than maxContentBytes: not kept")
    }
}
#endif
