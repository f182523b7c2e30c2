import CacheSemantics
import CacheStorage
import CacheSystem
import CacheTestSupport
import Foundation
import Synchronization
import Testing

@testable import CacheExchange
@testable import CacheStorage

/// What the driver remembers per key (``CandidateReader``): a key it forgot, a head changed in
/// place and a tight byte bound all still give the stored response, with the fields the host's
/// transform and serializer make of its current head.
@Suite("The exchange's memo: bounded, and never what the store no longer holds")
struct CandidateMemoTests {
    static let engine = CacheEngine(configuration: .sharedCache(named: "cache"))
    static let now = Fixtures.epoch

    static func url(_ number: Int) -> String { "http://origin.test/memo/\(number)" }

    static func key(_ url: String) -> String { CacheKey(method: "GET", uri: url)!.primaryKey }

    /// The head and serialized facts of a `200` for `url` with these fields, as stored now.
    static func stored(_ url: String, _ fields: HeaderFields) -> (fields: HeaderFields, facts: [UInt8]) {
        guard
            case .store(let storable) = engine.storageDecision(
                for: RequestHead(uri: url), response: ResponseHead(status: 200, fields: fields), requestTime: now,
                responseTime: now)
        else { fatalError("the test's response must be storable") }
        return (fields, storable.facts.serialized())
    }

    static func store(_ store: any CacheStore, _ number: Int) throws {
        let body = Array("body of \(number)".utf8)
        let (fields, facts) = stored(
            url(number),
            [
                "Cache-Control": "max-age=600", "Content-Length": String(body.count), "ETag": "\"e\(number)\"",
                "Age": "3",
            ])
        let writer = try store.makeWriter(
            for: EntryHead(primaryKey: key(url(number)), url: url(number), status: 200, fields: fields, facts: facts))
        try writer.append(body)
        try writer.commit()
    }

    /// A driver as the proxy makes one: its Via added to stored answers, their fields kept
    /// serialized.
    /// `made` counts the served bases made (each runs the transform once).
    static func driver(
        _ store: any CacheStore, capacity: Int, bytes: Int, made: Counter = Counter()
    ) -> ExchangeDriver {
        var configuration = ExchangeDriver.Configuration(
            engine: engine, name: "cache", clock: { now.secondsSince1970 }, log: { _ in })
        configuration.trace = nil
        configuration.storedFieldsTransform = { fields in
            made.add()
            var fields = fields
            fields.append(name: "Via", value: "1.1 cache")
            return fields
        }
        configuration.storedFieldsSerializer = { $0.serialized() }
        configuration.memoCapacity = capacity
        configuration.memoByteLimit = bytes
        return ExchangeDriver(store: store, configuration: configuration)
    }

    /// Asks `driver` for `url` and returns the hit it serves, checking its fields and bytes.
    static func hit(
        _ driver: ExchangeDriver, _ number: Int, age: String = "3", ttl: Int = 597,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> ServedResponse? {
        let request = ExchangeRequest(head: RequestHead(uri: url(number)), primaryKey: key(url(number)))
        var machine = driver.exchange(for: request)
        guard case .serve(let served, _) = driver.start(&machine) else {
            Issue.record("\(url(number)) is not a hit", sourceLocation: sourceLocation)
            return nil
        }
        guard case .stored(let body, let range) = served.body else {
            Issue.record("\(url(number)) has no stored body", sourceLocation: sourceLocation)
            return nil
        }
        #expect(try body.read(range.lowerBound...(range.upperBound - 1)) == Array("body of \(number)".utf8))
        #expect(served.fields[.eTag] == "\"e\(number)\"", sourceLocation: sourceLocation)
        #expect(served.fields[.via] == "1.1 cache", sourceLocation: sourceLocation)
        // The stored Age is replaced by the cache's own (RFC 9111 §5.1); Cache-Status is a hit.
        #expect(served.fields.values(named: .age) == [age], sourceLocation: sourceLocation)
        #expect(served.fields[.cacheStatus] == "cache; hit; ttl=\(ttl)", sourceLocation: sourceLocation)
        // The kept bytes stand for every field but the two each answer adds.
        let serialized = try #require(served.serializedFields, sourceLocation: sourceLocation)
        #expect(serialized.count == served.fields.count - 2, sourceLocation: sourceLocation)
        #expect(
            serialized.bytes == HeaderFields(served.fields.prefix(serialized.count)).serialized(),
            sourceLocation: sourceLocation)
        return served
    }

