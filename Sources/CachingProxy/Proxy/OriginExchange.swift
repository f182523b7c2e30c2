import CacheSemantics
import CacheStorage
import Glibc
import Synchronization

/// One request sent to the origin on a worker thread, and what becomes of its response:
/// relayed to the client while it is stored, a stored response freshened by a `304`
/// (RFC 9111 §4.3.4), a stale response served instead of an error (§4.2.4, RFC 5861 §4),
/// stored responses invalidated (§4.4).
final class OriginExchange: UpstreamReceiver {
    private let handler: ProxyHandler
    private let request: ProxyRequest
    private var plan: Forwarding
    private let candidates: [Candidate]
    /// `nil` for a background revalidation: the response is stored, not sent anywhere.
    private let responder: Responder?
    private var requestTime = Timestamp(secondsSince1970: 0)
    private var sentAt = 0.0

    private enum State {
        /// No response head yet.
        case waiting
        /// The head went to the client; body bytes follow.
        case relaying
        /// The client was answered otherwise (from the store); the origin's body is ignored.
        case answered
        /// A `304` matched nothing stored: ask again without validators.
        case retry
    }

    private var state = State.waiting
    private var writer: (any EntryWriter)?
    private var expectedLength: Int64?
    private var received: Int64 = 0
    private var clientGone = false
    private var forwardStatus = 0
    /// A `304` relayed to the client freshened stored responses.
    private var freshenedStored = false
    /// What requests that waited for this one are told; `nil` when nothing was stored.
    private var collapse: Collapse?
    /// Told once, as soon as the response is stored (before its last bytes go to the client)
    /// or when it turned out it will not be.
    private var onSettled: ((Collapse?) -> Void)?

    init(
        _ handler: ProxyHandler, _ request: ProxyRequest, _ plan: Forwarding, _ candidates: [Candidate],
        responder: Responder?, onSettled: ((Collapse?) -> Void)? = nil
    ) {
        self.handler = handler
        self.request = request
        self.plan = plan
        self.candidates = candidates
        self.responder = responder
        self.onSettled = onSettled
    }

    private func settle() {
        let action = onSettled
        onSettled = nil
        action?(collapse)
    }

    private var configuration: CachingProxy.Configuration { handler.configuration }
    private var engine: CacheEngine { handler.engine }
    private var store: any CacheStore { handler.store }
    /// Whether responses may be stored and stale ones served: not for methods the cache
    /// does not handle (RFC 9111 §2).
    private var caching: Bool { plan.reason != .method && plan.reason != .bypass }

    /// Sends the request and answers the client; returns when the response is complete.
    func run() {
        defer { settle() }
        requestTime = handler.now
        sentAt = Self.monotonicSeconds()
        handler.metrics.originRequests.add(1, ordering: .relaxed)
        do {
            try handler.upstream.perform(upstreamRequest(), self)
        } catch {
            failed(error)
            return
        }
        switch state {
        case .relaying:
            finishRelay()
        case .retry:
            plan.fields = [:]
            plan.validated = []
            let again = OriginExchange(handler, request, plan, candidates, responder: responder)
            again.run()
            collapse = again.collapse
        case .answered:
            break
        case .waiting:
            failed(UpstreamError(kind: .protocolError, description: "the origin sent no response", receivedHead: false))
        }
    }

    /// The request as the origin gets it: hop-by-hop fields dropped (RFC 9110 §7.6.1), `Host`
    /// set to the origin's authority (RFC 9112 §3.2.2), the engine's preconditions, `Via`.
    private func upstreamRequest() -> UpstreamRequest {
        let client = request.server
        var fields = Messages.removingHopByHop(client.fields)
        fields.removeAll(namedAnyOf: ["Content-Length", "Expect", "Proxy-Authorization"])
        fields = HeaderFields(
            fields.map { field in
                field.lowercasedName == "host" ? HeaderField(name: field.name, value: request.target.authority) : field
            })
        if !fields.contains("Host") {
            fields = HeaderFields([HeaderField(name: "Host", value: request.target.authority)] + Array(fields))
        }
        for field in plan.fields { fields[field.name] = field.value }
        Messages.addingVia(&fields, minorVersion: client.minorVersion, name: configuration.name)
        let hasBody = client.fields.contains("Content-Length") || client.fields.contains("Transfer-Encoding")
        return UpstreamRequest(
            method: request.method, url: request.target.url, fields: fields, body: hasBody ? client.body : nil)
    }

