import CacheSemantics
import CacheStorage
import Foundation

/// A page saved for offline reading: its document and everything it needs, kept together in
/// the cache's store, refreshed together, served together when the origin cannot be reached.
///
/// Every resource of a pack is pinned: eviction never removes it, and when the origin cannot
/// be reached it is served whatever its freshness and directives (`Cache-Status`
/// `detail=saved-offline`). With the origin reachable, HTTP's rules apply as for any entry.
/// The pack itself is a record in the same store (memory, disk, Redis), so every cache on
/// that store sees it.
public struct OfflinePack: Sendable, Hashable, Codable {
    /// One stored resource.
    public struct Resource: Sendable, Hashable, Codable {
        /// The URL requested (a redirect's source is a resource of its own).
        public var url: String
        /// The response's status.
        public var status: Int
        /// Body bytes.
        public var size: Int64
        /// `Content-Type`, when given.
        public var contentType: String?
        /// The validators a refresh sends (RFC 9110 §8.8).
        public var etag: String?
        /// `Last-Modified`, when given.
        public var lastModified: String?
        /// When it was saved (seconds since 1970).
        public var savedAt: Double
        /// A manifest's revision for this URL, when the pack is a manifest's.
        public var revision: String?

        /// The resource `entry` (stored for `url`) is.
        package init(_ entry: CacheEntryInfo, url: URL, revision: String? = nil) {
            self.init(
                url: url.absoluteString, status: entry.status, size: entry.bodySize,
                contentType: entry.fields[.contentType], etag: entry.fields[.eTag],
                lastModified: entry.fields[.lastModified], savedAt: entry.storedAt, revision: revision)
        }

        /// The resource a response fetched now is: `head`, for `url` (default: the head's),
        /// with `size` body bytes.
        package init(
            _ head: CachedResponseHead, url: URL? = nil, size: Int64, savedAt: Double, revision: String? = nil
        ) {
            self.init(
                url: (url ?? head.url).absoluteString, status: head.statusCode, size: size,
                contentType: head.fields[.contentType], etag: head.fields[.eTag],
                lastModified: head.fields[.lastModified], savedAt: savedAt, revision: revision)
        }

        /// Creates a resource description.
        public init(
            url: String, status: Int, size: Int64, contentType: String? = nil, etag: String? = nil,
            lastModified: String? = nil, savedAt: Double, revision: String? = nil
        ) {
            self.url = url
            self.status = status
            self.size = size
            self.contentType = contentType
            self.etag = etag
            self.lastModified = lastModified
            self.savedAt = savedAt
            self.revision = revision
        }
    }

    /// A resource the page needs that is not in the pack, and why.
    public struct Problem: Sendable, Hashable, Codable {
        /// The resource's URL.
        public var url: String
        /// Why it is missing: an HTTP status, a network error, a limit.
        public var reason: String
        /// `true` when fetching it failed; `false` when it was skipped by choice (another
        /// origin without `includesThirdParty`, over `maximumResourceSize`).
        public var isFailure: Bool

        /// Creates a problem report.
        public init(url: String, reason: String, isFailure: Bool) {
            self.url = url
            self.reason = reason
            self.isFailure = isFailure
        }
    }

    /// The pack's name.
    public var name: String
    /// The page saved.
    public var page: String
    /// When it was saved or last refreshed (seconds since 1970).
    public var savedAt: Double
    /// Every stored resource, the page first.
    public var resources: [Resource]
    /// Resources the page needs that are not stored.
    public var problems: [Problem]
    /// How it was saved, which a refresh repeats (`nil` for a pack made otherwise).
    public var options: SaveOptions?

    /// Body bytes of all resources.
    public var bytes: Int64 { resources.reduce(0) { $0 + $1.size } }
    /// Whether everything the page needs is stored: nothing failed or was skipped.
    public var isComplete: Bool { problems.isEmpty }

    /// Creates a pack description.
    public init(name: String, page: String, savedAt: Double, resources: [Resource], problems: [Problem] = []) {
        self.name = name
        self.page = page
        self.savedAt = savedAt
        self.resources = resources
        self.problems = problems
    }
}

/// How a page is saved (`HTTPCache.savePage(_:options:)` in the OfflinePages library).
public struct SaveOptions: Sendable, Hashable, Codable {
    /// The pack's name. Default: the page's URL.
    public var name: String?
    /// How many levels of linked pages (`<a href>`, `<area href>`) to save too, each with
    /// everything it needs: 1 saves the pages the page links to, like
    /// `wget --page-requisites --level=1`. Default 0.
    public var depth = 0
    /// Saves subresources and linked pages of other origins too. Default `false`: like
    /// `wget` without `--span-hosts`, only the page's own origin (scheme, host, port) is
    /// fetched; the others are reported as skipped.
    public var includesThirdParty = false
    /// The largest body saved, in bytes; a larger resource is skipped (and not downloaded
    /// past the limit). Default: no limit beyond the store's own.
    public var maximumResourceSize: Int64?
    /// Resources fetched at once. Default 6, a browser's connections per host.
    public var jobs = 6

    /// The defaults.
    public init() {}
}

