import CacheStorage
import Foundation

// `benchmarks full-store`: new entries written into a disk store that is full (every put evicts
// an older entry), as a proxy's store is once it has run for a while, against the same puts into
// an empty store; for bodies inside the index and in files of their own. Writes are batched
// behind, as `httpcache serve` does. Prints puts per second, the put's p99, and the read and
// write system calls per put (from /proc/self/io).
//
// Knobs: FULL_STORE_CAPACITY_MB (default 1024), FULL_STORE_BODY (bytes, default 16384),
// FULL_STORE_PUTS (measured puts, default 4000), FULL_STORE_INLINE (comma-separated inline
// limits in bytes, default "32768,4096").

/// Read and write system calls of this process so far (`syscr`, `syscw`); zeros where
/// /proc/self/io does not exist.
private func systemCalls() -> (reads: Int, writes: Int) {
    guard let text = try? String(contentsOfFile: "/proc/self/io", encoding: .utf8) else { return (0, 0) }
    var reads = 0
    var writes = 0
    for line in text.split(separator: "\n") {
        let parts = line.split(separator: " ")
        guard parts.count == 2, let value = Int(parts[1]) else { continue }
        if parts[0] == "syscr:" { reads = value }
        if parts[0] == "syscw:" { writes = value }
    }
    return (reads, writes)
}

func runFullStoreBenchmarks() throws {
    let environment = ProcessInfo.processInfo.environment
    let capacity = Int64(environment["FULL_STORE_CAPACITY_MB"].flatMap(Int.init) ?? 1024) << 20
    let size = environment["FULL_STORE_BODY"].flatMap(Int.init) ?? 16_384
    let measured = environment["FULL_STORE_PUTS"].flatMap(Int.init) ?? 4000
    let limits = (environment["FULL_STORE_INLINE"] ?? "32768,4096").split(separator: ",").compactMap { Int($0) }
    let root = FileManager.default.temporaryDirectory.appendingPathComponent(
        "full-store-bench-\(ProcessInfo.processInfo.processIdentifier)", isDirectory: true)
    defer { try? FileManager.default.removeItem(at: root) }
    var corpus = Corpus()
    print("capacity \(capacity >> 20) MiB, bodies of \(size) B, \(measured) puts measured; load \(loadAverage())")
    for limit in limits {
        for full in [false, true] {
            try? FileManager.default.removeItem(at: root)
            var configuration = DiskStore.Configuration(
                directory: root.path, capacity: capacity, inlineBodyLimit: limit)
            configuration.writesBehind = true
            let store = try DiskStore(configuration)
            let filled = full ? Int(capacity / Int64(size)) * 11 / 10 : 0
            _ = fill(store, group: "old", count: filled, size: size, corpus: &corpus)
            try store.flush()
            let before = systemCalls()
            let start = benchClock.now
            let times = fill(store, group: "new", count: measured, size: size, corpus: &corpus)
            try store.flush()
            let elapsed = nanoseconds(start.duration(to: benchClock.now)) / 1e9
            let after = systemCalls()
            let latency = Latency(times)
            let totals = store.totals()
            let index =
                (try? FileManager.default.attributesOfItem(atPath: root.path + "/index.sqlite")[.size] as? Int)
                .flatMap { $0 } ?? 0
            print(
                label("inline ≤ \(limit) B, \(full ? "full store (each put evicts)" : "empty store")")
                    + String(
                        format:
                            "%7.0f puts/s  p99 %6.0f µs  %5.1f reads + %5.1f writes per put  (%d entries, index %d MiB)",
                        Double(measured) / elapsed, latency.p99 / 1000,
                        Double(after.reads - before.reads) / Double(measured),
                        Double(after.writes - before.writes) / Double(measured), totals.entries, index >> 20))
        }
    }
}
