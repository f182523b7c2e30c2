#if os(Linux)
import CacheExchange
import CacheSemantics
import HTTPClient
import CacheSystem
@_spi(Wire) import HTTPWire
import CacheStorage
import Synchronization

/// One request through the proxy: the driver's host work, performed on the event loop (lookups,
/// answers from memory) and on worker threads (origin requests, large stored bodies). Every rule
/// of HTTP caching is the exchange's; this only moves bytes.
///
/// Used by one thread at a time: the loop hands it to a worker, a leader's worker to a follower.
final class ProxyExchange: UpstreamReceiver, @unchecked Sendable {
    private let handler: ProxyHandler
    let request: ProxyRequest
    private var machine: ExchangeStateMachine
    /// `nil` for a background revalidation: the response is stored, not sent anywhere.
    private let responder: Responder?
    /// Set for a background revalidation, which must be finished whatever happens.
    private let background: ExchangeDriver.BackgroundRevalidation?

    // While the request is at the origin.
    private var requestTime = Timestamp(secondsSince1970: 0)
    private var sentAt = 0.0
    /// What the exchange decided instead of relaying once the origin's head arrived: done once
    /// the transfer is over (its body is not wanted).
    private var afterHead: Instead?

    private enum Instead {
        /// A stored response (freshened by a `304`, or stale instead of a `5xx`).
        case serve(ServedResponse)
        /// The request again, as the exchange says.
        case forward(ExchangeStateMachine.ForwardedRequest)
    }
    private var relay: ExchangeDriver.Relay?
    /// The head of the response being relayed, not yet started to the client: it goes with the
    /// first body bytes, before the proxy waits for the origin, or at the end. Until then a
    /// response whose framing fails has sent the client nothing, which is answered `502`.
    private var heldHead: (head: ServerResponseHead, framing: BodyFraming)?
    /// A transfer begun on a loop whose rest a worker takes.
    private var handedOff: UpstreamTransfer?
    private var clientGone = false
    /// Seconds, in all, this exchange's origin transfer waited for its client while it led
    /// others (``CachingProxy/Configuration/collapsedClientWait``), and whether they were let go.
    private var heldByClient = 0.0
    private var waitersReleased = false
    /// The `Link` members this exchange sent in its own `103`, not to be sent again.
    private var sentHints: [String] = []
    /// Why the request went forward (RFC 9211 `fwd`), for an answer the proxy makes itself.
    private var forwardReason = CacheStatus.ForwardReason.miss
    /// The origin's response held whole, to be delta-coded once it ends (``ProxyRequest/delta``).
    private var held: HeldResponse?
    /// The body of a relayed response that offers itself as a dictionary (RFC 9842 §2.1), kept
    /// to be recorded once it ends; `nil` when there is none or it grew past the limit.
    private var dictionaryBody: [UInt8]?

    init(_ handler: ProxyHandler, _ request: ProxyRequest, _ machine: ExchangeStateMachine, responder: Responder?) {
        self.handler = handler
        self.request = request
        self.machine = machine
        self.responder = responder
        background = nil
    }

    /// A background revalidation (RFC 5861 §3): no client.
    init(
        _ handler: ProxyHandler, _ request: ProxyRequest, revalidating background: ExchangeDriver.BackgroundRevalidation
    ) {
        self.handler = handler
        self.request = request
        machine = background.exchange
        responder = nil
        self.background = background
    }

    private var driver: ExchangeDriver { handler.driver }
    private var configuration: CachingProxy.Configuration { handler.configuration }

    /// Starts the exchange on the calling thread.
    func start() {
        perform(driver.start(&machine))
    }

