import CacheStorage
import CacheTestSupport
import Foundation

#if canImport(Glibc)
import Glibc
#endif

// Opening a large store, in a new process: disk stores of 100,000 and 1,000,000 entries (typical
// heads, 100-byte bodies inline in the index) are built once with batched writes and kept next
// to this executable (.build/<triple>/release/benchmark-stores/), so later runs reuse them. Each
// open is a new process of this executable (`benchmarks large-store-open`), so nothing of the
// store is warm in it: it opens the store and answers one hit of a random key, and prints the
// time of each and its peak RSS. Measured with the store's files in the page cache (warm: read
// whole just before) and dropped from it (cold: posix_fadvise(POSIX_FADV_DONTNEED) after writing
// them out, which needs no root; mincore says how much of the index was still cached; the
// executable and its libraries stay cached), through a plain DiskStore and through a TieredStore
// (HTTPCache's default: 32 MiB of memory in front of the disk). Then a store of 100,000 entries
// whose bodies are in files: the first hit while the sweep that every open starts in the
// background goes through them, and how long one sweep takes.

/// The URL group of the stored entries.
private let group = "open"
/// The size of every stored body: small enough to be kept inline in the index.
private let bodySize = 100
/// The files of a store that an open reads.
private let indexFiles = ["index.sqlite", "index.sqlite-wal", "index.sqlite-shm"]

/// The directory of the store of `count` entries (`inFiles`: each body in a file of its own),
/// built first when it is missing or was built by another index format (a file `built` says
/// what it holds once the build has finished).
func builtStore(count: Int, inFiles: Bool = false, corpus: inout Corpus, say: (String) -> Void) throws -> String {
    let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    let name = "\(count)\(inFiles ? "-files" : "")"
    let directory = executable.deletingLastPathComponent().appendingPathComponent("benchmark-stores/\(name)").path
    let marker = directory + "/built"
    let expected = "\(count) entries\(inFiles ? ", bodies in files" : ""), index format \(DiskStore.formatVersion)"
    let what = "store of \(count) entries" + (inFiles ? " (bodies in files)" : "")
    if (try? String(contentsOfFile: marker, encoding: .utf8)) == expected {
        say(label(what) + "reused from an earlier run: \(directory)")
        return directory
    }
    try? FileManager.default.removeItem(atPath: directory)
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let start = benchClock.now
    do {
        weak var released: DiskStore?
        do {
            let store = try DiskStore(
                DiskStore.Configuration(directory: directory, inlineBodyLimit: inFiles ? 0 : 32 * 1024))
            released = store
            store.beginBatchedWrites()
            for key in 0..<count { try put(store, corpus.head(group, key), corpus.body(key, size: bodySize)) }
            try store.endBatchedWrites()
        }
        // Closed once its background sweep lets go of it too.
        for _ in 0..<500 where released != nil { Thread.sleep(forTimeInterval: 0.01) }
    }
    let seconds = nanoseconds(start.duration(to: benchClock.now)) / 1e9
    try expected.write(toFile: marker, atomically: true, encoding: .utf8)
    say(
        label(what)
            + String(
                format: "built in %.1f s (%.0f puts/s, batched writes): %@", seconds, Double(count) / seconds,
                directory))
    return directory
}

/// The size of the index of the store of `count` entries in `directory` (the index file and its
/// WAL), in all and per entry.
func indexLine(_ directory: String, count: Int) -> String {
    let bytes = indexFiles.dropLast().reduce(Int64(0)) { $0 + fileSize(directory + "/" + $1) }
    return label("  index on disk")
        + String(
            format: "%.1f MB, %.0f bytes per entry (typical heads, %d-byte bodies inline)", Double(bytes) / 1e6,
            Double(bytes) / Double(count), bodySize)
}

/// The bytes of `path` (0 when missing).
private func fileSize(_ path: String) -> Int64 {
    var status = stat()
    return lstat(path, &status) == 0 ? Int64(status.st_size) : 0
}

/// Writes `path` out and drops its pages from the page cache.
private func dropFromPageCache(_ path: String) {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return }
    defer { close(descriptor) }
    fsync(descriptor)
    _ = posix_fadvise(descriptor, 0, 0, Int32(POSIX_FADV_DONTNEED))
}

/// Reads `path` whole, so that its pages are in the page cache.
private func readWhole(_ path: String) {
    guard let handle = FileHandle(forReadingAtPath: path) else { return }
    defer { try? handle.close() }
    while let chunk = try? handle.read(upToCount: 1 << 20), !chunk.isEmpty {}
}

/// The fraction of `path`'s pages in the page cache (mincore); `nil` when it cannot be told.
private func cachedFraction(_ path: String) -> Double? {
    let size = Int(fileSize(path))
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard size > 0, descriptor >= 0 else { return nil }
    defer { close(descriptor) }
    guard let mapping = mmap(nil, size, PROT_READ, MAP_SHARED, descriptor, 0), mapping != MAP_FAILED else {
        return nil
    }
    defer { munmap(mapping, size) }
    let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
    var pages = [UInt8](repeating: 0, count: (size + pageSize - 1) / pageSize)
    guard mincore(mapping, size, &pages) == 0 else { return nil }
    return Double(pages.count { $0 & 1 != 0 }) / Double(pages.count)
}

/// What one open printed.
private struct OpenRun {
    var open: Double
    var hit: Double
    var process: Double
    var peakMiB: Double
    /// How long the sweep took that the open's own had to finish for (`sweep` mode).
    var sweep: Double
}