/// Where packs live in a store: one pinned record per pack, under a key no request has.
package enum PackRecord {
    package static let keyPrefix = "PACK name:"

    package static func key(_ name: String) -> String { keyPrefix + name }

    package static func read(_ name: String, in store: any CacheStore) throws(StorageError) -> OfflinePack? {
        guard let entry = try store.variants(of: key(name)).first else { return nil }
        return decode(try store.body(of: entry.id))
    }

    package static func all(in store: any CacheStore) throws(StorageError) -> [OfflinePack] {
        try store.entries().filter { $0.head.primaryKey.hasPrefix(keyPrefix) }
            .compactMap { entry in (try? store.body(of: entry.id)).flatMap(decode) }
            .sorted { $0.name < $1.name }
    }

    /// Replaces the record of `pack.name` in one commit: a reader sees the old pack or the new.
    package static func write(_ pack: OfflinePack, to store: any CacheStore) throws(StorageError) {
        try writeJSON(pack, key: key(pack.name), url: "httpcache:pack/\(pack.name)", to: store)
    }

    /// Stores `value` as JSON, pinned, under `key` (a key no request has) in one commit.
    package static func writeJSON(
        _ value: some Encodable, key: String, url: String, to store: any CacheStore
    ) throws(StorageError) {
        let json = try encoded(value, url: url)
        try writeRecord(key: key, url: url, to: store) { writer throws(StorageError) in try writer.append(json) }
    }

    /// Replaces the record of `pack.name` in one commit, with the resources `more` hands over
    /// (each as its JSON) before those of `pack`: a pack of any size is written as its resources
    /// come, never whole in memory.
    package static func write(
        _ pack: OfflinePack, to store: any CacheStore,
        prepending more: (_ append: (_ resource: [UInt8]) throws(StorageError) -> Void) throws(StorageError) -> Void
    ) throws(StorageError) {
        let url = "httpcache:pack/\(pack.name)"
        let json = try encoded(pack, url: url)
        // Keys are sorted and every `"` inside a JSON string is escaped: this is the key.
        guard let list = json.firstRange(of: Array(#""resources":["#.utf8)) else {
            throw StorageError(.writeFailed, "the record \(url) could not be encoded")
        }
        try writeRecord(key: key(pack.name), url: url, to: store) { writer throws(StorageError) in
            try writer.append(Array(json[..<list.upperBound]))
            var first = true
            try more { resource throws(StorageError) in
                try writer.append((first ? [] : [UInt8(ascii: ",")]) + resource)
                first = false
            }
            if !first && !pack.resources.isEmpty { try writer.append([UInt8(ascii: ",")]) }
            try writer.append(Array(json[list.upperBound...]))
        }
    }

    /// `value` as JSON, keys sorted.
    package static func encoded(_ value: some Encodable, url: String) throws(StorageError) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        guard let json = try? encoder.encode(value) else {
            throw StorageError(.writeFailed, "the record \(url) could not be encoded")
        }
        return Array(json)
    }

    private static func writeRecord(
        key: String, url: String, to store: any CacheStore,
        _ body: (any EntryWriter) throws(StorageError) -> Void
    ) throws(StorageError) {
        let writer = try store.makeWriter(
            for: EntryHead(
                primaryKey: key, url: url, status: 200, fields: ["Content-Type": "application/json"], facts: []))
        try body(writer)
        try writer.commit()
        try store.setPinned(true, primaryKey: key)
    }

    package static func remove(_ name: String, from store: any CacheStore) throws(StorageError) {
        _ = try store.remove(primaryKey: key(name))
    }

    private static func decode(_ bytes: [UInt8]) -> OfflinePack? {
        try? JSONDecoder().decode(OfflinePack.self, from: Data(bytes))
    }
}

extension HTTPCache {
    /// Every offline pack in the store, by name.
    public func packs() throws(StorageError) -> [OfflinePack] {
        try PackRecord.all(in: store)
    }

    /// The pack named `name`, or `nil`.
    public func pack(named name: String) throws(StorageError) -> OfflinePack? {
        try PackRecord.read(name, in: store)
    }

    /// Removes the pack named `name`: its record, and every resource no other pack holds
    /// (unpinned and removed). Returns the URLs removed, or `nil` when there is no such pack.
    @discardableResult
    public func removePack(named name: String) throws(StorageError) -> [String]? {
        guard let pack = try PackRecord.read(name, in: store) else { return nil }
        try PackRecord.remove(name, from: store)
        return try removeUnused(pack.resources.map(\.url))
    }

    /// Unpins and removes those of `urls` that no pack lists; returns them.
    package func removeUnused(_ urls: [String]) throws(StorageError) -> [String] {
        let kept = Set(try packs().flatMap { $0.resources.map(\.url) })
        var removed: [String] = []
        for url in urls where !kept.contains(url) {
            guard let address = URL(string: url), let key = storedKey(of: address) else { continue }
            _ = try store.remove(primaryKey: key)  // its pin goes with it
            removed.append(url)
        }
        return removed
    }

    /// Pins the stored responses of `url`; `false` when nothing is stored for it.
    package func pin(_ url: URL) -> Bool {
        guard let key = storedKey(of: url) else { return false }
        return ((try? store.setPinned(true, primaryKey: key)) ?? 0) > 0
            || !((try? store.variants(of: key)) ?? []).isEmpty
    }
}
