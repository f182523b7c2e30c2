import CacheLocking
import Foundation
import HTTPCaching

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Stores responses obtained elsewhere (a refresh's downloads, a WARC file's records) exactly
/// as a fetch through the cache would: a second cache on the same store whose transport
/// answers with the given response, asked with a reload.
final class Replayer: Sendable {
    private let cache: HTTPCache
    private let responses: ReplayTransport

    init(_ cache: HTTPCache) {
        var configuration = cache.configuration
        configuration.followsRedirects = false
        responses = ReplayTransport()
        self.cache = HTTPCache(configuration: configuration, store: cache.store, transport: responses)
    }

    /// Stores `response` under its URL (stored even where RFC 9111 would not, as a saved
    /// page's resources are).
    func store(_ response: StagedResponse) async throws {
        guard let url = URL(string: response.url) else { throw URLError(.badURL) }
        responses.set(response)
        var request = URLRequest(url: url)
        request.cachePolicy = .reloadIgnoringLocalCacheData
        let (_, body) = try await cache.bytes(for: request, forceStore: true) { _ in }
        for try await _ in body {}
    }
}

/// Answers each request with the response given for its URL.
private final class ReplayTransport: HTTPTransport {
    private let responses = Locked([String: StagedResponse]())

    func set(_ response: StagedResponse) {
        responses.withLock { $0 = [response.url: response] }
    }

    func send(_ request: URLRequest) async throws -> TransportResponse {
        guard let url = request.url, let staged = responses.withLock({ $0[url.absoluteString] }),
            let response = HTTPURLResponse(
                url: url, statusCode: staged.status, httpVersion: "HTTP/1.1", headerFields: staged.fields)
        else { throw URLError(.resourceUnavailable) }
        return TransportResponse(response: response, data: staged.body)
    }
}
