import CacheSemantics
import CacheStorage

/// An entry as kept in its primary key's hash: the entry, how many chunks its body has, and
/// when it stops being of use (`nil`: never, it is pinned). A body of at most
/// ``RedisStore/inlineLimit`` bytes is not in chunks but in the same hash, beside the entry
/// (`inlineChecksum` is then its XXH64): read with the variants, in the same round trip, and
/// evicted with them, never apart.
struct EntryRecord {
    var entry: StoredEntry
    var chunkCount: Int
    var expiresAt: Double?
    var inlineChecksum: UInt64?

    /// Version 2 added the tags; version 1 records (without) are still read.
    private static let formatVersion: UInt8 = 2

    func serialized() -> [UInt8] {
        var writer = ByteWriter()
        writer.byte(Self.formatVersion)
        writer.string(entry.id.rawValue)
        writer.string(entry.head.primaryKey)
        writer.string(entry.head.variantKey)
        writer.string(entry.head.url)
        writer.varint(UInt64(max(0, entry.head.status)))
        writer.blob(entry.head.fields.serialized())
        writer.blob(entry.head.facts)
        writer.byte(entry.head.storagePolicy.rawValue)
        writer.byte(entry.head.userInfo == nil ? 0 : 1)
        if let userInfo = entry.head.userInfo { writer.blob(userInfo) }
        writer.byte(entry.head.isComplete ? 1 : 0)
        writer.varint(UInt64(max(0, entry.bodySize)))
        writer.double(entry.storedAt)
        writer.double(entry.lastAccess)
        writer.varint(UInt64(max(0, entry.hits)))
        writer.byte(entry.isPinned ? 1 : 0)
        writer.varint(UInt64(chunkCount))
        writer.byte(expiresAt == nil ? 0 : 1)
        if let expiresAt { writer.double(expiresAt) }
        writer.byte(inlineChecksum == nil ? 0 : 1)
        if let inlineChecksum { writer.fixed64(inlineChecksum) }
        writer.varint(UInt64(entry.head.tags.count))
        for tag in entry.head.tags { writer.string(tag) }
        return writer.bytes
    }

    init(entry: StoredEntry, chunkCount: Int, expiresAt: Double?, inlineChecksum: UInt64?) {
        self.entry = entry
        self.chunkCount = chunkCount
        self.expiresAt = expiresAt
        self.inlineChecksum = inlineChecksum
    }

    /// `nil` for bytes of another version or damaged ones (read as a miss).
    init?(serialized bytes: [UInt8]) {
        var reader = ByteReader(bytes)
        guard let version = reader.byte(), version == 1 || version == Self.formatVersion, let idText = reader.string(),
            let id = EntryID(rawValue: idText),
            let primaryKey = reader.string(), let variantKey = reader.string(), let url = reader.string(),
            let status = reader.varint(), status < 1000, let fieldBytes = reader.blob(),
            let fields = HeaderFields(serialized: fieldBytes), let facts = reader.blob(),
            let policyByte = reader.byte(), let policy = StoragePolicy(rawValue: policyByte),
            let hasUserInfo = reader.byte(), hasUserInfo <= 1
        else { return nil }
        var userInfo: [UInt8]?
        if hasUserInfo == 1 {
            guard let info = reader.blob() else { return nil }
            userInfo = info
        }
        guard let complete = reader.byte(), complete <= 1, let bodySize = reader.varint(),
            bodySize <= UInt64(Int64.max), let storedAt = reader.double(), let lastAccess = reader.double(),
            let hits = reader.varint(), hits <= UInt64(Int.max), let pinned = reader.byte(), pinned <= 1,
            let chunkCount = reader.varint(), chunkCount <= 1 << 24, let hasExpiry = reader.byte(), hasExpiry <= 1
        else { return nil }
        var expiresAt: Double?
        if hasExpiry == 1 {
            guard let time = reader.double() else { return nil }
            expiresAt = time
        }
        guard let hasInline = reader.byte(), hasInline <= 1 else { return nil }
        var inlineChecksum: UInt64?
        if hasInline == 1 {
            guard let checksum = reader.fixed64() else { return nil }
            inlineChecksum = checksum
        }
        var tags: [String] = []
        if version >= 2 {
            guard let count = reader.varint(), count <= 1 << 16 else { return nil }
            for _ in 0..<count {
                guard let tag = reader.string() else { return nil }
                tags.append(tag)
            }
        }
        guard reader.atEnd else { return nil }
        let head = EntryHead(
            primaryKey: primaryKey, variantKey: variantKey, url: url, status: Int(status), fields: fields, facts: facts,
            storagePolicy: policy, userInfo: userInfo, isComplete: complete == 1, tags: tags)
        self.init(
            entry: StoredEntry(
                id: id, head: head, bodySize: Int64(bodySize), storedAt: storedAt, lastAccess: lastAccess,
                hits: Int(hits), isPinned: pinned == 1),
            chunkCount: Int(chunkCount), expiresAt: expiresAt, inlineChecksum: inlineChecksum)
    }
}

/// What a body is: whose it is (so the entry is found from its identity), its size, and the
/// XXH64 of each chunk.
struct BodyDescription {
    var primaryKey: String
    var variantKey: String
    var size: Int64
    var checksums: [UInt64]
    /// The body is in the primary key's hash (``EntryRecord/inlineChecksum``), not in chunks.
    var isInline: Bool

    private static let formatVersion: UInt8 = 1

    init(primaryKey: String, variantKey: String, size: Int64, checksums: [UInt64], isInline: Bool) {
        self.primaryKey = primaryKey
        self.variantKey = variantKey
        self.size = size
        self.checksums = checksums
        self.isInline = isInline
    }

    func serialized() -> [UInt8] {
        var writer = ByteWriter()
        writer.byte(Self.formatVersion)
        writer.string(primaryKey)
        writer.string(variantKey)
        writer.varint(UInt64(size))
        writer.varint(UInt64(checksums.count))
        for checksum in checksums { writer.fixed64(checksum) }
        writer.byte(isInline ? 1 : 0)
        return writer.bytes
    }

    init?(serialized bytes: [UInt8]) {
        var reader = ByteReader(bytes)
        guard reader.byte() == Self.formatVersion, let primaryKey = reader.string(), let variantKey = reader.string(),
            let size = reader.varint(), size <= UInt64(Int64.max), let count = reader.varint(),
            count == (size + UInt64(RedisStore.chunkSize) - 1) / UInt64(RedisStore.chunkSize)
        else { return nil }
        var checksums: [UInt64] = []
        for _ in 0..<count {
            guard let bits = reader.fixed64() else { return nil }
            checksums.append(bits)
        }
        guard let inline = reader.byte(), inline <= 1, reader.atEnd else { return nil }
        self.init(
            primaryKey: primaryKey, variantKey: variantKey, size: Int64(size), checksums: checksums,
            isInline: inline == 1)
    }
}
