import CacheSemantics
import CacheStorage
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A request as the cache handles it.
struct Prepared: @unchecked Sendable {
    /// The request as the caller made it (its body read from a stream if need be).
    var request: URLRequest
    var url: URL
    var urlString: String
    /// The method sent to the origin.
    var method: String
    /// The request as the engine sees it: method `GET` for a `POST` keyed by its body.
    var head: RequestHead
    /// The key responses are stored under; `nil` when the cache is bypassed.
    var primaryKey: String?
    var bypassReason: Reason?
    var policy: CachePolicy
    var forcedLifetime: Int?
    var pin = false
    var keyedByBody = false
    /// Store the response even when RFC 9111 would not (manifest pre-fetches): as
    /// `max-age=0`, so it is validated whenever the origin can be reached.
    var forceStore = false

    /// Identical requests (same key, fields and policy) share one origin request.
    var coalescingIdentity: String? {
        guard let primaryKey, head.method == "GET", policy != .reloadIgnoringLocalCacheData,
            policy != .reloadIgnoringLocalAndRemoteCacheData
        else { return nil }
        let fields = head.fields.map { "\($0.name.lowercased()):\($0.value)" }.sorted().joined(separator: "\n")
        return "\(method)\n\(primaryKey)\n\(policy)\n\(fields)"
    }
}

/// A response on its way to the caller.
struct Exchange: Sendable {
    enum Body: Sendable {
        /// Bytes `range` of a stored body of `size` bytes: read at once
        /// (``HTTPCache/data(for:)``) or in blocks (``HTTPCache/bytes(for:)``).
        case stored(EntryID, range: Range<Int64>, size: Int64)
        case source(any BodySource)
    }

    var status: Int
    var fields: HeaderFields
    var outcome: CacheOutcome
    var cacheStatus: CacheStatus
    var userInfo: Data?
    var reasons: [Reason]
    var body: Body
    var expectedLength: Int64?

    /// The head the caller sees, with `Cache-Status` added when configured.
    func responseHead(url: URL, configuration: HTTPCache.Configuration) -> CachedResponseHead {
        var fields = fields
        if configuration.addsCacheStatusField {
            fields["Cache-Status"] = cacheStatus.appended(to: fields["Cache-Status"])
        }
        return CachedResponseHead(
            head: ResponseHeadParts(status: status, fields: fields, url: url), outcome: outcome,
            cacheStatus: cacheStatus, userInfo: userInfo, reasons: reasons, expectedLength: expectedLength)
    }
}

typealias Candidate = StoredCandidate

/// What a forwarded request is (a copy of the engine's `Forwarding` the cache can also make
/// itself, for a retry without validators).
struct Plan: Sendable {
    var reason: CacheStatus.ForwardReason
    var candidate: Int?
    var validated: [Int] = []
    var fields: HeaderFields = [:]
    var reasons: [Reason]
    /// The stored incomplete response this request asks the rest of (RFC 9111 §3.3).
    var resuming: Int?

    init(_ forwarding: Forwarding) {
        reason = forwarding.reason
        candidate = forwarding.candidate
        validated = forwarding.validated
        fields = forwarding.fields
        reasons = forwarding.reasons
    }

    init(reason: CacheStatus.ForwardReason, candidate: Int? = nil, reasons: [Reason]) {
        self.reason = reason
        self.candidate = candidate
        self.reasons = reasons
    }
}

/// Whether a request sends itself or waits for an identical one in flight, and then what it
/// is told.
enum Join: Sendable {
    case lead
    case follow(Collapse?)
}

/// What the requests that waited for a collapsed one are told.
struct Collapse: Sendable {
    var outcome: CacheOutcome
    var reason: CacheStatus.ForwardReason
    var status: Int
}

/// Runs a completion at most once.
final class Once<Value: Sendable>: Sendable {
    private let action: Locked<(@Sendable (Value) -> Void)?>

    init(_ action: @escaping @Sendable (Value) -> Void) { self.action = Locked(action) }

    func callAsFunction(_ value: Value) {
        let action = action.withLock { action in
            defer { action = nil }
            return action
        }
        action?(value)
    }
}

extension HTTPCache {
    var now: Timestamp { Timestamp(secondsSince1970: configuration.clock()) }

