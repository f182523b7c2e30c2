import CacheSemantics
import CacheStorage
import CacheStorageRedis
import CacheTestSupport
import Foundation

/// What an entry costs Redis; then this package's RESP client against `redis-benchmark` (C, on
/// hiredis) on the same server: `GET` of a 16 KiB and a 64-byte value, one connection, one
/// command at a time (the way the store's hits use it), so the figure is round trips per second.
func runRedisBenchmarks(port: Int) throws {
    var configuration = try RedisConfiguration(url: "redis://127.0.0.1:\(port)")
    configuration.commandTimeout = 5
    let store = RedisStore(configuration)
    try store.checkConnection()
    try printRedisEntryCost(configuration)
    let requests = 20_000
    for size in [64, 16_384] {
        let key = Array("redis-bench:\(size)".utf8)
        _ = try store.command([Array("SET".utf8), key, [UInt8](repeating: 0x61, count: size)])
        for _ in 0..<1_000 { _ = try store.command([Array("GET".utf8), key]) }
        // Three rounds, the two clients alternating; medians.
        var ours: [Double] = []
        var theirs: [Double] = []
        for _ in 0..<3 {
            let start = Date()
            for _ in 0..<requests {
                guard try store.command([Array("GET".utf8), key])?.count == size else {
                    throw StorageError(.readFailed, "GET returned a value of the wrong size")
                }
            }
            ours.append(Double(requests) / Date().timeIntervalSince(start))
            if let reference = redisBenchmarkGets(port: port, size: size, requests: requests) {
                theirs.append(reference)
            }
        }
        let perSecond = ours.sorted()[1]
        let reference = theirs.count == 3 ? theirs.sorted()[1] : nil
        print(
            "GET \(size) B, 1 connection, median of 3: this client \(Int(perSecond)) req/s; redis-benchmark (hiredis) "
                + (reference.map { "\(Int($0)) req/s (ratio \(String(format: "%.2f", perSecond / $0)))" }
                    ?? "not run (is redis-benchmark installed?)"))
    }
}

/// What one entry with a 16,384-byte body and an nginx response's head costs Redis, stored
/// through the store: its keys and `MEMORY USAGE`, against the body's own bytes.
func printRedisEntryCost(_ configuration: RedisConfiguration) throws {
    var configuration = configuration
    configuration.keyPrefix = "redis-bench-entry:"
    let store = RedisStore(configuration)
    let url = "http://127.0.0.1:8080/set100000/4711"
    let fields: HeaderFields = [
        "Server": "nginx/1.22.1", "Date": "Thu, 03 Dec 2026 09:00:00 GMT", "Content-Type": "application/octet-stream",
        "Content-Length": "16384", "Last-Modified": "Thu, 03 Dec 2026 08:59:00 GMT", "Connection": "keep-alive",
        "ETag": "\"692fe8c4-4000\"", "Cache-Control": "max-age=3600", "Accept-Ranges": "bytes",
    ]
    let writer = try store.makeWriter(for: EntryHead(primaryKey: url, url: url, status: 200, fields: fields, facts: []))
    try writer.append([UInt8](repeating: 0x61, count: 16_384))
    try writer.commit()
    let (keys, bytes) = try store.memoryUsage(of: url)
    _ = try store.remove(primaryKey: url)
    print(
        "an entry with a 16,384-byte body: \(keys) key\(keys == 1 ? "" : "s"), MEMORY USAGE \(bytes) bytes "
            + "(\(String(format: "%.2f", Double(bytes) / 16_384))x the body)")
}

/// `redis-benchmark -t get -c 1 -d SIZE -n REQUESTS --csv`'s requests per second.
private func redisBenchmarkGets(port: Int, size: Int, requests: Int) -> Double? {
    let process = ChildProcess()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/redis-benchmark")
    process.arguments = [
        "-h", "127.0.0.1", "-p", String(port), "-t", "get", "-c", "1", "-d", String(size), "-n", String(requests),
        "--csv",
    ]
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    guard (try? process.run()) != nil else { return nil }
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    // "test","rps",...  then  "GET","71428.57",...
    guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("\"GET") }) else { return nil }
    let fields = line.split(separator: ",").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
    return fields.count > 1 ? Double(fields[1]) : nil
}