    /// A key that falls out of the memo (more keys than it holds) is read from the store again
    /// and answered the same; a memo large enough to be cut into shards
    /// (`CandidateReader.shardedCapacity`) remembers every key of a working set that fits, each
    /// in its shard. Arguments: keys hit, the memo's capacity, the keys it then remembers.
    @Test(arguments: [(6, 2, 2), (300, 8_192, 300)])
    func theMemoRemembersWhatFits(keys: Int, capacity: Int, remembered: Int) throws {
        let store = MemoryStore(capacity: 8 << 20)
        for number in 0..<keys { try Self.store(store, number) }
        let driver = Self.driver(store, capacity: capacity, bytes: 64 << 20)
        for _ in 0..<3 {
            for number in 0..<keys { _ = try Self.hit(driver, number) }
        }
        #expect(driver.rememberedKeys.count == remembered)
    }

    /// The keys' memo stays within three quarters of the byte bound, whatever the working set.
    @Test func theMemoStaysWithinItsBytes() throws {
        let store = MemoryStore(capacity: 1 << 20)
        for number in 0..<50 { try Self.store(store, number) }
        let driver = Self.driver(store, capacity: 1000, bytes: 40_000)
        for number in 0..<50 { _ = try Self.hit(driver, number) }
        let remembered = driver.rememberedKeys
        #expect(remembered.bytes <= 30_000)
        // A key costs more than its strings: nowhere near 50 fit, but some do.
        #expect(remembered.count > 0 && remembered.count < 50)
        for number in (0..<50).reversed() { _ = try Self.hit(driver, number) }
    }

    /// A read the store fails is a miss, and its log line names the key as an operator reads
    /// it: a No-Vary-Search marker by its path, a partition by its name, no control character
    /// of the stored key's encoding.
    @Test func aFailedReadIsLoggedWithTheKeyInWords() {
        let lines = Mutex<[String]>([])
        let builder = ServedResponseBuilder(
            engine: Self.engine, name: "cache", addsCacheStatus: true, transform: nil, serializer: nil)
        let reader = CandidateReader(
            store: FailingReads(MemoryStore(capacity: 1 << 20)), capacity: 16, byteLimit: 1 << 20,
            log: { line in lines.withLock { $0.append(line) } }, makeBase: builder.base)
        #expect(reader.candidates(CachePartition.key("NVS http://a.test/p", in: "alice")).isEmpty)
        #expect(reader.candidates("http://a.test/q").isEmpty)
        let logged = lines.withLock { $0 }
        let marker = "the No-Vary-Search marker of http://a.test/p (partition \"alice\")"
        #expect(logged.first?.hasPrefix("could not read the stored responses for \(marker): ") == true, "\(logged)")
        let plain = "could not read the stored responses for http://a.test/q: "
        #expect(logged.last?.hasPrefix(plain) == true, "\(logged)")
        #expect(!logged.joined().unicodeScalars.contains { $0.properties.generalCategory == .control })
    }

    /// A head changed in place (as a `304` freshens it, RFC 9111 §4.3.4) keeps its entry's
    /// identity: its answers carry the new fields, not those made of the old head.
    @Test func aHeadChangedInPlaceIsServedAsItIsNow() throws {
        let store = MemoryStore(capacity: 1 << 20)
        try Self.store(store, 1)
        let driver = Self.driver(store, capacity: 16, bytes: 1 << 20)
        let first = try #require(try Self.hit(driver, 1))
        var fields = first.entry.head.fields
        fields[.eTag] = "\"e1\""
        fields.append(name: "X-Freshened", value: "yes")
        let (_, facts) = Self.stored(Self.url(1), fields)
        try store.update(first.entry.id, fields: fields, facts: facts)
        let second = try #require(try Self.hit(driver, 1))
        #expect(second.entry.id == first.entry.id)
        #expect(second.fields["X-Freshened"] == "yes")
        #expect(first.fields["X-Freshened"] == nil)
    }

