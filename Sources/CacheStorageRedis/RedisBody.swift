import CacheStorage
import CacheSystem

/// A body in Redis, read chunk by chunk as it is asked for; each chunk is checked for its
/// length and XXH64 before any byte of it is handed out. A chunk that is gone (evicted,
/// expired) throws `StorageError.notFound`, one that does not match its checksum
/// `StorageError.corrupted` (the entry is then removed): never a short or wrong body.
final class RedisBody: StoredBody {
    private let store: RedisStore
    private let id: EntryID
    private let description: BodyDescription
    /// The chunks read when it was opened, and the last one read since.
    private let cached = Locked<[Int: [UInt8]]>([:])

    init(store: RedisStore, id: EntryID, description: BodyDescription) {
        self.store = store
        self.id = id
        self.description = description
    }

    var size: Int64 { description.size }

    private func expectedLength(_ index: Int) -> Int {
        let start = Int64(index) * Int64(RedisStore.chunkSize)
        return Int(min(Int64(RedisStore.chunkSize), description.size - start))
    }

    /// Checks `bytes` as chunk `index` and keeps it.
    func accept(_ bytes: [UInt8], chunk index: Int) throws(StorageError) {
        guard index < description.checksums.count, bytes.count == expectedLength(index) else {
            throw StorageError(.notFound, "a chunk of \(id)'s body in Redis has the wrong length (evicted or replaced)")
        }
        guard XXH64.hash(bytes) == description.checksums[index] else {
            try? store.remove(id)
            throw StorageError(
                .corrupted, "a chunk of \(id)'s body in Redis does not match its checksum; it was removed")
        }
        cached.withLock { cached in
            if index >= RedisStore.eagerChunks { cached = cached.filter { $0.key < RedisStore.eagerChunks } }
            cached[index] = bytes
        }
    }

    func read(_ range: ClosedRange<Int64>) throws(StorageError) -> [UInt8] {
        let lower = max(0, range.lowerBound)
        let upper = min(range.upperBound, size - 1)
        guard lower <= upper else { return [] }
        let chunk = Int64(RedisStore.chunkSize)
        let first = Int(lower / chunk)
        let last = Int(upper / chunk)
        var pieces = cached.withLock { $0 }.filter { (first...last).contains($0.key) }
        let missing = (first...last).filter { pieces[$0] == nil }
        if !missing.isEmpty {
            let values = try store.chunks(id, missing)
            for (index, value) in zip(missing, values) {
                guard let value else {
                    throw StorageError(.notFound, "a chunk of \(id)'s body is gone from Redis (evicted or expired)")
                }
                try accept(value, chunk: index)
                pieces[index] = value
            }
        }
        var result: [UInt8] = []
        result.reserveCapacity(Int(upper - lower + 1))
        for index in first...last {
            let start = Int64(index) * chunk
            let bytes = pieces[index]!
            let from = Int(max(lower, start) - start)
            let to = Int(min(upper, start + Int64(bytes.count) - 1) - start)
            if from == 0 && to == bytes.count - 1 && first == last { return bytes }
            result += bytes[from...to]
        }
        return result
    }
}

/// Writes one entry to Redis. A body of at most ``RedisStore/inlineLimit`` bytes is kept until
/// the commit writes it into the entry's hash with its record; of a larger one, full chunks go
/// out as they fill (unreachable until the commit, and expiring by themselves if it never
/// comes), and the commit writes the last one and the record in one transaction.
final class RedisWriter: EntryWriter {
    private let store: RedisStore
    private let head: EntryHead
    private let id: EntryID
    private let storedAt: Double
    private var pending: [UInt8] = []
    private var written = 0
    private var checksums: [UInt64] = []
    private var closed = false

    init(store: RedisStore, head: EntryHead, id: EntryID, storedAt: Double) {
        self.store = store
        self.head = head
        self.id = id
        self.storedAt = storedAt
    }

    func append(_ chunk: [UInt8]) throws(StorageError) {
        guard !closed else { throw StorageError(.writerClosed, "the Redis writer was already committed or aborted") }
        let limit = store.configuration.maximumEntrySize
        guard Int64(written + pending.count + chunk.count) <= limit else {
            abort()
            throw StorageError(
                .tooLarge,
                "not stored in Redis: the body has more than the maximum entry size \(limit) bytes; "
                    + "raise RedisConfiguration.maximumEntrySize")
        }
        pending += chunk
        while pending.count >= RedisStore.chunkSize {
            let full = Array(pending[0..<RedisStore.chunkSize])
            pending.removeFirst(RedisStore.chunkSize)
            do {
                try store.writeEarly(id, index: checksums.count, full)
            } catch {
                abort()
                throw error
            }
            checksums.append(XXH64.hash(full))
            written += full.count
        }
    }

    func commit() throws(StorageError) -> StoredEntry { try finish(head) }

    /// `true`: Redis takes or refuses the entry at the commit (a user denied writes, `OOM`, a
    /// failover, a timeout).
    var commitMayBeRefused: Bool { true }

    func commitIncomplete(facts: [UInt8]) throws(StorageError) -> StoredEntry {
        var head = head
        head.isComplete = false
        head.facts = facts
        return try finish(head)
    }

    private func finish(_ head: EntryHead) throws(StorageError) -> StoredEntry {
        guard !closed else { throw StorageError(.writerClosed, "the Redis writer was already committed or aborted") }
        closed = true
        let size = Int64(written + pending.count)
        let last = pending
        pending = []
        let entry = StoredEntry(id: id, head: head, bodySize: size, storedAt: storedAt, lastAccess: storedAt)
        if size <= Int64(RedisStore.inlineLimit) { return try store.commit(entry, .inline(last)) }
        var checksums = self.checksums
        if !last.isEmpty { checksums.append(XXH64.hash(last)) }
        return try store.commit(
            entry, .chunked(checksums: checksums, last: last.isEmpty ? nil : (checksums.count - 1, last)))
    }

    func abort() {
        closed = true
        pending = []
    }
}

/// The records a lookup just read, with their inline bodies, for the `openBody` that follows
/// (a hit then costs one round trip). A record never changes its body under its identity, so
/// one kept here is always right about the body; the few most recent are kept.
final class RecentRecords: Sendable {
    private struct State {
        var records: [EntryID: (record: EntryRecord, inline: [UInt8]?)] = [:]
        var order: [EntryID] = []
    }

    private let state = Locked(State())
    private let capacity = 64

    func keep(_ record: EntryRecord, inline: [UInt8]?) {
        let id = record.entry.id
        state.withLock { state in
            if state.records.updateValue((record, inline), forKey: id) == nil { state.order.append(id) }
            if state.order.count > capacity { state.records.removeValue(forKey: state.order.removeFirst()) }
        }
    }

    /// Forgets entries this store removed: their bodies are not opened again.
    func forget(_ ids: some Sequence<EntryID>) {
        state.withLock { state in
            for id in ids { state.records.removeValue(forKey: id) }
            state.order.removeAll { state.records[$0] == nil }
        }
    }

    func forgetAll() { state.withLock { $0 = State() } }

    func record(of id: EntryID) -> (record: EntryRecord, inline: [UInt8]?)? {
        state.withLock { $0.records[id] }
    }
}
