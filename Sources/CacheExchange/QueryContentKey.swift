import CacheCrypto
import CacheSemantics

/// The primary key of a `QUERY` request (RFC 10008 §2.7): its method and target URI, as for any
/// request (RFC 9111 §2), and the SHA-256 of its content as ``QueryContent`` normalizes it, with
/// the content's media type and codings. Two requests share an entry only when they send the
/// same query: the same JSON with other white space does, the same text as another media
/// type does not.
///
/// ```swift
/// let content = QueryContentKey(content: Array(#"{ "q": "swift" }"#.utf8), fields: ["Content-Type": "application/json"])
/// let key = content.primaryKey(for: CacheKey(method: "QUERY", uri: "https://example.com/search")!)
/// // "QUERY https://example.com/search content=sha-256:…"
/// ```
///
/// A host reads the whole content before it can key the request; both hosts bound it and send
/// larger ones on without the cache (`HTTPCache` above 1 MiB, the proxy above its
/// `maxQueryContentBytes`).
public struct QueryContentKey: Hashable, Sendable, CustomStringConvertible {
    /// The media type, normalized (``QueryContent/mediaType``).
    public var mediaType: String
    /// The content codings (``QueryContent/contentCoding``).
    public var contentCoding: String
    /// How the content was normalized before it was hashed.
    public var normalization: QueryContent.Normalization
    /// The length of the content as sent.
    public var sentLength: Int
    /// The length of the content as hashed, after normalization.
    public var keyedLength: Int
    /// The SHA-256 of the media type, the codings and the normalized content, in lower-case hex.
    public var digest: String

    /// The key of a `QUERY` with `content` and request fields `fields`.
    public init(content: [UInt8], fields: HeaderFields) {
        let keyed = QueryContent(content: content, fields: fields)
        mediaType = keyed.mediaType
        contentCoding = keyed.contentCoding
        normalization = keyed.normalization
        sentLength = content.count
        keyedLength = keyed.bytes.count
        // Each piece of metadata after its length, so that no two requests hash the same bytes.
        var hasher = DigestHasher(.sha256)
        hasher.update(Array("\(mediaType.utf8.count):\(mediaType)\(contentCoding.utf8.count):\(contentCoding)".utf8))
        hasher.update(keyed.bytes)
        digest = hasher.finalize().map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// The primary key of the request whose `QUERY` key without content is `key`.
    public func primaryKey(for key: CacheKey) -> String { "\(key.primaryKey) content=sha-256:\(digest)" }

    /// The key's content part as `explain` shows it.
    public var description: String {
        let type = mediaType.isEmpty ? "no Content-Type" : mediaType
        let coding = contentCoding.isEmpty ? "" : ", Content-Encoding \(contentCoding)"
        return
            "sha-256:\(digest) of \(keyedLength) of \(sentLength) bytes (\(type)\(coding); \(normalization)) (RFC 10008 §2.7)"
    }
}
