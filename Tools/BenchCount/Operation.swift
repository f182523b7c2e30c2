/// The operations bench-count counts (scripts/bench-check runs each in its own process).
enum Operation: String, CaseIterable {
    /// A memory-tier hit through `HTTPCache.data(for:)`.
    case memoryHit = "memory-hit"
    /// A disk-tier hit: `DiskStore` variants, `openBody` and the read of a 16 KiB body.
    case diskHit = "disk-hit"
    /// The same hit on a store encrypted at rest (not in scripts/bench-check's table: for
    /// comparing the two by hand, `callgrind_annotate` of each).
    case encryptedDiskHit = "encrypted-disk-hit"
    /// A hit through the caching proxy's request handler, on a working set of 5,000 URLs.
    case proxyHit = "proxy-hit"
    /// The same on the store `httpcache serve` makes by default: memory before a cache directory.
    case proxyDiskHit = "proxy-disk-hit"
    /// `CacheEngine.lookup` on a typical fresh response.
    case lookup = "lookup"

    func run(iterations: Int) throws {
        switch self {
        case .memoryHit: try countMemoryHits(iterations: iterations)
        case .diskHit: try countDiskHits(iterations: iterations)
        case .encryptedDiskHit: try countDiskHits(iterations: iterations, encrypted: true)
        case .proxyHit, .proxyDiskHit:
            #if os(Linux)
            if self == .proxyDiskHit {
                try withScratchDirectory("proxy") { try countProxyHits(iterations: iterations, cacheDirectory: $0) }
            } else {
                try countProxyHits(iterations: iterations)
            }
            #else
            throw BenchFailure("the caching proxy runs on Linux only")
            #endif
        case .lookup: countLookups(iterations: iterations)
        }
    }
}
