import CacheExchange
import CacheSemantics
import CacheStorage
import CacheSystem
import Foundation

/// A response on its way to the caller.
struct PendingResponse: Sendable {
    enum Body: Sendable {
        /// Bytes `range` of a stored body, opened when the response was chosen (so it is that
        /// version even if the entry is replaced meanwhile): read at once
        /// (``HTTPCache/data(for:)-(FetchRequest)``) or in blocks (``HTTPCache/bytes(for:)-(FetchRequest)``).
        case stored(any StoredBody, range: Range<Int64>)
        case source(any BodySource)
    }

    var status: Int
    /// The fields, with `Cache-Status` when the cache adds it.
    var fields: HeaderFields
    var outcome: CacheOutcome
    var cacheStatus: CacheStatus
    var userInfo: Data?
    var reasons: [Reason]
    var body: Body
    var expectedLength: Int64?
    /// The stored entry it is served from, when it is.
    var entry: EntryID?
    /// The stale-while-revalidate refresh running behind it, when it was served stale.
    var refresh: BackgroundRefresh?
}

/// The cache as a host of the exchange: it performs the host work the driver hands it over the
/// transport with async/await; every rule of HTTP caching is the exchange's.
extension HTTPCache {
    /// Answers one request (no redirects followed).
    func respond(to prepared: PreparedRequest) async throws -> PendingResponse {
        var exchange = driver.exchange(for: prepared.exchange, advisor: storage(for: prepared))
        let first = driver.start(&exchange)
        return try await perform(&exchange, first, prepared)
    }

    /// Answers `prepared` when the exchange does so on its first step without the origin or a
    /// wait: a stored response it may serve (a stale-while-revalidate one's validation starts
    /// behind it, as in ``respond(to:)``), or its own `504` for only-if-cached. `nil` when it
    /// would send the request or wait for an identical one in flight (the exchange is then
    /// abandoned, nothing done), or when `declines` a stored response's status, `Location` and
    /// body size.
    func respondFromStore(
        to prepared: PreparedRequest, declining declines: (_ status: Int, _ location: String?, _ size: Int64) -> Bool
    ) -> PendingResponse? {
        var exchange = driver.exchange(for: prepared.exchange, advisor: storage(for: prepared))
        switch driver.start(&exchange) {
        case .serve(let served, let background):
            let refresh = refreshing(served, background, prepared)
            return declines(served.status, served.fields[.location], served.body.count)
                ? nil : response(served, refresh: refresh)
        case .answer(let answer):
            return response(answer)
        case .join, .forward:
            driver.abandon(&exchange)
            return nil
        }
    }

    /// The refresh behind `served`: `background`, started now, or the one running for its key
    /// when another request's refresh runs (RFC 5861 §3); `nil` when it was not served stale.
    private func refreshing(
        _ served: ServedResponse, _ background: ExchangeDriver.BackgroundRevalidation?, _ prepared: PreparedRequest
    ) -> BackgroundRefresh? {
        guard let background else { return served.outcome == .stale ? runningRefresh(prepared, served: served) : nil }
        return revalidateInBackground(background, prepared, served: served)
    }

    /// Performs `first` and the host work that follows until the response is known.
    private func perform(
        _ exchange: inout ExchangeStateMachine, _ first: ExchangeDriver.HostWork, _ prepared: PreparedRequest
    ) async throws -> PendingResponse {
        var work = first
        while true {
            switch work {
            case .serve(let served, let background):
                // Served from the store; a stale-while-revalidate hit is validated behind it.
                return response(served, refresh: refreshing(served, background, prepared))
            case .answer(let answer):
                // The cache answers itself (a 504 for only-if-cached).
                return response(answer)
            case .join(let identity):
                // Lead the identical requests in flight, or wait for the one that leads.
                let turn: JoinTurn? = await withCheckedContinuation { continuation in
                    if driver.join(identity, waiter: { continuation.resume(returning: $0) }) {
                        continuation.resume(returning: nil)
                    }
                }
                work = turn.map { driver.resume(&exchange, $0) } ?? driver.joinedAsLeader(&exchange)
            case .forward(let forwarded):
                return try await send(&exchange, forwarded, prepared)
            }
        }
    }

    /// Sends the request to the origin (again, as often as the exchange asks) and performs
    /// what the exchange decides on its answer.
    private func send(
        _ exchange: inout ExchangeStateMachine, _ first: ExchangeStateMachine.ForwardedRequest,
        _ prepared: PreparedRequest
    ) async throws -> PendingResponse {
        var forwarded = first
        while true {
            var outbound = prepared.request
            // The exchange's fields replace those of the same name.
            outbound.fields.removeAll(namedAnyOf: forwarded.fields.map(\.name))
            for field in forwarded.fields { outbound.fields.append(name: field.name, value: field.value) }
            let requestTime = now
            let received: OriginResponse
            do {
                received = try await transport.send(outbound)
            } catch {
                // The caller went away: so does the exchange, and those waiting for it go on.
                if error is CancellationError || (error as? URLError)?.code == .cancelled {
                    driver.abandon(&exchange)
                    throw error
                }
                // Network state is not binary: any failure to get a response counts as unreachable.
                switch driver.originFailed(&exchange) {
                // Something stored stands in for the origin (RFC 9111 §4.2.4).
                case .serve(let served): return response(served)
                // A 504 the cache makes.
                case .answer(let answer): return response(answer)
                // Nothing may answer: the transport's own error goes to the caller.
                case .fail: throw error
                }
            }
            let head = ResponseHead(status: received.status, fields: received.fields)
            switch driver.originResponded(
                &exchange, head, requestTime: requestTime, decodedCodings: received.decodedContentCodings)
            {
            case .serve(let served):
                // A freshened (304) or stale (5xx) stored response answers instead.
                await Self.discard(received)
                return response(served)
            case .forward(let again):
                // Asked again (without validators, or for the whole response).
                await Self.discard(received)
                forwarded = again
            case .relay(let relay):
                // The origin's response goes to the caller, stored as it is read.
                return relayed(relay, received)
            }
        }
    }

