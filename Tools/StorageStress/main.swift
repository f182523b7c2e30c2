// A child process for the store's crash and multi-process tests.
//
//   StorageStress write-loop DIR SEED [MAXSIZE]  writes entries until killed; one operation in
//                                                five updates a stored entry's head, as a 304 does
//   StorageStress mixed DIR SECONDS SEED [MAXSIZE]  mixed put/get/remove, verifying every body
//   StorageStress verify DIR                     opens the store, checks every entry, reports
//   StorageStress rekey DIR OLDKEY NEWKEY       rekeys the store (key files; "-" for none) once
//
// With $HTTPCACHE_ENCRYPTION_KEY_FILE set, every mode but rekey opens the store encrypted with
// that key.
//
// Bodies are derived from their URLs (StressBodies), so any reader can verify them. Exit
// status: 0 on success, 1 when a wrong body was read, 2 for usage errors.
import CacheSemantics
import CacheStorage
import CacheTestSupport
import Foundation

func fail(_ message: String, status: Int32 = 1) -> Never {
    FileHandle.standardError.write(Data("StorageStress: \(message)\n".utf8))
    exit(status)
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 2 else {
    fail("usage: StorageStress write-loop|write-behind-loop|mixed|verify DIR [...]", status: 2)
}
let directory = arguments[1]
/// `write-behind-loop` writes as `write-loop` does, with every index commit written behind
/// (`DiskStore.Configuration.writesBehind`, as the caching proxy's store does).
let configuration = {
    var configuration = DiskStore.Configuration(
        directory: directory, capacity: 64 << 20, inlineBodyLimit: 16 * 1024, log: { _ in })
    configuration.writesBehind = arguments.first == "write-behind-loop"
    configuration.encryptionKey = ProcessInfo.processInfo.environment["HTTPCACHE_ENCRYPTION_KEY_FILE"].map(key)
    return configuration
}()

/// The key in the file `path`.
func key(_ path: String) -> EncryptionKey {
    do { return try EncryptionKey(contentsOfFile: path) } catch { fail("\(error)", status: 2) }
}
let writeLoops = ["write-loop", "write-behind-loop"]

/// Sizes that exercise inline bodies, one block, several blocks and a partial last block.
/// MAXSIZE (the last argument of write-loop and mixed) drops the larger ones.
let allSizes = [0, 1, 100, 4_000, 16_384, 20_000, 65_536, 70_000, 200_000, 400_000]
let sizes: [Int] = {
    guard (writeLoops + ["mixed"]).contains(arguments.first ?? ""), arguments.count >= 4,
        let limit = Int(arguments[arguments.count - 1]), writeLoops.contains(arguments[0]) || arguments.count == 5
    else { return allSizes }
    return allSizes.filter { $0 <= limit }
}()

/// Reads every entry back and checks it; returns how many were checked.
func verifyAll(_ store: DiskStore) -> Int {
    let entries: [StoredEntry]
    do { entries = try store.entries() } catch { fail("cannot list entries: \(error)") }
    for entry in entries {
        guard entry.bodySize == Int64(StressBodies.size(inURL: entry.head.url) ?? -1) else {
            fail("wrong size for \(entry.head.url)")
        }
        if let updatedFor = entry.head.fields[updatedForField], updatedFor != entry.head.url {
            fail("\(entry.head.url) carries the head update made for \(updatedFor)")
        }
        guard entry.head.fields["Content-Length"] == String(entry.bodySize) else {
            let length = entry.head.fields["Content-Length"] ?? "absent"
            fail("\(entry.head.url): Content-Length \(length) for a body of \(entry.bodySize)")
        }
        checkBody(store, entry)
    }
    return entries.count
}

func openStore() -> DiskStore {
    do { return try DiskStore(configuration) } catch { fail("open: \(error)") }
}

/// The field a head update adds, naming the URL of the entry it was made for: `verify` checks
/// that an update (written behind or not) never lands on another entry, such as the one that
/// replaced it.
let updatedForField = "X-Stress-Updated-For"

func writeLoop(seed: UInt64) -> Never {
    var random = SplitMix64(seed: seed)
    let store = openStore()
    FileHandle.standardOutput.write(Data("ready\n".utf8))
    var generation = 0
    // What an earlier child stored can be updated at once, as a 304 for any stored URL.
    var stored: [Int: StoredEntry] = [:]
    do {
        for entry in try store.entries() {
            guard let key = entry.head.primaryKey.split(separator: "/").last.flatMap({ Int($0) }) else { continue }
            stored[key] = entry
        }
    } catch {
        fail("cannot list entries: \(error)")
    }
    while true {
        generation += 1
        let key = Int(random.next() % 64)
        let size = sizes[Int(random.next() % UInt64(sizes.count))]
        do {
            switch (random.next() % 10, stored[key]) {
            case (0, _):
                _ = try store.remove(primaryKey: StressBodies.primaryKey(key: key))
                stored[key] = nil
            case (1...2, let entry?):
                // A 304's head update: the stored fields plus one naming the entry, the facts as
                // they were (written behind in `write-behind-loop`, as the proxy writes them).
                let fields =
                    entry.head.fields.filter { $0.name != updatedForField }
                    + [HeaderField(name: updatedForField, value: entry.head.url)]
                try store.update(entry.id, fields: HeaderFields(fields), facts: entry.head.facts)
            default:
                stored[key] = try StressBodies.write(into: store, key: key, generation: generation, size: size)
            }
        } catch {
            fail("write: \(error)")
        }
    }
}

func checkBody(_ store: DiskStore, _ entry: StoredEntry) {
    guard let size = StressBodies.size(inURL: entry.head.url) else { fail("bad URL \(entry.head.url)") }
    let body: [UInt8]
    do {
        body = try store.body(of: entry.id)
    } catch {
        if error.kind == .notFound { return }  // replaced or removed by the other process meanwhile
        fail("reading \(entry.head.url): \(error)")
    }
    if body != StressBodies.body(for: entry.head.url, size: size) { fail("wrong body for \(entry.head.url)") }
}

func mixed(seconds: Double, seed: UInt64) {
    let store = openStore()
    let deadline = Date().addingTimeInterval(seconds)
    var random = SplitMix64(seed: seed)
    var operations = 0
    while Date() < deadline {
        let key = Int(random.next() % 64)
        do {
            switch random.next() % 10 {
            case 0: _ = try store.remove(primaryKey: StressBodies.primaryKey(key: key))
            case 1...4:
                try StressBodies.write(
                    into: store, key: key, generation: Int(random.next() % 1_000_000),
                    size: sizes[Int(random.next() % UInt64(sizes.count))])
            default:
                for entry in try store.variants(of: StressBodies.primaryKey(key: key)) { checkBody(store, entry) }
            }
            operations += 1
        } catch {
            fail("operation: \(error)")
        }
    }
    print("operations \(operations)")
}

switch arguments[0] {
case "write-loop", "write-behind-loop":
    guard arguments.count == 3 || arguments.count == 4, let seed = UInt64(arguments[2]) else {
        fail("usage: \(arguments[0]) DIR SEED [MAXSIZE]", status: 2)
    }
    writeLoop(seed: seed)
case "mixed":
    guard arguments.count == 4 || arguments.count == 5, let seconds = Double(arguments[2]),
        let seed = UInt64(arguments[3])
    else {
        fail("usage: mixed DIR SECONDS SEED [MAXSIZE]", status: 2)
    }
    mixed(seconds: seconds, seed: seed)
case "verify":
    let store = openStore()
    let checked = verifyAll(store)
    store.sweep()
    print("verified \(checked)")
case "rekey":
    guard arguments.count == 4 else { fail("usage: rekey DIR OLDKEY NEWKEY (key files, - for none)", status: 2) }
    let (old, new) = (arguments[2] == "-" ? nil : key(arguments[2]), arguments[3] == "-" ? nil : key(arguments[3]))
    var from = configuration
    from.encryptionKey = old
    FileHandle.standardOutput.write(Data("ready\n".utf8))
    do {
        let result = try DiskStore.rekey(from, to: new)
        print("rekeyed \(result.entries), dropped \(result.dropped)")
    } catch {
        fail("rekey: \(error)")
    }
default:
    fail("unknown mode \(arguments[0])", status: 2)
}
