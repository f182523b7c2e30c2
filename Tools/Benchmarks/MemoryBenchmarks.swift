import CacheSemantics
import CacheStorage
import CacheTestSupport
import Foundation

#if canImport(Glibc)
import Glibc
#endif

// The memory suite: what an entry of the memory tier really costs, against what its capacity
// charges for it (MemoryStore.accountedBytes, from MemoryCost's estimates), and what the disk
// store keeps in memory per entry.
//   1. 200,000 entries with one-byte bodies in a store large enough to keep them all, with a
//      small head (the few fields a loopback origin sends) and a typical one (ten fields):
//      resident memory grown per entry, measured, against the bytes charged per entry. The
//      suite fails when an entry is charged less than it takes. Then the bytes beyond the key
//      and the body (aim <= 200 B), and where they go: the same heads kept alone in an array,
//      measured the same way, are the head's share; the rest is the store's bookkeeping.
//   2. The same 200,000 entries through a store of 1 MiB: the bytes charged stay within it, and
//      resident memory stays flat once it is full.
//   3. The disk store: the heads it remembers per key (read 10,000 keys of a store of typical
//      entries: anonymous memory grown per key), and a store of 1,000,000 entries (the storage
//      suite's, built once and kept under .build) opened and read at 100,000 random keys, once
//      the hashes of its keys are built: what grows with the entries stored, per entry (aim
//      <= 200 B), its index on disk per entry.
// `scripts/memory-bound` measures the same through `httpcache serve --memory-only --memory 1M`.

/// glibc's `malloc_trim`, which Glibc's module map leaves out (`<malloc.h>`).
private let mallocTrim: (@convention(c) (Int) -> Int32)? = {
    #if canImport(Glibc)
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return nil }
    return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
    #else
    return nil
    #endif
}()

/// The resident memory of this process in bytes, after handing back what malloc holds free:
/// all of it (`VmRSS`), or the part `field` of /proc/self/status names (`RssAnon`: the heap
/// and other private memory; `RssFile`: mapped files' pages).
func residentBytes(_ field: String = "VmRSS") -> Int64 {
    _ = mallocTrim?(0)
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix(field + ":") {
        return (Int64(line.dropFirst(field.count + 1).filter(\.isNumber)) ?? 0) * 1024
    }
    return 0
}

/// The verdict on a figure of bytes per entry.
private func aim(_ bytes: Double) -> String { "aim <= 200 B: \(bytes <= 200 ? "met" : "not met")" }

/// A head like the ones `httpcache serve` stores for `/u/<number>`: every string and array
/// made anew, as parsing each response does.
private func head(_ number: Int, typical: Bool) -> EntryHead {
    let url = "http://127.0.0.1:8081/u/\(number)"
    var fields: HeaderFields
    if typical {
        fields = Fixtures.typicalResponseFields
        fields["ETag"] = "\"\(String(number, radix: 16))-5d8c72a5edda8d6a\""
        fields["X-Request-Id"] = "7f3c9a1e-2b4d-4c8e-9f1a-\(100_000_000_000 + number)"
    } else {
        fields = ["Cache-Control": "max-age=3600", "Content-Length": "1"]
    }
    fields["Date"] = HTTPDate.format(Timestamp(secondsSince1970: 1_764_000_000 + Double(number)))
    let facts = Fixtures.typicalStoredFacts(uri: url, roundTrip: 0.001).serialized()
    return EntryHead(primaryKey: url, url: url, status: 200, fields: fields, facts: facts)
}

private func fill(
    _ store: MemoryStore, count: Int, typical: Bool, checkpoints: [Int] = [], at: (Int) -> Void = { _ in }
)
    throws
{
    for number in 0..<count {
        if checkpoints.contains(number) { at(number) }
        let writer = try store.makeWriter(for: head(number, typical: typical))
        try writer.append([UInt8(truncatingIfNeeded: number)])
        try writer.commit()
    }
    if checkpoints.contains(count) { at(count) }
}

