import CacheSemantics
import CacheStorage
import CacheTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Done-when item 1 of the CacheStorage issue: a child process (`StorageStress write-loop`)
/// writes entries in a loop and is killed with SIGKILL at a random moment; after every kill
/// the store opens, every entry it lists reads back byte-identical (bodies are derived from
/// their URLs), the totals agree with the entries, and after a sweep no temporary or orphan
/// body file is left. `scripts/crash-test` does the same 1,000 times against a release build.
///
/// Reproduce a run with `CRASH_TEST_SEED=<seed printed by the test>`; change the number of
/// kills with `CRASH_TEST_KILLS` (default 200).
@Suite("CacheStorage crash safety: SIGKILL during writes", .serialized)
struct CrashTests {
    /// Bodies up to this size only: the larger ones make debug-build checksums slow.
    static let maximumBodySize = 70_000
    static let defaultKills = 200
    static let maximumDelayMicroseconds: UInt64 = 30_000

    @Test("every SIGKILL leaves a store that opens, reads back byte-identical and sweeps clean")
    func killDuringWrites() async throws {
        try await offPool {
            let environment = ProcessInfo.processInfo.environment
            let seed = environment["CRASH_TEST_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64.max)
            let kills = environment["CRASH_TEST_KILLS"].flatMap { Int($0) } ?? Self.defaultKills
            print("CrashTests: seed \(seed) (rerun with CRASH_TEST_SEED=\(seed)), \(kills) kills")
            var random = SplitMix64(seed: seed)

            let stress = URL(fileURLWithPath: try StoreTestSupport.stressExecutable())
            let directory = TemporaryDirectory("cachestorage-crash")

            let started = Date()
            var entriesChecked = 0
            var bytesChecked: Int64 = 0
            var killsWithLeftoverTemporary = 0
            var leftoverTemporaryFiles = 0
            var finalEntries = 0
            var killsDone = 0
            var childFailures = 0
            for kill in 1...kills {
                let childSeed = random.next()
                let delay = random.next() % (Self.maximumDelayMicroseconds + 1)
                let context = "kill \(kill) of \(kills) (test seed \(seed), child seed \(childSeed), delay \(delay) µs)"

                // Every other child writes its index commits behind, as the caching proxy does:
                // a kill then loses its open batch, and must leave nothing else wrong.
                let outcome = try StressChild.runAndKill(
                    stress, directory: directory.path, seed: childSeed, maximumSize: Self.maximumBodySize,
                    delayMicroseconds: delay, writesBehind: kill % 2 == 0)
                #expect(outcome.killedBySIGKILL, "\(context): the child ended on its own: \(outcome.describe())")
                #expect(outcome.standardError.isEmpty, "\(context): the child reported: \(outcome.standardError)")

                let temporary = StoreCheck.files(in: directory.path + "/bodies").filter { $0.hasSuffix(".tmp") }.count
                leftoverTemporaryFiles += temporary
                if temporary > 0 { killsWithLeftoverTemporary += 1 }

                let report = StoreCheck.check(directory: directory.path)
                #expect(report.problems.isEmpty, "\(context): \(report.problems.joined(separator: "; "))")
                entriesChecked += report.entriesChecked
                bytesChecked += report.bytesChecked
                finalEntries = report.entriesChecked
                killsDone += 1
                if !outcome.killedBySIGKILL || !outcome.standardError.isEmpty { childFailures += 1 }
                // A damaged store would fail every later check: stop at the first.
                guard report.problems.isEmpty else { break }
            }
            let seconds = Date().timeIntervalSince(started)
            print(
                "CrashTests: \(killsDone) kills (\(childFailures) children failed before their kill), "
                    + "\(entriesChecked) entries (\(bytesChecked) bytes) verified, "
                    + "\(killsWithLeftoverTemporary) kills left \(leftoverTemporaryFiles) temporary file(s) behind, "
                    + "\(finalEntries) entries at the end, \(String(format: "%.1f", seconds)) s")
            // Proof that the kills landed while bodies were being written, not between writes
            // or before the child started: otherwise the test above would prove nothing.
            #expect(
                killsWithLeftoverTemporary > 0,
                "no kill out of \(kills) interrupted a body write (no .tmp file was ever left behind)")
            #expect(finalEntries > 0, "the store was empty after \(kills) write loops")
        }
    }