    /// What to store, by this cache's rules and hooks.
    private func storage(for prepared: PreparedRequest) -> HTTPCacheStorage {
        HTTPCacheStorage(
            engine: driver.configuration.engine, prepared: prepared, willStore: configuration.willStoreResponse)
    }

    /// The head the caller sees of `response`, for a request for `url`: one served from a stored
    /// entry shares its platform response with the last one like it (``PlatformResponses``).
    func responseHead(_ response: PendingResponse, url: URL) -> CachedResponseHead {
        CachedResponseHead(
            head: ResponseHeadParts(status: response.status, fields: response.fields, url: url),
            outcome: response.outcome, cacheStatus: response.cacheStatus, userInfo: response.userInfo,
            reasons: response.reasons, expectedLength: response.expectedLength,
            entry: response.entry, responses: platformResponses, refresh: response.refresh)
    }

    /// A response the cache made itself (a `504`).
    private func response(_ answer: CacheAnswer) -> PendingResponse {
        PendingResponse(
            status: answer.status, fields: answer.fields, outcome: .miss, cacheStatus: answer.cacheStatus,
            reasons: answer.reasons, body: .source(DataSource(Data(answer.body))),
            expectedLength: Int64(answer.body.count))
    }

    /// A stored response served, with the stale-while-revalidate refresh behind it.
    private func response(_ served: ServedResponse, refresh: BackgroundRefresh? = nil) -> PendingResponse {
        // Read once: `entry` is a copy of the stored entry each time.
        let entry = served.entry
        state.withLock { state in
            if served.cacheStatus.collapsed == true { state.statistics.collapsed += 1 }
            if served.outcome == .revalidated { state.statistics.bytesSavedByRevalidation += entry.bodySize }
            state.statistics.bytesServedFromCache += served.body.count
        }
        let body: PendingResponse.Body
        switch served.body {
        case .none: body = .source(DataSource(Data()))
        case .stored(let stored, let range): body = .stored(stored, range: range)
        case .bytes(let bytes): body = .source(DataSource(Data(bytes)))
        }
        return PendingResponse(
            status: served.status, fields: served.fields, outcome: served.outcome, cacheStatus: served.cacheStatus,
            userInfo: entry.head.userInfo.map { Data($0) }, reasons: served.reasons, body: body,
            expectedLength: served.body.count, entry: entry.id, refresh: refresh)
    }

    /// The origin's response, passed on while it is stored (when the exchange stores it): a
    /// stored part first when the response completes one (RFC 9111 §3.4).
    private func relayed(_ relay: ExchangeDriver.Relay, _ origin: OriginResponse) -> PendingResponse {
        var fields = relay.fields
        if configuration.addsCacheStatusField {
            fields[.cacheStatus] = relay.cacheStatus.appended(to: fields[.cacheStatus])
        }
        // What the network must deliver of the origin's own body: a body cut short of it is
        // never stored as complete.
        let originLength = relay.storedPart == nil ? relay.expectedLength : Self.expectedLength(of: origin.fields)
        let tee = TeeSource(origin.body, recorder: relay.recorder, expectedLength: originLength)
        return PendingResponse(
            status: relay.status, fields: fields, outcome: relay.outcome, cacheStatus: relay.cacheStatus,
            userInfo: relay.userInfo.map { Data($0) }, reasons: relay.reasons,
            body: .source(
                relay.storedPart.map { CombinedSource(prefix: StoredSource($0, range: 0..<$0.size), rest: tee) } ?? tee),
            expectedLength: relay.expectedLength)
    }

    /// Drops an origin response whose answer the exchange replaced (a `304`'s empty body is
    /// read, so its connection can be reused).
    private static func discard(_ origin: OriginResponse) async {
        guard origin.status == 304 else { return }
        do {
            for try await _ in origin.body {}
        } catch {}
    }

    /// The body length `Content-Length` declares (one value, digits only), else `nil`.
    private static func expectedLength(of fields: HeaderFields) -> Int64? {
        guard let value = fields[.contentLength]?.trimmingCharacters(in: .whitespaces), !value.isEmpty,
            value.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
        else { return nil }
        return Int64(value)
    }

    /// Validates a response served stale-while-revalidate in the background (RFC 5861 §3),
    /// and tells subscribers when what it stores is another representation than `served`.
    private func revalidateInBackground(
        _ background: ExchangeDriver.BackgroundRevalidation, _ prepared: PreparedRequest, served: ServedResponse
    ) -> BackgroundRefresh? {
        guard let key = prepared.primaryKey else {
            // Never: the exchange revalidates in the background only what it stores under a key.
            driver.finish(background)
            return nil
        }
        let token = refreshes.begin(key)
        let task = Task { [self] in
            var exchange = background.exchange
            var landed = false
            do {
                let first = driver.start(&exchange)
                let response = try await perform(&exchange, first, prepared)
                landed = try await readLanded(response, replacing: served)
            } catch {
                configuration.log("background revalidation of \(prepared.urlString) failed: \(error)")
            }
            // Subscribers are told before the refresh counts as over (waitForBackgroundWork).
            let listeners = refreshes.end(key, token)
            if landed, !listeners.isEmpty, let update = refreshedResponse(prepared, excluding: served.entry.id) {
                listeners.tell(update)
            }
            driver.finish(background)
            return landed
        }
        refreshes.started(task, key, token)
        return BackgroundRefresh(task: task, cache: self, prepared: prepared, replaced: served.entry.id)
    }
}
