import CacheExchange
import CacheSemantics
import CacheStorage
import CacheSystem
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What `<destination>.partial.json` holds: what is needed to resume safely.
struct DownloadRecord: Codable, Equatable {
    var version = 1
    /// The request URL the partial file is a prefix of.
    var url: String
    /// The `ETag` of the representation being downloaded, as received.
    var etag: String?
    /// Its `Last-Modified`, as received.
    var lastModified: String?
    /// The `If-Range` value: the strong `ETag`, else a strong `Last-Modified`; `nil` when the
    /// download cannot be resumed safely.
    var validator: String?
    /// The whole length, when known.
    var expectedLength: Int64?
    /// The representation's `Repr-Digest` (RFC 9530 §3), as received: the whole file is
    /// checked against it at the end, when the response that ends it states none.
    var reprDigest: String?

    /// The record for a `200` (or `203`) response to `url`.
    init(url: String, fields: HeaderFields, expectedLength: Int64?) {
        self.url = url
        etag = fields[.eTag]
        lastModified = fields[.lastModified]
        validator = Self.validator(of: fields)
        self.expectedLength = expectedLength
        reprDigest = fields[.reprDigest]
    }

    /// The value `If-Range` may carry for a response with `fields` (RFC 9110 §13.1.5): a strong
    /// entity tag; else, when there is no entity tag at all, a `Last-Modified` at least one
    /// second before `Date` (a strong date, §8.8.2.2); else `nil`.
    static func validator(of fields: HeaderFields) -> String? {
        if let value = fields[.eTag] {
            guard let tag = EntityTag(value), !tag.isWeak else { return nil }
            return tag.description
        }
        guard let text = fields[.lastModified], let modified = HTTPDate.parse(text),
            let dateText = fields[.date], let date = HTTPDate.parse(dateText), date - modified >= 1
        else { return nil }
        return text
    }
}
