import CacheTestSupport
import Testing

@testable import CacheSemantics

/// Helpers for the reuse, validation and invalidation suites (RFC 9111 §4). Everything is a
/// static member of `Reuse` so that nothing collides with helpers of other test folders.
enum Reuse {
    /// The target URI used throughout.
    static let uri = "https://example.com/resource"

    /// A private cache (the default configuration).
    static let privateEngine = CacheEngine()
    /// A shared cache.
    static let sharedEngine = CacheEngine(configuration: .sharedCache)

    struct NotStored: Error, CustomStringConvertible {
        var decision: StorageDecision
        var description: String { "expected .store, got \(decision)" }
    }

    /// The timestamp `offset` seconds after ``Fixtures/epoch``.
    static func time(_ offset: Double) -> Timestamp { Fixtures.epoch + offset }

    /// Stores a response the realistic way, through `storageDecision`, and returns its facts.
    ///
    /// The response is received at `epoch + at`; its `Date` is that time unless `fields`
    /// has one. The request was sent `delay` seconds earlier.
    static func store(
        _ fields: HeaderFields, status: Int = 200, request: HeaderFields = [:], at offset: Double = 0,
        delay: Double = 0, engine: CacheEngine = privateEngine, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> StoredResponseFacts {
        try storeResponse(
            fields, status: status, request: request, at: offset, delay: delay, engine: engine,
            sourceLocation: sourceLocation
        ).facts
    }

    /// Like ``store(_:status:request:at:delay:engine:sourceLocation:)`` but returns the
    /// stored fields too.
    static func storeResponse(
        _ fields: HeaderFields, status: Int = 200, request: HeaderFields = [:], at offset: Double = 0,
        delay: Double = 0, engine: CacheEngine = privateEngine, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> StorableResponse {
        var responseFields = fields
        if !responseFields.contains("Date") { responseFields["Date"] = Fixtures.httpDate(offset) }
        let decision = engine.storageDecision(
            for: RequestHead(uri: uri, fields: request), response: ResponseHead(status: status, fields: responseFields),
            requestTime: time(offset - delay), responseTime: time(offset))
        guard case .store(let stored) = decision else {
            Issue.record("expected the response to be stored, got \(decision)", sourceLocation: sourceLocation)
            throw NotStored(decision: decision)
        }
        return stored
    }

    /// Looks a request up at `epoch + at`.
    static func lookup(
        method: String = "GET", fields: HeaderFields = [:], policy: CachePolicy = .useProtocolCachePolicy,
        candidates: [StoredResponseFacts], at offset: Double, engine: CacheEngine = privateEngine
    ) -> LookupDecision {
        engine.lookup(
            CacheRequest(RequestHead(method: method, uri: uri, fields: fields), policy: policy),
            candidates: candidates, now: time(offset))
    }

    /// The stored response used, when the decision is `.serve`.
    static func served(_ decision: LookupDecision) -> CachedUse? {
        if case .serve(let use) = decision { return use }
        return nil
    }

    /// The forwarding, when the decision is `.forward`.
    static func forwarded(_ decision: LookupDecision) -> Forwarding? {
        if case .forward(let forwarding) = decision { return forwarding }
        return nil
    }

    /// The reasons, when the decision is `.gatewayTimeout`.
    static func gatewayTimeout(_ decision: LookupDecision) -> [Reason]? {
        if case .gatewayTimeout(let reasons) = decision { return reasons }
        return nil
    }

    /// The stale use and its background revalidation, when the decision is
    /// `.serveStaleWhileRevalidate`.
    static func staleWhileRevalidate(_ decision: LookupDecision) -> (use: CachedUse, revalidation: Forwarding)? {
        if case .serveStaleWhileRevalidate(let use, let revalidation) = decision { return (use, revalidation) }
        return nil
    }

    /// The stored response used, when the fallback is `.serve`.
    static func served(_ decision: FallbackDecision) -> CachedUse? {
        if case .serve(let use) = decision { return use }
        return nil
    }
}
