import CacheSemantics
import CacheStorage
import CacheSystem
import CacheTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Disk store tests that change process-wide state (a file size limit) or lean on the disk
/// for seconds: they run one at a time, so a limit set by one never hits another's writes.
@Suite(.serialized) struct DiskStoreProcessTests {}

/// What the stress workers saw.
private struct StressCounts {
    var operations = 0
    var writes = 0
    var removals = 0
    var bodiesVerified = 0
    var rangesVerified = 0
    var notFoundAfterRemoval = 0
    var failures: [String] = []
}

/// Shared between the worker threads.
private final class SharedCounts: Sendable {
    let value = Locked(StressCounts())
}

/// Helpers shared by the concurrency and fault tests.

extension DiskStoreProcessTests {
    @Suite struct ConcurrencyTests {
        /// Sizes from inline through several 64 KiB blocks with a partial last one.
        static let sizes = [0, 1, 100, 4_000, 16_384, 20_000, 65_536, 70_000, 131_072, 200_000]

        /// One worker's loop: mixed puts, gets (whole, range, stream), removals and access
        /// records, every body checked against its URL. `notFound` is accepted only for an
        /// entry listed a moment ago (another worker or the other process removed it).
        private static func work(
            _ store: some CacheStore, seed: UInt64, until deadline: Date, counts: SharedCounts
        ) {
            var random = SplitMix64(seed: seed)
            var local = StressCounts()
            func failure(_ message: String) {
                if local.failures.count < 20 { local.failures.append(message) }
            }
            while Date() < deadline {
                let key = Int(random.next() % 64)
                let choice = random.next() % 20
                do {
                    switch choice {
                    case 0, 1:
                        _ = try store.remove(primaryKey: StressBodies.primaryKey(key: key))
                        local.removals += 1
                    case 2...8:
                        let size = sizes[Int(random.next() % UInt64(sizes.count))]
                        let entry = try StoreTestSupport.write(
                            store, key: key, generation: Int(random.next() % 1_000_000), size: size)
                        if entry.bodySize != Int64(size) { failure("committed size \(entry.bodySize) for \(size)") }
                        local.writes += 1
                    default:
                        for entry in try store.variants(of: StressBodies.primaryKey(key: key)) {
                            guard let expected = StoreTestSupport.expectedBody(entry) else {
                                failure("bad URL \(entry.head.url)")
                                continue
                            }
                            if entry.bodySize != Int64(expected.count) {
                                failure("listed size \(entry.bodySize) for \(entry.head.url)")
                            }
                            do {
                                switch choice {
                                case 9...14:
                                    let body = try store.body(of: entry.id)
                                    if body != expected { failure("wrong body for \(entry.head.url)") }
                                    local.bodiesVerified += 1
                                    store.recordAccess(entry.id, at: Date().timeIntervalSince1970)
                                case 15...17:
                                    let lower = Int64(random.next() % UInt64(max(1, expected.count)))
                                    let upper = lower + Int64(random.next() % 100_000)
                                    let range = try store.body(of: entry.id, range: lower...upper)
                                    let clampedUpper = min(Int(upper), expected.count - 1)
                                    let wanted =
                                        expected.isEmpty || Int(lower) > clampedUpper
                                        ? [] : Array(expected[Int(lower)...clampedUpper])
                                    if range != wanted {
                                        failure("wrong range \(lower)...\(upper) of \(entry.head.url)")
                                    }
                                    local.rangesVerified += 1
                                case 18:
                                    var streamed: [UInt8] = []
                                    try store.streamBody(of: entry.id) { chunk in
                                        streamed += chunk
                                        return true
                                    }
                                    if streamed != expected { failure("wrong streamed body for \(entry.head.url)") }
                                    local.bodiesVerified += 1
                                default:
                                    try store.remove(entry.id)
                                    local.removals += 1
                                }
                            } catch let error as StorageError where error.kind == .notFound {
                                local.notFoundAfterRemoval += 1
                            }
                        }
                    }
                    local.operations += 1
                } catch {
                    failure("\(error)")
                }
            }
            let finished = local
            counts.value.withLock { counts in
                counts.operations += finished.operations
                counts.writes += finished.writes
                counts.removals += finished.removals
                counts.bodiesVerified += finished.bodiesVerified
                counts.rangesVerified += finished.rangesVerified
                counts.notFoundAfterRemoval += finished.notFoundAfterRemoval
                counts.failures += finished.failures
            }
        }

        /// Runs `threads` workers on real threads (the cooperative pool may have only two)
        /// until `seconds` have passed.
        private static func runWorkers(
            _ store: some CacheStore, threads: Int, seconds: Double, seed: UInt64
        ) async -> StressCounts {
            let counts = SharedCounts()
            let deadline = Date().addingTimeInterval(seconds)
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let group = DispatchGroup()
                for index in 0..<threads {
                    group.enter()
                    let thread = Thread {
                        work(store, seed: seed &+ UInt64(index) &* 7919, until: deadline, counts: counts)
                        group.leave()
                    }
                    thread.stackSize = 4 << 20
                    thread.start()
                }
                group.notify(queue: .global()) { continuation.resume() }
            }
            return counts.value.withLock { $0 }
        }

