// Release-mode benchmarks: `swift run -c release benchmarks [semantics] [storage] [http] [groups]
// [partial] [offline] [memory] [memo] [import] [transport] [encryption]`. With no argument every suite
// but groups, partial, offline, memory, memo, import, transport and encryption runs. Each line names its units.
// `benchmarks dictionaries OLD NEW` prints the sizes of NEW in each coding, dcz against OLD.
// `benchmarks redis PORT` compares the Redis store's client with redis-benchmark on a running
// redis-server (scripts/redis-bench starts one).

import Foundation

let arguments = CommandLine.arguments.dropFirst()
var suites = arguments.isEmpty ? ["semantics", "storage", "http"] : Array(arguments)
if suites.first == "redis" {
    guard suites.count == 2, let port = Int(suites[1]) else {
        print("benchmarks: usage: benchmarks redis PORT (a redis-server on 127.0.0.1:PORT)")
        exit(2)
    }
    print("== the Redis store's RESP client against redis-benchmark (hiredis), same server, same run")
    do {
        try runRedisBenchmarks(port: port)
    } catch {
        print("benchmarks: the redis suite failed: \(error)")
        exit(1)
    }
    suites = []
}
if suites.first == "dictionaries" {
    guard suites.count == 3 else {
        print("benchmarks: usage: benchmarks dictionaries OLD NEW (two releases of one file; scripts/dictionary-sizes)")
        exit(2)
    }
    print("== Compression Dictionary Transport (RFC 9842): the new release's size in each coding, same run")
    do {
        try await runDictionaryBenchmarks(oldPath: suites[1], newPath: suites[2])
    } catch {
        print("benchmarks: the dictionaries suite failed: \(error)")
        exit(1)
    }
    suites = []
}
if suites.first == "offline-save-child" {
    // One save of the offline suite, in a process of its own (its peak RSS is the save's).
    guard suites.count == 4, let jobs = Int(suites[3]) else { exit(2) }
    do {
        try await runOfflineSaveChild(url: suites[1], directory: suites[2], jobs: jobs)
    } catch {
        print("benchmarks: the save failed: \(error)")
        exit(1)
    }
    exit(0)
}
if suites.first == "large-store-open" {
    // One open of a large store, in a process of its own (the storage suite's open time).
    guard suites.count == 4, let key = Int(suites[2]) else { exit(2) }
    do {
        try runLargeStoreOpenChild(directory: suites[1], key: key, mode: suites[3])
    } catch {
        print("benchmarks: the open failed: \(error)")
        exit(1)
    }
    exit(0)
}
for suite in suites {
    switch suite {
    case "semantics":
        print("== CacheSemantics (lookup target: median <= 200 ns)")
        for measurement in runSemanticsBenchmarks() { print(measurement.line) }
    case "encryption":
        runEncryptionBenchmarks()
    case "full-store":
        print("== New entries into a full disk store (each put evicts) against an empty one, bodies inline or in files")
        do {
            try runFullStoreBenchmarks()
        } catch {
            print("benchmarks: the full-store suite failed: \(error)")
            exit(1)
        }
    case "storage":
        print(
            "== CacheStorage (targets: memory hit <= 2 µs, disk hit <= 30 µs up to 16 KiB, >= 10x URLCache on disk "
                + "hits, open time flat in the entry count)")
        _ = runStorageBenchmarks()
    case "http":
        print(
            "== HTTPCaching against a loopback origin (target: a hit at least 10x faster than a loopback round trip)")
        do {
            try await runHTTPBenchmarks()
        } catch {
            print("benchmarks: the http suite failed: \(error)")
            exit(1)
        }
    case "groups":
        print("== Purge by cache group (RFC 9875), 100,000 entries (target: < 10 ms)")
        do {
            try runGroupBenchmarks()
        } catch {
            print("benchmarks: the groups suite failed: \(error)")
            exit(1)
        }
    case "partial":
        print("== A range within a 1 GiB incomplete stored response (target: bytes read ≈ the range's size)")
        do {
            try runPartialBenchmarks()
        } catch {
            print("benchmarks: the partial suite failed: \(error)")
            exit(1)
        }
    case "offline":
        print(
            "== Saving a page of 500 subresources, and loading it through httpcache serve online and offline "
                + "(swift build -c release --product httpcache first)")
        do {
            try await runOfflineBenchmarks()
        } catch {
            print("benchmarks: the offline suite failed: \(error)")
            exit(1)
        }
    case "memory":
        print(
            "== The memory tier's bytes per entry, measured against what its capacity charges (target: charged >= "
                + "measured), and a 1 MiB store under 200,000 entries")
        do {
            if try !runMemoryBenchmarks() { exit(1) }
        } catch {
            print("benchmarks: the memory suite failed: \(error)")
            exit(1)
        }
    case "memo":
        print(
            "== The exchange's memo: bytes per key, measured against what its bound charges (target: charged >= measured)"
        )
        do {
            if try !runMemoBenchmarks() { exit(1) }
        } catch {
            print("benchmarks: the memo suite failed: \(error)")
            exit(1)
        }
    case "import":
        print(
            "== httpcache import on a gzip bomb and on 1,000,000 tiny records (target: peak RSS <= 128 MiB; "
                + "swift build -c release --product httpcache first)")
        do {
            try runImportBenchmarks()
        } catch {
            print("benchmarks: the import suite failed: \(error)")
            exit(1)
        }
    case "transport":
        print("== HTTPCache.data(for:) misses and hits through each transport, same origin, same run")
        do {
            try await runTransportBenchmarks()
        } catch {
            print("benchmarks: the transport suite failed: \(error)")
            exit(1)
        }
    default:
        print(
            "benchmarks: unknown suite '\(suite)'; known: semantics, storage, http, groups, partial, offline, memory,"
                + " memo, import, transport")
        exit(2)
    }
}
print("peak RSS: \(Int(peakResidentMiB())) MiB")