    /// Performs `first` (the first host work the driver returned, or a later one) and the work
    /// that follows; returns once the rest happens elsewhere (a worker, a leader) or the
    /// request is answered.
    func perform(_ first: ExchangeDriver.HostWork) {
        var work = first
        while true {
            switch work {
            case .serve(let served, let revalidation):
                // A hit, sent from here; a stale-while-revalidate one is validated on a worker.
                if let revalidation { handler.revalidateInBackground(revalidation, request) }
                return serve(served)
            case .answer(let answer):
                // The proxy answers itself (a 504 for only-if-cached), without asking the origin
                // (RFC 9209 §2.3.29).
                return self.answer(answer, error: .proxyInternalResponse)
            case .join(let identity):
                let leads = driver.join(identity) { [self] turn in
                    // On the leader's thread, once its response is stored (or is not going to be),
                    // or on the store's when another cache's fetch lapsed.
                    perform(driver.resume(&machine, turn))
                }
                // Another request fetches it: this one waits for its turn.
                guard leads else { return }
                // This one fetches it for all.
                work = driver.joinedAsLeader(&machine)
            case .forward(let forwarded):
                sendEarlyHints()
                // On a kept-alive connection from this loop when one is idle; else on a worker,
                // which may block (a connect, a TLS handshake): the event loop never does.
                let request = upstreamRequest(forwarded)
                if let loop = EventLoop.current, sendOnLoop(forwarded, request, loop) { return }
                handler.workers.submit { [self] in send(forwarded, request) }
                return
            }
        }
    }

    /// Sends `103 Early Hints` with what the last stored response for this URL linked to
    /// (RFC 8297), once per exchange, before the request goes to the origin.
    private func sendEarlyHints() {
        guard configuration.earlyHints, sentHints.isEmpty, let responder, request.method == "GET",
            let hints = handler.earlyHints.hints(for: request.target.url, request: request.server.fields)
        else { return }
        sentHints = hints
        responder.interim(ServerResponseHead(status: 103, fields: HeaderFields(hints.map { ("Link", $0) })))
    }

    private func serve(_ served: ServedResponse) {
        if let responder { handler.serve(served, request, responder) }
        finished()
    }

    /// Sends an answer the exchange made, with this proxy's `Proxy-Status` member saying why
    /// (RFC 9209 §2).
    private func answer(_ answer: CacheAnswer, error: ProxyStatusMember.ErrorType) {
        if let responder {
            handler.metrics.count(.error)
            var fields = answer.fields
            fields[.proxyStatus] = ProxyStatusMember(proxy: configuration.name, error: error).fieldValue
            responder.respond(ServerResponseHead(status: answer.status, fields: fields), body: answer.body)
        }
        finished()
    }

    /// Blocking, on a worker: sends the request (`request` when it was built already) and
    /// performs what the exchange decides.
    private func send(_ forwarded: ExchangeStateMachine.ForwardedRequest, _ request: UpstreamRequest? = nil) {
        var next = forwarded
        var request = request ?? upstreamRequest(forwarded)
        while let again = sendOnce(next, request) {
            next = again
            request = upstreamRequest(again)
        }
    }

    /// Sends `request`, made of `forwarded`, once and performs what the exchange decides;
    /// returns the request to send next when the exchange asks for another.
    private func sendOnce(_ forwarded: ExchangeStateMachine.ForwardedRequest, _ request: UpstreamRequest)
        -> ExchangeStateMachine.ForwardedRequest?
    {
        willSend(forwarded)
        do {
            try handler.upstream.perform(request, self)
        } catch {
            return transferEnded(error)
        }
        return transferEnded(nil)
    }

    /// Resets what one transfer learns, as a request goes to the origin.
    private func willSend(_ forwarded: ExchangeStateMachine.ForwardedRequest) {
        requestTime = handler.now
        sentAt = MonotonicClock.seconds()
        forwardReason = forwarded.reason
        afterHead = nil
        relay = nil
        heldHead = nil
        held = nil
        dictionaryBody = nil
        handler.metrics.originRequests.add(1, ordering: .relaxed)
    }