/// Runs `benchmarks large-store-open directory key mode` in a new process.
private func openInChild(_ directory: String, key: Int, mode: String) throws -> OpenRun {
    let child = try run(CommandLine.arguments[0], ["large-store-open", directory, String(key), mode])
    let fields = child.output.split(whereSeparator: \.isWhitespace).compactMap { Double($0) }
    guard child.status == 0, fields.count == 4 else {
        throw LargeStoreFailure(
            description: "the open of \(directory) (\(mode), key \(key)) failed: exit \(child.status), \(child.output)")
    }
    return OpenRun(open: fields[0], hit: fields[1], process: child.seconds * 1e9, peakMiB: fields[2], sweep: fields[3])
}

private struct LargeStoreFailure: Error, CustomStringConvertible {
    var description: String
}

/// In the child process: opens the store in `directory` (plainly, or `tiered` behind a memory
/// tier) and answers one hit of `key`; prints the open's and the hit's nanoseconds, the peak
/// RSS in MiB, and in `sweep` mode the nanoseconds a sweep then takes (it waits for the one the
/// open started, then sweeps again), else 0. `none` opens nothing: the process's own peak RSS.
/// Throws when the body is wrong.
func runLargeStoreOpenChild(directory: String, key: Int, mode: String) throws {
    guard mode != "none" else {
        print("0 0 \(peakResidentMiB()) 0")
        return
    }
    var corpus = Corpus()
    let expected = corpus.body(key, size: bodySize)
    let start = benchClock.now
    let disk = try DiskStore(DiskStore.Configuration(directory: directory))
    let store: any CacheStore =
        mode == "tiered" ? TieredStore(memory: MemoryStore(capacity: 32 << 20), disk: disk) : disk
    let opened = benchClock.now
    let body = hit(store, Corpus.url(group, key), now: Date().timeIntervalSince1970)
    let answered = benchClock.now
    guard body == expected else { throw LargeStoreFailure(description: "key \(key): a wrong or missing body") }
    if mode == "sweep" { disk.sweep() }
    print(
        "\(nanoseconds(start.duration(to: opened))) \(nanoseconds(opened.duration(to: answered))) \(peakResidentMiB()) "
            + "\(mode == "sweep" ? nanoseconds(answered.duration(to: benchClock.now)) : 0)")
}

/// Builds (or reuses) a store of each of `counts` entries and opens each in new processes, warm
/// and cold, plain and tiered; returns the median time to open and answer the first hit, warm
/// and plain, by count.
func runLargeStoreOpens(counts: [Int], corpus: inout Corpus, say: (String) -> Void) throws -> [Int: Double] {
    let baseline = try openInChild("", key: 0, mode: "none")
    say(
        label("a process of this executable that opens nothing") + String(format: "peak RSS %.1f MiB", baseline.peakMiB)
    )
    var warmMedians: [Int: Double] = [:]
    for count in counts.sorted() {
        let directory = try builtStore(count: count, corpus: &corpus, say: say)
        say(indexLine(directory, count: count))
        var random = SplitMix64(seed: UInt64(count))
        for cold in [false, true] {
            for mode in ["disk", "tiered"] {
                var runs: [OpenRun] = []
                var cached: [Double] = []
                for _ in 0..<5 {
                    for file in indexFiles {
                        if cold { dropFromPageCache(directory + "/" + file) } else { readWhole(directory + "/" + file) }
                    }
                    if let fraction = cachedFraction(directory + "/index.sqlite") { cached.append(fraction) }
                    runs.append(try openInChild(directory, key: Int(random.next() % UInt64(count)), mode: mode))
                }
                let totals = runs.map { $0.open + $0.hit }
                let median = Latency(totals).p50
                if !cold && mode == "disk" { warmMedians[count] = median }
                let slowest = totals.max() ?? .nan
                let what =
                    "  open + first hit, \(cold ? "cold" : "warm"), \(mode == "disk" ? "DiskStore" : "TieredStore")"
                say(
                    label(what)
                        + String(
                            format:
                                "median %.1f ms (open %.1f + hit %.1f), max %.1f ms; process %.0f ms; peak RSS %.1f MiB; "
                                + "index cached %.0f%%; aim <= 1 s: %@",
                            median / 1e6, Latency(runs.map(\.open)).p50 / 1e6, Latency(runs.map(\.hit)).p50 / 1e6,
                            slowest / 1e6, Latency(runs.map(\.process)).p50 / 1e6, runs.map(\.peakMiB).max() ?? 0,
                            100 * (cached.max() ?? .nan), slowest <= 1e9 ? "met" : "not met"))
            }
        }
    }
    let files = try builtStore(count: 100_000, inFiles: true, corpus: &corpus, say: say)
    var random = SplitMix64(seed: 100_000)
    let sweeps = try (0..<3).map { _ in try openInChild(files, key: Int(random.next() % 100_000), mode: "sweep") }
    say(
        label("  open + first hit, warm, while the sweep runs")
            + String(
                format: "median %.1f ms (open %.1f + hit %.1f); then the open's sweep and one more: %.2f s median",
                Latency(sweeps.map { $0.open + $0.hit }).p50 / 1e6, Latency(sweeps.map(\.open)).p50 / 1e6,
                Latency(sweeps.map(\.hit)).p50 / 1e6, Latency(sweeps.map(\.sweep)).p50 / 1e9))
    return warmMedians
}