    /// Misses and revalidations of other keys write to the store between two hits of one key:
    /// a store that counts changes per key (``DiskStore``, as the proxy's tiered store uses it)
    /// has the second hit answered from the memo, not read again; a change to the key itself
    /// (a `304`'s update, RFC 9111 §4.3.4) is read, and served as it is now.
    @Test func otherKeysWritesLeaveAKeyRemembered() throws {
        let directory = NSTemporaryDirectory() + "/memo-key-changes-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = DiskStore.Configuration(directory: directory, log: { _ in })
        configuration.writesBehind = true
        let disk = try DiskStore(configuration)
        let store = CountingStore(disk)
        try Self.store(store, 1)
        try Self.store(store, 2)
        // Written to the index: a key whose commit is still queued has no count of its own.
        try disk.flush()
        let driver = Self.driver(store, capacity: 16, bytes: 1 << 20)
        let first = try #require(try Self.hit(driver, 1))
        let reads = store.reads
        try Self.store(store, 3)
        try disk.update(
            try #require(try disk.variants(of: Self.key(Self.url(2))).first).id,
            fields: ["Cache-Control": "max-age=600", "ETag": "\"e2\""], facts: Self.stored(Self.url(2), [:]).facts)
        try disk.flush()
        #expect(disk.changeCount != nil)
        _ = try Self.hit(driver, 1)
        #expect(store.reads == reads, "the hit was read from the store again")
        // Again after another write: the memo, found current at the last count, is checked anew.
        try Self.store(store, 4)
        try disk.flush()
        _ = try Self.hit(driver, 1)
        _ = try Self.hit(driver, 1)
        #expect(store.reads == reads, "the hit was read from the store again")

        var fields = first.entry.head.fields
        fields.append(name: "X-Freshened", value: "yes")
        try store.update(first.entry.id, fields: fields, facts: Self.stored(Self.url(1), fields).facts)
        let freshened = try #require(try Self.hit(driver, 1))
        #expect(store.reads == reads + 1)
        #expect(freshened.fields["X-Freshened"] == "yes")
    }

    /// A candidate changed by its holder (a `304` applied to the exchange's copy) drops the
    /// served fields made of its old head; its other copies keep theirs. They are made when a
    /// version is first served, not when it is read, and kept for every later read.
    @Test func aChangedCandidateDropsItsServedBase() throws {
        let store = MemoryStore(capacity: 1 << 20)
        try Self.store(store, 2)
        let made = Counter()
        let driver = Self.driver(store, capacity: 16, bytes: 1 << 20, made: made)
        #expect(try #require(driver.candidates(Self.key(Self.url(2))).first).base == nil)
        #expect(made.value == 0)
        _ = try Self.hit(driver, 2)
        _ = try Self.hit(driver, 2)
        #expect(made.value == 1)
        let read = driver.candidates(Self.key(Self.url(2)))
        let original = try #require(read.first)
        #expect(original.base != nil)
        var changed = original
        changed.entry.head.fields[.cacheControl] = "max-age=1"
        #expect(changed.base == nil)
        #expect(original.base != nil)
        #expect(original.entry.head.fields[.cacheControl] == "max-age=600")
    }