    // MARK: Preparing

    func prepare(_ request: URLRequest) throws -> Prepared {
        guard let url = request.url, let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme) else {
            throw URLError(
                .unsupportedURL,
                userInfo: [NSLocalizedDescriptionKey: "only http and https URLs can be fetched through the cache"])
        }
        guard let host = url.host, !host.isEmpty else {
            throw URLError(.badURL, userInfo: [NSLocalizedDescriptionKey: "the URL has no host: \(url)"])
        }
        let method = (request.httpMethod ?? "GET").uppercased()
        let fields = HeaderFields(
            (request.allHTTPHeaderFields ?? [:]).sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
        var policy = CachePolicy(request.cachePolicy)
        if policy == .useProtocolCachePolicy { policy = configuration.defaultPolicy }
        let urlString = url.absoluteString
        var prepared = Prepared(
            request: request, url: url, urlString: urlString, method: method,
            head: RequestHead(method: method, uri: urlString, fields: fields), policy: policy)

        let rules = self.rules.filter { $0.pattern.matches(urlString) }
        if let never = rules.first(where: { $0.action == .neverCache }) {
            prepared.bypassReason = .configured("rule \"\(never)\": the cache is not used")
            return prepared
        }
        for rule in rules {
            switch rule.action {
            case .forceLifetime(let seconds): prepared.forcedLifetime = prepared.forcedLifetime ?? seconds
            case .pin: prepared.pin = true
            case .neverCache: break
            }
        }
        let key: RequestKey?
        if let hook = configuration.cacheKey { key = hook(request) } else { key = RequestKey(url: url) }
        guard let key else {
            prepared.bypassReason = .configured("the cache-key hook chose not to cache this request")
            return prepared
        }
        prepared.keyedByBody = key.includesBody && method == "POST"
        let keyMethod = prepared.keyedByBody || method == "HEAD" ? "GET" : method
        guard let cacheKey = CacheKey(method: keyMethod, uri: key.url.absoluteString) else {
            throw URLError(.badURL, userInfo: [NSLocalizedDescriptionKey: "the URL cannot be parsed: \(key.url)"])
        }
        if prepared.keyedByBody {
            let body = Array(request.httpBody ?? Data())
            let digest = [XXH64.hash(body), XXH64.hash(body, seed: 0x9E37_79B9)].map { String($0, radix: 16) }
            prepared.primaryKey = "POST \(cacheKey.uri) body=\(body.count):\(digest.joined(separator: ":"))"
            prepared.head.method = "GET"
        } else {
            prepared.primaryKey = cacheKey.primaryKey
        }
        return prepared
    }

    func candidates(_ primaryKey: String) -> [Candidate] {
        let entries: [StoredEntry]
        do {
            entries = try store.variants(of: primaryKey)
        } catch {
            configuration.log("could not read the stored responses for \(primaryKey): \(error); treated as a miss")
            return []
        }
        return entries.compactMap { entry in
            guard let facts = StoredResponseFacts(serialized: entry.head.facts) else {
                configuration.log("dropped the stored response for \(entry.head.url): its facts cannot be read")
                try? store.remove(entry.id)
                return nil
            }
            return Candidate(entry: entry, facts: facts)
        }
    }

    // MARK: Answering