    /// The checks above must be able to fail: a wrong body, a wrong size, a temporary file
    /// a sweep cannot take and a foreign file are each reported; an unreferenced body file
    /// is swept and not reported.
    @Test("the store check reports wrong bodies, wrong sizes and files a sweep leaves behind")
    func checkDetectsDamage() async throws {
        try await offPool {
            let directory = TemporaryDirectory("cachestorage-crash")
            let bodies = directory.path + "/bodies"
            let goodURL = StressBodies.url(key: 1, generation: 1, size: 20_000)
            let wrongBodyURL = StressBodies.url(key: 2, generation: 2, size: 20_000)
            let wrongSizeURL = StressBodies.url(key: 3, generation: 3, size: 300)
            let lockedTemporary = EntryID().rawValue + ".tmp"
            let orphan = EntryID().rawValue
            do {
                let store = try DiskStore(StoreCheck.configuration(directory.path))
                try Self.put(store, url: goodURL, key: 1, body: StressBodies.body(for: goodURL, size: 20_000))
                var wrong = StressBodies.body(for: wrongBodyURL, size: 20_000)
                wrong[12_345] ^= 1
                try Self.put(store, url: wrongBodyURL, key: 2, body: wrong)
                try Self.put(store, url: wrongSizeURL, key: 3, body: StressBodies.body(for: wrongSizeURL, size: 200))
            }
            #expect(FileManager.default.createFile(atPath: bodies + "/" + orphan, contents: Data([1, 2, 3])))
            #expect(FileManager.default.createFile(atPath: bodies + "/notes.txt", contents: Data("hi".utf8)))
            #expect(FileManager.default.createFile(atPath: bodies + "/" + lockedTemporary, contents: Data([4])))
            // A live writer's lock: the sweep must leave this one, so the check must see it.
            let lock = open(bodies + "/" + lockedTemporary, O_RDONLY)
            try #require(lock >= 0)
            defer { close(lock) }
            try #require(flock(lock, LOCK_EX) == 0)

            let report = StoreCheck.check(directory: directory.path)
            let text = report.problems.joined(separator: "\n")
            #expect(report.problems.contains { $0.contains("wrong body") && $0.contains(wrongBodyURL) }, "\(text)")
            #expect(report.problems.contains { $0.contains("body size") && $0.contains(wrongSizeURL) }, "\(text)")
            #expect(
                report.problems.contains { $0.contains("temporary file") && $0.contains(lockedTemporary) }, "\(text)")
            #expect(
                report.problems.contains { $0.contains("not the id of an entry") && $0.contains("notes.txt") },
                "\(text)")
            #expect(!report.problems.contains { $0.contains(goodURL) }, "\(text)")
            #expect(
                !report.problems.contains { $0.contains(orphan) },
                "an unreferenced body file outlived the sweep: \(text)")
            #expect(!FileManager.default.fileExists(atPath: bodies + "/" + orphan))
            // The wrong-size entry is also a wrong body: 300 bytes expected, 200 read.
            #expect(report.problems.count == 5, "\(text)")
        }
    }

    /// Issue 32: a rekey killed at any moment leaves a store that opens with the old key (killed
    /// before its commit) or the new one (after), every entry intact and no file left over.
    /// `CRASH_TEST_REKEY_KILLS` sets the number of kills (default 30).
    @Test("every SIGKILL during a rekey leaves a store that opens with the old or the new key, no entry lost")
    func killDuringRekey() async throws {
        try await offPool {
            let kills = ProcessInfo.processInfo.environment["CRASH_TEST_REKEY_KILLS"].flatMap { Int($0) } ?? 30
            let stress = URL(fileURLWithPath: try StoreTestSupport.stressExecutable())
            let directory = TemporaryDirectory("cachestorage-rekey-crash")
            let store = directory.path + "/store"
            var keys: [(path: String, key: EncryptionKey)] = []
            for name in ["a", "b"] {
                let bytes = (0..<32).map { _ in UInt8.random(in: 0...255) }
                let path = directory.path + "/key-" + name
                #expect(
                    FileManager.default.createFile(
                        atPath: path, contents: Data(bytes), attributes: [.posixPermissions: 0o600]))
                keys.append((path, try EncryptionKey(contentsOfFile: path)))
            }
            let sizes = [0, 100, 16_384, 20_000, 65_536, 70_000, 200_000]
            do {
                let writer = try DiskStore(StoreCheck.configuration(store, key: keys[0].key))
                for key in 0..<40 {
                    try StressBodies.write(into: writer, key: key, generation: key, size: sizes[key % sizes.count])
                }
            }
            // How long a whole rekey takes here: the kills land anywhere within it.
            let started = Date()
            let whole = try StoreTestSupport.run(stress.path, ["rekey", store, keys[0].path, keys[1].path])
            #expect(whole.exited && whole.status == 0, "the rekey failed: \(whole.errors)")
            let span = UInt64(Date().timeIntervalSince(started) * 1_000_000)
            var current = 1
            var (interrupted, switched) = (0, 0)
            for kill in 1...kills {
                let delay = UInt64.random(in: 0...(span / 2))
                let (old, new) = (keys[current], keys[1 - current])
                _ = try StressChild.runAndKill(
                    stress, arguments: ["rekey", store, old.path, new.path], delayMicroseconds: delay)
                let opensWithNew = (try? DiskStore(StoreCheck.configuration(store, key: new.key))) != nil
                let report = StoreCheck.check(directory: store, key: opensWithNew ? new.key : old.key)
                let context = "kill \(kill) after \(delay) µs (the key \(opensWithNew ? "after" : "before") the rekey)"
                #expect(report.problems.isEmpty, "\(context): \(report.problems.joined(separator: "; "))")
                #expect(report.entriesChecked == 40, "\(context): \(report.entriesChecked) entries")
                guard report.problems.isEmpty else { break }
                if opensWithNew {
                    current = 1 - current
                    switched += 1
                } else {
                    interrupted += 1
                }
            }
            print("CrashTests: \(kills) rekeys killed, \(interrupted) before their switch, \(switched) after")
            #expect(interrupted > 0, "no kill landed before a rekey's switch")
        }
    }

    private static func put(_ store: DiskStore, url: String, key: Int, body: [UInt8]) throws {
        let head = EntryHead(
            primaryKey: StressBodies.primaryKey(key: key), url: url, status: 200, fields: [:], facts: [1])
        try writeEntry(store, head, body, chunk: body.count + 1)
    }
}

