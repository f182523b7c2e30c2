import CacheSemantics
import CacheStorage
import CacheSystem
import Foundation

/// A store in Redis, standalone or a Redis Cluster: the shared tier several caches on several
/// machines read and write.
///
/// Layout, for a key prefix `P` and a primary key `K` whose 16-bit tag is `T` (every key of
/// one primary key carries the hash tag `{T}`, so a Cluster keeps them in one slot and one
/// transaction commits them):
/// - `P{T}v:K`, a hash: variant key → the entry (its head, facts, size and times);
/// - `P{T}m:ID`, the body's description (its primary and variant key, size, chunk checksums);
/// - `P{T}c:ID:N`, the body in chunks of at most 1 MiB.
///
/// An entry's identity starts with its tag, so a body is found from the identity alone.
/// A commit writes the description, the last chunks and the hash entry in one `MULTI`/`EXEC`:
/// a reader sees a head only with its whole body. Every key expires when the entry can no
/// longer be of use (freshness, `stale-while-revalidate`, `stale-if-error`, plus
/// ``RedisConfiguration/keepTime`` for revalidation; pinned entries do not expire), so Redis
/// frees memory by itself; and since Redis may also evict any key at any time (`maxmemory`),
/// a body is checked chunk by chunk (presence, length, XXH64) and one with a part missing or
/// wrong reads as a miss, never as a short or wrong body.
///
/// Every change is announced on the channel `Pinvalidate` (``SharedStore`` listens there).
/// What fails in Redis is thrown as a `StorageError` (a timeout as `.readFailed` or
/// `.writeFailed`): a cache treats it as a miss, never as an error for its client.
public final class RedisStore: CacheStore {
    let client: RedisClient
    private let prefix: [UInt8]
    private let clock: @Sendable () -> Double
    /// Identifies this process's messages on the invalidation channel.
    let senderID = EntryID.random().rawValue

    /// The largest value written: bodies are cut into chunks of this size.
    static let chunkSize = 1 << 20
    /// How long the chunks of a replaced or removed body stay readable, for responses being served.
    static let graceSeconds = 60

