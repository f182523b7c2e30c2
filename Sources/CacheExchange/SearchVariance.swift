import CacheSemantics
import CacheStorage

/// No-Vary-Search (draft-ietf-httpbis-no-vary-search §7) in the exchange, as the draft's
/// aside suggests a cache do it without reading every response of a path:
///
/// - A response with a non-default URL variation config is stored under its *simplified*
///   key URI's key (the parameters that do not matter dropped, the others sorted when their
///   order does not), so every equivalent URI maps to that one key. The key URI is the
///   request's URI, or the URL an app's key hook mapped it to (``keyURI(of:)``): the hook
///   comes first, No-Vary-Search applies to what it chose.
/// - Beside it, a small *marker* entry for the URI's path (key `NVS` + the URI without its
///   query) keeps the most recent non-default `No-Vary-Search` value of that path.
/// - A lookup whose own key has nothing stored reads the marker (remembered like any
///   candidates), simplifies the request's key URI with it, reads that key, and keeps the
///   stored responses whose key URI is equivalent to the request's under their own config (§6).
/// - A hit No-Vary-Search made says so in `Cache-Status` (`detail=no-vary-search`).
///
/// A request with nothing under its own key pays one more (remembered) read, unless the store
/// surely holds no marker for its path (``CacheStore/holdsNone(_:)``); a hit pays nothing.
enum SearchVariance {
    /// The marker key of `uri`'s path; `nil` when `uri` is not absolute.
    static func markerKey(of uri: String) -> String? { URLVariationConfig.pathKey(uri).map { "NVS " + $0 } }

    /// Whether `key` names stored markers (listed by no inspection), in any partition.
    static func isMarker(_ key: String) -> Bool { CachePartition.split(key).key.hasPrefix("NVS ") }

    /// `primaryKey` as a log line names it: a marker as "the No-Vary-Search marker of" its
    /// path, a partition's key with the partition's name after it, never the separators
    /// (control characters) the stored key holds.
    static func describe(_ primaryKey: String) -> String {
        let (partition, key) = CachePartition.split(primaryKey)
        let named = key.hasPrefix("NVS ") ? "the No-Vary-Search marker of \(key.dropFirst(4))" : key
        return partition.map { "\(named) (partition \"\($0)\")" } ?? named
    }

    /// The marker entry to store beside `head`, which `head`'s fields' config simplified, in
    /// `partition`.
    static func marker(for head: EntryHead, uri: String, partition: String?) -> EntryHead? {
        guard let key = markerKey(of: uri) else { return nil }
        var fields: HeaderFields = [:]
        for value in head.fields.values(named: .noVarySearch) { fields.append(name: .noVarySearch, value: value) }
        return EntryHead(
            primaryKey: CachePartition.key(key, in: partition), url: String(key.dropFirst(4)), status: 200,
            fields: fields, facts: head.facts)
    }

    /// Where a response to `request` is stored: under the simplified key URI's key when its
    /// config is not the default and the request is keyed by a URI (``keyURI(of:)``); with the
    /// marker to store beside it.
    static func placed(_ head: EntryHead, request: ExchangeRequest) -> (head: EntryHead, marker: EntryHead?) {
        guard head.fields.contains(.noVarySearch), request.head.method == "GET", let uri = keyURI(of: request) else {
            return (head, nil)
        }
        let config = URLVariationConfig(fields: head.fields)
        guard !config.isDefault, let simplified = config.simplified(uri),
            let simplifiedKey = CacheKey(method: "GET", uri: simplified)
        else { return (head, nil) }
        var placed = head
        placed.primaryKey = CachePartition.key(simplifiedKey.primaryKey, in: request.partition)
        return (placed, marker(for: head, uri: uri, partition: request.partition))
    }

    /// The URI `request` is keyed by: its own, or the one a host's key hook chose (the app's
    /// `cacheKey`). No-Vary-Search applies to it, after the hook: the hook maps the URL, and
    /// the parameters the response names are then ignored in the hook's URL. `nil` when the key
    /// is not a `GET` of a URI (a `POST` keyed by its body).
    static func keyURI(of request: ExchangeRequest) -> String? {
        guard let primaryKey = request.primaryKey else { return nil }
        let (partition, key) = CachePartition.split(primaryKey)
        guard partition == request.partition, CacheKey(method: "GET", uri: key)?.primaryKey == key else { return nil }
        return key
    }

    /// Whether No-Vary-Search made `candidate` answer `request` (for `Cache-Status`'s
    /// `detail=no-vary-search`, RFC 9211 §2.8): the response, stored for another URL than the
    /// request's, has a config that is not the default. A hit on the URL it was stored for
    /// costs one comparison of the two.
    @inline(__always)
    static func madeMatch(_ candidate: StoredCandidate, for request: ExchangeRequest) -> Bool {
        candidate.url != request.head.uri && hasConfig(candidate.entry.head.fields)
    }

    private static func hasConfig(_ fields: HeaderFields) -> Bool {
        fields.contains(.noVarySearch) && !URLVariationConfig(fields: fields).isDefault
    }

    /// `status` with `detail=no-vary-search`; a detail already there is kept, the two separated
    /// by a space.
    static func note(_ status: inout CacheStatus) {
        status.detail = status.detail.map { $0 + " " + detail } ?? detail
    }

    /// The `Cache-Status` detail of a hit that No-Vary-Search made.
    static let detail = "no-vary-search"

    /// The key equivalent URIs of `primaryKey` are stored under, by the config its path's
    /// marker (read with `read`) holds, in `primaryKey`'s partition; `nil` when there is none, or
    /// it is `primaryKey` itself. `uri` is the URI `primaryKey` keys.
    static func simplifiedKey(_ primaryKey: String, read: (String) -> [StoredCandidate]) -> (
        key: String, uri: String
    )? {
        let (partition, uri) = CachePartition.split(primaryKey)
        guard !uri.hasPrefix("NVS "), let markerKey = markerKey(of: uri),
            let marker = read(CachePartition.key(markerKey, in: partition)).first
        else { return nil }
        let config = URLVariationConfig(fields: marker.entry.head.fields)
        guard !config.isDefault, let simplified = config.simplified(uri),
            let key = CacheKey(method: "GET", uri: simplified)?.primaryKey, key != uri
        else { return nil }
        return (CachePartition.key(key, in: partition), uri)
    }

    /// The stored responses of `simplifiedKey` that answer `uri` (a key URI): equivalent to it
    /// under their own config (§6), that is stored under the key their config simplifies `uri`
    /// to. (Compared by key, not by the URL stored with each, which a key hook may have mapped
    /// to another key URI.)
    static func equivalent(_ candidates: [StoredCandidate], to uri: String) -> [StoredCandidate] {
        candidates.filter { candidate in
            let config = URLVariationConfig(fields: candidate.entry.head.fields)
            guard let simplified = config.simplified(uri), let key = CacheKey(method: "GET", uri: simplified) else {
                return false
            }
            return CachePartition.split(candidate.entry.head.primaryKey).key == key.primaryKey
        }
    }
}