    /// Performs what the exchange decides once a transfer ended (with `error`, or complete);
    /// returns the request to send next when the exchange asks for another.
    private func transferEnded(_ error: (any Error)?) -> ExchangeStateMachine.ForwardedRequest? {
        if let error { return failed(error) }
        if let held {
            self.held = nil
            // Compressing takes a while: never on the event loop.
            guard EventLoop.current == nil else {
                handler.workers.submit { [self] in if let next = relayDelta(held) { send(next) } }
                return nil
            }
            return relayDelta(held)
        }
        if let relay {
            // Stored before the client has the end of it: a request right after is a plain hit.
            relay.recorder?.finish()
            startRelayedHead()
            if let mismatch = relay.recorder?.mismatch {
                // It failed its digest (RFC 9530) and was not stored: the client must not take
                // it as complete, so the end (last chunk or bytes) is withheld and the
                // connection (HTTP/2: the stream) is closed.
                handler.limitedLog(
                    .cutOff,
                    "closed the response to \(request.method) \(request.target.url) before its end: \(mismatch)")
                responder?.abort()
            } else {
                if let dictionaryBody, let registry = handler.dictionaries {
                    let fields = relay.fields
                    if let content = DeltaCoding.content(
                        of: dictionaryBody, fields: fields, limit: registry.settings.maxBodyBytes)
                    {
                        registry.store.record(url: request.target.url, fields: fields, content: content)
                    }
                }
                responder?.finish()
            }
            finished()
            return nil
        }
        guard let afterHead else {
            return failed(
                UpstreamError(kind: .protocolError, description: "the origin sent no response", receivedHead: false))
        }
        return perform(afterHead)
    }

    /// Sends the request from `loop` on a kept-alive connection to the origin, advanced as the
    /// connection is ready: no thread hop, no blocked thread. `false` when none is idle (nothing
    /// was sent).
    private func sendOnLoop(
        _ forwarded: ExchangeStateMachine.ForwardedRequest, _ request: UpstreamRequest, _ loop: EventLoop
    ) -> Bool {
        // A request that cannot be sent at all fails on the worker, as any other.
        guard let transfer = try? handler.upstream.transferOnPooledConnection(request, self) else { return false }
        willSend(forwarded)
        handler.metrics.originRequestsOnLoop.add(1, ordering: .relaxed)
        // The watch holds this exchange until the transfer ends; the exchange does not hold it.
        // One-shot: re-armed by each wait; once the response is in, nothing to remove from epoll.
        let watch = LoopWatch(
            fd: transfer.fd, oneShot: true,
            ready: { [self] in advance(transfer, on: loop, forwarded) },
            expired: { [self] in
                transfer.timedOut()
                advance(transfer, on: loop, forwarded)
            })
        advance(transfer, on: loop, forwarded, watch)
        return true
    }

    /// Moves the transfer on as far as it goes, then waits for its connection, or hands the rest
    /// to a worker, or ends it.
    private func advance(
        _ transfer: UpstreamTransfer, on loop: EventLoop, _ forwarded: ExchangeStateMachine.ForwardedRequest,
        _ newWatch: LoopWatch? = nil
    ) {
        let watch = newWatch ?? loop.watches[transfer.fd]
        var step = transfer.advance()
        // More of the body is buffered: on while the client keeps up (the loop does not flush
        // its output meanwhile, so a large body soon hands the rest to a worker below).
        while step == .more && responder?.isBackedUp != true { step = transfer.advance() }
        switch step {
        case .more:
            // The client is backed up (the loop above goes on otherwise).
            handOff(transfer, from: loop, watch)
        case .wait(let readable, let writable):
            if responder?.isBackedUp != true, let watch,
                loop.watch(watch, readable: readable, writable: writable, for: transfer.stallTimeout)
            {
                return
            }
            handOff(transfer, from: loop, watch)
        case .done:
            if let watch { loop.unwatch(watch) }
            let next: ExchangeStateMachine.ForwardedRequest?
            do {
                if try transfer.finish() == .sendAgain {
                    // The kept-alive connection closed unanswered: again on a new one (RFC 9110
                    // §9.2.2), from a worker, which may block connecting.
                    return handler.workers.submit { [self] in send(forwarded) }
                }
                next = transferEnded(nil)
            } catch {
                next = transferEnded(error)
            }
            if let next { perform(ExchangeDriver.HostWork.forward(next)) }
        }
    }

