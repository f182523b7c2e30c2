#if os(Linux)
import CacheTestSupport
import CachingProxy
import Foundation
import Glibc
import LoopbackOrigin

/// Hits through the caching proxy on a working set of 5,000 URLs (1 KiB bodies, memory store;
/// with `cacheDirectory`, memory before that directory, as `httpcache serve` keeps them): a real
/// loopback connection, because the proxy's `Responder` belongs to its event loop. What is
/// counted is the proxy's request handler (ProxyHandler.handle: the route, the exchange's
/// lookup, the stored response written to the connection): scripts/bench-check passes its
/// symbol to callgrind's `--toggle-collect`, so the client, the event loop's reads and parsing,
/// and the origin are not counted.
func countProxyHits(iterations: Int, cacheDirectory: String? = nil) throws {
    let urls = 5_000
    let body = [UInt8](repeating: 120, count: 1024)
    let origin = try LoopbackOrigin()
    defer { origin.stop() }
    origin.setDefault { _ in
        LoopbackOrigin.Response(
            status: 200, headers: [("Cache-Control", "max-age=3600"), ("Content-Type", "application/octet-stream")],
            body: body)
    }
    var configuration = CachingProxy.Configuration(mode: .reverse(origin: origin.baseURL))
    configuration.port = 0
    configuration.cacheDirectory = cacheDirectory
    configuration.clock = { fixedNow }
    configuration.log = { message in FileHandle.standardError.write(Data("bench-count: \(message)\n".utf8)) }
    let proxy = try CachingProxy(configuration)
    proxy.start()
    defer { proxy.shutdown(timeout: 5) }
    let client = try LoopbackClient(port: proxy.port)

    /// Fetches `key`; whether its Cache-Status says `status`. Throws for a wrong answer, and
    /// when it does not say `status` with `required`.
    @discardableResult
    func get(_ key: Int, expecting status: String, required: Bool = true) throws -> Bool {
        let response = try client.get("/v1/items/\(key)")
        let said = response.cacheStatus.contains(status)
        guard response.status == 200, response.body == body, said || !required else {
            throw BenchFailure(
                "GET /v1/items/\(key): \(response.status), \(response.body.count) bytes, Cache-Status "
                    + "\"\(response.cacheStatus)\" (expected \(status))")
        }
        return said
    }
    for key in 0..<urls { try get(key, expecting: "stored") }
    var random = SplitMix64(seed: 5_000)
    let order = Array(0..<urls).shuffled(using: &random)
    // Every URL a hit before counting. On a busy machine (valgrind runs one thread at a time) the
    // disk store's writer can fall so far behind that a miss is refused rather than waited for
    // (`StorageError.Kind.busy`; its Cache-Status said `stored` before the commit was refused):
    // such a URL is fetched again, and stored, once the writer had a moment.
    var notHits = order
    var fetchedAgain = 0
    for pass in 0..<5 where !notHits.isEmpty {
        if pass > 0 { Thread.sleep(forTimeInterval: 1) }
        // A URL that is not a hit is fetched from the origin by that request, and stored.
        notHits = try notHits.filter { key in try !get(key, expecting: "hit", required: false) }
        fetchedAgain += notHits.count
    }
    guard notHits.isEmpty else { throw BenchFailure("\(notHits.count) URLs were not hits in five passes") }
    let primed = origin.requests.count
    guard primed == urls + fetchedAgain else {
        throw BenchFailure("the origin saw \(primed) requests, expected \(urls + fetchedAgain)")
    }
    // The disk store's written-behind commits done (its batch closed), as between bursts of
    // misses: the hits measured are those of an idle writer.
    if cacheDirectory != nil { Thread.sleep(forTimeInterval: 2) }

    Callgrind.startInstrumentation()
    try proxyHitRequests(client, order: order, iterations: iterations, bodySize: body.count)
    Callgrind.stopInstrumentation()
    guard origin.requests.count == primed else { throw BenchFailure("a measured request went to the origin") }
}

/// The measured requests (the count itself is the handler's, see ``countProxyHits(iterations:)``).
@inline(never)
private func proxyHitRequests(_ client: LoopbackClient, order: [Int], iterations: Int, bodySize: Int) throws {
    for index in 0..<iterations {
        let key = order[index % order.count]
        let response = try client.get("/v1/items/\(key)")
        guard response.status == 200, response.body.count == bodySize else {
            throw BenchFailure("measured GET /v1/items/\(key): \(response.status), \(response.body.count) bytes")
        }
    }
}

/// One keep-alive HTTP/1.1 connection, one request at a time; responses framed by
/// `Content-Length` (all the proxy sends here).
private final class LoopbackClient {
    struct Response {
        var status: Int
        var cacheStatus: String
        var body: [UInt8]
    }

    private let fd: Int32
    private var buffer: [UInt8] = []

    init(port: UInt16) throws {
        do {
            fd = try LoopbackOrigin.connect(port: port)
        } catch {
            throw BenchFailure("connect to the proxy: \(error)")
        }
    }

    deinit { close(fd) }

    func get(_ target: String) throws -> Response {
        let request = Array(
            "GET \(target) HTTP/1.1\r\nHost: bench.example\r\nAccept: */*\r\nUser-Agent: bench-count\r\n\r\n".utf8)
        var sent = 0
        while sent < request.count {
            let count = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw BenchFailure("the proxy closed the connection") }
            sent += count
        }
        let terminator: [UInt8] = [13, 10, 13, 10]
        var headEnd: Int?
        while headEnd == nil {
            headEnd = buffer.firstRange(of: terminator)?.upperBound
            if headEnd == nil { try receive() }
        }
        let head = String(decoding: buffer[..<headEnd!], as: UTF8.self)
        let lines = head.split(separator: "\r\n")
        let status = lines.first.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
        var length = 0
        var cacheStatus = ""
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            if name == "content-length" { length = Int(value) ?? 0 }
            if name == "cache-status" { cacheStatus = value }
        }
        while buffer.count < headEnd! + length { try receive() }
        let body = Array(buffer[headEnd!..<(headEnd! + length)])
        buffer.removeSubrange(0..<(headEnd! + length))
        return Response(status: status, cacheStatus: cacheStatus, body: body)
    }

    private func receive() throws {
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw BenchFailure("the proxy closed the connection") }
            buffer.append(contentsOf: chunk[..<count])
            return
        }
    }
}
#endif
