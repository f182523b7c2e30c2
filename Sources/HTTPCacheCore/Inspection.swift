import CacheExchange
import CacheSemantics
import CacheStorage
import Foundation

/// A stored response as ``HTTPCache/entries(urlPrefix:)`` and ``HTTPCache/entries(for:partition:)``
/// show it: what is stored, and what it means now.
public struct CacheEntryInfo: Hashable, Sendable {
    /// The entry's identity in the store.
    public var id: EntryID
    /// The URL it was stored for.
    public var url: String
    /// The key it is stored under (RFC 9111 §4.1), within its ``partition``.
    public var primaryKey: String
    /// The cache partition it is stored in (``FetchRequest/partition``); `nil`: none.
    public var partition: String?
    /// The status code.
    public var status: Int
    /// The stored fields.
    public var fields: HeaderFields
    /// The body size in bytes.
    public var bodySize: Int64
    /// When it was stored and last used, in seconds since 1970.
    public var storedAt: Double
    /// See ``storedAt``.
    public var lastAccess: Double
    /// How often it was served.
    public var hits: Int
    /// Whether eviction skips it.
    public var isPinned: Bool
    /// Whether it lives in memory only.
    public var isMemoryOnly: Bool
    /// `false` for a response whose body was cut off, kept to be resumed (RFC 9111 §3.3).
    public var isComplete: Bool
    /// The bytes a will-store hook kept with it.
    public var userInfo: Data?
    /// The parsed facts, `nil` when they cannot be read.
    public var facts: StoredResponseFacts?
    /// `current_age` now (RFC 9111 §4.2.3).
    public var age: Double
    /// Whether it is fresh now (§4.2).
    public var isFresh: Bool { facts.map { $0.freshnessLifetime > age } ?? false }
    /// Why it is fresh or stale now, and what limits its reuse.
    public var reasons: [Reason]
}

extension HTTPCache {
    /// Whether `primaryKey` is one of the records the cache keeps for itself in its store (the
    /// last manifest applied, offline packs): no request has such a key, and listings leave
    /// them out.
    package static func isRecordKey(_ primaryKey: String) -> Bool {
        // "MANIFEST ": the last manifest applied, as the release before packs kept it.
        primaryKey.hasPrefix("MANIFEST ") || primaryKey.hasPrefix("PACK ")
    }

    /// The key `GET url` is stored under: the configured ``Configuration/cacheKey`` hook's, or
    /// the URL's.
    package func storedKey(of url: URL) -> String? { (try? prepare(FetchRequest(url: url)))?.primaryKey }

    /// Every stored response whose URL starts with `urlPrefix` (all when `nil`), most
    /// recently used first, in every partition (``CacheEntryInfo/partition`` says which).
    public func entries(urlPrefix: String? = nil) throws(StorageError) -> [CacheEntryInfo] {
        let time = now
        return try store.entries()
            .filter {
                !driver.isInternal($0) && !Self.isRecordKey($0.head.primaryKey)
                    && (urlPrefix.map($0.head.url.hasPrefix) ?? true)
            }
            .map { info($0, at: time) }
    }

    /// The key `GET url` is stored under in `partition`, or in ``Configuration/partition`` when
    /// `nil`.
    private func key(of url: URL, partition: String?) -> String? {
        CacheKey(method: "GET", uri: Self.sentURI(url)).map {
            CachePartition.key($0.primaryKey, in: partition ?? configuration.partition)
        }
    }

    /// The stored responses (every `Vary` variant) for `GET url` in `partition` (by default
    /// ``Configuration/partition``).
    public func entries(for url: URL, partition: String? = nil) throws(StorageError) -> [CacheEntryInfo] {
        guard let key = key(of: url, partition: partition) else { return [] }
        let time = now
        return driver.storedEntries(for: key).map { info($0, at: time) }
    }

    /// The stored responses (every `Vary` variant) under the key `request` is answered from: its
    /// URL's, or for a `QUERY` its URL's and content's (RFC 10008 §2.7).
    public func entries(answering request: FetchRequest) throws(StorageError) -> [CacheEntryInfo] {
        guard let key = (try? prepare(request))?.primaryKey else { return [] }
        let time = now
        return driver.storedEntries(for: key).map { info($0, at: time) }
    }