    /// Hands the rest of the transfer to a worker: a client slower than its origin, whose writes
    /// there wait for the client (bounded memory) where the loop's would pile up; or a
    /// connection the loop could not watch.
    private func handOff(_ transfer: UpstreamTransfer, from loop: EventLoop, _ watch: LoopWatch?) {
        if let watch { loop.unwatch(watch) }
        handedOff = transfer
        handler.workers.submit { [self] in
            guard let transfer = handedOff else { return }
            handedOff = nil
            var next: ExchangeStateMachine.ForwardedRequest?
            do {
                try transfer.finishBlocking()
                next = transferEnded(nil)
            } catch {
                next = transferEnded(error)
            }
            if let next { send(next) }
        }
    }

    /// Performs what the exchange decided instead of relaying: returns the request to send
    /// again, if that is it.
    private func perform(_ instead: Instead) -> ExchangeStateMachine.ForwardedRequest? {
        switch instead {
        case .serve(let served):
            serve(served)
            return nil
        case .forward(let forwarded):
            return forwarded
        }
    }

    /// Fields of the client's request the origin never gets from the proxy (lowered): the
    /// proxy frames the body itself, answers `Expect` itself, and `Proxy-Authorization` is for it.
    private static let notForwarded = [HeaderField.Name.contentLength, .expect, .proxyAuthorization].map(
        \.lowercasedName)

    /// The request as the origin gets it: hop-by-hop fields dropped (RFC 9110 §7.6.1), `Host`
    /// set to the origin's authority (RFC 9112 §3.2.2), the exchange's fields, `Via`.
    private func upstreamRequest(_ forwarded: ExchangeStateMachine.ForwardedRequest) -> UpstreamRequest {
        let client = request.server
        let kept = Messages.removingHopByHop(client.fields)
        // One pass: the lines the origin does not get dropped, `Host` (first when the client
        // sent none) naming the origin.
        var fields = HeaderFields()
        fields.reserveCapacity(kept.count + forwarded.fields.count + 2)
        let host = HeaderField.Name.host.lowercasedName
        if !kept.contains(.host) { fields.append(HeaderField(name: .host, value: request.target.authority)) }
        for field in kept where !Self.notForwarded.contains(field.lowercasedName) {
            fields.append(
                field.isNamed(host) ? HeaderField(name: field.name, value: request.target.authority) : field)
        }
        for field in forwarded.fields { fields[field.name] = field.value }
        Messages.addingVia(&fields, version: client.version, name: configuration.name)
        let hasBody = client.fields.contains(.contentLength) || client.fields.contains(.transferEncoding)
        return UpstreamRequest(
            method: client.method, target: request.target, fields: fields, body: hasBody ? client.body : nil)
    }

    // MARK: UpstreamReceiver

    /// Relays an interim response from the origin (RFC 9110 §15.2: "A proxy MUST forward 1xx
    /// responses unless the proxy itself requested the generation of the 1xx response"):
    /// `102 Processing`, `103 Early Hints` and the like. Not `100 Continue` (the proxy reads a
    /// request's content before forwarding it and answers `Expect` itself) nor `101`. Nothing
    /// of it is stored or merged into the final response (RFC 9111 §3).
    func receive(interim head: UpstreamResponseHead) {
        guard let responder, head.status != 100, head.status != 101 else { return }
        var fields = Messages.removingHopByHop(head.fields)
        if head.status == 103 && !sentHints.isEmpty {
            // Merged with the hints the proxy sent (RFC 8297 §2 allows several 103s): only the
            // links the client has not had; nothing when it had them all.
            let links = fields.values(named: "Link").flatMap { EarlyHints.members(of: Substring($0)) }
            let new = links.filter { !sentHints.contains(String($0)) }
            guard !new.isEmpty else { return }
            fields.removeAll(named: "Link")
            for link in new { fields.append(HeaderField(name: "Link", value: String(link))) }
        }
        fields.removeAll(named: .contentLength)
        Messages.addingVia(&fields, version: head.version, name: configuration.name)
        responder.interim(ServerResponseHead(status: head.status, reason: head.reason, fields: fields))
    }