    /// Answers one request (no redirects followed).
    func exchange(_ prepared: Prepared, coalesce: Bool) async throws -> Exchange {
        guard let primaryKey = prepared.primaryKey else {
            return try await forward(
                prepared, Plan(reason: .bypass, reasons: prepared.bypassReason.map { [$0] } ?? []), [],
                storing: false)
        }
        let candidates = candidates(primaryKey)
        let request = CacheRequest(prepared.head, policy: prepared.policy)
        switch engine.lookup(request, candidates: candidates.map(\.facts), now: now) {
        case .serve(let use):
            let status = CacheStatus(cache: configuration.name, hit: true, ttl: Int(use.timeToLive.rounded(.down)))
            return serveStored(
                candidates[use.candidate], use, prepared, outcome: use.isStale ? .stale : .hit, status: status)
        case .serveStaleWhileRevalidate(let use, let revalidation):
            await revalidateInBackground(prepared, Plan(revalidation), candidates)
            var status = CacheStatus(cache: configuration.name, hit: true, ttl: Int(use.timeToLive.rounded(.down)))
            status.detail = "stale-while-revalidate"
            return serveStored(candidates[use.candidate], use, prepared, outcome: .stale, status: status)
        case .gatewayTimeout(let reasons):
            return gatewayTimeout(reasons, detail: prepared.policy == .returnCacheDataDontLoad ? "policy" : "only-if-cached")
        case .forward(let forwarding):
            if forwarding.reason == .method {
                return try await forward(prepared, Plan(forwarding), candidates, storing: false)
            }
            var plan = Plan(forwarding)
            if forwarding.reason == .partial { resume(&plan, prepared, candidates) }
            guard coalesce, let identity = prepared.coalescingIdentity else {
                return try await forward(prepared, plan, candidates, storing: true)
            }
            return try await coalesced(identity, prepared, plan, candidates)
        }
    }

    /// When only an incomplete stored response matches (RFC 9111 §3.3), asks the origin for
    /// the rest of it with `Range` and `If-Range` instead of the whole — unless the request
    /// has its own `Range` or validators.
    private func resume(_ plan: inout Plan, _ prepared: Prepared, _ candidates: [Candidate]) {
        let fields = prepared.head.fields
        guard prepared.method == "GET", !fields.contains("Range"), !fields.contains("If-Range"),
            !CacheRequest(prepared.head).isConditional,
            let index = engine.resumableVariant(fields, candidates: candidates.map(\.facts)),
            let resumption = engine.resumptionFields(
                stored: candidates[index].facts, storedLength: candidates[index].entry.bodySize)
        else { return }
        plan.resuming = index
        for field in resumption { plan.fields[field.name] = field.value }
    }

    /// Sends the request unless an identical one is in flight; then waits for it and answers
    /// from what it stored.
    private func coalesced(
        _ identity: String, _ prepared: Prepared, _ plan: Plan, _ candidates: [Candidate]
    ) async throws -> Exchange {
        let joined: Join = await withCheckedContinuation { continuation in
            let leads = state.withLock { state -> Bool in
                if state.inFlight[identity] != nil {
                    state.inFlight[identity]!.append(continuation)
                    return false
                }
                state.inFlight[identity] = []
                return true
            }
            if leads { continuation.resume(returning: .lead) }
        }
        guard case .follow(let collapse) = joined else {
            let done = Once<Collapse?> { [self] collapse in
                let waiting = state.withLock { $0.inFlight.removeValue(forKey: identity) ?? [] }
                for waiter in waiting { waiter.resume(returning: .follow(collapse)) }
            }
            do {
                return try await forward(prepared, plan, candidates, storing: true, done: done.callAsFunction)
            } catch {
                done(nil)
                throw error
            }
        }
        var exchange = try await self.exchange(prepared, coalesce: false)
        if let collapse, exchange.outcome == .hit {
            exchange.outcome = collapse.outcome
            exchange.cacheStatus = CacheStatus(
                cache: configuration.name, forward: collapse.reason, forwardStatus: collapse.status, stored: true)
            exchange.cacheStatus.collapsed = true
            state.withLock { $0.statistics.collapsed += 1 }
        }
        return exchange
    }

