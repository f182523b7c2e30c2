import CacheSemantics
import CacheStorage

/// An entry as kept in its primary key's hash (``RedisStore``): the entry, where its body is,
/// and when it stops being of use (`nil`: never, it is pinned).
struct EntryRecord {
    var entry: StoredEntry
    var expiresAt: Double?
    var body: BodyLayout

    /// Where a body is and what it must hash to.
    enum BodyLayout: Equatable {
        /// In chunks of ``RedisStore/chunkSize`` under keys of their own, with the XXH64 of each.
        case chunked(checksums: [UInt64])
        /// In the hash: its first bytes in pieces of these lengths, each in a field of its own
        /// (``RedisStore/bodyField(_:_:)``), the rest (`tail`) in the record's own value after
        /// the record; `checksum` is the XXH64 of the whole body. Where the cuts fall is
        /// ``InlineLayout/pieces(bodySize:recordSize:)``'s choice.
        case inline(checksum: UInt64, pieces: [Int], tail: [UInt8])
    }

    /// Version 3: the layout with the body in the hash and no description key. Records of
    /// earlier versions were written under other keys, which are never read.
    private static let formatVersion: UInt8 = 3

    /// The record with everything but the tail of an inline body: what the layout is chosen by.
    private func serializedHead() -> ByteWriter {
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
        writer.byte(expiresAt == nil ? 0 : 1)
        if let expiresAt { writer.double(expiresAt) }
        writer.varint(UInt64(entry.head.tags.count))
        for tag in entry.head.tags { writer.string(tag) }
        switch body {
        case .chunked(let checksums):
            writer.byte(0)
            writer.varint(UInt64(checksums.count))
            for checksum in checksums { writer.fixed64(checksum) }
        case .inline(let checksum, let pieces, _):
            writer.byte(1)
            writer.fixed64(checksum)
            writer.varint(UInt64(pieces.count))
            for piece in pieces { writer.varint(UInt64(piece)) }
        }
        return writer
    }

    /// The bytes of the record's field: the record, then an inline body's tail.
    func serialized() -> [UInt8] {
        var writer = serializedHead()
        if case .inline(_, _, let tail) = body { writer.blob(tail) }
        return writer.bytes
    }

    /// How many bytes the record takes without an inline body's tail.
    var recordSize: Int { serializedHead().bytes.count }

    init(entry: StoredEntry, expiresAt: Double?, body: BodyLayout) {
        self.entry = entry
        self.expiresAt = expiresAt
        self.body = body
    }

    /// `nil` for bytes of another version or damaged ones (read as a miss). A body the record
    /// describes is checked against it: chunk counts and inline lengths must add up to the
    /// entry's size, and an inline body is at most ``RedisStore/inlineLimit`` bytes.
    init?(serialized bytes: [UInt8]) {
        var reader = ByteReader(bytes)
        guard reader.byte() == Self.formatVersion, let idText = reader.string(), let id = EntryID(rawValue: idText),
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
            let hasExpiry = reader.byte(), hasExpiry <= 1
        else { return nil }
        var expiresAt: Double?
        if hasExpiry == 1 {
            guard let time = reader.double() else { return nil }
            expiresAt = time
        }
        guard let tagCount = reader.varint(), tagCount <= 1 << 16 else { return nil }
        var tags: [String] = []
        for _ in 0..<tagCount {
            guard let tag = reader.string() else { return nil }
            tags.append(tag)
        }
        let body: BodyLayout
        switch reader.byte() {
        case 0:
            let chunk = UInt64(RedisStore.chunkSize)
            guard let count = reader.varint(), count == (bodySize + chunk - 1) / chunk else { return nil }
            var checksums: [UInt64] = []
            for _ in 0..<count {
                guard let checksum = reader.fixed64() else { return nil }
                checksums.append(checksum)
            }
            body = .chunked(checksums: checksums)
        case 1:
            guard bodySize <= UInt64(RedisStore.inlineLimit), let checksum = reader.fixed64(),
                let count = reader.varint(), count <= bodySize
            else { return nil }
            var pieces: [Int] = []
            var total: UInt64 = 0
            for _ in 0..<count {
                guard let piece = reader.varint(), piece > 0, piece <= bodySize - total else { return nil }
                pieces.append(Int(piece))
                total += piece
            }
            guard let tail = reader.blob(), UInt64(tail.count) == bodySize - total else { return nil }
            body = .inline(checksum: checksum, pieces: pieces, tail: tail)
        default:
            return nil
        }
        guard reader.atEnd else { return nil }
        let head = EntryHead(
            primaryKey: primaryKey, variantKey: variantKey, url: url, status: Int(status), fields: fields, facts: facts,
            storagePolicy: policy, userInfo: userInfo, isComplete: complete == 1, tags: tags)
        self.init(
            entry: StoredEntry(
                id: id, head: head, bodySize: Int64(bodySize), storedAt: storedAt, lastAccess: lastAccess,
                hits: Int(hits), isPinned: pinned == 1),
            expiresAt: expiresAt, body: body)
    }

