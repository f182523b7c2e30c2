import CacheSemantics
import CacheStorage
import CacheTestSupport
import Foundation

#if canImport(Glibc)
import Glibc
#endif

// The memory suite: what an entry of the memory tier really costs, against what its capacity
// charges for it (MemoryStore.accountedBytes, from MemoryCost's estimates).
//   1. 200,000 entries with one-byte bodies in a store large enough to keep them all, with a
//      small head (the few fields a loopback origin sends) and a typical one (ten fields):
//      resident memory grown per entry, measured, against the bytes charged per entry. The
//      suite fails when an entry is charged less than it takes.
//   2. The same 200,000 entries through a store of 1 MiB: the bytes charged stay within it, and
//      resident memory stays flat once it is full.
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

/// The resident memory of this process in bytes (VmRSS), after handing back what malloc
/// holds free.
private func residentBytes() -> Int64 {
    _ = mallocTrim?(0)
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        return (Int64(line.dropFirst(6).filter(\.isNumber)) ?? 0) * 1024
    }
    return 0
}

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
    return passed
}
