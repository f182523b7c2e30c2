import CacheSemantics
import CacheStorage
import CacheTestSupport
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// The storage suite: per-operation latency of hits (each operation timed on its own with
// ContinuousClock, many samples, random keys), put throughput, the open of stores of 100k and 1M
// entries in a new process (LargeStoreBenchmarks.swift), peak RSS, and the same operations on
// Foundation's URLCache in the same run.
//
// Environment knobs (for profiling; the defaults are the reported configuration):
//   STORAGE_BENCH_OPEN_ENTRIES=100000,1000000   entry counts for the open-time figures
//   STORAGE_BENCH_URLCACHE_ENTRIES=500          entries in the URLCache disk stores
//   STORAGE_BENCH_ONLY=memory|disk|open|urlcache   run one part
//   STORAGE_BENCH_SAMPLE_SCALE=0.01             fewer hit samples (for valgrind)
//   STORAGE_BENCH_INLINE=4096                   the disk stores' inline body limit (default 32 KiB)

// MARK: - Timing

let benchClock = ContinuousClock()

func nanoseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1e9 + Double(duration.components.attoseconds) / 1e9
}

/// Percentiles of individually timed operations.
struct Latency {
    var p50: Double
    var p99: Double
    var p999: Double
    var max: Double
    var count: Int

    init(_ samples: [Double]) {
        let sorted = samples.sorted()
        func at(_ fraction: Double) -> Double {
            sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
        }
        p50 = at(0.5)
        p99 = at(0.99)
        p999 = at(0.999)
        max = sorted.last ?? .nan
        count = sorted.count
    }

    var text: String {
        "p50 \(microseconds(p50))  p99 \(microseconds(p99))  (p99.9 \(microseconds(p999)), max \(microseconds(max)), "
            + "n=\(count))"
    }
}

/// A duration in nanoseconds as microseconds with a unit.
private func microseconds(_ nanoseconds: Double) -> String {
    if nanoseconds.isNaN { return "n/a" }
    let value = nanoseconds / 1000
    if value >= 10_000 { return String(format: "%.1f ms", value / 1000) }
    if value >= 100 { return String(format: "%.0f µs", value) }
    return String(format: "%.2f µs", value)
}

func label(_ text: String) -> String { text.padding(toLength: 56, withPad: " ", startingAt: 0) }

/// Times each call of `operation` on its own. `keys` picks the argument of each sample;
/// `check` validates the result outside the timed region and counts failures.
private func timeEach<R>(
    samples: Int, warmup: Int = 200, keys: [Int], _ operation: (Int) -> R?, check: (Int, R) -> Bool
) -> (latency: Latency, failures: Int) {
    for index in 0..<min(warmup, samples) { blackHole(operation(keys[index % keys.count])) }
    var times: [Double] = []
    times.reserveCapacity(samples)
    var failures = 0
    for sample in 0..<samples {
        let key = keys[sample % keys.count]
        let start = benchClock.now
        let result = operation(key)
        let elapsed = start.duration(to: benchClock.now)
        times.append(nanoseconds(elapsed))
        if let result {
            if !check(key, result) { failures += 1 }
        } else {
            failures += 1
        }
    }
    return (Latency(times), failures)
}

func randomKeys(count: Int, range: Int, seed: UInt64) -> [Int] {
    var random = SplitMix64(seed: seed)
    return (0..<count).map { _ in Int(random.next() % UInt64(range)) }
}

// MARK: - Corpus

/// Heads and bodies the benchmarks store: typical response fields, real serialized facts,
/// and bodies that are one random buffer per size with the key's number stamped in front
/// (so every body differs and can be checked byte for byte without keeping copies).
struct Corpus {
    let facts: [UInt8]
    let fields: HeaderFields
    private var bases: [Int: [UInt8]] = [:]

    init() {
        facts = Fixtures.typicalStoredFacts(uri: "https://bench.example/item", roundTrip: 0.1).serialized()
        fields = Fixtures.typicalResponseFields
    }

    static func url(_ group: String, _ key: Int) -> String { "https://bench.example/\(group)/item/\(key)" }

    func head(_ group: String, _ key: Int) -> EntryHead {
        let url = Self.url(group, key)
        return EntryHead(primaryKey: url, url: url, status: 200, fields: fields, facts: facts)
    }

