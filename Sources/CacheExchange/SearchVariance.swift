import CacheSemantics
import CacheStorage

/// No-Vary-Search (draft-ietf-httpbis-no-vary-search §7) in the exchange, as the draft's
/// aside suggests a cache do it without reading every response of a path:
///
/// - A response with a non-default URL variation config is stored under its *simplified*
///   URI's key (the parameters that do not matter dropped, the others sorted when their order
///   does not), so every equivalent URI maps to that one key.
/// - Beside it, a small *marker* entry for the URI's path (key `NVS` + the URI without its
///   query) keeps the most recent non-default `No-Vary-Search` value of that path.
/// - A lookup whose own key has nothing stored reads the marker (remembered like any
///   candidates), simplifies the request's URI with it, reads that key, and keeps the stored
///   responses whose URI is equivalent to the request's under their own config (§6).
///
/// A request with nothing under its own key pays one more (remembered) read; a hit, and every
/// request of a path that never had the field, pay nothing.
enum SearchVariance {
    /// The marker key of `uri`'s path; `nil` when `uri` is not absolute.
    static func markerKey(of uri: String) -> String? { URLVariationConfig.pathKey(uri).map { "NVS " + $0 } }

    /// Whether `key` names stored markers (listed by no inspection), in any partition.
    static func isMarker(_ key: String) -> Bool { CachePartition.split(key).key.hasPrefix("NVS ") }

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

    /// Where a response to `request` is stored: under the simplified URI's key when its
    /// config is not the default and the request is keyed by its URI alone; with the marker to
    /// store beside it.
    static func placed(_ head: EntryHead, request: ExchangeRequest) -> (head: EntryHead, marker: EntryHead?) {
        guard head.fields.contains(.noVarySearch), request.head.method == "GET",
            let key = CacheKey(method: "GET", uri: request.head.uri),
            request.primaryKey == CachePartition.key(key.primaryKey, in: request.partition)
        else { return (head, nil) }
        let config = URLVariationConfig(fields: head.fields)
        guard !config.isDefault, let simplified = config.simplified(request.head.uri),
            let simplifiedKey = CacheKey(method: "GET", uri: simplified)
        else { return (head, nil) }
        var placed = head
        placed.primaryKey = CachePartition.key(simplifiedKey.primaryKey, in: request.partition)
        return (placed, marker(for: head, uri: request.head.uri, partition: request.partition))
    }

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

    /// The stored responses of `simplifiedKey` that answer `uri`: equivalent to it under
    /// their own config (§6).
    static func equivalent(_ candidates: [StoredCandidate], to uri: String) -> [StoredCandidate] {
        candidates.filter { URLVariationConfig(fields: $0.entry.head.fields).equivalent($0.entry.head.url, uri) }
    }
}
