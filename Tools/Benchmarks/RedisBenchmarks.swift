import CacheStorage
import CacheStorageRedis
import CacheTestSupport
import Foundation

/// This package's RESP client against `redis-benchmark` (C, on hiredis) on the same server:
/// `GET` of a 16 KiB and a 64-byte value, one connection, one command at a time (the way the
/// store's hits use it), so the figure is round trips per second.
func runRedisBenchmarks(port: Int) throws {
    var configuration = try RedisConfiguration(url: "redis://127.0.0.1:\(port)")
    configuration.commandTimeout = 5
    let store = RedisStore(configuration)
    try store.checkConnection()
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

/// `redis-benchmark -t get -c 1 -d SIZE -n REQUESTS --csv`'s requests per second.
private func redisBenchmarkGets(port: Int, size: Int, requests: Int) -> Double? {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/redis-benchmark")
    process.arguments = [
        "-h", "127.0.0.1", "-p", String(port), "-t", "get", "-c", "1", "-d", String(size), "-n", String(requests),
        "--csv",
    ]
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    guard (try? process.runSerialized()) != nil else { return nil }
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    // "test","rps",...  then  "GET","71428.57",...
    guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("\"GET") }) else { return nil }
    let fields = line.split(separator: ",").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
    return fields.count > 1 ? Double(fields[1]) : nil
}