    func receive(head: UpstreamResponseHead) -> Bool {
        let waited = MonotonicClock.seconds() - sentAt
        handler.metrics.recordOriginLatency(waited)
        responder?.addOriginTime(waited)
        if request.delta != nil, let registry = handler.dictionaries,
            DeltaCoding.mayCode(status: head.status, fields: head.fields, limit: registry.settings.maxBodyBytes)
        {
            held = HeldResponse(head, registry: registry)
            return true
        }
        return relay(head)
    }

    /// Relays the delta of a held response (RFC 9842 §5), or the response as the origin sent
    /// it when no delta can be made; returns the request to send next when the exchange asks
    /// for another.
    private func relayDelta(_ held: HeldResponse) -> ExchangeStateMachine.ForwardedRequest? {
        let head = held.head
        let body = held.body
        var sent = head
        var sentBody = body
        let registry = handler.dictionaries
        let content = registry.flatMap {
            DeltaCoding.content(of: body, fields: head.fields, limit: $0.settings.maxBodyBytes)
        }
        if let plan = request.delta, let registry, let content,
            let coded = DeltaCoding.coded(
                content, fields: head.fields, plan: plan, level: registry.settings.level, plainSize: body.count)
        {
            (sent.fields, sentBody) = coded
        }
        held.giveBack()
        let relaying = relay(sent, delta: sent.fields[.contentEncoding] == "dcz")
        // What the client decodes may be its next dictionary: recorded here, from the content.
        dictionaryBody = nil
        if relaying, let registry, let content, self.relay?.recorder != nil {
            registry.store.record(url: request.target.url, fields: head.fields, content: content)
        }
        if relaying, !sentBody.isEmpty { _ = sentBody.withUnsafeBytes { relayBody($0, fromOrigin: false) } }
        return transferEnded(nil)
    }

    /// Hands the origin's response head to the exchange and starts relaying it as decided;
    /// `false` when its body is not wanted. `delta`: it is the proxy's `dcz` delta.
    private func relay(_ head: UpstreamResponseHead, delta: Bool = false) -> Bool {
        let relay: ExchangeDriver.Relay
        switch driver.originResponded(
            &machine, ResponseHead(status: head.status, fields: head.fields), requestTime: requestTime)
        {
        case .relay(let decided):
            // The origin's response goes to the client, stored as it passes.
            relay = decided
        case .serve(let served):
            // Answered otherwise (a stale or freshened stored response), or sent again below:
            // the origin's body is not wanted (a 304 has none: read it, keep the connection).
            afterHead = .serve(served)
            return head.status == 304
        case .forward(let forwarded):
            afterHead = .forward(forwarded)
            return head.status == 304
        }
        self.relay = relay
        if relay.recorder != nil && head.status == 200 && request.method == "GET" {
            // Stored: its links are what the next wait for this URL is hinted with, unless its
            // directives withhold them from answers made without validation.
            handler.earlyHints.learn(url: request.target.url, response: head.fields, request: request.server.fields) {
                [engine = driver.configuration.engine] in
                let directives = engine.effectiveDirectives(head.fields).directives
                return directives.noCacheFieldNames + directives.privateFieldNames
            }
        }
        let framing: BodyFraming
        switch relay.expectedLength {
        case 0?: framing = .none
        case let length?: framing = .length(length)
        case nil: framing = .streamed
        }
        var outgoing = Messages.removingHopByHop(relay.fields)
        // The version it was received with (RFC 9110 §7.6.3): `1.0` from an HTTP/1.0 origin.
        // Served from the store later, it says `1.1` (see ProxyHandler's storedFieldsTransform).
        Messages.addingVia(&outgoing, version: head.version, name: configuration.name)
        var cacheStatus = relay.cacheStatus
        if delta { cacheStatus.detail = DeltaCoding.detail }
        outgoing[.cacheStatus] = cacheStatus.appended(to: outgoing[.cacheStatus])
        if !delta, handler.dictionaries != nil, relay.recorder != nil, relay.status == 200, request.method == "GET",
            relay.fields.contains(CompressionDictionaries.useAsDictionary)
        {
            dictionaryBody = []
        }
        heldHead = (ServerResponseHead(status: relay.status, reason: head.reason, fields: outgoing), framing)
        return true
    }