/// Opens a store after a crash and lists everything wrong with it.
enum StoreCheck {
    struct Report {
        var entriesChecked = 0
        var bytesChecked: Int64 = 0
        var problems: [String] = []
    }

    /// What `StorageStress` uses.
    static func configuration(_ directory: String, key: EncryptionKey? = nil) -> DiskStore.Configuration {
        var configuration = DiskStore.Configuration(
            directory: directory, capacity: 64 << 20, inlineBodyLimit: 16 * 1024, log: { _ in })
        configuration.encryptionKey = key
        return configuration
    }

    static func files(in directory: String) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
    }

    static func check(directory: String, key: EncryptionKey? = nil) -> Report {
        var report = Report()
        let store: DiskStore
        do {
            store = try DiskStore(configuration(directory, key: key))
        } catch {
            report.problems.append("the store does not open: \(error)")
            return report
        }
        let entries: [StoredEntry]
        do {
            entries = try store.entries()
        } catch {
            report.problems.append("the entries cannot be listed: \(error)")
            return report
        }
        for entry in entries {
            let url = entry.head.url
            guard let size = StressBodies.size(inURL: url) else {
                report.problems.append("entry \(entry.id) has a URL without a size: \(url)")
                continue
            }
            if !url.hasPrefix(entry.head.primaryKey + "?") {
                report.problems.append("entry \(entry.id) for \(url) has the primary key \(entry.head.primaryKey)")
            }
            if entry.bodySize != Int64(size) {
                report.problems.append("entry \(entry.id) for \(url) has the body size \(entry.bodySize)")
            }
            let body: [UInt8]
            do {
                body = try store.body(of: entry.id)
            } catch {
                report.problems.append("entry \(entry.id) for \(url) cannot be read: \(error)")
                continue
            }
            let expected = StressBodies.body(for: url, size: size)
            if body != expected {
                let offset =
                    (0..<min(body.count, expected.count)).first { body[$0] != expected[$0] }
                    ?? min(body.count, expected.count)
                report.problems.append(
                    "entry \(entry.id) for \(url): wrong body (\(body.count) bytes read, first difference at byte "
                        + "\(offset))")
            }
            report.entriesChecked += 1
            report.bytesChecked += Int64(body.count)
        }
        let totals = store.totals()
        let byteSum = entries.reduce(Int64(0)) { $0 + $1.bodySize }
        if totals.entries != entries.count || totals.bodyBytes != byteSum || totals.pinnedBytes != 0 {
            report.problems.append(
                "the totals (\(totals.entries) entries, \(totals.bodyBytes) bytes, \(totals.pinnedBytes) pinned) "
                    + "disagree with the entries (\(entries.count) entries, \(byteSum) bytes, none pinned)")
        }
        store.sweep()
        let ids = Set(entries.map(\.id.rawValue))
        for name in files(in: directory + "/bodies").sorted() {
            if name.hasSuffix(".tmp") {
                report.problems.append("the temporary file bodies/\(name) outlived a sweep")
            } else if !ids.contains(name) {
                report.problems.append("bodies/\(name) outlived a sweep and is not the id of an entry")
            }
        }
        return report
    }
}