    // MARK: UpstreamReceiver

    func receive(head: UpstreamResponseHead) -> Bool {
        handler.metrics.recordOriginLatency(Self.monotonicSeconds() - sentAt)
        let responseTime = handler.now
        let status = head.status
        forwardStatus = status
        var fields = head.fields
        if caching, (500..<600).contains(status), serveStale(after: .serverError(status: status)) {
            state = .answered
            return false
        }
        if status == 304, caching, !plan.validated.isEmpty {
            state = freshened(notModified: fields, responseTime: responseTime) ? .answered : .retry
            return true
        }
        if status == 304, caching {
            // The client's own validators went forward: the 304 is its answer, relayed below,
            // and it still freshens the stored responses it selects (RFC 9111 §4.3.4).
            freshenedStored = applied(notModified: fields, responseTime: responseTime) != nil
        }
        store.invalidate(
            after: request.head, response: ResponseHead(status: status, fields: fields), engine: engine,
            log: configuration.log)
        if request.method == "HEAD", status == 200, let index = plan.candidate {
            store.applyHeadResponse(
                fields, to: candidates[index], request: request.head.fields, engine: engine, requestTime: requestTime,
                responseTime: responseTime, log: configuration.log)
        }
        // A recipient with a clock adds Date when forwarding or storing a response without one
        // (RFC 9110 §6.6.1).
        if !fields.contains("Date") { fields.append(name: "Date", value: HTTPDate.format(responseTime)) }
        if caching, request.method == "GET" { startStoring(status: status, fields: fields, responseTime: responseTime) }

        let noBody = request.method == "HEAD" || status == 204 || status == 304 || status < 200
        let framing: BodyFraming
        if noBody {
            framing = .none
            expectedLength = 0
        } else if let length = fields["Content-Length"].flatMap({ Int64($0) }), length >= 0 {
            framing = .length(length)
            expectedLength = length
        } else {
            framing = .streamed
        }
        var outgoing = Messages.removingHopByHop(fields)
        Messages.addingVia(&outgoing, minorVersion: 1, name: configuration.name)
        let cacheStatus = CacheStatus(
            cache: configuration.name, forward: plan.reason, forwardStatus: status,
            stored: caching ? writer != nil || freshenedStored : nil)
        outgoing["Cache-Status"] = cacheStatus.appended(to: outgoing["Cache-Status"])
        state = .relaying
        handler.metrics.count(caching ? .miss : .pass)
        responder?.start(ServerResponseHead(status: status, reason: head.reason, fields: outgoing), framing: framing)
        return true
    }

    func receive(body: UnsafeRawBufferPointer) -> Bool {
        guard state == .relaying else { return true }
        received += Int64(body.count)
        handler.metrics.bytesFromOrigin.add(body.count, ordering: .relaxed)
        if let writer {
            do {
                try writer.append(Array(body))
            } catch {
                configuration.log("stopped storing \(request.target.url): \(error)")
                writer.abort()
                self.writer = nil
            }
            // Stored before the client has it all: a request right after it is a plain hit.
            if received == expectedLength { commit() }
        }
        if let responder, !clientGone, !responder.write(body) { clientGone = true }
        // A response being stored is read to its end even when its client left.
        return !(clientGone || responder == nil) || writer != nil
    }

    // MARK: Outcomes

    private func finishRelay() {
        if expectedLength == nil || received == expectedLength {
            commit()
        } else {
            writer?.abort()
            writer = nil
        }
        responder?.finish()
    }

    /// Stores the complete response, and tells requests waiting for it.
    private func commit() {
        guard let writer else { return }
        self.writer = nil
        do {
            try writer.commit()
            handler.metrics.stored.add(1, ordering: .relaxed)
            collapse = Collapse(reason: plan.reason, status: forwardStatus)
        } catch {
            configuration.log("could not store the response for \(request.target.url): \(error)")
        }
        settle()
    }