    /// A `304` that freshens a stored response (RFC 9111 §4.3.4) leaves its new version
    /// remembered with the fields its answers start with: the answer to the revalidating request
    /// and the next hit share one served base, made of the updated head (its new field, its
    /// new lifetime, no stored `Age`), and the store holds that head.
    @Test func aFreshenedResponseIsRememberedAsStoredNow() throws {
        let store = MemoryStore(capacity: 1 << 20)
        let url = Self.url(7)
        let body = Array("body of 7".utf8)
        let (fields, facts) = Self.stored(
            url, ["Cache-Control": "max-age=0", "Content-Length": String(body.count), "ETag": "\"e7\"", "Age": "3"])
        let writer = try store.makeWriter(
            for: EntryHead(primaryKey: Self.key(url), url: url, status: 200, fields: fields, facts: facts))
        try writer.append(body)
        try writer.commit()
        let made = Counter()
        let driver = Self.driver(store, capacity: 16, bytes: 1 << 20, made: made)
        var machine = driver.exchange(for: ExchangeRequest(head: RequestHead(uri: url), primaryKey: Self.key(url)))
        // A request that goes to the origin may be shared: this one leads.
        guard case .join = driver.start(&machine), case .forward(let forwarded) = driver.joinedAsLeader(&machine)
        else {
            Issue.record("a stale response is not revalidated")
            return
        }
        #expect(forwarded.fields[.ifNoneMatch] == "\"e7\"")
        let notModified: HeaderFields = ["ETag": "\"e7\"", "Cache-Control": "max-age=600", "X-Freshened": "yes"]
        guard
            case .serve(let freshened) = driver.originResponded(
                &machine, ResponseHead(status: 304, fields: notModified), requestTime: Self.now)
        else {
            Issue.record("the 304 is not answered from the store")
            return
        }
        #expect(freshened.fields["X-Freshened"] == "yes")
        #expect(freshened.fields[.cacheControl] == "max-age=600")
        #expect(freshened.fields.values(named: .age) == ["0"])
        let storedNow = try #require(try store.variants(of: Self.key(url)).first)
        #expect(storedNow.head.fields["X-Freshened"] == "yes")
        #expect(storedNow.head.fields[.age] == nil)
        let hit = try #require(try Self.hit(driver, 7, age: "0", ttl: 600))
        #expect(hit.fields["X-Freshened"] == "yes")
        let base = try #require(hit.candidate.base)
        #expect(freshened.candidate.base === base)
        #expect(base.fields == HeaderFields(storedNow.head.fields + [HeaderField(name: "Via", value: "1.1 cache")]))
        // Made once: for the freshened version, never for the stale one read to be revalidated.
        #expect(made.value == 1)
    }

    /// A `304` for a stored response that another request replaced while the origin answered
    /// selects nothing stored now (RFC 9111 §4.3.4: "If none of the stored responses contain
    /// the same validator, the cache MUST NOT use the new response to update any stored
    /// responses"): the request is sent again without validators, and the newer response is
    /// left as it is. The proxy's store: a memory tier over a disk tier that writes updates
    /// behind, which cannot say at once that a replaced identity is gone. The newer response
    /// stored through both tiers (its commit still queued, or written to the index), or by
    /// another writer of the disk tier alone (another process on the same directory), the
    /// memory tier still holding the old body.
    @Test(arguments: [(false, false), (false, true), (true, false), (true, true)])
    func aNotModifiedForAReplacedResponseIsSentAgain(diskOnly: Bool, flushed: Bool) throws {
        let directory = TemporaryDirectory()
        var configuration = DiskStore.Configuration(directory: directory.path, log: { _ in })
        configuration.writesBehind = true
        let disk = try DiskStore(configuration)
        let store = TieredStore(memory: MemoryStore(capacity: 1 << 20), disk: disk)
        let url = Self.url(8)
        func put(_ version: Int, maxAge: Int, into store: any CacheStore) throws {
            let body = Array("body of 8".utf8)
            let (fields, facts) = Self.stored(
                url,
                [
                    "Cache-Control": "max-age=\(maxAge)", "Content-Length": String(body.count),
                    "ETag": "\"v\(version)\"",
                ])
            let writer = try store.makeWriter(
                for: EntryHead(primaryKey: Self.key(url), url: url, status: 200, fields: fields, facts: facts))
            try writer.append(body)
            try writer.commit()
        }
        try put(1, maxAge: 0, into: store)
        try disk.flush()
        let driver = Self.driver(store, capacity: 16, bytes: 1 << 20)
        var machine = driver.exchange(for: ExchangeRequest(head: RequestHead(uri: url), primaryKey: Self.key(url)))
        guard case .join = driver.start(&machine), case .forward(let forwarded) = driver.joinedAsLeader(&machine)
        else {
            Issue.record("a stale response is not revalidated")
            return
        }
        #expect(forwarded.fields[.ifNoneMatch] == "\"v1\"")
        try put(3, maxAge: 600, into: diskOnly ? disk : store)
        if flushed { try disk.flush() }
        let notModified: HeaderFields = ["ETag": "\"v1\"", "Cache-Control": "max-age=600"]
        let work = driver.originResponded(
            &machine, ResponseHead(status: 304, fields: notModified), requestTime: Self.now)
        guard case .forward(let again) = work else {
            Issue.record("the 304 for a replaced response is answered without the origin: \(work)")
            return
        }
        #expect(again.fields[.ifNoneMatch] == nil)
        try disk.flush()
        let storedNow = try store.variants(of: Self.key(url))
        #expect(storedNow.map { $0.head.fields[.eTag] } == ["\"v3\""])
        #expect(storedNow.first?.head.fields[.cacheControl] == "max-age=600")
    }