/// One `StorageStress write-loop` (or `write-behind-loop`) child, killed with SIGKILL a while after it said "ready".
enum StressChild {
    struct Outcome {
        var killedBySIGKILL: Bool
        var reason: Process.TerminationReason
        var status: Int32
        var standardError: String

        func describe() -> String {
            "\(reason == .exit ? "exit status" : "signal") \(status)"
        }
    }

    static func runAndKill(
        _ executable: URL, directory: String, seed: UInt64, maximumSize: Int, delayMicroseconds: UInt64,
        writesBehind: Bool
    ) throws -> Outcome {
        try runAndKill(
            executable,
            arguments: [writesBehind ? "write-behind-loop" : "write-loop", directory, "\(seed)", "\(maximumSize)"],
            delayMicroseconds: delayMicroseconds)
    }

    /// Runs `executable` with `arguments` and kills it `delayMicroseconds` after it said "ready"
    /// (unless it ended first: then ``Outcome/killedBySIGKILL`` is `false`).
    static func runAndKill(_ executable: URL, arguments: [String], delayMicroseconds: UInt64) throws -> Outcome {
        let process = ChildProcess()
        process.executableURL = executable
        process.arguments = arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let ready = waitForReady(output.fileHandleForReading.fileDescriptor, timeoutMilliseconds: 20_000)
        if ready {
            usleep(useconds_t(delayMicroseconds))
        }
        process.send(signal: SIGKILL)
        process.waitUntilExit()
        let errorText = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        try? output.fileHandleForReading.close()
        try? errors.fileHandleForReading.close()
        let killed = process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGKILL
        return Outcome(
            killedBySIGKILL: killed && ready, reason: process.terminationReason, status: process.terminationStatus,
            standardError: ready ? errorText : "no \"ready\" within 20 s. \(errorText)")
    }

    /// Reads the child's output until it has printed "ready"; `false` at end of file or timeout.
    private static func waitForReady(_ fd: Int32, timeoutMilliseconds: Int32) -> Bool {
        var received: [UInt8] = []
        let deadline = Date().addingTimeInterval(Double(timeoutMilliseconds) / 1000)
        var buffer = [UInt8](repeating: 0, count: 256)
        while !String(decoding: received, as: UTF8.self).contains("ready\n") {
            let remaining = Int32(max(0, deadline.timeIntervalSinceNow * 1000))
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let polled = poll(&descriptor, 1, remaining)
            if polled < 0 && errno == EINTR { continue }
            guard polled > 0 else { return false }
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return false }
            received += buffer[0..<count]
        }
        return true
    }
}
