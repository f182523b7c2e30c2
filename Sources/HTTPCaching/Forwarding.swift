import CacheSemantics
import CacheStorage
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sending a request on: falling back on stale responses, freshening after a `304`,
/// completing a stored part, storing and invalidating per the response, and background
/// revalidation.
extension HTTPCache {
    /// The stored response to serve after the origin failed, a 504, or `nil` to pass the
    /// failure on (RFC 9111 §4.2.4, RFC 5861 §4).
    private func fallback(
        _ failure: OriginFailure, _ prepared: Prepared, _ plan: Plan, _ candidates: [Candidate]
    ) -> Exchange? {
        guard let index = plan.candidate else { return nil }
        let request = CacheRequest(prepared.head, policy: prepared.policy)
        switch engine.fallback(after: failure, request: request, candidate: (index, candidates[index].facts), now: now) {
        case .serve(let use):
            let status = CacheStatus(cache: configuration.name, servedStale: use, after: failure)
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
            store.applyHeadResponse(
                fields, to: candidates[index], request: prepared.head.fields, engine: engine, requestTime: requestTime,
                responseTime: responseTime, log: configuration.log)
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
        // Responses to HEAD, and 204 and 304 responses, have no body whatever Content-Length says.
        let hasBody = prepared.method != "HEAD" && status != 204 && status != 304 && status >= 200
        let expected = hasBody ? http.expectedContentLength : -1
        let tee = TeeSource(
            body, writer: writer, expectedLength: expected >= 0 ? expected : nil, incompleteFacts: incompleteFacts,
            log: configuration.log
        ) {
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
        guard
            let updated = store.applyNotModified(
                notModified, to: candidates, validated: plan.validated, request: prepared.head.fields, engine: engine,
                requestTime: requestTime, responseTime: responseTime, log: configuration.log)
        else { return nil }
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

    /// Removes what an unsafe request's response invalidates (RFC 9111 §4.4). A `POST`
    /// keyed by its body is a query and invalidates nothing.
    private func invalidate(_ prepared: Prepared, response: ResponseHead) {
        guard !prepared.keyedByBody else { return }
        store.invalidate(after: prepared.head, response: response, engine: engine, log: configuration.log)
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
                    refusals: Self.refusals(decision)))
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
            let head = EntryHead(
                primaryKey: prepared.primaryKey!, variantKey: storable.facts.variantKey, url: prepared.urlString, status: status,
                fields: storable.fields, facts: storable.facts.serialized(),
                storagePolicy: choice.action == .memoryOnly ? .memoryOnly : .allowed,
                userInfo: choice.userInfo.map { Array($0) })
            return (head, storable.facts, reasons + storable.notes, choice.userInfo, prepared.pin)
        }
    }

    /// Why a response may not be stored; empty when it may.
    static func refusals(_ decision: StorageDecision) -> [Reason] {
        if case .doNotStore(let reasons) = decision { return reasons }
        return []
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
    ///
    /// The task is registered for ``waitForBackgroundWork()`` only while its key is still its
    /// own: one that finished before it was registered, when another for the key has already
    /// started, would otherwise stay registered forever.
    func revalidateInBackground(_ prepared: Prepared, _ plan: Plan, _ candidates: [Candidate]) async {
        guard let primaryKey = prepared.primaryKey else { return }
        let id: Int? = state.withLock { state in
            guard state.revalidating[primaryKey] == nil else { return nil }
            state.nextBackgroundID += 1
            state.revalidating[primaryKey] = state.nextBackgroundID
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
                state.revalidating[primaryKey] = nil
                state.background[id] = nil
            }
        }
        await configuration.beforeRegisteringRevalidation?(task)
        state.withLock { state in
            if state.revalidating[primaryKey] == id { state.background[id] = task }
        }
    }
}
