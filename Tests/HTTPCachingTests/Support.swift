import CacheSemantics
import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A cache in a fresh directory, on a manual clock, in front of a fresh loopback origin.
final class Harness: Sendable {
    let origin: LoopbackOrigin
    let directory: TemporaryDirectory
    let clock: ManualClock
    let cache: HTTPCache

    /// - Parameters:
    ///   - directory: Another harness's directory, for a second cache on the same store.
    ///   - clock: Another harness's clock, so that both caches see the same time however long
    ///     the machine takes between them (a fresh clock would start at a later real time).
    init(
        memoryOnly: Bool = false, directory: TemporaryDirectory? = nil, clock: ManualClock = ManualClock(),
        _ configure: (inout HTTPCache.Configuration) -> Void = { _ in }
    ) throws {
        origin = try LoopbackOrigin()
        self.clock = clock
        self.directory = directory ?? TemporaryDirectory("httpcaching-test")
        var configuration = HTTPCache.Configuration()
        configuration.directory = memoryOnly ? nil : self.directory.path
        configuration.clock = clock.function
        configuration.log = { _ in }
        configure(&configuration)
        cache = try HTTPCache(configuration: configuration)
    }

    deinit { origin.stop() }

    /// The `Date` field value of now on the cache's clock, so ages are what the test says.
    var date: String { HTTPDate.format(Timestamp(secondsSince1970: clock.now())) }

    /// Routes `path` to a fixed response dated by the cache's clock.
    func serve(_ path: String, status: Int = 200, _ headers: [(String, String)] = [], body: String = "body") {
        origin.route(path) { [clock] _ in
            LoopbackOrigin.Response(
                status: status,
                headers: [("Date", HTTPDate.format(Timestamp(secondsSince1970: clock.now())))] + headers, body: body)
        }
    }

    /// Routes `path` to a response with `validators` that answers a matching `If-None-Match`
    /// or `If-Modified-Since` with `304`.
    func serveValidated(
        _ path: String, etag: String? = "\"v1\"", lastModified: String? = nil, _ headers: [(String, String)],
        body: String = "body"
    ) {
        origin.route(path) { [clock] request in
            var fields = [("Date", HTTPDate.format(Timestamp(secondsSince1970: clock.now())))] + headers
            if let etag { fields.append(("ETag", etag)) }
            if let lastModified { fields.append(("Last-Modified", lastModified)) }
            let matches: Bool
            if let tags = request.header("If-None-Match") {
                matches = etag.map { tags.contains($0) } ?? false
            } else if let since = request.header("If-Modified-Since") {
                matches = since == lastModified
            } else {
                matches = false
            }
            return LoopbackOrigin.Response(status: matches ? 304 : 200, headers: fields, body: matches ? "" : body)
        }
    }

    func request(
        _ path: String, method: String = "GET", policy: URLRequest.CachePolicy = .useProtocolCachePolicy,
        headers: [String: String] = [:], body: Data? = nil
    ) -> URLRequest {
        var request = URLRequest(url: origin.url(path), cachePolicy: policy)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        request.httpBody = body
        return request
    }

    func get(
        _ path: String, method: String = "GET", policy: URLRequest.CachePolicy = .useProtocolCachePolicy,
        headers: [String: String] = [:], body: Data? = nil
    ) async throws -> CachedResponse {
        try await cache.data(for: request(path, method: method, policy: policy, headers: headers, body: body))
    }
}

extension CachedResponse {
    var text: String { String(decoding: data, as: UTF8.self) }
    func field(_ name: String) -> String? { response.value(forHTTPHeaderField: name) }
}
