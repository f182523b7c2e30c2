import CacheSemantics
import CacheStorage
import CacheSystem
import Foundation
import HTTPCacheCore

/// Stores responses obtained elsewhere (a refresh's downloads, a WARC file's records) exactly
/// as a fetch through the cache would: a second cache on the same store whose transport
/// answers with the given response, asked with a reload.
///
/// Of a tiered store it writes to the disk tier only: memory holds bodies that are read, not
/// everything an archive brings (its capacity counts body bytes, so a million tiny records
/// would each leave a head there). Heads always come from the disk index, so the tiered cache
/// serves what was written here at once.
final class Replayer: Sendable {
    private let cache: HTTPCache
    private let responses: ReplayTransport
    /// What the cache logged while storing the current response: why it did not keep it.
    private let notes = Locked([String]())
    private let log: @Sendable (String) -> Void

    init(_ cache: HTTPCache) {
        var configuration = cache.configuration
        configuration.followsRedirects = false
        log = configuration.log
        configuration.log = { [notes] message in notes.withLock { $0.append(message) } }
        responses = ReplayTransport()
        let store = (cache.store as? TieredStore)?.disk ?? cache.store
        self.cache = HTTPCache(configuration: configuration, store: store, transport: responses)
    }

    /// Stores `response` under its URL (stored even where RFC 9111 would not, as a saved
    /// page's resources are); logs why when the store does not keep it.
    func store(_ response: StagedResponse) async throws {
        guard let url = URL(string: response.url) else { throw URLError(.badURL) }
        let body = response.body
        let refusal = try await store(
            url: url, status: response.status, fields: response.fields,
            body: AsyncThrowingStream { continuation in
                if !body.isEmpty { continuation.yield(body) }
                continuation.finish()
            })
        if let refusal { log("\(response.url) was downloaded but not stored: \(refusal)") }
    }

    /// Stores a response whose body is pulled from `body` as the store takes it in, and stops
    /// pulling as soon as the store gives it up (too large, a write failed).
    ///
    /// - Returns: `nil` when it is stored, else why not.
    /// - Throws: What `body` throws (nothing of it is then stored).
    func store(
        url: URL, status: Int, fields: [String: String], body: AsyncThrowingStream<Data, any Error>
    ) async throws -> String? {
        notes.withLock { $0.removeAll() }
        responses.set(url.absoluteString, ReplayTransport.Response(status: status, fields: fields, body: body))
        defer { responses.clear() }
        let request = FetchRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData)
        let (head, stream) = try await cache.bytes(for: request, forceStore: true) { _ in }
        if head.cacheStatus.stored == false {
            let reasons = head.reasons.map(\.description).joined(separator: "; ")
            return "\(url.absoluteString) not stored: " + (reasons.isEmpty ? "the cache would not store it" : reasons)
        }
        for try await _ in stream {
            if let note = notes.withLock({ $0.first }) { return note }
        }
        return notes.withLock { $0.first }
    }
}

/// Answers a request with the response given for its URL, once.
private final class ReplayTransport: OriginTransport {
    struct Response: Sendable {
        var status: Int
        var fields: [String: String]
        var body: AsyncThrowingStream<Data, any Error>
    }

    private let responses = Locked([String: Response]())

    func set(_ url: String, _ response: Response) {
        responses.withLock { $0 = [url: response] }
    }

    func clear() {
        responses.withLock { $0 = [:] }
    }

    func send(_ request: FetchRequest) async throws -> OriginResponse {
        guard let staged = responses.withLock({ $0.removeValue(forKey: request.url.absoluteString) }) else {
            throw URLError(.resourceUnavailable)
        }
        // Sorted by name, as a response through `HTTPURLResponse` has them.
        let fields = HeaderFields(staged.fields.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
        return OriginResponse(status: staged.status, fields: fields, url: request.url, body: staged.body)
    }
}