    mutating func body(_ key: Int, size: Int) -> [UInt8] {
        if bases[size] == nil {
            var random = SplitMix64(seed: UInt64(size) &* 0x1234_5678_9abc_def1)
            bases[size] = (0..<size).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        }
        var body = bases[size]!
        var stamp = UInt64(key)
        for index in 0..<min(8, size) {
            body[index] = UInt8(truncatingIfNeeded: stamp)
            stamp >>= 8
        }
        return body
    }

    /// Whether `bytes` is the body of `key`: the size, the stamp, and every other byte.
    func matches(_ bytes: some Collection<UInt8>, key: Int, size: Int) -> Bool {
        guard bytes.count == size, let base = bases[size] else { return false }
        let stamp = UInt64(key)
        var index = 0
        for byte in bytes {
            let expected = index < 8 ? UInt8(truncatingIfNeeded: stamp >> UInt64(8 * index)) : base[index]
            if byte != expected { return false }
            index += 1
        }
        return true
    }
}

/// One put through the public writer API, in chunks of at most 64 KiB.
func put(_ store: some CacheStore, _ head: EntryHead, _ body: [UInt8]) throws(StorageError) {
    let writer = try store.makeWriter(for: head)
    var offset = 0
    repeat {
        let end = min(body.count, offset + 65_536)
        try writer.append(offset == 0 && end == body.count ? body : Array(body[offset..<end]))
        offset = end
    } while offset < body.count
    try writer.commit()
}

/// A hit as a cache performs it: the variants of the key, the body of the (only) variant,
/// and recording the access.
@inline(never)
func hit(_ store: some CacheStore, _ primaryKey: String, now: Double) -> [UInt8]? {
    guard let variants = try? store.variants(of: primaryKey), let entry = variants.first,
        let body = try? store.body(of: entry.id)
    else { return nil }
    store.recordAccess(entry.id, at: now)
    return body
}

/// Fills `store` with `count` entries of `size` bytes; returns each put's time.
func fill(
    _ store: some CacheStore, group: String, count: Int, size: Int, corpus: inout Corpus
) -> [Double] {
    var times: [Double] = []
    times.reserveCapacity(count)
    for key in 0..<count {
        let head = corpus.head(group, key)
        let body = corpus.body(key, size: size)
        let start = benchClock.now
        do {
            try put(store, head, body)
        } catch {
            fatalError("put \(key) into \(group) failed: \(error)")
        }
        times.append(nanoseconds(start.duration(to: benchClock.now)))
    }
    return times
}

private func formatRate(_ perSecond: Double) -> String {
    perSecond >= 10_000 ? String(format: "%.0f", perSecond) : String(format: "%.1f", perSecond)
}

private func verdict(_ pass: Bool) -> String { pass ? "PASS" : "FAIL" }

private func sizeName(_ size: Int) -> String {
    size >= 1 << 20 ? "\(size >> 20) MiB" : "\(size >> 10) KiB"
}

// MARK: - URLCache

/// Foundation's URLCache with one response per key, for the same operations.
private struct URLCacheBench {
    let cache: URLCache
    let fields: [String: String]

    /// `directory` is always given, so even the memory-only cache never creates the default
    /// one under the home directory.
    init(memoryCapacity: Int, diskCapacity: Int, directory: URL, fields: HeaderFields) {
        cache = URLCache(memoryCapacity: memoryCapacity, diskCapacity: diskCapacity, diskPath: directory.path)
        var dictionary: [String: String] = [:]
        for field in fields { dictionary[field.name] = field.value }
        self.fields = dictionary
    }

    static func request(_ group: String, _ key: Int) -> URLRequest {
        URLRequest(url: URL(string: Corpus.url(group, key))!)
    }

    func store(_ group: String, _ key: Int, body: [UInt8]) {
        let request = Self.request(group, key)
        let response = HTTPURLResponse(
            url: request.url!, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: fields)!
        cache.storeCachedResponse(CachedURLResponse(response: response, data: Data(body)), for: request)
    }

    @inline(never)
    func lookup(_ request: URLRequest) -> Data? {
        cache.cachedResponse(for: request)?.data
    }
}

// MARK: - The suite

