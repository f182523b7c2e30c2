import CacheSemantics
import CacheSystem
import Foundation
import HTTPCaching

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A hit through `HTTPCache.data(for:)` on the default store (memory in front of disk) whose
/// body the memory tier holds: one URL, a 1 KiB body, as the http benchmark's hit. The origin is
/// a transport that answers from memory, so no socket or URLSession is involved.
func countMemoryHits(iterations: Int) throws {
    try withScratchDirectory("memory-hit") { try countMemoryHits(iterations: iterations, directory: $0) }
}

private func countMemoryHits(iterations: Int, directory: String) throws {
    let transport = CannedTransport(body: [UInt8](repeating: 120, count: 1024))
    var configuration = HTTPCache.Configuration()
    configuration.directory = directory
    configuration.clock = { fixedNow }
    configuration.log = { message in FileHandle.standardError.write(Data("bench-count: \(message)\n".utf8)) }
    let cache = try HTTPCache(configuration: configuration, transport: transport)
    let expected = transport.body.count
    try runBlocking {
        let request = URLRequest(url: URL(string: "https://bench.example/v1/items/hit")!)
        let primed = try await cache.data(for: request)
        guard primed.outcome == .miss, primed.data.count == expected else {
            throw BenchFailure("priming gave \(primed.outcome) with \(primed.data.count) bytes")
        }
        for _ in 0..<100 {
            let result = try await cache.data(for: request)
            guard result.outcome == .hit, result.data == Data(transport.body) else {
                throw BenchFailure("a warm-up request gave \(result.outcome) with \(result.data.count) bytes")
            }
        }
        var failures = 0
        Callgrind.startInstrumentation()
        try await countedAsyncRegion(iterations: iterations) { _ in
            let result = try await cache.data(for: request)
            if result.outcome != .hit || result.data.count != expected { failures += 1 }
        }
        Callgrind.stopInstrumentation()
        guard failures == 0, transport.requests == 1 else {
            throw BenchFailure("\(failures) measured requests were not hits; the origin saw \(transport.requests)")
        }
    }
}

/// An origin in memory: every request gets the same cacheable response.
private final class CannedTransport: HTTPTransport {
    let body: [UInt8]
    private let count = Locked(0)

    init(body: [UInt8]) { self.body = body }

    var requests: Int { count.withLock { $0 } }

    func send(_ request: URLRequest) async throws -> TransportResponse {
        count.withLock { $0 += 1 }
        let fields = [
            "Cache-Control": "max-age=3600", "ETag": "\"v1\"", "Content-Type": "application/octet-stream",
            "Content-Length": String(body.count),
        ]
        guard let url = request.url,
            let response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: fields)
        else { throw URLError(.badURL) }
        return TransportResponse(response: response, data: Data(body))
    }
}