    /// A path's No-Vary-Search marker is read only from a store that may hold it: where the
    /// disk's known keys say none is stored (every path that never had the field), the miss's
    /// lookup reads its own key alone and nothing is remembered of the marker; a marker stored
    /// is read, and its simplified key answers an equivalent URL (draft §6, §7).
    @Test func aMarkerIsReadOnlyWhereItMayBeStored() throws {
        let directory = TemporaryDirectory()
        let disk = try DiskStore(DiskStore.Configuration(directory: directory.path))
        let store = ReadRecordingStore(TieredStore(memory: MemoryStore(capacity: 1 << 20), disk: disk))
        #expect(DiskStore.buildKnownKeys({ disk }))
        let driver = Self.driver(store, capacity: 64, bytes: 1 << 20)
        let plain = Self.key("http://origin.test/p?x=1")
        let plainMarker = try #require(SearchVariance.markerKey(of: plain))
        #expect(driver.candidates(plain).isEmpty)
        #expect(store.keysRead == [plain])
        #expect(disk.memo.withLock { $0.heads.value(for: plainMarker) } == nil)
        // A response that ignores utm, stored under its simplified key with its path's marker.
        let url = "http://origin.test/n?utm=1&x=1"
        let body = Array("n".utf8)
        let (fields, facts) = Self.stored(
            url, ["Cache-Control": "max-age=600", "No-Vary-Search": "params=(\"utm\")", "Content-Length": "1"])
        let request = ExchangeRequest(head: RequestHead(uri: url), primaryKey: Self.key(url))
        let (placed, marker) = SearchVariance.placed(
            EntryHead(primaryKey: Self.key(url), url: url, status: 200, fields: fields, facts: facts), request: request)
        for head in [try #require(marker), placed] {
            let writer = try store.makeWriter(for: head)
            try writer.append(body)
            try writer.commit()
        }
        store.keysRead = []
        let equivalent = Self.key("http://origin.test/n?x=1&utm=2")
        #expect(driver.candidates(equivalent).map(\.entry.head.primaryKey) == [placed.primaryKey])
        #expect(store.keysRead == [equivalent, marker?.primaryKey, placed.primaryKey].compactMap { $0 })
    }

    /// Counts, from any thread.
    final class Counter: Sendable {
        private let count = Mutex(0)
        func add() { count.withLock { $0 += 1 } }
        var value: Int { count.withLock { $0 } }
    }
}

/// A store that counts the reads of variants and passes everything to `base`, its per-key
/// change count too.
private final class CountingStore: ForwardingStore, @unchecked Sendable {
    private let count = Atomic<Int>(0)

    /// How many times ``variants(of:)`` was called.
    var reads: Int { count.load(ordering: .relaxed) }

    override func variants(of primaryKey: String) throws(StorageError) -> [StoredEntry] {
        count.add(1, ordering: .relaxed)
        return try base.variants(of: primaryKey)
    }
}

/// A store that records the keys whose variants are read.
private final class ReadRecordingStore: ForwardingStore, @unchecked Sendable {
    private let read = Mutex<[String]>([])

    /// The keys read, in order.
    var keysRead: [String] {
        get { read.withLock { $0 } }
        set { read.withLock { $0 = newValue } }
    }

    override func variants(of primaryKey: String) throws(StorageError) -> [StoredEntry] {
        read.withLock { $0.append(primaryKey) }
        return try base.variants(of: primaryKey)
    }
}

/// A store whose reads of variants fail.
private final class FailingReads: ForwardingStore, @unchecked Sendable {
    override func variants(of primaryKey: String) throws(StorageError) -> [StoredEntry] {
        throw StorageError(.readFailed, "the disk is gone")
    }
}
