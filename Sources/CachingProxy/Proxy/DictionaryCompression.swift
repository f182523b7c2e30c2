#if os(Linux)
import CacheSemantics
import CacheSystem
import CacheZstd
import HTTPClient
@_spi(Wire) import HTTPWire

extension CachingProxy {
    /// Compression Dictionary Transport ([RFC 9842](https://www.rfc-editor.org/rfc/rfc9842)) made
    /// by the proxy (`httpcache serve --dictionary-compress`): a stored response with
    /// `Use-As-Dictionary` is kept as a dictionary, and a client that offers one
    /// (`Available-Dictionary`, `Accept-Encoding: dcz`) for a later version of a URL it matches
    /// gets the `dcz` delta the proxy made from the origin's identity or gzip response, stored
    /// as a variant of its own (the next such request is a hit).
    public struct DictionaryCompression: Sendable {
        /// Bodies (and dictionaries) larger than this are sent as the origin sent them: the
        /// proxy holds a body whole to compress it.
        public var maxBodyBytes = 8 << 20
        /// How many bytes of origin responses all requests together may hold to delta-code at
        /// once; past it a response is relayed as the origin sends it. Each one may hold up to
        /// ``maxBodyBytes``: without this, many misses at once for URLs a dictionary matches
        /// would hold that much each.
        public var maxHeldBytes = 64 << 20
        /// How many dictionaries are kept, the least recently used dropped first.
        public var maxDictionaries = 64
        /// How many bytes of dictionaries are kept at most (in memory).
        public var maxDictionaryBytes = 64 << 20
        /// The Zstandard level of the deltas (1–22).
        public var level: Int32 = 19

        public init() {}
    }
}

/// A request that offers a dictionary the proxy holds for its URL: its responses are stored in
/// a partition of their own (one per dictionary), where the delta-coded variant lives.
struct DeltaPlan: Sendable {
    let dictionary: CompressionDictionary

    var partition: String { "dcz " + dictionary.hashText }
}

/// The dictionaries the proxy holds, bounded in count and bytes.
final class DictionaryRegistry: Sendable {
    let settings: CachingProxy.DictionaryCompression
    let store: CompressionDictionaryStore
    /// The bytes of origin responses held to be delta-coded now, by every request
    /// (``CachingProxy/DictionaryCompression/maxHeldBytes``).
    let heldBytes = Locked(0)

    init(_ settings: CachingProxy.DictionaryCompression) {
        self.settings = settings
        store = CompressionDictionaryStore(
            maxCount: settings.maxDictionaries, maxBytes: settings.maxDictionaryBytes,
            maxContentBytes: settings.maxBodyBytes)
    }

    /// The delta to make for a `GET` of `url` with `fields`: when they accept `dcz` and offer a
    /// dictionary held here whose pattern matches `url` (RFC 9842 §2.2.2: same origin, the URL
    /// in its pattern, its `match-dest` holding the request's `Sec-Fetch-Dest` when both are
    /// given). Not for a range request: a delta is of the whole content.
    func plan(for fields: HeaderFields, url: String) -> DeltaPlan? {
        guard !fields.contains(.range), CompressionDictionaries.accepts("dcz", in: fields),
            let hashText = CompressionDictionaries.availableHash(in: fields),
            let dictionary = store.dictionary(named: hashText, for: url)
        else { return nil }
        if !dictionary.offer.destinations.isEmpty, let destination = fields["Sec-Fetch-Dest"],
            !dictionary.offer.destinations.contains(destination)
        {
            return nil
        }
        return DeltaPlan(dictionary: dictionary)
    }
}

/// An origin's response held whole to be delta-coded: its bytes count against the registry's
/// ``CachingProxy/DictionaryCompression/maxHeldBytes`` until it is let go, on every path (it
/// gives them back when released). Used by one exchange at a time: filled on its event loop,
/// then handed whole to the worker that codes it.
final class HeldResponse: @unchecked Sendable {
    let head: UpstreamResponseHead
    private(set) var body: [UInt8] = []
    private let registry: DictionaryRegistry

    init(_ head: UpstreamResponseHead, registry: DictionaryRegistry) {
        self.head = head
        self.registry = registry
    }

    /// Adds `bytes`; false, adding nothing, when they would pass this response's limit or all
    /// held responses' together.
    func append(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let settings = registry.settings
        guard body.count + bytes.count <= settings.maxBodyBytes,
            registry.heldBytes.withLock({ held in
                guard held + bytes.count <= settings.maxHeldBytes else { return false }
                held += bytes.count
                return true
            })
        else { return false }
        body += bytes
        return true
    }

