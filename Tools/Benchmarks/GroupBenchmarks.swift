import CacheSemantics
import CacheStorage
import CacheTestSupport
import Foundation

// The groups suite: purging one cache group (RFC 9875) among 100,000 stored entries, on the
// memory store and on the disk store, through the tag index; and, in the same run, the purge by
// URL prefix an operator used before (it reads every entry) removing the same entries.
//
//   GROUP_BENCH_ENTRIES=100000   entries stored
//   GROUP_BENCH_SIZE=100         entries per group

private let groupClock = ContinuousClock()

private func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1e3 + Double(duration.components.attoseconds) / 1e15
}

func runGroupBenchmarks() throws {
    let environment = ProcessInfo.processInfo.environment
    let count = environment["GROUP_BENCH_ENTRIES"].flatMap(Int.init) ?? 100_000
    let groupSize = environment["GROUP_BENCH_SIZE"].flatMap(Int.init) ?? 100
    let groups = max(1, count / groupSize)
    let facts = Fixtures.typicalStoredFacts(uri: "https://bench.example/item", roundTrip: 0.1).serialized()
    let fields = Fixtures.typicalResponseFields
    // Group g holds entries g, g + groups, g + 2 × groups …; their URLs also share a prefix of
    // their own, so that a prefix purge can remove exactly the same entries.
    func head(_ index: Int) -> EntryHead {
        let group = index % groups
        let url = "https://bench.example/g\(group)/item/\(index)"
        return EntryHead(
            primaryKey: url, url: url, status: 200, fields: fields, facts: facts,
            tags: [CacheGroups.tag("g\(group)", origin: "https://bench.example"), CacheGroups.tag("g\(group)")])
    }
    let body = [UInt8](repeating: 0x61, count: 512)
    let directory = TemporaryDirectory("group-bench")
    let stores: [(String, any CacheStore)] = [
        ("memory", MemoryStore(capacity: 1 << 40, maximumEntrySize: 1 << 20)),
        (
            "disk",
            try DiskStore(
                DiskStore.Configuration(directory: directory.path, capacity: 1 << 40, maximumEntrySize: 1 << 20))
        ),
    ]
    for (name, store) in stores {
        let filling = groupClock.now
        for index in 0..<count {
            let writer = try store.makeWriter(for: head(index))
            try writer.append(body)
            try writer.commit()
        }
        print("\(name): stored \(count) entries in \(groups) groups of \(groupSize) in \(groupClock.now - filling)")
        var byTag: [Double] = []
        var byPrefix: [Double] = []
        for round in 0..<21 {
            let tagged = round * 2
            let prefixed = round * 2 + 1
            let start = groupClock.now
            let removed = try store.remove(tag: CacheGroups.tag("g\(tagged)", origin: "https://bench.example"))
            byTag.append(milliseconds(start.duration(to: groupClock.now)))
            let prefixStart = groupClock.now
            let prefixRemoved = try store.remove(urlPrefix: "https://bench.example/g\(prefixed)/")
            byPrefix.append(milliseconds(prefixStart.duration(to: groupClock.now)))
            guard removed == groupSize, prefixRemoved == groupSize else {
                throw StorageError(.index, "removed \(removed) by tag and \(prefixRemoved) by prefix, not \(groupSize)")
            }
        }
        byTag.sort()
        byPrefix.sort()
        print(
            String(
                format: "%@: purge one group of %d among %d entries: median %.2f ms, max %.2f ms (target < 10 ms)",
                name, groupSize, count, byTag[byTag.count / 2], byTag.last ?? 0))
        print(
            String(
                format: "%@: same entries by URL prefix (reads every entry): median %.2f ms, max %.2f ms",
                name, byPrefix[byPrefix.count / 2], byPrefix.last ?? 0))
    }
}