    /// Serves a stored response: whole, as a `304` when the client's validators match
    /// (RFC 9111 §4.3.2), or the parts a `Range` asks for (RFC 9110 §14.2).
    func serveStored(
        _ candidate: Candidate, _ use: CachedUse, _ prepared: Prepared, outcome: CacheOutcome, status: CacheStatus
    ) -> Exchange {
        let entry = candidate.entry
        var fields = entry.head.fields
        fields["Age"] = use.ageFieldValue
        store.recordAccess(entry.id, at: configuration.clock())
        var exchange = Exchange(
            status: entry.head.status, fields: fields, outcome: outcome, cacheStatus: status,
            userInfo: entry.head.userInfo.map { Data($0) }, reasons: use.reasons,
            body: .stored(entry.id, range: 0..<entry.bodySize, size: entry.bodySize), expectedLength: entry.bodySize)
        if use.notModified {
            // The client's own validators match (RFC 9111 §4.3.2): 304, no body.
            exchange.status = 304
            exchange.fields.removeAll(named: "Content-Length")
            exchange.body = .source(DataSource(Data()))
            exchange.expectedLength = 0
            return exchange
        }
        let size = entry.bodySize
        switch engine.rangeAnswer(method: prepared.method, request: prepared.head.fields, stored: candidate.facts, length: size) {
        case .whole:
            state.withLock { $0.statistics.bytesServedFromCache += size }
        case .partial(let ranges) where ranges.count == 1:
            let range = ranges[0]
            exchange.status = 206
            exchange.fields["Content-Range"] = ContentRange(range: range, completeLength: size).fieldValue
            exchange.fields["Content-Length"] = String(range.count)
            exchange.body = .stored(entry.id, range: range.lowerBound..<(range.upperBound + 1), size: size)
            exchange.expectedLength = Int64(range.count)
            state.withLock { $0.statistics.bytesServedFromCache += Int64(range.count) }
        case .partial(let ranges):
            guard let body = multipart(entry, ranges, contentType: fields["Content-Type"]) else {
                break  // The stored body cannot be read: answered whole, which fails and refetches.
            }
            exchange.status = 206
            exchange.fields["Content-Type"] = "multipart/byteranges; boundary=\(body.boundary)"
            exchange.fields["Content-Length"] = String(body.data.count)
            exchange.body = .source(DataSource(body.data))
            exchange.expectedLength = Int64(body.data.count)
            state.withLock { $0.statistics.bytesServedFromCache += Int64(body.data.count) }
        case .unsatisfiable(let length):
            exchange.status = 416
            exchange.fields["Content-Range"] = ContentRange(range: nil, completeLength: length).fieldValue
            exchange.fields["Content-Length"] = "0"
            exchange.body = .source(DataSource(Data()))
            exchange.expectedLength = 0
        }
        return exchange
    }

    /// A `multipart/byteranges` body of `ranges` of a stored body (RFC 9110 §14.6).
    private func multipart(
        _ entry: StoredEntry, _ ranges: [ClosedRange<Int64>], contentType: String?
    ) -> (data: Data, boundary: String)? {
        let boundary = "httpcache-" + EntryID.random().rawValue
        var data = Data()
        for range in ranges {
            guard let bytes = try? store.body(of: entry.id, range: range) else { return nil }
            var part = "--\(boundary)\r\n"
            if let contentType { part += "Content-Type: \(contentType)\r\n" }
            part += "Content-Range: \(ContentRange(range: range, completeLength: entry.bodySize).fieldValue)\r\n\r\n"
            data.append(Data(part.utf8))
            data.append(contentsOf: bytes)
            data.append(Data("\r\n".utf8))
        }
        data.append(Data("--\(boundary)--\r\n".utf8))
        return (data, boundary)
    }

    func gatewayTimeout(_ reasons: [Reason], detail: String) -> Exchange {
        let text = "504 Gateway Timeout: the cache could not answer: "
            + reasons.map(\.description).joined(separator: "; ") + "\n"
        let body = Data(text.utf8)
        return Exchange(
            status: 504,
            fields: ["Content-Type": "text/plain; charset=utf-8", "Content-Length": String(body.count)],
            outcome: .miss, cacheStatus: CacheStatus(cache: configuration.name, hit: false, detail: detail),
            reasons: reasons, body: .source(DataSource(body)), expectedLength: Int64(body.count))
    }
}

extension CachePolicy {
    /// The policy of a `URLRequest.CachePolicy`.
    public init(_ policy: URLRequest.CachePolicy) {
        switch policy {
        case .useProtocolCachePolicy: self = .useProtocolCachePolicy
        case .reloadIgnoringLocalCacheData: self = .reloadIgnoringLocalCacheData
        case .reloadIgnoringLocalAndRemoteCacheData: self = .reloadIgnoringLocalAndRemoteCacheData
        case .returnCacheDataElseLoad: self = .returnCacheDataElseLoad
        case .returnCacheDataDontLoad: self = .returnCacheDataDontLoad
        case .reloadRevalidatingCacheData: self = .reloadRevalidatingCacheData
        @unknown default: self = .useProtocolCachePolicy
        }
    }
}
