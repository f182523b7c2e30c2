import CacheCrypto
import CacheSemantics
import CacheStorage
import CacheSystem
import Foundation

/// A store in Redis, standalone or a Redis Cluster: the shared tier several caches on several
/// machines read and write.
///
/// Layout, for a key prefix `P` and a primary key `K` whose XXH64 is `H` (16 hex digits) and
/// whose last 4 hex digits are its tag `T` (every key of one primary key carries the hash tag
/// `{T}`, so a Cluster keeps them in one slot and one transaction commits them):
/// - `P{T}e:H`, a hash: variant key → the entry's record (head, facts, size, times, expiry,
///   where the body is and its XXH64); a body of at most `inlineLimit` (256 KiB) bytes is in this hash
///   too, cut so that Redis allocates and keeps resident as little as it can
///   (`InlineLayout`): pieces of at most 14 KiB in fields named by the entry's identity and
///   the piece's index, the rest after the record in the record's own value. Such an entry is
///   one key with one TTL, evicted whole or not at all.
/// - `P{T}c:ID:N`, a larger body in chunks of at most 1 MiB, with the XXH64 of each in the record.
///
/// An entry's identity is `H` and 16 random hex digits, so its hash is found from the identity
/// alone. A commit writes the record with its body (or its last chunk) in one `MULTI`/`EXEC`:
/// a reader sees a record only with its whole body. Every key expires when the entry can no
/// longer be of use (freshness, `stale-while-revalidate`, `stale-if-error`, plus
/// ``RedisConfiguration/keepTime`` for revalidation; pinned entries do not expire), so Redis
/// frees memory by itself; and since Redis may also evict any key at any time (`maxmemory`),
/// a body is checked (presence, length, XXH64) and one with a part missing or wrong reads as
/// a miss, never as a short or wrong body. Records Redis holds are input like any other: one
/// that does not parse, whose body does not add up, or that sits under another key is a miss
/// and is removed. Keys of earlier layouts (`P{T}v:K`, `P{T}m:ID`) are never read: they expire.
///
/// Every change is announced on the channel `Pinvalidate` (``SharedStore`` listens there).
/// What fails in Redis is thrown as a `StorageError` (a timeout as `.readFailed` or
/// `.writeFailed`): a cache treats it as a miss, never as an error for its client.
public final class RedisStore: CacheStore {
    let client: RedisClient
    private let prefix: [UInt8]
    private let clock: @Sendable () -> Double
    /// Identifies this process's messages on the invalidation channel.
    let senderID = EntryID().rawValue
    /// Seals what is written, with ``RedisConfiguration/encryptionKey``.
    private let sealing: RedisSealing?

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
        sealing = configuration.encryptionKey.map(RedisSealing.init)
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

    /// The keys of `primaryKey`'s entries and what Redis says they take (`MEMORY USAGE`, every
    /// field counted): for the benchmarks that print what an entry costs.
    package func memoryUsage(of primaryKey: String) throws(StorageError) -> (keys: Int, bytes: Int) {
        let records = try records(of: primaryKey)
        let keys =
            [entryKey(primaryKey)]
            + records.flatMap { record in (0..<record.chunkCount).map { chunkKey(record.entry.id, $0) } }
        let replies = try run(
            keys.map { [bytes("MEMORY"), bytes("USAGE"), $0, bytes("SAMPLES"), bytes("0")] }, slotKey: keys[0],
            failing: .readFailed)
        return (keys.count, replies.reduce(0) { $0 + Int($1.integer ?? 0) })
    }

    /// Redis cannot tell when another cache changed a key.
    public var changeCount: UInt64? { nil }

    // MARK: Keys