        /// Every entry left must read back intact, and the totals must match the rows.
        private static func verifyAll(_ store: DiskStore) throws {
            let entries = try store.entries()
            for entry in entries {
                let expected = try #require(StoreTestSupport.expectedBody(entry))
                #expect(try store.body(of: entry.id) == expected, "final check of \(entry.head.url)")
            }
            let totals = store.totals()
            #expect(totals.entries == entries.count)
            #expect(totals.bodyBytes == entries.reduce(0) { $0 + $1.bodySize })
            // No body file without a row once both writers are gone.
            let files = try FileManager.default.contentsOfDirectory(atPath: store.configuration.directory + "/bodies")
            let ids = Set(entries.map(\.id.rawValue))
            let orphans = files.filter { !ids.contains($0) && !$0.hasSuffix(".tmp") }
            #expect(orphans.isEmpty, "body files without a row: \(orphans)")
            #expect(files.filter { $0.hasSuffix(".tmp") }.isEmpty, "temporary files left: \(files)")
        }

        private static func configuration(_ directory: String, log: StoreTestSupport.Log) -> DiskStore.Configuration {
            DiskStore.Configuration(
                directory: directory, capacity: 64 << 20, inlineBodyLimit: 16 * 1024, log: log.sink)
        }

        @Test("8 threads on one DiskStore for 10 s while StorageStress mixes on the same directory")
        func eightThreadsAndAChildProcess() async throws {
            try await offPool {
                let stress = try #require(
                    try? StoreTestSupport.stressExecutable(),
                    "the StorageStress executable was not found next to the test bundle; build with --build-tests")
                let directory = StoreTestSupport.makeDirectory("concurrency")
                defer { StoreTestSupport.removeDirectory(directory) }
                let log = StoreTestSupport.Log()
                let store = try DiskStore(Self.configuration(directory, log: log))

                let child = try StoreTestSupport.start(stress, ["mixed", directory, "10", "4242"])
                let counts = await Self.runWorkers(store, threads: 8, seconds: 10.5, seed: 1_000)
                let result = child.wait()

                #expect(counts.failures.isEmpty, "\(counts.failures)")
                #expect(result.exited && result.status == 0, "StorageStress exited \(result.status): \(result.errors)")
                let childOperations = result.output.split(separator: " ").last.flatMap {
                    Int($0.trimmingCharacters(in: .whitespacesAndNewlines))
                }
                #expect((childOperations ?? 0) >= 5, "child output: \(result.output)")
                // Floors low enough for a ThreadSanitizer build on two cores, where a debug build
                // does roughly ten times as much.
                #expect(counts.writes >= 5 && counts.bodiesVerified >= 1 && counts.removals >= 1)
                try Self.verifyAll(store)
                print(
                    "concurrency: \(counts.operations) operations in 8 threads (\(counts.writes) writes, "
                        + "\(counts.bodiesVerified) bodies and \(counts.rangesVerified) ranges verified, "
                        + "\(counts.removals) removals, \(counts.notFoundAfterRemoval) not found after a concurrent "
                        + "removal); child: \(result.output.trimmingCharacters(in: .whitespacesAndNewlines))")
            }
        }

        @Test("8 threads on one TieredStore (written behind, 3 readers), StorageStress on the same directory, 2 s")
        func tieredStore() async throws {
            try await offPool {
                let stress = try #require(
                    try? StoreTestSupport.stressExecutable(),
                    "the StorageStress executable was not found next to the test bundle; build with --build-tests")
                let directory = StoreTestSupport.makeDirectory("tiered")
                defer { StoreTestSupport.removeDirectory(directory) }
                let log = StoreTestSupport.Log()
                // As a caching proxy has it: commits written behind, bodies found through
                // reading connections of the store's own (fewer than the threads: some take turns
                // on the writing connection).
                var configuration = Self.configuration(directory, log: log)
                configuration.writesBehind = true
                configuration.readingConnections = 3
                let disk = try DiskStore(configuration)
                // Small enough that the memory tier evicts too.
                let store = TieredStore(memory: MemoryStore(capacity: 2 << 20, maximumEntrySize: 256 << 10), disk: disk)

                let child = try StoreTestSupport.start(stress, ["mixed", directory, "2", "77"])
                let counts = await Self.runWorkers(store, threads: 8, seconds: 2, seed: 9_000)
                let result = child.wait()

                #expect(counts.failures.isEmpty, "\(counts.failures)")
                #expect(result.exited && result.status == 0, "StorageStress exited \(result.status): \(result.errors)")
                #expect(counts.writes >= 1 && counts.operations >= 8)
                try Self.verifyAll(disk)
                print(
                    "tiered: \(counts.operations) operations (\(counts.writes) writes, \(counts.bodiesVerified) bodies, "
                        + "\(counts.rangesVerified) ranges verified, \(counts.notFoundAfterRemoval) not found after "
                        + "removal); child: \(result.output.trimmingCharacters(in: .whitespacesAndNewlines))")
            }
        }
    }
}
