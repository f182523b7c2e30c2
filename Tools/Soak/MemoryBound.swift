#if os(Linux)
import CacheSystem
import CacheTestSupport
import Foundation
import Glibc
import LoopbackOrigin

// `soak memory-bound`: does `--memory` bound the proxy's memory? Distinct URLs with one-byte
// bodies (what any client can send: distinct query strings) through `httpcache serve
// --memory-only --memory 1M`, the proxy's resident memory read at 0, 70,000, 100,000 and
// 200,000 URLs. It must stay flat once the budget is full. Run by `scripts/memory-bound`.

let memoryBoundUsage = """
    Usage: soak memory-bound [--urls N] [--memory BYTES] [--clients N] [--httpcache PATH]

      --urls N          distinct URLs requested, each once (default 200000)
      --memory BYTES    the proxy's memory tier (default 1M)
      --clients N       keep-alive connections requesting in parallel (default 4)
      --httpcache PATH  the httpcache to run (default: the one next to this executable)
    """

/// Runs the measurement with `arguments` (after `memory-bound`); the exit status.
func memoryBound(_ arguments: [String]) -> Int32 {
    var values: [String: String] = [:]
    var rest = arguments[...]
    while let name = rest.popFirst() {
        guard name.hasPrefix("--"), let value = rest.popFirst() else {
            print(memoryBoundUsage)
            return name == "--help" || name == "-h" ? 0 : 2
        }
        values[String(name.dropFirst(2))] = value
    }
    let here = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().path
    guard let urls = Int(values.removeValue(forKey: "urls") ?? "200000"), urls > 0,
        let clients = Int(values.removeValue(forKey: "clients") ?? "4"), clients > 0
    else {
        print(memoryBoundUsage)
        return 2
    }
    let memory = values.removeValue(forKey: "memory") ?? "1M"
    let httpcache = values.removeValue(forKey: "httpcache") ?? here + "/httpcache"
    if let unknown = values.keys.first {
        print("soak memory-bound: unknown option --\(unknown)\n\(memoryBoundUsage)")
        return 2
    }
    do {
        return try measureMemoryBound(urls: urls, clients: clients, memory: memory, httpcache: httpcache) ? 0 : 1
    } catch {
        print("soak memory-bound: \(error)")
        return 1
    }
}

private func measureMemoryBound(urls: Int, clients: Int, memory: String, httpcache: String) throws -> Bool {
    let origin = try LoopbackOrigin()
    origin.setDefault { _ in
        LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=3600")], body: [UInt8(ascii: "x")])
    }
    let proxy = try ProxyProcess(
        executable: httpcache, arguments: ["--origin", origin.baseURL, "--memory-only", "--memory", memory])
    defer {
        proxy.stop()
        origin.stop()
    }
    print(
        "memory-bound: \(urls) distinct URLs with one-byte bodies through httpcache serve --memory-only "
            + "--memory \(memory) (pid \(proxy.process.processIdentifier)), \(clients) keep-alive clients")
    let checkpoints = [0, 70_000, 100_000, urls].filter { $0 <= urls }
    var done = 0
    var figures: [(urls: Int, rss: Int64, peak: Int64)] = []
    for checkpoint in checkpoints {
        let range = done..<checkpoint
        let port = proxy.port
        let failures = Locked(0)
        let finished = Locked(0)
        for client in 0..<clients {
            Thread.detachNewThread {
                defer {
                    finished.withLock { $0 += 1 }
                    finished.wakeWaiters()
                }
                do {
                    let connection = try SoakConnection(port: port, timeoutSeconds: 30)
                    for number in stride(from: range.lowerBound + client, to: range.upperBound, by: clients) {
                        try connection.send("GET /u/\(number) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                        let head = try connection.readHead()
                        var length = 0
                        try connection.readBody(head, method: "GET") { length += $0.count }
                        if head.status != 200 || length != 1 { failures.withLock { $0 += 1 } }
                    }
                } catch {
                    failures.withLock { $0 += 1 }
                }
            }
        }
        _ = finished.withLock(when: { $0 == clients }) { _ in true }
        guard failures.withLock({ $0 }) == 0 else { throw SoakFailure("requests for /u/\(range) failed") }
        done = checkpoint
        // The proxy hands free memory back every 10 s (malloc_trim): read after it has.
        Thread.sleep(forTimeInterval: 11)
        let figure = (checkpoint, proxy.memory("VmRSS") ?? 0, proxy.memory("VmHWM") ?? 0)
        figures.append(figure)
        print(
            "  after \(figure.0) URLs: RSS \(String(format: "%.1f", Double(figure.1) / 1_048_576)) MiB, peak "
                + "\(String(format: "%.1f", Double(figure.2) / 1_048_576)) MiB")
    }
    let metrics = try fetchMetrics(port: proxy.port)
    for line in metrics.split(separator: "\n") where line.hasPrefix("httpcache_store_") { print("  \(line)") }
    // Flat: from 100,000 URLs on (the budget and the memos are full long before), the peak
    // grows by less than 5 MiB.
    if let middle = figures.first(where: { $0.urls == 100_000 }), let last = figures.last, last.urls > middle.urls {
        let growth = Double(last.peak - middle.peak) / 1_048_576
        print("  peak growth from \(middle.urls) to \(last.urls) URLs: \(String(format: "%.1f", growth)) MiB")
        return growth < 5
    }
    return true
}

/// The proxy's metrics text.
private func fetchMetrics(port: UInt16) throws -> String {
    let connection = try SoakConnection(port: port, timeoutSeconds: 30)
    try connection.send("GET /_httpcache/metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    let head = try connection.readHead()
    var body: [UInt8] = []
    try connection.readBody(head, method: "GET") { body += $0 }
    return String(decoding: body, as: UTF8.self)
}
#endif