    /// Gives back what it holds at once: called once the delta is made, before the response
    /// goes out, since the client may ask for the next one (and need the room) as soon as it
    /// has it; the last reference to a held response can go later, on another thread.
    func giveBack() {
        let count = body.count
        body = []
        registry.heldBytes.withLock { $0 -= count }
    }

    deinit { giveBack() }
}

/// The `dcz` delta of an origin's response, made by the proxy (RFC 9842 §5, §6.2).
enum DeltaCoding {
    /// The `Cache-Status` detail of a response the proxy delta-coded (RFC 9211 §2.8).
    static let detail = "dcz-delta"

    /// Whether a response with `status` and `fields` may be held to be delta-coded: a `200`
    /// whose content is identity or gzip-coded, not too large, and not marked `no-transform`
    /// (RFC 9110 §7.7: a proxy does not change the coding of such content).
    static func mayCode(status: Int, fields: HeaderFields, limit: Int) -> Bool {
        guard status == 200, !fields.contains(.contentRange), isPlainOrGzip(fields) else { return false }
        if let length = fields[.contentLength].flatMap({ Int($0) }), length > limit { return false }
        return !ResponseCacheControl(fields: fields).noTransform
    }

    /// Whether the content coding is none, identity or gzip.
    static func isPlainOrGzip(_ fields: HeaderFields) -> Bool {
        fields.listMembers(named: .contentEncoding).allSatisfy {
            ASCII.equalsIgnoringCase($0, "identity") || ASCII.equalsIgnoringCase($0, "gzip")
                || ASCII.equalsIgnoringCase($0, "x-gzip")
        }
    }

    /// The content of `body`, gzip decoded when `fields` say it is; `nil` when it cannot be
    /// decoded or decodes to more than `limit` bytes.
    static func content(of body: [UInt8], fields: HeaderFields, limit: Int) -> [UInt8]? {
        guard isPlainOrGzip(fields) else { return nil }
        guard let codings = ContentCoding.applied(in: fields), !codings.isEmpty else { return body }
        var content: [UInt8] = []
        do {
            let decoder = try ContentDecoder(codings)
            let whole = try body.withUnsafeBytes { bytes throws(ContentDecodingError) in
                try decoder.decode(bytes) { piece in
                    content += piece
                    return content.count <= limit
                }
            }
            guard whole,
                try decoder.finish({ piece in
                    content += piece
                    return content.count <= limit
                })
            else { return nil }
        } catch {
            return nil
        }
        return content
    }

    /// The delta-coded response for `content` with the origin's `fields`: `dcz` with the plan's
    /// dictionary, its length, `Vary` that holds `Accept-Encoding` and `Available-Dictionary`
    /// (RFC 9842 §6.2), the entity tag made weak (the representation's bytes changed; a weak
    /// validator still revalidates it with the origin, RFC 9110 §8.8.3.2), digests of the old
    /// bytes dropped. `nil` when compressing fails or saves nothing.
    static func coded(
        _ content: [UInt8], fields: HeaderFields, plan: DeltaPlan, level: Int32, plainSize: Int
    ) -> (fields: HeaderFields, body: [UInt8])? {
        let dictionary = plan.dictionary
        guard
            let body = try? DictionaryZstandard.compress(
                content, dictionary: dictionary.content, hash: dictionary.hash, level: level),
            body.count < plainSize
        else { return nil }
        var fields = fields
        fields[.contentEncoding] = "dcz"
        fields[.contentLength] = String(body.count)
        fields.removeAll(namedAnyOf: [HeaderField.Name.contentDigest, .reprDigest, "Digest", "Content-MD5"])
        if let tag = fields[.eTag], !tag.hasPrefix("W/") { fields[.eTag] = "W/" + tag }
        let vary = fields.listMembers(named: .vary)
        if !vary.contains("*") {
            var names = vary.map(String.init)
            for name in ["Accept-Encoding", "Available-Dictionary"]
            where !vary.contains(where: { ASCII.equalsIgnoringCase($0, name) }) {
                names.append(name)
            }
            fields[.vary] = names.joined(separator: ", ")
        }
        return (fields, body)
    }

    /// `fields` with this cache's `Cache-Status` member (`ours`, the last one) saying the
    /// response is the proxy's delta.
    static func namingDelta(_ fields: inout HeaderFields, ours: CacheStatus) {
        guard let value = fields[.cacheStatus], value.hasSuffix(ours.fieldValue) else { return }
        var named = ours
        named.detail = detail
        fields[.cacheStatus] = String(value.dropLast(ours.fieldValue.count)) + named.fieldValue
    }
}
#endif