    private func failed(_ error: any Error) {
        // Answered from the store after a 5xx: the transfer was stopped on purpose.
        if state == .answered { return }
        handler.metrics.originErrors.add(1, ordering: .relaxed)
        writer?.abort()
        writer = nil
        let description = (error as? UpstreamError)?.description ?? "\(error)"
        switch state {
        case .relaying:
            // The head is out: the client can only be told by a cut connection.
            configuration.log("the response for \(request.target.url) was cut off: \(description)")
            responder?.abort()
        case .answered, .retry:
            break
        case .waiting:
            if caching, serveStale(after: .unreachable) { return }
            configuration.log("no response for \(request.method) \(request.target.url): \(description)")
            let timeout = (error as? UpstreamError)?.kind == .timeout
            guard let responder else { return }
            let status = timeout ? 504 : 502
            let text = (timeout ? "504 Gateway Timeout: " : "502 Bad Gateway: ") + description
            var (fields, body) = Messages.plainText(text)
            var cacheStatus = CacheStatus(cache: configuration.name, forward: plan.reason)
            cacheStatus.detail = timeout ? "origin-timeout" : "origin-unreachable"
            fields["Cache-Status"] = cacheStatus.fieldValue
            handler.metrics.count(.error)
            responder.respond(ServerResponseHead(status: status, fields: fields), body: body)
        }
    }

    /// Serves the selected stored response after the origin failed, when allowed
    /// (RFC 9111 §4.2.4, RFC 5861 §4); a `504` when it must not be served stale.
    private func serveStale(after failure: OriginFailure) -> Bool {
        guard let index = plan.candidate else { return false }
        switch engine.fallback(
            after: failure, request: CacheRequest(request.head), candidate: (index, candidates[index].facts),
            now: handler.now)
        {
        case .serve(let use):
            let status = CacheStatus(cache: configuration.name, servedStale: use, after: failure)
            if let responder { handler.serveStored(candidates[index], use, request, status: status, outcome: .stale, responder) }
            return true
        case .gatewayTimeout(let reasons):
            if let responder {
                handler.answer(
                    504, "504 Gateway Timeout: the origin failed and the stored response may not be served stale: "
                        + reasons.map(\.description).joined(separator: "; "), responder)
            }
            return true
        case .passThrough:
            return false
        }
    }

    /// Applies a `304` to the stored responses it matches (RFC 9111 §4.3.4) and serves the
    /// selected one; `false` when it matches none.
    private func freshened(notModified: HeaderFields, responseTime: Timestamp) -> Bool {
        guard let updated = applied(notModified: notModified, responseTime: responseTime) else { return false }
        guard let responder else { return true }
        // Serve from the freshened responses; the client's own validators still apply.
        let lookup = CacheRequest(request.head, policy: .returnCacheDataElseLoad)
        guard case .serve(let use) = engine.lookup(lookup, candidates: updated.map(\.facts), now: handler.now) else {
            return false
        }
        var status = CacheStatus(cache: configuration.name, forward: plan.reason, forwardStatus: 304, stored: true)
        status.ttl = Int(use.timeToLive.rounded(.down))
        handler.serveStored(updated[use.candidate], use, request, status: status, outcome: .revalidated, responder)
        return true
    }

    /// Updates the stored responses a `304` selects (RFC 9111 §4.3.4, §3.2): the candidates
    /// as updated, or `nil` when it selects none.
    private func applied(notModified: HeaderFields, responseTime: Timestamp) -> [Candidate]? {
        let updated = store.applyNotModified(
            notModified, to: candidates, validated: plan.validated, request: request.head.fields, engine: engine,
            requestTime: requestTime, responseTime: responseTime, log: configuration.log,
            reread: { handler.candidates(request.primaryKey) })
        if updated != nil { collapse = Collapse(reason: plan.reason, status: 304) }
        return updated
    }

    /// Opens a writer when RFC 9111 §3 allows storing the response in a shared cache.
    private func startStoring(status: Int, fields: HeaderFields, responseTime: Timestamp) {
        let decision = engine.storageDecision(
            for: request.head, response: ResponseHead(status: status, fields: fields), requestTime: requestTime,
            responseTime: responseTime)
        guard case .store(let storable) = decision else { return }
        let head = EntryHead(
            primaryKey: request.primaryKey, variantKey: storable.facts.variantKey, url: request.target.url,
            status: status, fields: storable.fields, facts: storable.facts.serialized())
        do {
            writer = try store.makeWriter(for: head)
        } catch {
            configuration.log("not storing \(request.target.url): \(error)")
        }
    }

    private static func monotonicSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