    /// A store on the Redis `configuration` names. Nothing is sent until it is used.
    public init(
        _ configuration: RedisConfiguration, clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }
    ) {
        client = RedisClient(configuration: configuration)
        prefix = Array(configuration.keyPrefix.utf8)
        self.clock = clock
    }

    /// Where it connects.
    public var configuration: RedisConfiguration { client.configuration }

    /// What the client counted: round trips, errors, timeouts, latency, invalidations.
    public var metrics: RedisMetrics { client.metrics }

    /// Whether Redis answered the last command.
    public var isReachable: Bool { client.isReachable }

    /// Tells the store that Redis did not answer at start (a caller that logged it already):
    /// only its return is then logged.
    public func assumeUnreachable() { client.assumeUnreachable() }

    /// Sends `PING` to every server; throws with what to do when one does not answer.
    /// Its failure is not logged: the caller reports it.
    public func checkConnection() throws(StorageError) {
        do {
            try client.quietly { () throws(RedisFailure) in
                for node in try client.masters() {
                    let reply = try client.execute([[bytes("PING")]], on: node)
                    if let message = reply.first?.errorMessage {
                        throw RedisFailure(.reply, "Redis at \(node) answered PING with \(message)")
                    }
                }
            }
        } catch {
            throw StorageError(.index, "\(error); start Redis or check --redis / --redis-cluster")
        }
    }

    /// Sends one command and returns its reply's bytes (`nil` for a null or non-string reply):
    /// for the benchmarks that compare this client with others.
    package func command(_ arguments: [[UInt8]]) throws(StorageError) -> [UInt8]? {
        try run([arguments], slotKey: arguments.count > 1 ? arguments[1] : nil, failing: .readFailed)[0].bytes
    }

    /// Redis cannot tell when another cache changed a key.
    public var changeCount: UInt64? { nil }

    // MARK: Keys

    /// The 4 hex digits every key of `primaryKey` is tagged with.
    static func tag(of primaryKey: String) -> String {
        let value = UInt16(truncatingIfNeeded: XXH64.hash(Array(primaryKey.utf8)))
        let text = String(value, radix: 16)
        return String(repeating: "0", count: 4 - text.count) + text
    }

    private func key(_ tag: some StringProtocol, _ kind: String, _ rest: String) -> [UInt8] {
        prefix + Array("{\(tag)}\(kind):".utf8) + Array(rest.utf8)
    }

    func variantsKey(_ primaryKey: String) -> [UInt8] { key(Self.tag(of: primaryKey), "v", primaryKey) }
    func lockKey(_ identity: String) -> [UInt8] { key(Self.tag(of: identity), "l", identity) }
    /// The set of the primary keys with an entry tagged `tag` (``EntryHead/tags``).
    private func tagKey(_ tag: String) -> [UInt8] { key(Self.tag(of: tag), "t", tag) }
    private func metaKey(_ id: EntryID) -> [UInt8] { key(id.rawValue.prefix(4), "m", id.rawValue) }
    private func chunkKey(_ id: EntryID, _ index: Int) -> [UInt8] {
        key(id.rawValue.prefix(4), "c", "\(id.rawValue):\(index)")
    }
    var channel: [UInt8] { prefix + Array("invalidate".utf8) }

    /// A new identity that starts with `primaryKey`'s tag.
    private static func newID(for primaryKey: String) -> EntryID {
        EntryID(rawValue: tag(of: primaryKey) + EntryID.random().rawValue.dropFirst(4))!
    }

    // MARK: Running commands

    /// Runs `commands` on the server of `slotKey`; a failure becomes a `StorageError` of `kind`.
    func run(_ commands: [[[UInt8]]], slotKey: [UInt8]?, failing kind: StorageError.Kind) throws(StorageError)
        -> [RESPValue]
    {
        do {
            return try client.execute(commands, slotKey: slotKey)
        } catch {
            throw StorageError(kind, "Redis: \(error)")
        }
    }

    /// Runs `commands` on `node` (keys a `SCAN` of that node found); as ``run(_:slotKey:failing:)``.
    private func run(_ commands: [[[UInt8]]], on node: RedisConfiguration.Node, failing kind: StorageError.Kind)
        throws(StorageError) -> [RESPValue]
    {
        do {
            return try client.execute(commands, on: node)
        } catch {
            throw StorageError(kind, "Redis: \(error)")
        }
    }

    /// The replies of a `MULTI` … `EXEC` that was the whole pipeline, or a thrown error.
    private func transaction(_ commands: [[[UInt8]]], slotKey: [UInt8], then extra: [[[UInt8]]] = [])
        throws(StorageError) -> [RESPValue]
    {
        let replies = try run(
            [[bytes("MULTI")]] + commands + [[bytes("EXEC")]] + extra, slotKey: slotKey, failing: .writeFailed)
        let exec = replies[commands.count + 1]
        guard let results = exec.array else {
            let message = replies.lazy.compactMap(\.errorMessage).first ?? "the transaction was not run"
            throw StorageError(.writeFailed, "Redis refused a write: \(message)")
        }
        if let message = results.lazy.compactMap(\.errorMessage).first {
            throw StorageError(.writeFailed, "Redis refused a write: \(message)")
        }
        return results
    }

    /// Tells the other caches that `primaryKey`'s variants changed (`*`: everything did).
    func publishCommand(_ primaryKey: String) -> [[UInt8]] {
        client.count { $0.invalidationsSent += 1 }
        return [bytes("PUBLISH"), channel, Array("\(senderID) \(primaryKey)".utf8)]
    }

    // MARK: Expiry

    /// When an entry stops being of use (seconds since 1970): what is left of its freshness
    /// lifetime, plus `stale-while-revalidate` or `stale-if-error`, plus the keep time; `nil`
    /// when it does not expire (pinned).
    func expiresAt(facts: [UInt8], pinned: Bool) -> Double? {
        guard !pinned else { return nil }
        let now = clock()
        var seconds = client.configuration.keepTime
        if let facts = StoredResponseFacts(serialized: facts) {
            let remaining = max(0, facts.freshnessLifetime - facts.currentAge(at: Timestamp(secondsSince1970: now)))
            seconds += remaining + Double(max(facts.staleWhileRevalidate ?? 0, facts.staleIfError ?? 0))
        }
        return now + min(max(1, seconds), 1e10)
    }

    /// Milliseconds from now until `expiresAt` (at least 1), a key's TTL; `nil` for none.
    private func milliseconds(until expiresAt: Double?) -> Int? {
        expiresAt.map { Int(max(1, ($0 - clock()) * 1000)) }
    }

    /// Sets `key`'s expiry as a new key's (`nil`: none).
    private func expiry(_ key: [UInt8], _ milliseconds: Int?) -> [[UInt8]] {
        milliseconds.map { [bytes("PEXPIRE"), key, bytes(String($0))] } ?? [bytes("PERSIST"), key]
    }

    /// Makes the variants hash live at least as long as `milliseconds` (`nil`: for ever).
    private func extendVariants(_ key: [UInt8], _ milliseconds: Int?) -> [[[UInt8]]] {
        guard let milliseconds else { return [[bytes("PERSIST"), key]] }
        return [
            [bytes("PEXPIRE"), key, bytes(String(milliseconds)), bytes("NX")],
            [bytes("PEXPIRE"), key, bytes(String(milliseconds)), bytes("GT")],
        ]
    }

    /// Lets a body's keys go after the grace time (removed or replaced; readers finish); an
    /// inline body goes at once (a reader has it whole already).
    private func retire(_ record: EntryRecord) -> [[[UInt8]]] {
        var commands: [[[UInt8]]] = [[bytes("DEL"), metaKey(record.entry.id)]]
        if record.inlineChecksum != nil {
            commands.append([bytes("HDEL"), variantsKey(record.entry.head.primaryKey), inlineField(record.entry.id)])
        }
        for index in 0..<record.chunkCount {
            commands.append([
                bytes("PEXPIRE"), chunkKey(record.entry.id, index), bytes(String(Self.graceSeconds * 1000)),
            ])
        }
        return commands
    }

    // MARK: CacheStore

    public func variants(of primaryKey: String) throws(StorageError) -> [StoredEntry] {
        try records(of: primaryKey).map(\.entry)
    }

    /// The entries in `primaryKey`'s hash that have not expired.
    func records(of primaryKey: String) throws(StorageError) -> [EntryRecord] {
        let key = variantsKey(primaryKey)
        let reply = try run([[bytes("HGETALL"), key]], slotKey: key, failing: .readFailed)[0]
        guard let fields = reply.array else {
            if let message = reply.errorMessage { throw StorageError(.readFailed, "Redis: \(message)") }
            return []
        }
        let now = clock()
        var found: [EntryRecord] = []
        var expired: [[UInt8]] = []
        var inline: [[UInt8]: [UInt8]] = [:]
        for index in stride(from: 1, to: fields.count, by: 2) {
            guard let name = fields[index - 1].bytes else { continue }
            if name.first == 0 {
                inline[name] = fields[index].bytes
                continue
            }
            guard let value = fields[index].bytes, let record = EntryRecord(serialized: value),
                record.entry.head.primaryKey == primaryKey
            else {
                expired.append(name)
                continue
            }
            if let expiresAt = record.expiresAt, expiresAt <= now {
                expired.append(name)
                if record.inlineChecksum != nil { expired.append(inlineField(record.entry.id)) }
            } else {
                found.append(record)
            }
        }
        // Bodies in the hash came with it: kept for the `openBody` that follows a lookup.
        for record in found where record.inlineChecksum != nil {
            if let body = inline[inlineField(record.entry.id)] { recentBodies.keep(body, for: record) }
        }
        if !expired.isEmpty { _ = try? run([[bytes("HDEL"), key] + expired], slotKey: key, failing: .writeFailed) }
        return found
    }

    /// The hash field of an inline body (a NUL byte first: no variant key starts with one).
    private func inlineField(_ id: EntryID) -> [UInt8] { [0] + Array("b:\(id.rawValue)".utf8) }

    /// Bodies larger than this are stored in chunks of their own; smaller ones in the hash.
    static let inlineLimit = 256 << 10

    /// Inline bodies just read with their variants.
    private let recentBodies = RecentBodies()

    /// Opens a body: its description and its chunks in one round trip, all of them verified
    /// before anything is served, so a body Redis evicted a part of reads as a miss (not as a
    /// response cut off half way). Of a body of more than 8 chunks (8 MiB), the first 8 are read
    /// and the others are checked to exist; those are read as they are served.
    public func openBody(of id: EntryID) throws(StorageError) -> any StoredBody {
        if let recent = recentBodies.body(of: id) { return try inlineBody(id, recent.description, recent.bytes) }
        let meta = metaKey(id)
        let replies = try run(
            [[bytes("MGET"), meta] + (0..<Self.eagerChunks).map { chunkKey(id, $0) }], slotKey: meta,
            failing: .readFailed)
        guard let values = replies[0].array, values.count == Self.eagerChunks + 1 else {
            throw StorageError(.readFailed, "Redis: \(replies[0].errorMessage ?? "an unexpected reply to MGET")")
        }
        guard let metaBytes = values[0].bytes, let description = BodyDescription(serialized: metaBytes) else {
            throw StorageError(.notFound, "no body for \(id) in Redis (removed, expired or evicted)")
        }
        if description.isInline {
            let key = variantsKey(description.primaryKey)
            let reply = try run([[bytes("HGET"), key, inlineField(id)]], slotKey: key, failing: .readFailed)[0]
            guard let bytes = reply.bytes else { throw evicted(id) }
            return try inlineBody(id, description, bytes)
        }
        let body = RedisBody(store: self, id: id, description: description)
        let count = description.checksums.count
        for index in 0..<min(count, Self.eagerChunks) {
            guard let chunk = values[index + 1].bytes else { throw evicted(id) }
            try body.accept(chunk, chunk: index)
        }
        if count > Self.eagerChunks {
            let rest = (Self.eagerChunks..<count).map { chunkKey(id, $0) }
            let reply = try run([[bytes("EXISTS")] + rest], slotKey: meta, failing: .readFailed)[0]
            guard reply.integer == Int64(rest.count) else { throw evicted(id) }
        }
        return body
    }

    private func inlineBody(_ id: EntryID, _ description: BodyDescription, _ bytes: [UInt8]) throws(StorageError)
        -> any StoredBody
    {
        let body = RedisBody(store: self, id: id, description: description)
        if description.size > 0 { try body.accept(bytes, chunk: 0) }
        return body
    }

    /// Chunks read with a body's description when it is opened (8 MiB).
    static let eagerChunks = 8

    private func evicted(_ id: EntryID) -> StorageError {
        StorageError(.notFound, "a part of \(id)'s body is gone from Redis (evicted or expired): a miss")
    }

    public func makeWriter(for head: EntryHead) throws(StorageError) -> any EntryWriter {
        RedisWriter(store: self, head: head, id: Self.newID(for: head.primaryKey), storedAt: clock())
    }

    /// Commits a written entry: the rest of its chunks, its description and its hash field in
    /// one transaction; the variant it replaces is retired.
    func commit(
        _ entry: StoredEntry, chunks: [(index: Int, bytes: [UInt8])], description: BodyDescription
    ) throws(StorageError) -> StoredEntry {
        let key = variantsKey(entry.head.primaryKey)
        let variant = Array(entry.head.variantKey.utf8)
        let previous = try run([[bytes("HGET"), key, variant]], slotKey: key, failing: .writeFailed)[0].bytes
            .flatMap(EntryRecord.init(serialized:))
        var entry = entry
        if previous?.entry.isPinned == true { entry.isPinned = true }
        let expiresAt = expiresAt(facts: entry.head.facts, pinned: entry.isPinned)
        let lifetime = milliseconds(until: expiresAt)
        let inline = description.isInline
        let record = EntryRecord(
            entry: entry, chunkCount: inline ? 0 : description.checksums.count, expiresAt: expiresAt,
            inlineChecksum: inline ? description.checksums.first ?? XXH64.hash([]) : nil)
        // The tags' sets first: a failure there stores nothing, so no entry is ever out of
        // its tags' reach. A member left behind by a failed commit is skipped on removal.
        for tag in Set(entry.head.tags) {
            let setKey = tagKey(tag)
            let replies = try run(
                [[bytes("SADD"), setKey, Array(entry.head.primaryKey.utf8)]] + extendVariants(setKey, lifetime),
                slotKey: setKey, failing: .writeFailed)
            if let message = replies.lazy.compactMap(\.errorMessage).first {
                throw StorageError(.writeFailed, "Redis refused a write: \(message)")
            }
        }
        var commands: [[[UInt8]]] = []
        if !inline {
            commands = chunks.map { [bytes("SET"), chunkKey(entry.id, $0.index), $0.bytes] }
            for index in 0..<description.checksums.count {
                commands.append(expiry(chunkKey(entry.id, index), lifetime))
            }
        }
        commands.append([bytes("SET"), metaKey(entry.id), description.serialized()])
        commands.append(expiry(metaKey(entry.id), lifetime))
        commands.append(
            [bytes("HSET"), key, variant, record.serialized()]
                + (inline ? [inlineField(entry.id), chunks.first?.bytes ?? []] : []))
        commands += extendVariants(key, lifetime)
        if let previous, previous.entry.id != entry.id { commands += retire(previous) }
        _ = try transaction(commands, slotKey: key, then: [publishCommand(entry.head.primaryKey)])
        return entry
    }

    /// Writes a chunk before the commit (it is not reachable until then); it expires by itself
    /// when the commit never comes.
    func writeEarly(_ id: EntryID, index: Int, _ chunk: [UInt8]) throws(StorageError) {
        let key = chunkKey(id, index)
        let reply = try run(
            [[bytes("SET"), key, chunk, bytes("PX"), bytes(String(Int(client.configuration.keepTime * 1000)))]],
            slotKey: key, failing: .writeFailed)[0]
        if let message = reply.errorMessage { throw StorageError(.writeFailed, "Redis refused a write: \(message)") }
    }

    /// Reads chunks of a body (``RedisBody``).
    func chunks(_ id: EntryID, _ indices: [Int]) throws(StorageError) -> [[UInt8]?] {
        let keys = indices.map { chunkKey(id, $0) }
        let reply = try run([[bytes("MGET")] + keys], slotKey: keys.first, failing: .readFailed)[0]
        guard let values = reply.array, values.count == indices.count else {
            throw StorageError(.readFailed, "Redis: \(reply.errorMessage ?? "an unexpected reply to MGET")")
        }
        return values.map(\.bytes)
    }

    /// The record of `id`, found through its body description.
    private func record(of id: EntryID) throws(StorageError) -> EntryRecord? {
        let meta = metaKey(id)
        guard let metaBytes = try run([[bytes("GET"), meta]], slotKey: meta, failing: .readFailed)[0].bytes,
            let description = BodyDescription(serialized: metaBytes)
        else { return nil }
        let key = variantsKey(description.primaryKey)
        let reply = try run(
            [[bytes("HGET"), key, Array(description.variantKey.utf8)]], slotKey: key, failing: .readFailed)[0]
        guard let value = reply.bytes, let record = EntryRecord(serialized: value), record.entry.id == id else {
            return nil
        }
        return record
    }

    public func update(_ id: EntryID, fields: HeaderFields, facts: [UInt8]) throws(StorageError) {
        guard var record = try record(of: id) else {
            throw StorageError(.notFound, "no entry \(id) in Redis (removed, expired or evicted)")
        }
        record.entry.head.fields = fields
        record.entry.head.facts = facts
        record.expiresAt = expiresAt(facts: facts, pinned: record.entry.isPinned)
        try rewrite([record])
    }

    /// Writes `records` (variants of one primary key) back with their new expiries; the hash
    /// then lives at least as long as the longest of them.
    private func rewrite(_ records: [EntryRecord]) throws(StorageError) {
        guard let primaryKey = records.first?.entry.head.primaryKey else { return }
        let key = variantsKey(primaryKey)
        var commands: [[[UInt8]]] = []
        for record in records {
            commands.append([bytes("HSET"), key, Array(record.entry.head.variantKey.utf8), record.serialized()])
            let lifetime = milliseconds(until: record.expiresAt)
            commands.append(expiry(metaKey(record.entry.id), lifetime))
            for index in 0..<record.chunkCount {
                commands.append(expiry(chunkKey(record.entry.id, index), lifetime))
            }
        }
        let longest = records.contains { $0.expiresAt == nil } ? nil : records.compactMap(\.expiresAt).max()
        commands += extendVariants(key, milliseconds(until: longest))
        _ = try transaction(commands, slotKey: key, then: [publishCommand(primaryKey)])
    }

    /// Redis keeps its own recency (its LRU or LFU eviction sees every read).
    public func recordAccess(_ id: EntryID, at time: Double) {}

    public func remove(_ id: EntryID) throws(StorageError) {
        guard let record = try record(of: id) else { return }
        _ = try remove([record], of: record.entry.head.primaryKey)
    }

    public func remove(primaryKey: String) throws(StorageError) -> Int {
        let records = try records(of: primaryKey)
        let key = variantsKey(primaryKey)
        _ = try transaction(
            [[bytes("DEL"), key]] + records.flatMap(retire), slotKey: key, then: [publishCommand(primaryKey)])
        return records.count
    }

    public func remove(urlPrefix prefix: String) throws(StorageError) -> Int {
        let primaryKeys = Set(try entries().filter { $0.head.url.hasPrefix(prefix) }.map(\.head.primaryKey))
        var removed = 0
        for primaryKey in primaryKeys {
            removed += try remove(
                try records(of: primaryKey).filter { $0.entry.head.url.hasPrefix(prefix) }, of: primaryKey)
        }
        return removed
    }

    /// Removes `records`, variants of `primaryKey`, in one transaction; returns how many.
    private func remove(_ records: [EntryRecord], of primaryKey: String) throws(StorageError) -> Int {
        guard !records.isEmpty else { return 0 }
        let key = variantsKey(primaryKey)
        _ = try transaction(
            [[bytes("HDEL"), key] + records.map { Array($0.entry.head.variantKey.utf8) }] + records.flatMap(retire),
            slotKey: key, then: [publishCommand(primaryKey)])
        return records.count
    }

    public func remove(tag: String) throws(StorageError) -> Int {
        let setKey = tagKey(tag)
        let members = try run([[bytes("SMEMBERS"), setKey]], slotKey: setKey, failing: .readFailed)[0].array ?? []
        var removed = 0
        for member in members.compactMap(\.bytes) {
            let primaryKey = String(decoding: member, as: UTF8.self)
            removed += try remove(
                try records(of: primaryKey).filter { $0.entry.head.tags.contains(tag) }, of: primaryKey)
            _ = try run([[bytes("SREM"), setKey, member]], slotKey: setKey, failing: .writeFailed)
        }
        return removed
    }

    public func removeAll() throws(StorageError) {
        try forEachKey(matching: Self.globEscaped(prefix) + Array("*".utf8)) { node, keys throws(StorageError) in
            _ = try run(keys.map { [bytes("UNLINK"), $0] }, on: node, failing: .writeFailed)
        }
        _ = try? run([publishCommand("*")], slotKey: nil, failing: .writeFailed)
    }

    public func entries() throws(StorageError) -> [StoredEntry] {
        var found: [StoredEntry] = []
        let now = clock()
        try forEachKey(matching: Self.globEscaped(prefix) + Array("{*}v:*".utf8)) { node, keys throws(StorageError) in
            // The field names first: the records are read, not the inline bodies beside them.
            let names = try run(keys.map { [bytes("HKEYS"), $0] }, on: node, failing: .readFailed)
            var reads: [[[UInt8]]] = []
            for (key, reply) in zip(keys, names) {
                let fields = (reply.array ?? []).compactMap(\.bytes).filter { $0.first != 0 }
                if !fields.isEmpty { reads.append([bytes("HMGET"), key] + fields) }
            }
            let records = reads.isEmpty ? [] : try run(reads, on: node, failing: .readFailed)
            for reply in records {
                for value in reply.array ?? [] {
                    guard let bytes = value.bytes, let record = EntryRecord(serialized: bytes),
                        record.expiresAt.map({ $0 > now }) ?? true
                    else { continue }
                    found.append(record.entry)
                }
            }
        }
        return found.sorted { $0.lastAccess > $1.lastAccess }
    }

    public func totals() -> StoreTotals {
        var totals = StoreTotals()
        for entry in (try? entries()) ?? [] { totals.add(entry) }
        return totals
    }

    public func setPinned(_ pinned: Bool, primaryKey: String) throws(StorageError) -> Int {
        var changed: [EntryRecord] = []
        for var record in try records(of: primaryKey) where record.entry.isPinned != pinned {
            record.entry.isPinned = pinned
            record.expiresAt = expiresAt(facts: record.entry.head.facts, pinned: pinned)
            changed.append(record)
        }
        guard !changed.isEmpty else { return 0 }
        try rewrite(changed)
        return changed.count
    }

    /// Calls `body` with batches of the keys matching `pattern` on every server (`SCAN`).
    private func forEachKey(
        matching pattern: [UInt8], _ body: (RedisConfiguration.Node, [[UInt8]]) throws(StorageError) -> Void
    ) throws(StorageError) {
        let nodes: [RedisConfiguration.Node]
        do {
            nodes = try client.masters()
        } catch {
            throw StorageError(.readFailed, "Redis: \(error)")
        }
        for node in nodes {
            var cursor: [UInt8] = bytes("0")
            repeat {
                let reply = try run(
                    [[bytes("SCAN"), cursor, bytes("MATCH"), pattern, bytes("COUNT"), bytes("1000")]], on: node,
                    failing: .readFailed)[0]
                guard let parts = reply.array, parts.count == 2, let next = parts[0].bytes else {
                    throw StorageError(.readFailed, "Redis: \(reply.errorMessage ?? "an unexpected reply to SCAN")")
                }
                let keys = (parts[1].array ?? []).compactMap(\.bytes)
                if !keys.isEmpty { try body(node, keys) }
                cursor = next
            } while cursor != bytes("0")
        }
    }

    /// `text` with the glob characters of `SCAN MATCH` escaped.
    private static func globEscaped(_ text: [UInt8]) -> [UInt8] {
        var escaped: [UInt8] = []
        for byte in text {
            if [UInt8(ascii: "*"), UInt8(ascii: "?"), UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: "\\")]
                .contains(byte)
            {
                escaped.append(UInt8(ascii: "\\"))
            }
            escaped.append(byte)
        }
        return escaped
    }
}
