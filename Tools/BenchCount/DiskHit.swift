import CacheSemantics
import CacheStorage
import CacheTestSupport
import Foundation

/// A disk-tier hit on a plain `DiskStore` (no memory tier): the variants of a key, `openBody`
/// of the only one and the read of its 16 KiB body, on 1,000 entries visited in a fixed
/// shuffled order. Filled, then closed and opened again, so the index is checkpointed and no
/// background checkpoint runs while counting.
/// With `encrypted`, on a store encrypted at rest (a fixed key).
func countDiskHits(iterations: Int, encrypted: Bool = false) throws {
    try withScratchDirectory("disk-hit") {
        try countDiskHits(iterations: iterations, directory: $0, encrypted: encrypted)
    }
}

private func countDiskHits(iterations: Int, directory: String, encrypted: Bool) throws {
    let entries = 1_000
    let size = 16 << 10
    var configuration = DiskStore.Configuration(
        directory: directory, capacity: 1 << 30,
        log: { message in FileHandle.standardError.write(Data("bench-count: \(message)\n".utf8)) })
    if encrypted { configuration.encryptionKey = EncryptionKey(bytes: Array(repeating: 0x5A, count: 32)) }
    let urls = (0..<entries).map { "https://bench.example/v1/items/\($0)" }
    let bodies = DiskBodies(size: size)
    try fill(configuration, urls: urls, bodies: bodies)
    let store = try DiskStore(configuration, clock: { fixedNow })

    var random = SplitMix64(seed: 16)
    let order = Array(0..<entries).shuffled(using: &random)
    for key in order {
        guard let body = diskHit(store, urls[key]), bodies.matches(body, key: key) else {
            throw BenchFailure("the warm-up hit on \(urls[key]) was missing or had the wrong bytes")
        }
    }
    var failures = 0
    Callgrind.startInstrumentation()
    countedRegion(iterations: iterations) { index in
        if diskHit(store, urls[order[index % entries]])?.count != size { failures += 1 }
    }
    Callgrind.stopInstrumentation()
    guard failures == 0 else { throw BenchFailure("\(failures) measured hits were missing or short") }
}

/// One hit: what a cache reads from the store to answer with a stored response.
@inline(never)
private func diskHit(_ store: DiskStore, _ primaryKey: String) -> [UInt8]? {
    guard let variants = try? store.variants(of: primaryKey), let entry = variants.first,
        let body = try? store.openBody(of: entry.id), body.size > 0
    else { return nil }
    return try? body.read(0...(body.size - 1))
}

/// Stores one entry per URL, then waits until the store has been released (its background
/// work holds it for a while).
private func fill(_ configuration: DiskStore.Configuration, urls: [String], bodies: DiskBodies) throws {
    let facts = Fixtures.typicalStoredFacts(uri: "https://bench.example/item", roundTrip: 0.1).serialized()
    weak var released: DiskStore?
    do {
        let store = try DiskStore(configuration, clock: { fixedNow })
        released = store
        for (key, url) in urls.enumerated() {
            let head = EntryHead(
                primaryKey: url, url: url, status: 200, fields: Fixtures.typicalResponseFields, facts: facts)
            let writer = try store.makeWriter(for: head)
            try writer.append(bodies.body(key))
            _ = try writer.commit()
        }
        try store.flush()
    }
    for _ in 0..<3_000 where released != nil { usleep(10_000) }
    guard released == nil else { throw BenchFailure("the filled store was not released within 30 s") }
}

/// Bodies that differ per key (its number in the first 8 bytes) and can be checked whole.
private struct DiskBodies {
    let base: [UInt8]

    init(size: Int) {
        var random = SplitMix64(seed: UInt64(size))
        base = (0..<size).map { _ in UInt8(truncatingIfNeeded: random.next()) }
    }

    func body(_ key: Int) -> [UInt8] {
        var body = base
        withUnsafeBytes(of: UInt64(key).littleEndian) { body.replaceSubrange(0..<8, with: $0) }
        return body
    }

    func matches(_ bytes: [UInt8], key: Int) -> Bool { bytes == body(key) }
}