    /// The 16 hex digits of `text`'s XXH64, or with an encryption key of its keyed hash.
    private func hashText(_ text: String) -> String {
        if let sealing { return sealing.hash("k", text) }
        let digits = String(XXH64.hash(Array(text.utf8)), radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// The 4 hex digits every key of `primaryKey` is tagged with.
    func tag(of primaryKey: String) -> String { String(hashText(primaryKey).suffix(4)) }

    /// What names a text in a key: itself, or with an encryption key its keyed hash.
    private func named(_ text: String) -> String { sealing == nil ? text : hashText(text) }

    /// The hash field of `head`'s record: its variant key, or with an encryption key a keyed
    /// hash of its primary and variant keys.
    private func field(_ head: EntryHead) -> [UInt8] {
        Array((sealing?.hash("v", head.primaryKey + "\0" + head.variantKey) ?? head.variantKey).utf8)
    }

    /// `value` as stored at `place` (a key, or a key, a NUL and a field): sealed for it with an
    /// encryption key.
    private func sealed(_ value: [UInt8], at place: [UInt8]) -> [UInt8] {
        sealing?.seal(value, for: place) ?? value
    }

    /// What a value read from `place` holds; `nil` when it does not authenticate there.
    private func opened(_ value: [UInt8], at place: [UInt8]) -> [UInt8]? {
        sealing.map { $0.open(value, for: place) } ?? value
    }

    /// The record read from field `field` of the hash `key`.
    private func record(_ value: [UInt8], key: [UInt8], field: [UInt8]) -> EntryRecord? {
        opened(value, at: key + [0] + field).flatMap(EntryRecord.init(serialized:))
    }

    private func key(_ tag: some StringProtocol, _ kind: String, _ rest: some StringProtocol) -> [UInt8] {
        prefix + Array("{\(tag)}\(kind):".utf8) + Array(rest.utf8)
    }

    /// The hash of `primaryKey`'s entries.
    func entryKey(_ primaryKey: String) -> [UInt8] {
        let hash = hashText(primaryKey)
        return key(hash.suffix(4), "e", hash)
    }

    /// The hash `id`'s entry is in (its identity starts with its primary key's XXH64).
    func entryKey(of id: EntryID) -> [UInt8] {
        let hash = id.rawValue.prefix(16)
        return key(hash.suffix(4), "e", hash)
    }

    func lockKey(_ identity: String) -> [UInt8] { key(tag(of: identity), "l", named(identity)) }
    /// The set of the primary keys with an entry tagged `tag` (``EntryHead/tags``).
    private func tagKey(_ tag: String) -> [UInt8] { key(self.tag(of: tag), "t", named(tag)) }
    private func chunkKey(_ id: EntryID, _ index: Int) -> [UInt8] {
        key(id.rawValue.prefix(16).suffix(4), "c", "\(id.rawValue):\(index)")
    }
    /// The hash field of piece `index` of `id`'s inline body (a NUL first: no variant key
    /// starts with one).
    static func bodyField(_ id: EntryID, _ index: Int) -> [UInt8] { [0] + Array("\(id.rawValue):\(index)".utf8) }
    var channel: [UInt8] { prefix + Array("invalidate".utf8) }

    /// A new identity: `primaryKey`'s XXH64 (or keyed hash), then 64 random bits.
    private func newID(for primaryKey: String) -> EntryID {
        EntryID(rawValue: hashText(primaryKey) + EntryID().rawValue.suffix(16))!
    }

    // MARK: Running commands

    /// Runs `commands` on the server of `slotKey`; a failure becomes a `StorageError` of `kind`,
    /// but a value too large to read, which is removed and reported as `.notFound`
    /// (``failure(_:_:_:)``).
    func run(_ commands: [[[UInt8]]], slotKey: [UInt8]?, failing kind: StorageError.Kind) throws(StorageError)
        -> [RESPValue]
    {
        do {
            return try client.execute(commands, slotKey: slotKey)
        } catch {
            throw failure(error, commands, kind)
        }
    }

    /// Runs `commands` on `node` (keys a `SCAN` of that node found); as ``run(_:slotKey:failing:)``.
    private func run(_ commands: [[[UInt8]]], on node: RedisConfiguration.Node, failing kind: StorageError.Kind)
        throws(StorageError) -> [RESPValue]
    {
        do {
            return try client.execute(commands, on: node)
        } catch {
            throw failure(error, commands, kind)
        }
    }

    /// What the store reports for `error`, met running `commands`: a `StorageError` of `kind`;
    /// for a value too large to read, `.notFound` (a miss) once the key that held it, when it
    /// is one of the store's, is removed (``removeOversized(_:length:)``).
    private func failure(_ error: RedisFailure, _ commands: [[[UInt8]]], _ kind: StorageError.Kind) -> StorageError {
        guard let oversized = error.oversized else { return StorageError(kind, "Redis: \(error)") }
        if let key = Self.key(answeredBy: oversized, of: commands, prefix: prefix) {
            removeOversized(key, length: oversized.length)
        }
        return StorageError(
            .notFound, "Redis held a value of \(oversized.length) bytes, too large to be one of this cache's: a miss")
    }

    /// The key whose value was too large to read in the reply to one of `commands`: the
    /// command's key (for `MGET`, the one of the value in the reply), when it starts with
    /// `prefix`; `nil` when the reply does not say which.
    static func key(answeredBy oversized: RedisFailure.Oversized, of commands: [[[UInt8]]], prefix: [UInt8])
        -> [UInt8]?
    {
        guard commands.indices.contains(oversized.reply) else { return nil }
        let command = commands[oversized.reply]
        let isMultiple = command.first.map { String(decoding: $0, as: UTF8.self).uppercased() == "MGET" } ?? false
        guard let index = isMultiple ? oversized.path.first.map({ $0 + 1 }) : 1, command.indices.contains(index),
            command[index].starts(with: prefix)
        else { return nil }
        return command[index]
    }

    /// Removes `key`, which held a value of `length` bytes, longer than any the store writes
    /// (``RESPParser/maximumBulkLength``): it was not read (the connection that met it was
    /// closed, since what followed could not be read without it), and once it is gone the next
    /// lookup is a plain miss and the next store of it works. Logged, with what to do: the
    /// value was put there by something other than this cache.
    func removeOversized(_ key: [UInt8], length: Int64) {
        let removed = (try? run([[bytes("UNLINK"), key]], slotKey: key, failing: .writeFailed)) != nil
        let name = String(decoding: key, as: UTF8.self)
        client.configuration.log(
            "redis: \(name) held a value of \(length) bytes, larger than the \(RESPParser.maximumBulkLength) bytes "
                + "this cache ever writes there: it was not read, the connection was closed, and the key "
                + (removed ? "was removed" : "could not be removed (Redis did not answer)")
                + " (a miss). Something other than this cache writes under its prefix "
                + "\(client.configuration.keyPrefix): give each cache a prefix of its own (--redis-prefix)")
    }

    /// Logs that the store's own key `key` held another type than the store keeps there
    /// (Redis answered `message`, `WRONGTYPE`): it is not the store's to keep, and is removed
    /// (in `action`) so that the URL is cached again.
    private func logForeignType(_ key: [UInt8], _ message: String, _ action: String) {
        client.configuration.log(
            "redis: \(String(decoding: key, as: UTF8.self)) held another type than this cache keeps there "
                + "(\(message.prefix(80))): \(action). Something other than this cache writes under its prefix "
                + "\(client.configuration.keyPrefix): give each cache a prefix of its own (--redis-prefix)")
    }

    /// Whether `reply` is Redis' `WRONGTYPE` error: the key holds another type than the command's.
    private static func isWrongType(_ reply: RESPValue?) -> Bool {
        reply?.errorMessage?.hasPrefix("WRONGTYPE") == true
    }

    /// The replies of a `MULTI` … `EXEC` that was the whole pipeline, or a thrown error.
    private func transaction(_ commands: [[[UInt8]]], slotKey: [UInt8], then extra: [[[UInt8]]] = [])
        throws(StorageError) -> [RESPValue]
    {
        // What is written there is read again, not what a lookup read before.
        staged.withLock { _ = $0.removeValue(forKey: slotKey) }
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
        // With an encryption key the key goes out sealed (base64) too: subscribers see no URL.
        let named = sealing.map { Base64.encode($0.seal(Array(primaryKey.utf8), for: channel)) } ?? primaryKey
        return [bytes("PUBLISH"), channel, Array("\(senderID) \(named)".utf8)]
    }

    /// The primary key an invalidation names (what follows the sender's identity); `nil` for one
    /// sealed under another key.
    func primaryKey(inInvalidation text: Substring) -> String? {
        guard let sealing else { return String(text) }
        return Base64.decode(text).flatMap { sealing.open($0, for: channel) }.map {
            String(decoding: $0, as: UTF8.self)
        }
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

    /// Makes a hash or set live at least as long as `milliseconds` (`nil`: for ever).
    private func extendLife(_ key: [UInt8], _ milliseconds: Int?) -> [[[UInt8]]] {
        guard let milliseconds else { return [[bytes("PERSIST"), key]] }
        return [
            [bytes("PEXPIRE"), key, bytes(String(milliseconds)), bytes("NX")],
            [bytes("PEXPIRE"), key, bytes(String(milliseconds)), bytes("GT")],
        ]
    }

    /// Lets a replaced or removed entry's body go: chunks after the grace time (responses
    /// being served from them finish), an inline body's own field at once (a reader has it
    /// whole already).
    private func retire(_ record: EntryRecord) -> [[[UInt8]]] {
        switch record.body {
        case .inline(_, let pieces, _):
            guard !pieces.isEmpty else { return [] }
            return [
                [bytes("HDEL"), entryKey(of: record.entry.id)]
                    + pieces.indices.map { Self.bodyField(record.entry.id, $0) }
            ]
        case .chunked(let checksums):
            return checksums.indices.map { index in
                [bytes("PEXPIRE"), chunkKey(record.entry.id, index), bytes(String(Self.graceSeconds * 1000))]
            }
        }
    }

    // MARK: CacheStore

    public func variants(of primaryKey: String) throws(StorageError) -> [StoredEntry] {
        try records(of: primaryKey).map(\.entry)
    }

    /// The entries of `primaryKey` that have not expired.
    func records(of primaryKey: String) throws(StorageError) -> [EntryRecord] {
        try records(in: entryKey(primaryKey)).filter { $0.entry.head.primaryKey == primaryKey }
    }

    /// The record of `id`, found in the hash its identity names.
    private func record(of id: EntryID) throws(StorageError) -> EntryRecord? {
        try records(in: entryKey(of: id)).first { $0.entry.id == id }
    }

    /// The records in the hash `key` that have not expired and whose inline bodies are whole,
    /// kept with those bodies for the `openBody` that follows. What cannot be used is removed
    /// from the hash: records that do not parse, that belong in another hash, that expired or
    /// whose body's field is missing or of the wrong length, and body fields of no record.
    /// A key of another type than a hash (`WRONGTYPE`) or holding a value too large to read is
    /// not the store's: it is removed, and its lookup is a miss.
    private func records(in key: [UInt8]) throws(StorageError) -> [EntryRecord] {
        var reply = try stagedReply(key)
        if reply == nil {
            do throws(StorageError) {
                reply = try run([[bytes("HGETALL"), key]], slotKey: key, failing: .readFailed)[0]
            } catch  where error.kind == .notFound {
                return []  // a value too large to read: removed already
            }
        }
        guard let reply else { return [] }
        guard let fields = reply.array else {
            if let message = reply.errorMessage {
                guard Self.isWrongType(reply) else { throw StorageError(.readFailed, "Redis: \(message)") }
                let removed = (try? run([[bytes("UNLINK"), key]], slotKey: key, failing: .writeFailed)) != nil
                logForeignType(key, message, removed ? "it was removed (a miss)" : "it could not be removed yet")
            }
            return []
        }
        let now = clock()
        var candidates: [(name: [UInt8], record: EntryRecord)] = []
        var bodyFields: [[UInt8]: [UInt8]] = [:]
        var unusable: [[UInt8]] = []
        for index in stride(from: 1, to: fields.count, by: 2) {
            guard let name = fields[index - 1].bytes else { continue }
            if name.first == 0 {
                bodyFields[name] = fields[index].bytes
                continue
            }
            guard let value = fields[index].bytes, let record = record(value, key: key, field: name),
                entryKey(of: record.entry.id) == key, entryKey(record.entry.head.primaryKey) == key,
                field(record.entry.head) == name,
                record.expiresAt.map({ $0 > now }) ?? true
            else {
                unusable.append(name)
                continue
            }
            candidates.append((name, record))
        }
        var found: [EntryRecord] = []
        for (name, record) in candidates {
            var inline: [UInt8]?
            if case .inline(_, let pieces, let tail) = record.body {
                let names = pieces.indices.map { Self.bodyField(record.entry.id, $0) }
                var body: [UInt8] = []
                body.reserveCapacity(Int(record.entry.bodySize))
                for (field, length) in zip(names, pieces) {
                    guard let stored = bodyFields.removeValue(forKey: field),
                        let piece = opened(stored, at: key + [0] + field), piece.count == length
                    else { break }
                    body += piece
                }
                body += tail
                guard body.count == record.entry.bodySize else {
                    unusable += [name] + names
                    continue
                }
                inline = body
            }
            recentRecords.keep(record, inline: inline)
            found.append(record)
        }
        unusable += bodyFields.keys
        if !unusable.isEmpty { _ = try? run([[bytes("HDEL"), key] + unusable], slotKey: key, failing: .writeFailed) }
        return found
    }

    /// Bodies larger than this are stored in chunks of their own; smaller ones in the hash.
    static let inlineLimit = 256 << 10

    /// `HGETALL` replies (or why there is none) an event loop's channel received, by hash key,
    /// while the lookup that asked resumes (``answering(_:with:_:)``).
    private let staged = Locked<[[UInt8]: Result<RESPValue, StorageError>]>([:])

    /// Runs `resume` while `reply` stands for the hash `key`'s `HGETALL`: the reads it makes of
    /// that hash use it (or throw its error) instead of a round trip.
    func answering(_ key: [UInt8], with reply: Result<RESPValue, StorageError>, _ resume: () -> Void) {
        staged.withLock { $0[key] = reply }
        resume()
        staged.withLock { _ = $0.removeValue(forKey: key) }
    }

    /// The staged reply for the hash `key`, if a lookup is being resumed with one.
    private func stagedReply(_ key: [UInt8]) throws(StorageError) -> RESPValue? {
        try staged.withLock { $0[key] }?.get()
    }

    /// A channel for one event loop (`LookupChannel`): a connection of its own to the server, or
    /// in a Cluster to each master, lookups routed by the slot map (`RedisClusterLookupChannel`;
    /// on Linux; elsewhere a Cluster's lookups are made where they are needed, over the pool).
    public func makeLookupChannel() -> (any LookupChannel)? { lookupChannel(answersLocally: { _ in false }) }

    /// A channel whose lookups of the keys `answersLocally` names are not queued.
    func lookupChannel(answersLocally: @escaping (String) -> Bool) -> (any LookupChannel)? {
        guard configuration.isCluster else {
            return RedisLookupChannel(store: self, node: configuration.nodes[0], answersLocally: answersLocally)
        }
        #if os(Linux)
        return RedisClusterLookupChannel(store: self, answersLocally: answersLocally)
        #else
        return nil
        #endif
    }

    /// Records just read, with their inline bodies.
    private let recentRecords = RecentRecords()

    /// Opens a body, all of it verified before anything is served, so that a body Redis evicted
    /// a part of reads as a miss (not as a response cut off half way). An inline body came
    /// with its record (the lookup before this one read it); of a chunked one, the first 8
    /// chunks (8 MiB) are read and the others checked to exist, in one round trip, and those
    /// are read as they are served.
    public func openBody(of id: EntryID) throws(StorageError) -> any StoredBody {
        let known: (record: EntryRecord, inline: [UInt8]?)
        if let recent = recentRecords.record(of: id) {
            known = recent
        } else {
            guard try record(of: id) != nil, let read = recentRecords.record(of: id) else {
                throw StorageError(.notFound, "no entry \(id) in Redis (removed, expired or evicted)")
            }
            known = read
        }
        let body = RedisBody(store: self, id: id, description: known.record.bodyDescription)
        guard case .chunked(let checksums) = known.record.body else {
            if let inline = known.inline, !inline.isEmpty { try body.accept(inline, chunk: 0) }
            return body
        }
        let eager = min(checksums.count, Self.eagerChunks)
        let rest = (eager..<checksums.count).map { chunkKey(id, $0) }
        let first = chunkKey(id, 0)
        let replies = try run(
            [[bytes("MGET")] + (0..<eager).map { chunkKey(id, $0) }] + (rest.isEmpty ? [] : [[bytes("EXISTS")] + rest]),
            slotKey: first, failing: .readFailed)
        guard let values = replies[0].array, values.count == eager else {
            throw StorageError(.readFailed, "Redis: \(replies[0].errorMessage ?? "an unexpected reply to MGET")")
        }
        for (index, value) in values.enumerated() {
            guard let chunk = value.bytes.flatMap({ opened($0, at: chunkKey(id, index)) }) else { throw evicted(id) }
            try body.accept(chunk, chunk: index)
        }
        if !rest.isEmpty, replies[1].integer != Int64(rest.count) { throw evicted(id) }
        return body
    }

    /// Chunks read with a body's description when it is opened (8 MiB).
    static let eagerChunks = 8

    private func evicted(_ id: EntryID) -> StorageError {
        StorageError(.notFound, "a part of \(id)'s body is gone from Redis (evicted or expired): a miss")
    }

    public func makeWriter(for head: EntryHead) throws(StorageError) -> any EntryWriter {
        RedisWriter(store: self, head: head, id: newID(for: head.primaryKey), storedAt: clock())
    }

    /// A body as its writer hands it to the commit.
    enum WrittenBody {
        /// The whole body, to be kept in the entry's hash.
        case inline([UInt8])
        /// The XXH64 of each chunk, and the last chunk when it is not written yet.
        case chunked(checksums: [UInt64], last: (index: Int, bytes: [UInt8])?)
    }

    /// Commits a written entry: its record with an inline body (or a chunked body's last
    /// chunk) in one transaction; the variant it replaces is retired.
    func commit(_ entry: StoredEntry, _ written: WrittenBody) throws(StorageError) -> StoredEntry {
        let key = entryKey(entry.head.primaryKey)
        let variant = field(entry.head)
        let current: RESPValue?
        do throws(StorageError) {
            current = try run([[bytes("HGET"), key, variant]], slotKey: key, failing: .writeFailed)[0]
        } catch  where error.kind == .notFound {
            current = nil  // a value too large to read: removed already
        }
        // Another type than a hash under the entry's key is not ours: replaced in the transaction.
        let foreign = Self.isWrongType(current)
        let previous = current?.bytes.flatMap { record($0, key: key, field: variant) }
            .flatMap { entryKey(of: $0.entry.id) == key ? $0 : nil }
        var entry = entry
        if previous?.entry.isPinned == true { entry.isPinned = true }
        let expiresAt = expiresAt(facts: entry.head.facts, pinned: entry.isPinned)
        let lifetime = milliseconds(until: expiresAt)
        // The tags' sets first: a failure there stores nothing, so no entry is ever out of
        // its tags' reach. A member left behind by a failed commit is skipped on removal.
        for tag in Set(entry.head.tags) {
            let setKey = tagKey(tag)
            for attempt in 0..<2 {
                let replies = try run(
                    [[bytes("SADD"), setKey, member(entry.head.primaryKey, of: setKey)]] + extendLife(setKey, lifetime),
                    slotKey: setKey, failing: .writeFailed)
                guard let message = replies.lazy.compactMap(\.errorMessage).first else { break }
                // Another type than a set under the tag's key is not ours: removed, and added again.
                guard attempt == 0, Self.isWrongType(replies[0]) else {
                    throw StorageError(.writeFailed, "Redis refused a write: \(message)")
                }
                _ = try run([[bytes("UNLINK"), setKey]], slotKey: setKey, failing: .writeFailed)
                logForeignType(setKey, message, "it was removed and written again")
            }
        }
        var commands: [[[UInt8]]] = []
        if foreign {
            commands.append([bytes("DEL"), key])
            logForeignType(key, current?.errorMessage ?? "", "it is replaced by the entry being stored")
        }
        switch written {
        case .inline(let body):
            let checksum = XXH64.hash(body)
            var record = EntryRecord(
                entry: entry, expiresAt: expiresAt, body: .inline(checksum: checksum, pieces: [], tail: []))
            let pieces = InlineLayout.pieces(bodySize: body.count, recordSize: record.recordSize)
            var hset = [bytes("HSET"), key, variant, []]
            var start = 0
            for (index, length) in pieces.enumerated() {
                let field = Self.bodyField(entry.id, index)
                hset += [field, sealed(Array(body[start..<start + length]), at: key + [0] + field)]
                start += length
            }
            record.body = .inline(checksum: checksum, pieces: pieces, tail: Array(body[start...]))
            hset[3] = sealed(record.serialized(), at: key + [0] + variant)
            commands.append(hset)
        case .chunked(let checksums, let last):
            if let last {
                let chunk = chunkKey(entry.id, last.index)
                commands.append([bytes("SET"), chunk, sealed(last.bytes, at: chunk)])
            }
            for index in checksums.indices { commands.append(expiry(chunkKey(entry.id, index), lifetime)) }
            let record = EntryRecord(entry: entry, expiresAt: expiresAt, body: .chunked(checksums: checksums))
            commands.append([bytes("HSET"), key, variant, sealed(record.serialized(), at: key + [0] + variant)])
        }
        commands += extendLife(key, lifetime)
        if let previous, previous.entry.id != entry.id { commands += retire(previous) }
        _ = try transaction(commands, slotKey: key, then: [publishCommand(entry.head.primaryKey)])
        if let previous { recentRecords.forget([previous.entry.id]) }
        return entry
    }

    /// Writes a chunk before the commit (it is not reachable until then); it expires by itself
    /// when the commit never comes.
    func writeEarly(_ id: EntryID, index: Int, _ chunk: [UInt8]) throws(StorageError) {
        let key = chunkKey(id, index)
        let reply = try run(
            [
                [
                    bytes("SET"), key, sealed(chunk, at: key), bytes("PX"),
                    bytes(String(Int(client.configuration.keepTime * 1000))),
                ]
            ],
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
        return zip(keys, values).map { key, value in value.bytes.flatMap { opened($0, at: key) } }
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
        let key = entryKey(primaryKey)
        var commands: [[[UInt8]]] = []
        for record in records {
            let variant = field(record.entry.head)
            commands.append([bytes("HSET"), key, variant, sealed(record.serialized(), at: key + [0] + variant)])
            let lifetime = milliseconds(until: record.expiresAt)
            for index in 0..<record.chunkCount {
                commands.append(expiry(chunkKey(record.entry.id, index), lifetime))
            }
        }
        let longest = records.contains { $0.expiresAt == nil } ? nil : records.compactMap(\.expiresAt).max()
        commands += extendLife(key, milliseconds(until: longest))
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
        let key = entryKey(primaryKey)
        _ = try transaction(
            [[bytes("DEL"), key]] + records.flatMap(retire), slotKey: key, then: [publishCommand(primaryKey)])
        recentRecords.forget(records.map(\.entry.id))
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

    /// Keys are hashed in Redis: every entry's record is read (`SCAN`) to find the keys.
    public func remove(primaryKeyPrefix prefix: String) throws(StorageError) -> Int {
        var removed = 0
        for primaryKey in Set(try entries().map(\.head.primaryKey)) where primaryKey.hasPrefix(prefix) {
            removed += try remove(primaryKey: primaryKey)
        }
        return removed
    }

    /// Removes `records`, variants of `primaryKey`, in one transaction; returns how many.
    private func remove(_ records: [EntryRecord], of primaryKey: String) throws(StorageError) -> Int {
        guard !records.isEmpty else { return 0 }
        let key = entryKey(primaryKey)
        _ = try transaction(
            [[bytes("HDEL"), key] + records.map { field($0.entry.head) }] + records.flatMap(retire),
            slotKey: key, then: [publishCommand(primaryKey)])
        recentRecords.forget(records.map(\.entry.id))
        return records.count
    }

    public func remove(tag: String) throws(StorageError) -> Int {
        let setKey = tagKey(tag)
        let members = try run([[bytes("SMEMBERS"), setKey]], slotKey: setKey, failing: .readFailed)[0].array ?? []
        var removed = 0
        for member in members.compactMap(\.bytes) {
            if let primaryKey = opened(member, at: setKey).map({ String(decoding: $0, as: UTF8.self) }) {
                removed += try remove(
                    try records(of: primaryKey).filter { $0.entry.head.tags.contains(tag) }, of: primaryKey)
            }
            _ = try run([[bytes("SREM"), setKey, member]], slotKey: setKey, failing: .writeFailed)
        }
        return removed
    }

    /// How `primaryKey` is kept in the set `setKey` of a tag: itself, or with an encryption key
    /// sealed so that the same key always seals alike there (a member is found again).
    private func member(_ primaryKey: String, of setKey: [UInt8]) -> [UInt8] {
        sealing?.sealDeterministically(Array(primaryKey.utf8), for: setKey) ?? Array(primaryKey.utf8)
    }

    public func removeAll() throws(StorageError) {
        try forEachKey(matching: Self.globEscaped(prefix) + Array("*".utf8)) { node, keys throws(StorageError) in
            _ = try run(keys.map { [bytes("UNLINK"), $0] }, on: node, failing: .writeFailed)
        }
        _ = try? run([publishCommand("*")], slotKey: nil, failing: .writeFailed)
        recentRecords.forgetAll()
    }

    public func entries() throws(StorageError) -> [StoredEntry] {
        var found: [StoredEntry] = []
        let now = clock()
        try forEachKey(matching: Self.globEscaped(prefix) + Array("{*}e:*".utf8)) { node, keys throws(StorageError) in
            // The field names first: the records are read, not the inline bodies beside them.
            let names = try run(keys.map { [bytes("HKEYS"), $0] }, on: node, failing: .readFailed)
            var reads: [[[UInt8]]] = []
            var places: [(key: [UInt8], fields: [[UInt8]])] = []
            for (key, reply) in zip(keys, names) {
                let fields = (reply.array ?? []).compactMap(\.bytes).filter { $0.first != 0 }
                if !fields.isEmpty {
                    reads.append([bytes("HMGET"), key] + fields)
                    places.append((key, fields))
                }
            }
            let records = reads.isEmpty ? [] : try run(reads, on: node, failing: .readFailed)
            for (reply, place) in zip(records, places) {
                for (value, field) in zip(reply.array ?? [], place.fields) {
                    guard let bytes = value.bytes, let record = record(bytes, key: place.key, field: field),
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