/// Runs the suite; `false` when an entry is charged less than it takes or a bounded store
/// holds more than its capacity.
func runMemoryBenchmarks() throws -> Bool {
    let count = 200_000
    var passed = true
    for typical in [false, true] {
        let before = residentBytes()
        var store: MemoryStore? = MemoryStore(capacity: 1 << 40)
        if let store { try fill(store, count: count, typical: typical) }
        let grown = residentBytes() - before
        let charged = store?.accountedBytes ?? 0
        let measuredPerEntry = Double(grown) / Double(count)
        let chargedPerEntry = Double(charged) / Double(count)
        print(
            "\(typical ? "typical heads (10 fields)" : "small heads (3 fields)"), one-byte bodies, \(count) entries "
                + "kept: resident memory +\(Int(measuredPerEntry)) bytes per entry, charged \(Int(chargedPerEntry)) "
                + "bytes per entry (\(String(format: "%.2f", chargedPerEntry / measuredPerEntry))x)")
        if chargedPerEntry < measuredPerEntry {
            print("  FAILED: an entry is charged less than it takes")
            passed = false
        }
        store = nil
        // The same heads alone, made the same way: what holding the head takes.
        let headsBefore = residentBytes()
        var heads: [EntryHead]? = (0..<count).map { head($0, typical: typical) }
        let headPerEntry = Double(residentBytes() - headsBefore) / Double(count)
        let sample = heads?[count / 2]
        heads = nil
        let key = Double(sample?.primaryKey.utf8.count ?? 0)
        let serialized = Double((sample?.fields.serialized().count ?? 0) + (sample?.facts.count ?? 0))
        let beyond = measuredPerEntry - key - 1
        let bookkeeping = measuredPerEntry - headPerEntry - 1
        print(
            "  beyond the key (\(Int(key)) B) and the body (1 B): \(Int(beyond)) B per entry, \(aim(beyond)); "
                + "of which the head as kept (its fields, facts and URL; \(Int(serialized)) B serialized) "
                + "\(Int(headPerEntry - key)) B, and the store's bookkeeping (its node, indexes, the body's "
                + "allocation) \(Int(bookkeeping)) B: \(aim(bookkeeping))")
    }

    let capacity: Int64 = 1 << 20
    let bounded = MemoryStore(capacity: capacity)
    let start = residentBytes()
    var line = "small heads through a store of 1 MiB: resident memory over the start at"
    try fill(bounded, count: count, typical: false, checkpoints: [0, 70_000, 100_000, count]) { done in
        line += " \(done): +\(String(format: "%.1f", Double(residentBytes() - start) / 1_048_576)) MiB;"
    }
    let totals = bounded.totals()
    print(line)
    print(
        "  then \(totals.entries) entries held (\(totals.bodyBytes) body bytes), \(bounded.accountedBytes) bytes "
            + "charged of \(capacity)")
    if bounded.accountedBytes > capacity {
        print("  FAILED: more charged than the capacity")
        passed = false
    }
    if try !runMemoBenchmarks() { passed = false }
    try measureDiskStore()
    return passed
}

/// What a disk store keeps in memory: the heads it remembers per key, and what grows with the
/// entries it stores.
private func measureDiskStore() throws {
    let directory = TemporaryDirectory("memory-bench")
    let keys = 10_000
    var corpus = Corpus()
    do {
        let store = try DiskStore(DiskStore.Configuration(directory: directory.path))
        store.beginBatchedWrites()
        for key in 0..<keys { try put(store, corpus.head("memo", key), corpus.body(key, size: 100)) }
        try store.endBatchedWrites()
        let before = residentBytes("RssAnon")
        for key in 0..<keys { blackHole(try store.variants(of: Corpus.url("memo", key))) }
        let perKey = Double(residentBytes("RssAnon") - before) / Double(keys)
        print(
            "disk store, typical heads: the heads remembered per key read (\(keys) keys): +\(Int(perKey)) B of "
                + "memory each (the key \(Corpus.url("memo", 0).utf8.count) B and the head as kept, as in the memory "
                + "tier); at most 16,384 keys and 16 MiB whatever the store holds")
    }

    let count = 1_000_000
    let large = try builtStore(count: count, corpus: &corpus) { print($0) }
    let anonymous = residentBytes("RssAnon")
    let mapped = residentBytes("RssFile")
    let store = try DiskStore(DiskStore.Configuration(directory: large))
    var random = SplitMix64(seed: 30)
    let now = Date().timeIntervalSince1970
    for _ in 0..<100_000 { blackHole(hit(store, Corpus.url("open", Int(random.next() % UInt64(count))), now: now)) }
    try store.flush()
    // The hashes of the keys it holds, built in the background after the first lookups.
    let deadline = Date().addingTimeInterval(60)
    while !store.knownKeys.inUse && Date() < deadline { usleep(50_000) }
    let perEntry = Double(residentBytes("RssAnon") - anonymous) / Double(count)
    print(
        "disk store of \(count) entries, opened and read at 100,000 random keys: memory +\(Int(perEntry)) B per "
            + "stored entry (the hashes of the keys it holds, "
            + (store.knownKeys.inUse ? "\(store.knownKeys.count) of 8 B in a set" : "NOT BUILT within 60 s")
            + "; the remembered heads, SQLite's page caches (at most 16 MiB for reads, SQLite's "
            + "2 MB default for the access times' writer) and the access times not yet written: bounded), \(aim(perEntry)); "
            + "index pages mapped from the page cache +\((residentBytes("RssFile") - mapped) >> 20) MiB "
            + "(SQLite maps at most 256 MiB of the index; the kernel reclaims them as it needs)")
    print(indexLine(large, count: count))
}
