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
    func head(url: URL, configuration: HTTPCache.Configuration) -> ResponseHeadParts {
        var fields = fields
        if configuration.addsCacheStatusField {
            fields["Cache-Status"] = cacheStatus.appended(to: fields["Cache-Status"])
        }
        return ResponseHeadParts(status: status, fields: fields, url: url)
    }
}

/// A stored response and its decoded facts.
struct Candidate: Sendable {
    var entry: StoredEntry
    var facts: StoredResponseFacts
}

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
            revalidateInBackground(prepared, Plan(revalidation), candidates)
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

    /// The stored response to serve after the origin failed, a 504, or `nil` to pass the
    /// failure on (RFC 9111 §4.2.4, RFC 5861 §4).
    private func fallback(
        _ failure: OriginFailure, _ prepared: Prepared, _ plan: Plan, _ candidates: [Candidate]
    ) -> Exchange? {
        guard let index = plan.candidate else { return nil }
        let request = CacheRequest(prepared.head, policy: prepared.policy)
        switch engine.fallback(after: failure, request: request, candidate: (index, candidates[index].facts), now: now) {
        case .serve(let use):
            var status = CacheStatus(cache: configuration.name, hit: true, ttl: Int(use.timeToLive.rounded(.down)))
            if case .serverError(let code) = failure {
                status.detail = "stale-if-error"
                status.forwardStatus = code
            } else {
                status.detail = use.reasons.contains { if case .staleIfError = $0 { true } else { false } }
                    ? "stale-if-error" : "disconnected"
            }
            return serveStored(candidates[index], use, prepared, outcome: .stale, status: status)
        case .gatewayTimeout(let reasons):
            return gatewayTimeout(reasons, detail: "stale-not-allowed")
        case .passThrough:
            return nil
        }
    }

    /// Sends the request on, then stores, freshens or invalidates per the response.
    ///
    /// `done` is called exactly once: when the response is stored (or not), with what
    /// requests waiting for this one are told.
    func forward(
        _ prepared: Prepared, _ plan: Plan, _ candidates: [Candidate], storing: Bool,
        done: @escaping @Sendable (Collapse?) -> Void = { _ in }
    ) async throws -> Exchange {
        var outbound = prepared.request
        for field in plan.fields { outbound.setValue(field.value, forHTTPHeaderField: field.name) }
        let requestTime = now
        let received: TransportResponse
        do {
            received = try await transport.send(outbound)
        } catch {
            done(nil)
            if error is CancellationError || (error as? URLError)?.code == .cancelled { throw error }
            // Network state is not binary: any failure to get a response counts as unreachable.
            if storing, let stale = fallback(.unreachable, prepared, plan, candidates) { return stale }
            throw error
        }
        let responseTime = now
        let http = received.response
        let status = http.statusCode
        let fields = Self.fields(of: http)

        if storing, (500..<600).contains(status), let stale = fallback(.serverError(status: status), prepared, plan, candidates) {
            done(nil)
            return stale
        }
        if status == 304, storing, !plan.validated.isEmpty {
            for try await _ in received.body {}
            if let exchange = freshened(
                prepared, plan, candidates, notModified: fields, requestTime: requestTime, responseTime: responseTime)
            {
                done(Collapse(outcome: .revalidated, reason: plan.reason, status: 304))
                return exchange
            }
            // The 304 matches nothing stored (RFC 9111 §4.3.4): ask again without validators.
            var retry = plan
            retry.fields = [:]
            retry.validated = []
            return try await forward(prepared, retry, candidates, storing: storing, done: done)
        }

        if let index = plan.resuming {
            // A stored part was resumed (RFC 9111 §3.3): combine the rest with it (§3.4).
            let part = candidates[index]
            if engine.continues(
                stored: part.facts, storedLength: part.entry.bodySize, response: ResponseHead(status: status, fields: fields)
            ) {
                let prefix = StoredSource(store: store, id: part.entry.id, range: 0..<part.entry.bodySize)
                if (try? prefix.readAhead()) != nil {
                    // The combined response has the stored fields updated with the new ones (§3.4, §3.2).
                    let combined = engine.updatedFields(
                        stored: part.entry.head.fields, with: fields, responseTime: responseTime)
                    return relay(
                        prepared, plan, http, status: 200, fields: combined, received.body, prefix: prefix,
                        forwardStatus: status, storing: storing, requestTime: requestTime, responseTime: responseTime,
                        done: done)
                }
            }
            if status != 200 {
                // Not the rest of the stored part, or the part cannot be read: drop it, ask for all.
                try? store.remove(part.entry.id)
                var retry = plan
                retry.resuming = nil
                retry.fields.removeAll(namedAnyOf: ["Range", "If-Range"])
                return try await forward(prepared, retry, candidates, storing: storing, done: done)
            }
            // A 200: the representation changed (If-Range failed); it replaces the part.
        }

        invalidate(prepared, response: ResponseHead(status: status, fields: fields))
        if prepared.method == "HEAD", status == 200, let index = plan.candidate {
            freshen(candidates[index], withHead: fields, prepared, requestTime: requestTime, responseTime: responseTime)
        }
        return relay(
            prepared, plan, http, status: status, fields: fields, received.body, prefix: nil, forwardStatus: status,
            storing: storing, requestTime: requestTime, responseTime: responseTime, done: done)
    }

    /// Passes a response from the origin on while storing it when allowed: `prefix` (a
    /// stored part being completed) first, then `body`. A body cut off by the network is kept
    /// as an incomplete entry when it can be resumed later (RFC 9111 §3.3).
    private func relay(
        _ prepared: Prepared, _ plan: Plan, _ http: HTTPURLResponse, status: Int, fields: HeaderFields,
        _ body: AsyncThrowingStream<Data, any Error>, prefix: StoredSource?, forwardStatus: Int, storing: Bool,
        requestTime: Timestamp, responseTime: Timestamp, done: @escaping @Sendable (Collapse?) -> Void
    ) -> Exchange {
        var reasons = plan.reasons
        var writer: (any EntryWriter)?
        var userInfo: Data?
        var pin = false
        var incompleteFacts: [UInt8]?
        if storing && prepared.method != "HEAD" {
            let plan = storePlan(
                prepared, http: http, status: status, fields: fields, requestTime: requestTime,
                responseTime: responseTime)
            reasons += plan.reasons
            if let head = plan.head, var facts = plan.facts {
                do {
                    writer = try store.makeWriter(for: head)
                    userInfo = plan.userInfo
                    pin = plan.pin
                    if status == 200, engine.resumptionFields(stored: facts, storedLength: 0) != nil {
                        facts.flags.formUnion(.incomplete)
                        incompleteFacts = facts.serialized()
                    }
                } catch {
                    reasons.append(.configured("not stored: \(error)"))
                }
            }
        }
        let outcome: CacheOutcome = storing ? .miss : .bypass
        let collapse = Collapse(outcome: outcome, reason: plan.reason, status: forwardStatus)
        let primaryKey = prepared.primaryKey
        let stored = writer != nil
        let pinning = pin
        let tee = TeeSource(body, writer: writer, incompleteFacts: incompleteFacts, log: configuration.log) {
            [store] committed in
            if committed, pinning, let primaryKey { _ = try? store.setPinned(true, primaryKey: primaryKey) }
            done(committed ? collapse : nil)
        }
        // A combined response is as long as its stored Content-Length says.
        let length = prefix == nil ? http.expectedContentLength : fields["Content-Length"].flatMap { Int64($0) } ?? -1
        return Exchange(
            status: status, fields: fields, outcome: outcome,
            cacheStatus: CacheStatus(
                cache: configuration.name, forward: plan.reason, forwardStatus: forwardStatus,
                stored: storing ? stored : nil),
            userInfo: userInfo, reasons: reasons,
            body: .source(prefix.map { CombinedSource(prefix: $0, rest: tee) } ?? tee),
            expectedLength: length >= 0 ? length : nil)
    }

    /// Applies a `304` to the stored responses it matches (RFC 9111 §4.3.4) and serves the
    /// selected one; `nil` when it matches none.
    private func freshened(
        _ prepared: Prepared, _ plan: Plan, _ candidates: [Candidate], notModified: HeaderFields,
        requestTime: Timestamp, responseTime: Timestamp
    ) -> Exchange? {
        var updated = candidates
        let indexes = engine.responsesToUpdate(
            notModified: notModified, request: prepared.head.fields, candidates: candidates.map(\.facts),
            validated: plan.validated)
        guard !indexes.isEmpty else { return nil }
        for index in indexes {
            let candidate = candidates[index]
            let (fields, facts) = engine.freshen(
                storedFields: candidate.entry.head.fields, storedFacts: candidate.facts, with: notModified,
                request: prepared.head.fields, requestTime: requestTime, responseTime: responseTime)
            do {
                try store.update(candidate.entry.id, fields: fields, facts: facts.serialized())
            } catch {
                configuration.log("could not freshen the stored response for \(prepared.urlString): \(error)")
            }
            updated[index].entry.head.fields = fields
            updated[index].facts = facts
        }
        // Serve from the freshened responses; the client's own validators still apply.
        let request = CacheRequest(prepared.head, policy: .returnCacheDataElseLoad)
        guard case .serve(var use) = engine.lookup(request, candidates: updated.map(\.facts), now: now) else {
            return nil
        }
        use.reasons = plan.reasons
        let size = updated[use.candidate].entry.bodySize
        state.withLock { $0.statistics.bytesSavedByRevalidation += size }
        var status = CacheStatus(cache: configuration.name, forward: plan.reason, forwardStatus: 304, stored: true)
        status.ttl = Int(use.timeToLive.rounded(.down))
        return serveStored(updated[use.candidate], use, prepared, outcome: .revalidated, status: status)
    }

    /// A `200` answering `HEAD` freshens the stored `GET` response when its validators and
    /// length match, and makes it need validation when they differ (RFC 9111 §4.3.5).
    private func freshen(
        _ candidate: Candidate, withHead head: HeaderFields, _ prepared: Prepared, requestTime: Timestamp,
        responseTime: Timestamp
    ) {
        do {
            switch engine.headFreshening(head: head, stored: candidate.facts) {
            case .update:
                let (fields, facts) = engine.freshen(
                    storedFields: candidate.entry.head.fields, storedFacts: candidate.facts, with: head,
                    request: prepared.head.fields, requestTime: requestTime, responseTime: responseTime)
                try store.update(candidate.entry.id, fields: fields, facts: facts.serialized())
            case .markStale:
                var facts = candidate.facts
                facts.flags.formUnion(.invalidated)
                try store.update(candidate.entry.id, fields: candidate.entry.head.fields, facts: facts.serialized())
            }
        } catch {
            configuration.log("could not apply a HEAD response to the stored response for \(prepared.urlString): \(error)")
        }
    }

    /// Removes what an unsafe request's response invalidates (RFC 9111 §4.4). A `POST`
    /// keyed by its body is a query and invalidates nothing.
    private func invalidate(_ prepared: Prepared, response: ResponseHead) {
        guard !prepared.keyedByBody else { return }
        for uri in engine.invalidatedURIs(request: prepared.head, response: response) {
            guard let key = CacheKey(method: "GET", uri: uri) else { continue }
            do {
                try store.remove(primaryKey: key.primaryKey)
            } catch {
                configuration.log("could not invalidate \(uri): \(error)")
            }
        }
    }

    /// Whether and how to store a response: the rules, the will-store hook, then RFC 9111 §3.
    private func storePlan(
        _ prepared: Prepared, http: HTTPURLResponse, status: Int, fields received: HeaderFields,
        requestTime: Timestamp, responseTime: Timestamp
    ) -> (head: EntryHead?, facts: StoredResponseFacts?, reasons: [Reason], userInfo: Data?, pin: Bool) {
        var fields = received
        var reasons: [Reason] = []
        func decide() -> StorageDecision {
            engine.storageDecision(
                for: prepared.head, response: ResponseHead(status: status, fields: fields), requestTime: requestTime,
                responseTime: responseTime)
        }
        if let seconds = prepared.forcedLifetime {
            fields = Self.replacingCacheControl(fields, with: "max-age=\(seconds)")
            reasons.append(.configured("a rule forces max-age=\(seconds)"))
        }
        var decision = decide()
        var choice = StoreChoice.store
        if let hook = configuration.willStore {
            choice = hook(
                StoreCandidate(
                    request: prepared.request, response: http, fields: fields.map { ($0.name, $0.value) },
                    refusals: decision.reasons.filter { _ in if case .doNotStore = decision { true } else { false } }))
            if let replacement = choice.fields {
                fields = HeaderFields(replacement.map { ($0.name, $0.value) })
                decision = decide()
                reasons.append(.configured("the will-store hook rewrote the stored fields"))
            }
        }
        if case .doNotStore = decision, prepared.forceStore {
            fields = Self.replacingCacheControl(fields, with: "max-age=0")
            decision = decide()
            reasons.append(.configured("stored for offline use (manifest) as max-age=0"))
        }
        if choice.action == .doNotStore {
            return (nil, nil, reasons + [.configured("not stored: the will-store hook refused it")], nil, false)
        }
        switch decision {
        case .doNotStore(let refusals):
            return (nil, nil, reasons + refusals, nil, false)
        case .store(let storable):
            let variantKey = storable.facts.varyValues.map { $0 ?? "\u{0}" }.joined(separator: "\u{1}")
            let head = EntryHead(
                primaryKey: prepared.primaryKey!, variantKey: variantKey, url: prepared.urlString, status: status,
                fields: storable.fields, facts: storable.facts.serialized(),
                storagePolicy: choice.action == .memoryOnly ? .memoryOnly : .allowed,
                userInfo: choice.userInfo.map { Array($0) })
            return (head, storable.facts, reasons + storable.notes, choice.userInfo, prepared.pin)
        }
    }

    static func replacingCacheControl(_ fields: HeaderFields, with value: String) -> HeaderFields {
        var fields = fields
        fields.removeAll(namedAnyOf: ["Cache-Control", "Expires", "Pragma"])
        fields.append(name: "Cache-Control", value: value)
        return fields
    }

    /// A response's fields.
    static func fields(of response: HTTPURLResponse) -> HeaderFields {
        HeaderFields(
            response.allHeaderFields.compactMap { name, value -> (String, String)? in
                guard let name = name as? String else { return nil }
                return (name, value as? String ?? String(describing: value))
            }.sorted { $0.0 < $1.0 })
    }

    // MARK: Background revalidation

    /// Validates a response served stale-while-revalidate, once per key at a time (RFC 5861 §3).
    private func revalidateInBackground(_ prepared: Prepared, _ plan: Plan, _ candidates: [Candidate]) {
        guard let primaryKey = prepared.primaryKey else { return }
        let id: Int? = state.withLock { state in
            guard state.revalidating.insert(primaryKey).inserted else { return nil }
            state.nextBackgroundID += 1
            return state.nextBackgroundID
        }
        guard let id else { return }
        let task = Task { [self] in
            do {
                let exchange = try await forward(prepared, plan, candidates, storing: true)
                if case .source(let source) = exchange.body {
                    while try await source.next() != nil {}
                }
            } catch {
                configuration.log("background revalidation of \(prepared.urlString) failed: \(error)")
            }
            state.withLock { state in
                state.revalidating.remove(primaryKey)
                state.background[id] = nil
            }
        }
        state.withLock { state in
            if state.revalidating.contains(primaryKey) { state.background[id] = task }
        }
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