    /// Starts the relayed response's head to the client, once (the first body bytes, a wait for
    /// the origin or the end of the response start it).
    private func startRelayedHead() {
        guard let (head, framing) = heldHead, let relay else { return }
        heldHead = nil
        handler.metrics.count(relay.outcome == .bypass ? .pass : .miss)
        if responder != nil {
            handler.metrics.history.recordLatency(MonotonicClock.seconds() - request.receivedAt, .miss)
        }
        responder?.start(head, framing: framing)
    }

    /// The origin sent what it has for now: the head goes out rather than wait for the body
    /// (a stream whose first event takes a while).
    func willWait() {
        startRelayedHead()
    }

    func receive(body: UnsafeRawBufferPointer) -> Bool {
        if held != nil {
            handler.metrics.bytesFromOrigin.add(body.count, ordering: .relaxed)
            guard let held, !held.append(body) else { return true }
            // Too large to hold, or the proxy holds too much already: relayed as the origin
            // sends it, from here on.
            self.held = nil
            guard relay(held.head) else { return false }
            let sentWhole = held.body.withUnsafeBytes { relayBody($0, fromOrigin: false) }
            return sentWhole && relayBody(body, fromOrigin: false)
        }
        return relayBody(body)
    }

    /// Relays body bytes as the exchange decided (stored, sent to the client); `fromOrigin`:
    /// they are not yet counted as the origin's (those of a held response are).
    private func relayBody(_ body: UnsafeRawBufferPointer, fromOrigin: Bool = true) -> Bool {
        guard let relay else { return true }
        startRelayedHead()
        if dictionaryBody != nil {
            dictionaryBody! += body
            if dictionaryBody!.count > handler.dictionaries?.settings.maxBodyBytes ?? 0 { dictionaryBody = nil }
        }
        if fromOrigin { handler.metrics.bytesFromOrigin.add(body.count, ordering: .relaxed) }
        // Stored before it goes to the client: the last bytes commit the entry. A body being
        // stored is copied once, into the array the store keeps and the client's queue shares.
        let storing = relay.recorder?.isStoring == true
        let stored = storing ? Array(body) : nil
        if let stored { relay.recorder?.record(stored) }
        // The bytes that end a body failing its digest are withheld (see `sendOnce`).
        if relay.recorder?.mismatch != nil { return true }
        if let responder, !clientGone {
            if storing { waitForClient(responder) }
            let written = stored.map { responder.write($0) } ?? responder.write(body)
            if !written { clientGone = true }
        }
        // A response being stored is read to its end even when its client left (or, for a
        // background revalidation, there is none), including the bytes that commit it.
        return !(clientGone || responder == nil) || storing
    }

    /// A leader whose client reads slower than the origin sends (or not at all) holds those
    /// waiting for it no longer than ``CachingProxy/Configuration/collapsedClientWait`` in all:
    /// then they go on by themselves (``ExchangeDriver/releaseWaiters(_:)``), and this transfer
    /// goes on at its client's pace. Off the loops only: a loop never waits for a client, it
    /// hands the transfer to a worker once the client falls behind.
    private func waitForClient(_ responder: Responder) {
        guard machine.leads != nil, !waitersReleased, !EventLoop.isOnAnyLoop else { return }
        let limit = configuration.collapsedClientWait
        let start = MonotonicClock.seconds()
        let caughtUp = responder.waitWhileBackedUp(until: start + max(0, limit - heldByClient))
        heldByClient += MonotonicClock.seconds() - start
        guard !caughtUp || heldByClient >= limit else { return }
        waitersReleased = true
        driver.releaseWaiters(&machine)
    }

    // MARK: Outcomes