    /// The chunks of a chunked body (none for an inline one).
    var chunkCount: Int {
        if case .chunked(let checksums) = body { return checksums.count }
        return 0
    }

    /// What a reader checks the body against.
    var bodyDescription: BodyDescription {
        switch body {
        case .chunked(let checksums): BodyDescription(size: entry.bodySize, checksums: checksums)
        case .inline(let checksum, _, _):
            BodyDescription(size: entry.bodySize, checksums: entry.bodySize > 0 ? [checksum] : [])
        }
    }
}

/// What a body is: its size and the XXH64 of each chunk (one, for an inline body).
struct BodyDescription {
    var size: Int64
    var checksums: [UInt64]
}

/// Where an inline body is cut into fields of the entry's hash, so that Redis allocates and
/// keeps resident as little as it can for it.
///
/// Redis keeps a hash field's value as an SDS string (a header of 1 to 17 bytes, the bytes, a
/// NUL) in one jemalloc allocation, and jemalloc rounds an allocation up to its size class:
/// four classes per doubling (8 KiB, 10 KiB, 12 KiB, 14 KiB, 16 KiB, 20 KiB, …). A 16,384-byte
/// body with its 6 bytes of SDS is a 20 KiB allocation, a quarter more than the body, and what
/// `maxmemory` counts. Past 14 KiB, allocations are runs of pages, each padded with a page of
/// its own (jemalloc's cache-oblivious large allocations): resident memory grows by another
/// quarter that `maxmemory` does not count. So a body is cut into pieces of at most 14,330
/// bytes (a 14 KiB allocation, exactly), the last piece as long as fills a smaller class
/// exactly, and the few bytes left over ride with the record.
enum InlineLayout {
    /// The jemalloc size class an allocation of `size` bytes takes (64-bit, 16-byte quantum,
    /// 4 KiB pages: jemalloc 5's defaults on x86-64 and arm64 Linux).
    static func sizeClass(_ size: Int) -> Int {
        if size <= 8 { return 8 }
        if size <= 128 { return (size + 15) & ~15 }
        let spacing = 1 << (Int.bitWidth - (size - 1).leadingZeroBitCount - 3)
        return (size + spacing - 1) & ~(spacing - 1)
    }

    /// What Redis allocates for a string of `length` bytes (header, bytes, NUL).
    static func allocation(_ length: Int) -> Int {
        let header =
            switch length {
            case ..<32: 1
            case ..<256: 3
            case ..<65_536: 5
            case ..<(1 << 32): 9
            default: 17
            }
        return sizeClass(header + length + 1)
    }

    /// The longest piece: its string fills jemalloc's largest small class (14 KiB) exactly.
    static let pieceLimit = 14_330

    /// A field of its own: its name (a NUL, 32 hex digits, a colon, an index) and Redis'
    /// dictionary entry.
    private static let fieldCost = allocation(36) + sizeClass(24)

    /// The lengths of the pieces a body of `bodySize` bytes is cut into, in order, each in a
    /// field of its own; the rest follows a record of `recordSize` bytes. Full pieces of
    /// ``pieceLimit``; of what is left, a piece that fills a size class exactly when Redis
    /// allocates less that way than with all of it after the record.
    static func pieces(bodySize: Int, recordSize: Int) -> [Int] {
        let full = [Int](repeating: pieceLimit, count: bodySize / pieceLimit)
        let rest = bodySize % pieceLimit
        let last = filling(rest)
        guard last > 0 else { return full }
        let apart = allocation(last) + fieldCost + allocation(recordSize + rest - last)
        return apart < allocation(recordSize + rest) ? full + [last] : full
    }

    /// The largest length below `length` whose string fills its allocation exactly (0: none).
    static func filling(_ length: Int) -> Int {
        var size = allocation(length)
        // The size class below.
        size -= size <= 128 ? 16 : 1 << (Int.bitWidth - (size - 1).leadingZeroBitCount - 3)
        for header in [1, 3, 5, 9, 17] where size - header - 1 > 0 {
            let candidate = size - header - 1
            if candidate < length && allocation(candidate) == size { return candidate }
        }
        return 0
    }
}