    /// Removes the stored responses for `GET url` in `partition` (by default
    /// ``Configuration/partition``); returns how many.
    @discardableResult
    public func remove(url: URL, partition: String? = nil) throws(StorageError) -> Int {
        guard let key = key(of: url, partition: partition) else { return 0 }
        return try driver.removeStored(primaryKey: key)
    }

    /// Removes every stored response in the partition `name`, with its body; returns how many.
    /// The keys of a partition share a prefix: a disk store finds them in its index.
    @discardableResult
    public func remove(partition name: String) throws(StorageError) -> Int {
        try store.remove(primaryKeyPrefix: CachePartition.prefix(of: name))
    }

    /// Removes every stored response whose URL starts with `prefix`, in every partition;
    /// returns how many.
    @discardableResult
    public func remove(urlPrefix prefix: String) throws(StorageError) -> Int {
        try store.remove(urlPrefix: prefix)
    }

    /// Removes every stored response in the cache group `group` (the `Cache-Groups` field,
    /// [RFC 9875 §2](https://www.rfc-editor.org/rfc/rfc9875#section-2)) of `origin` (the
    /// scheme, host and port of a URL; every origin when `nil`): the surrogate-key purge of a
    /// CDN, on the standard's field. Groups are indexed: the other entries are not read.
    /// Returns how many were removed.
    @discardableResult
    public func remove(group: String, origin: URL? = nil) throws(StorageError) -> Int {
        guard let origin else { return try store.remove(tag: CacheGroups.tag(group)) }
        guard let originText = CacheGroups.origin(of: origin.absoluteString) else { return 0 }
        return try store.remove(tag: CacheGroups.tag(group, origin: originText))
    }

    /// Removes everything.
    public func removeAll() throws(StorageError) {
        try store.removeAll()
    }

    /// Pins (or unpins) the stored responses for `GET url`: saved for offline use. Eviction
    /// skips pinned entries, and when the origin cannot be reached they are served whatever
    /// their freshness and directives (`Cache-Status` `detail=saved-offline`). Returns how
    /// many changed.
    @discardableResult
    public func setPinned(_ pinned: Bool, url: URL) throws(StorageError) -> Int {
        guard let key = key(of: url, partition: nil) else { return 0 }
        return try store.setPinned(pinned, primaryKey: key)
    }

    /// Entry counts and body bytes: all, and per tier when the store is tiered.
    public var totals: (all: StoreTotals, memory: StoreTotals?, disk: StoreTotals?) {
        if let tiered = store as? TieredStore {
            return (tiered.totals(), tiered.memory.totals(), tiered.disk.totals())
        }
        return (store.totals(), store is MemoryStore ? store.totals() : nil, store is DiskStore ? store.totals() : nil)
    }

    private func info(_ entry: StoredEntry, at time: Timestamp) -> CacheEntryInfo {
        let facts = StoredResponseFacts(serialized: entry.head.facts)
        var reasons: [Reason] = []
        var age = 0.0
        if let facts {
            age = facts.currentAge(at: time)
            let lifetime = facts.freshnessLifetime
            reasons.append(lifetime > age ? .fresh(age: age, lifetime: lifetime) : .stale(by: age - lifetime))
            if facts.flags.has(.noCache) { reasons.append(.responseNoCache) }
            if facts.flags.has(.mustRevalidate) { reasons.append(.mustRevalidate) }
            if facts.flags.has(.invalidated) { reasons.append(.invalidated) }
            if !facts.hasValidator { reasons.append(.noValidator) }
        } else {
            reasons.append(.configured("its facts cannot be read; it will be dropped when next looked up"))
        }
        let partitioned = CachePartition.split(entry.head.primaryKey)
        return CacheEntryInfo(
            id: entry.id, url: entry.head.url, primaryKey: partitioned.key, partition: partitioned.partition,
            status: entry.head.status,
            fields: entry.head.fields, bodySize: entry.bodySize, storedAt: entry.storedAt,
            lastAccess: entry.lastAccess, hits: entry.hits, isPinned: entry.isPinned,
            isMemoryOnly: entry.head.storagePolicy == .memoryOnly, isComplete: entry.head.isComplete,
            userInfo: entry.head.userInfo.map { Data($0) },
            facts: facts, age: age, reasons: reasons)
    }
}