    /// The transfer ended without a complete response; returns the request to send again
    /// when the exchange asks for another.
    private func failed(_ error: any Error) -> ExchangeStateMachine.ForwardedRequest? {
        if let afterHead {
            // The exchange had answered otherwise (a stale response after a 5xx): the transfer
            // was stopped on purpose.
            return perform(afterHead)
        }
        let upstreamError = error as? UpstreamError
        handler.metrics.originFailed(upstreamError?.description ?? "\(error)", at: handler.now.secondsSince1970)
        let proxyError = Messages.proxyError(upstreamError)
        let description = Messages.withAdvice(upstreamError?.description ?? "\(error)", proxyError)
        let what = "\(request.method) \(request.target.url)"
        /// One line for the failure: how the client was answered, or that a background
        /// revalidation (no client) failed.
        func logFailure(_ answered: String) {
            handler.limitedLog(
                .origin(proxyError),
                responder == nil
                    ? "could not revalidate \(what) in the background: \(description)"
                    : "answered \(what) \(answered): \(description)")
        }
        // No head came: the whole wait was the origin's.
        if relay == nil { responder?.addOriginTime(MonotonicClock.seconds() - sentAt) }
        if let relay, heldHead != nil {
            // The origin's response failed before anything of it went to the client: a gateway
            // that received an invalid response answers 502 (RFC 9110 §15.6.3). Nothing is stored.
            heldHead = nil
            relay.recorder?.cut()
            logFailure("with 502 (Proxy-Status error=\(proxyError.rawValue))")
            defer { finished() }
            badGateway(502, description, upstreamError?.kind, proxyError)
            return nil
        }
        if let relay {
            // The head is out: the client can only be told by a cut connection.
            relay.recorder?.cut()
            handler.limitedLog(.cutOff, "the response to \(what) was cut off: \(description)")
            responder?.abort()
            finished()
            return nil
        }
        switch driver.originFailed(&machine) {
        case .serve(let served):
            // Something stored stands in for the origin (RFC 9111 §4.2.4).
            logFailure("with a stored response, the origin failed")
            serve(served)
        case .answer(let answer):
            // A 504 the exchange makes (stale not allowed).
            logFailure("with \(answer.status) (Proxy-Status error=\(proxyError.rawValue))")
            self.answer(answer, error: proxyError)
        case .fail:
            // Nothing may answer: a 502, or a 504 when the origin timed out.
            let status = upstreamError?.kind == .timeout ? 504 : 502
            logFailure("with \(status) (Proxy-Status error=\(proxyError.rawValue))")
            defer { finished() }
            badGateway(status, description, upstreamError?.kind, proxyError)
        }
        return nil
    }

    /// Answers `status` (`502`, or `504` when the origin timed out) for an origin that failed,
    /// saying what failed in `Cache-Status` (RFC 9211 §2.8) and `Proxy-Status` (RFC 9209 §2.3).
    private func badGateway(
        _ status: Int, _ description: String, _ kind: UpstreamError.Kind?, _ proxyError: ProxyStatusMember.ErrorType
    ) {
        guard let responder else { return }
        let text = (status == 504 ? "504 Gateway Timeout: " : "502 Bad Gateway: ") + description
        var (fields, body) = Messages.plainText(text)
        var cacheStatus = CacheStatus(cache: configuration.name, forward: forwardReason)
        // What failed, for the client (RFC 9211 §2.8): the origin timed out, its TLS failed
        // (a certificate refused, a handshake or TLS connection that failed), or it could not
        // be reached or answered wrongly.
        cacheStatus.detail =
            switch kind {
            case .timeout?: "origin-timeout"
            case .tls?: "origin-tls-failed"
            default: "origin-unreachable"
            }
        fields[.cacheStatus] = cacheStatus.fieldValue
        // What failed, in RFC 9209 §2.3's terms.
        fields[.proxyStatus] = ProxyStatusMember(proxy: configuration.name, error: proxyError).fieldValue
        handler.metrics.count(.error)
        responder.respond(ServerResponseHead(status: status, fields: fields), body: body)
    }

    /// The exchange is over: a background revalidation says so.
    private func finished() {
        if let background { driver.finish(background) }
    }
}
#endif