/// Runs the storage benchmarks and returns the lines to print.
func runStorageBenchmarks() -> [String] {
    var lines: [String] = []
    func say(_ line: String) {
        print(line)
        lines.append(line)
    }
    let environment = ProcessInfo.processInfo.environment
    let only = environment["STORAGE_BENCH_ONLY"]
    func runs(_ part: String) -> Bool { only == nil || only == part }
    let openCounts = (environment["STORAGE_BENCH_OPEN_ENTRIES"] ?? "100000,1000000").split(separator: ",").compactMap {
        Int($0)
    }
    let urlCacheEntries = Int(environment["STORAGE_BENCH_URLCACHE_ENTRIES"] ?? "") ?? 500
    let sampleScale = Double(environment["STORAGE_BENCH_SAMPLE_SCALE"] ?? "") ?? 1
    func scaled(_ samples: Int) -> Int { max(10, Int(Double(samples) * sampleScale)) }

    let root = FileManager.default.temporaryDirectory.appendingPathComponent(
        "storage-bench-\(ProcessInfo.processInfo.processIdentifier)", isDirectory: true)
    try? FileManager.default.removeItem(at: root)
    try? FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: root) }
    let inlineBodyLimit = ProcessInfo.processInfo.environment["STORAGE_BENCH_INLINE"].flatMap(Int.init)
    func diskConfiguration(_ name: String) -> DiskStore.Configuration {
        // Large enough that nothing is evicted while measuring.
        var configuration = DiskStore.Configuration(
            directory: root.appendingPathComponent(name).path, capacity: 64 << 30)
        if let inlineBodyLimit { configuration.inlineBodyLimit = inlineBodyLimit }
        return configuration
    }
    func openDisk(_ name: String) -> DiskStore {
        do { return try DiskStore(diskConfiguration(name)) } catch { fatalError("cannot open \(name): \(error)") }
    }

    var corpus = Corpus()
    let now = Date().timeIntervalSince1970
    let sizes = [1 << 10, 16 << 10, 1 << 20]

    say("temp directory: \(root.path)")
    let overhead = timeEach(samples: 100_000, keys: [0], { $0 }, check: { _, _ in true }).latency
    say(label("timer overhead (empty operation)") + overhead.text)

    // MARK: memory hits
    var oursMemory: Latency?
    if runs("memory") || runs("urlcache") {
        let entries = 10_000
        let memory = MemoryStore(capacity: 1 << 30)
        _ = fill(memory, group: "mem", count: entries, size: 1 << 10, corpus: &corpus)
        let keys = randomKeys(count: 200_000, range: entries, seed: 1)
        let urls = (0..<entries).map { Corpus.url("mem", $0) }
        let result = timeEach(samples: scaled(200_000), keys: keys, { hit(memory, urls[$0], now: now) }) {
            corpus.matches($1, key: $0, size: 1 << 10)
        }
        oursMemory = result.latency
        say("== Memory hits (MemoryStore, \(entries) entries, 1 KiB bodies; variants + body + recordAccess)")
        say(label("memory hit 1 KiB") + result.latency.text + failureNote(result.failures))
        let variants = timeEach(samples: scaled(100_000), keys: keys, { try? memory.variants(of: urls[$0]) }) {
            $1.count == 1
        }
        say(label("  of which variants(of:)") + variants.latency.text)
        let ids = (0..<entries).map { try! memory.variants(of: urls[$0])[0].id }
        let bodies = timeEach(samples: scaled(100_000), keys: keys, { try? memory.body(of: ids[$0]) }) {
            $1.count == 1 << 10
        }
        say(label("  of which body(of:)") + bodies.latency.text)
        let access = timeEach(samples: scaled(100_000), keys: keys, { memory.recordAccess(ids[$0], at: now) }) { _, _ in
            true
        }
        say(label("  of which recordAccess") + access.latency.text)
        say(
            "target memory hit <= 2 µs: p50 \(verdict(result.latency.p50 <= 2_000)), "
                + "p99 \(verdict(result.latency.p99 <= 2_000))")
    }

    // MARK: disk hits
    var oursDisk: [Int: Latency] = [:]  // at 10k (1 MiB: 1k) entries
    if runs("disk") {
        say("== Disk hits (plain DiskStore, no memory tier; random keys; files in the OS page cache)")
        for size in sizes {
            let entries = size >= 1 << 20 ? 1_000 : 10_000
            let name = "disk-\(size)"
            let store = openDisk(name)
            let putTimes = fill(store, group: name, count: entries, size: size, corpus: &corpus)
            try? store.flush()
            let samples = scaled(size >= 1 << 20 ? 3_000 : 30_000)
            let keys = randomKeys(count: samples, range: entries, seed: UInt64(size))
            let urls = (0..<entries).map { Corpus.url(name, $0) }
            let result = timeEach(samples: samples, keys: keys, { hit(store, urls[$0], now: now) }) {
                corpus.matches($1, key: $0, size: size)
            }
            oursDisk[size] = result.latency
            say(
                label("disk hit \(sizeName(size)) (\(entries) entries)") + result.latency.text
                    + failureNote(result.failures))
            if size == 16 << 10 {
                let variants = timeEach(samples: samples, keys: keys, { try? store.variants(of: urls[$0]) }) {
                    $1.count == 1
                }
                say(label("  of which variants(of:)") + variants.latency.text)
                let ids = (0..<entries).map { try! store.variants(of: urls[$0])[0].id }
                let bodies = timeEach(samples: samples, keys: keys, { try? store.body(of: ids[$0]) }) {
                    corpus.matches($1, key: $0, size: size)
                }
                say(label("  of which body(of:)") + bodies.latency.text)
                let access = timeEach(samples: samples, keys: keys, { store.recordAccess(ids[$0], at: now) }) { _, _ in
                    true
                }
                say(label("  of which recordAccess (flushes every 256)") + access.latency.text)

                // Put throughput: the fill of this store.
                let total = putTimes.reduce(0, +)
                let perSecond = Double(entries) / (total / 1e9)
                let megabytes = Double(entries * size) / 1_048_576 / (total / 1e9)
                say("== Puts (DiskStore, 16 KiB bodies, processCrashSafe, one transaction per put)")
                say(
                    label("put 16 KiB x \(entries) into an empty store")
                        + "\(formatRate(perSecond)) entries/s, \(String(format: "%.1f", megabytes)) MiB/s; per put "
                        + Latency(putTimes).text)
            }
        }
        if let one = oursDisk[1 << 10], let sixteen = oursDisk[16 << 10] {
            say(
                "target disk hit <= 30 µs (bodies up to 16 KiB): 1 KiB p50 \(verdict(one.p50 <= 30_000)) "
                    + "p99 \(verdict(one.p99 <= 30_000)); 16 KiB p50 \(verdict(sixteen.p50 <= 30_000)) "
                    + "p99 \(verdict(sixteen.p99 <= 30_000))")
        }
    }

    // MARK: open time
    if runs("open"), !openCounts.isEmpty {
        say(
            "== Open time (a new process opens a DiskStore and answers a hit of a random key and its body; typical "
                + "heads, 100-byte inline bodies; aim for 1,000,000 entries: <= 1 s)")
        do {
            let medians = try runLargeStoreOpens(counts: openCounts, corpus: &corpus, say: say)
            if let small = medians[100_000], let large = medians[1_000_000] {
                say(
                    "target open time does not grow with entries (1M median <= 2x 100k median, warm): "
                        + String(format: "ratio %.2f ", large / small) + verdict(large <= 2 * small))
            }
        } catch {
            say("open time: \(error)")
        }
    }

    // MARK: URLCache
    if runs("urlcache") {
        say("== Foundation URLCache (swift-corelibs-foundation) in the same run")
        say(
            "note: URLCache on Linux lists its whole directory on every lookup and several times per store (both "
                + "O(entries)), so its disk stores hold only \(urlCacheEntries) entries (1 MiB: 200); ours are "
                + "measured at the same counts here for the ratios")

        // Memory hits.
        if let oursMemory {
            let entries = 10_000
            let urlCache = URLCacheBench(
                memoryCapacity: 1 << 30, diskCapacity: 0, directory: root.appendingPathComponent("urlcache-memory"),
                fields: corpus.fields)
            for key in 0..<entries { urlCache.store("umem", key, body: corpus.body(key, size: 1 << 10)) }
            let requests = (0..<entries).map { URLCacheBench.request("umem", $0) }
            let keys = randomKeys(count: 100_000, range: entries, seed: 1)
            let result = timeEach(samples: scaled(100_000), keys: keys, { urlCache.lookup(requests[$0]) }) {
                corpus.matches($1, key: $0, size: 1 << 10)
            }
            say(
                label("URLCache memory-only hit 1 KiB (\(entries) entries)") + result.latency.text
                    + failureNote(result.failures, what: "nil or wrong bytes"))
            say(ratioLine("memory hit 1 KiB", ours: oursMemory, theirs: result.latency, failures: result.failures))
        }

        var ratioPasses: [Bool] = []
        for size in sizes {
            let entries = size >= 1 << 20 ? 200 : urlCacheEntries
            let samples = size >= 1 << 20 ? 100 : 300
            let group = "u\(size)"
            // Ours, same entry count.
            let ours = openDisk("ours-\(group)")
            let ourPuts = fill(ours, group: group, count: entries, size: size, corpus: &corpus)
            try? ours.flush()
            // URLCache, disk only.
            let directory = root.appendingPathComponent("urlcache-\(group)", isDirectory: true)
            let urlCache = URLCacheBench(
                memoryCapacity: 0, diskCapacity: 64 << 30, directory: directory, fields: corpus.fields)
            var theirPuts: [Double] = []
            for key in 0..<entries {
                let body = corpus.body(key, size: size)
                let start = benchClock.now
                urlCache.store(group, key, body: body)
                theirPuts.append(nanoseconds(start.duration(to: benchClock.now)))
            }
            let requests = (0..<entries).map { URLCacheBench.request(group, $0) }
            let urls = (0..<entries).map { Corpus.url(group, $0) }
            let keys = randomKeys(count: max(samples, 30_000), range: entries, seed: UInt64(size) + 7)
            let mine = timeEach(
                samples: scaled(size >= 1 << 20 ? 3_000 : 30_000), keys: keys, { hit(ours, urls[$0], now: now) }
            ) {
                corpus.matches($1, key: $0, size: size)
            }
            let theirs = timeEach(samples: samples, warmup: 10, keys: keys, { urlCache.lookup(requests[$0]) }) {
                corpus.matches($1, key: $0, size: size)
            }
            say(
                label("ours disk hit \(sizeName(size)) (\(entries) entries)") + mine.latency.text
                    + failureNote(mine.failures))
            say(
                label("URLCache disk hit \(sizeName(size)) (\(entries) entries)") + theirs.latency.text
                    + failureNote(theirs.failures, what: "nil or wrong bytes"))
            say(
                ratioLine(
                    "disk hit \(sizeName(size))", ours: mine.latency, theirs: theirs.latency, failures: theirs.failures)
            )
            if theirs.failures < samples {
                ratioPasses.append(theirs.latency.p50 >= 10 * mine.latency.p50)
            }
            if size == 16 << 10 {
                let ourRate = Double(entries) / (ourPuts.reduce(0, +) / 1e9)
                let theirRate = Double(entries) / (theirPuts.reduce(0, +) / 1e9)
                say(
                    label("ours put 16 KiB x \(entries)") + "\(formatRate(ourRate)) entries/s, "
                        + String(format: "%.1f MiB/s", ourRate * 16 / 1024))
                say(
                    label("URLCache put 16 KiB x \(entries)") + "\(formatRate(theirRate)) entries/s, "
                        + String(format: "%.1f MiB/s", theirRate * 16 / 1024) + "; per put " + Latency(theirPuts).text)
                say(String(format: "ratio put throughput ours/URLCache = %.1fx", ourRate / theirRate))
            }
            try? FileManager.default.removeItem(at: directory)
        }
        say(
            "target >= 10x faster than URLCache on disk hits (p50, all sizes): "
                + verdict(!ratioPasses.isEmpty && ratioPasses.allSatisfy { $0 }))
    }

    say("peak RSS after the storage suite: \(Int(peakResidentMiB())) MiB")
    return lines
}

private func failureNote(_ failures: Int, what: String = "wrong or missing bodies") -> String {
    failures == 0 ? "" : "  !! \(failures) \(what)"
}

private func ratioLine(_ what: String, ours: Latency, theirs: Latency, failures: Int) -> String {
    if failures >= theirs.count { return "ratio \(what): URLCache returned nil for every lookup, no ratio" }
    func factor(_ ours: Double, _ theirs: Double) -> String {
        ours <= theirs
            ? String(format: "%.4f, URLCache %.1fx slower", ours / theirs, theirs / ours)
            : String(format: "%.4f, ours %.1fx slower", ours / theirs, ours / theirs)
    }
    return "ratio \(what) ours/URLCache: p50 \(factor(ours.p50, theirs.p50)); p99 \(factor(ours.p99, theirs.p99))"
}
