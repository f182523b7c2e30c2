import CacheSemantics
import CacheStorage

/// Runs the exchanges of one cache over one store: it performs every store action an
/// ``ExchangeStateMachine`` asks for (reading candidates, opening bodies, applying a `304` or a
/// `HEAD` response, invalidating, opening writers) and hands its host only what the host must do
/// itself: send to the origin, serve or relay to the client, wait for a leader. Each event
/// returns only the host work that can follow it: ``HostWork`` before the origin was asked,
/// ``ResponseHostWork`` once its response head arrived, ``FailureHostWork`` when none came.
///
/// Why two layers, the machine's actions and the driver's host work: the machine decides
/// without I/O, so what it returns names store work too (``ExchangeStateMachine/Action/readCandidates(primaryKey:)``,
/// ``ExchangeStateMachine/ResponseAction/applyNotModified(_:)``) and carries what the store has
/// yet to open (a ``ExchangeStateMachine/StoredAnswer`` is a chosen entry, not yet a body). The
/// driver performs that work, feeding the machine the events it produces until only the
/// host's part is left, and hands it over with what the store opened: a ``ServedResponse``
/// whose body is open, a ``Relay`` with its ``ResponseRecorder``, a ``BackgroundRevalidation``.
/// A host never sees a store action, and the machine never sees a store.
///
/// A host, in outline:
///
/// ```swift
/// var exchange = driver.exchange(for: request)
/// var work = driver.start(&exchange)
/// while true {
///     switch work {
///     case .serve(let response, let background): send(response); background.map(runInBackground); return
///     case .answer(let answer): send(answer); return
///     case .join(let identity):
///         if let turn = await waitUnlessLeading(identity) { work = driver.resume(&exchange, turn) }
///         else { work = driver.joinedAsLeader(&exchange) }
///     case .forward(var request):
///         while true {  // the origin's turn
///             guard let head = try? await origin.send(request) else {
///                 switch driver.originFailed(&exchange) {
///                 case .serve(let response): send(response)
///                 case .answer(let answer): send(answer)
///                 case .fail(let reasons): throw Unreachable(reasons)
///                 }
///                 return
///             }
///             switch driver.originResponded(&exchange, head, requestTime: sent) {
///             case .serve(let response): send(response); return
///             case .forward(let again): request = again
///             case .relay(let relay): stream(relay); return
///             }
///         }
///     }
/// }
/// ```
///
/// A stored response whose body cannot be opened (a Redis chunk evicted or timed out, a file
/// corrupted) is logged with its URL, removed when it is damaged or gone, and the request
/// decided again without it: never a failed request, never a wrong body.
///
/// It also holds what exchanges share: the candidates remembered per key (bounded, valid while
/// the store's change count stands still), the coalescing of identical misses, and the
/// stale-while-revalidate revalidations running in the background.
///
/// With a ``Configuration/trace`` (`HTTPCACHE_TRACE=1` in the environment), it writes every
/// transition of every exchange: see ``ExchangeTrace``.
public final class ExchangeDriver: Sendable {
    /// How the exchanges behave.
    public struct Configuration: Sendable {
        /// The RFC 9111 engine (private or shared).
        public var engine: CacheEngine
        /// The cache's name in `Cache-Status` (RFC 9211 §2).
        public var name: String
        /// Whether served responses carry the `Cache-Status` field.
        public var addsCacheStatus = true
        /// Applied once per stored entry to the fields every answer from it starts with (a
        /// proxy adds its `Via` there).
        public var storedFieldsTransform: (@Sendable (HeaderFields) -> HeaderFields)?
        /// Applied once per stored entry to those fields (transformed): the bytes the host sends
        /// for them, without `Content-Length` (the host writes the length of what it sends).
        /// Plain hits carry them (``ServedResponse/serializedFields``), so a host writes a stored
        /// head once, not field by field on every hit.
        public var storedFieldsSerializer: (@Sendable (HeaderFields) -> [UInt8])?
        /// What to store of responses; `nil`: what RFC 9111 §3 allows.
        public var advisor: (any StorageAdvisor)?
        /// How many keys (and entries) the exchange remembers at most.
        public var memoCapacity = 16_384
        /// How many bytes what the exchange remembers (candidates with their decoded facts and
        /// served fields) holds at most, together: three quarters for the candidates of each key
        /// (what a hit reads), a quarter for what was decoded per entry (what a key read again
        /// reuses). ``ExchangeDriver/rememberedKeys`` says what a key costs.
        public var memoByteLimit = 12 << 20
        /// Seconds since 1970, now.
        public var clock: @Sendable () -> Double
        /// Receives what goes wrong in the store (it never fails a request).
        public var log: @Sendable (String) -> Void
        /// Told of each response from the origin stored whole (`true`) and of each one meant to
        /// be stored that the store refused (`false`: its write failed, or it was too busy to
        /// take it without the request waiting), as it happens: a host's counters.
        public var storeObserver: (@Sendable (_ stored: Bool) -> Void)?
        /// Receives every transition of every exchange; by default standard error's when the
        /// environment has `HTTPCACHE_TRACE=1` (``ExchangeTrace/environmentVariable``), else
        /// none.
        public var trace: ExchangeTrace?

        /// A configuration.
        public init(
            engine: CacheEngine, name: String, clock: @escaping @Sendable () -> Double,
            log: @escaping @Sendable (String) -> Void
        ) {
            self.engine = engine
            self.name = name
            self.clock = clock
            self.log = log
            trace = ExchangeTrace.fromEnvironment()
        }
    }

    /// What the host must do, the store work done, before the origin was asked: the first
    /// work of every exchange, and what follows joining.
    public enum HostWork: Sendable {
        /// Send this stored response to the client (its body is open: it stays this version);
        /// for stale-while-revalidate, also run `background`.
        case serve(ServedResponse, background: BackgroundRevalidation?)
        /// Send this response the cache made to the client.
        indirect case answer(CacheAnswer)
        /// Identical requests may share one origin request: ask ``join(_:waiter:)``.
        case join(identity: String)
        /// Send the request to the origin with these fields set; report its head with
        /// ``originResponded(_:_:requestTime:decodedCodings:)`` or its failure with ``originFailed(_:)``.
        indirect case forward(ExchangeStateMachine.ForwardedRequest)
    }

    /// What the host must do, the store work done, once the origin's response head arrived.
    public enum ResponseHostWork: Sendable {
        /// Send this stored response instead of the origin's (freshened by a `304`, or stale
        /// instead of a `5xx`); the origin's body is not wanted.
        case serve(ServedResponse)
        /// Send the request to the origin again with these fields set (the origin's body is
        /// not wanted); report as after the first.
        indirect case forward(ExchangeStateMachine.ForwardedRequest)
        /// Relay the origin's response to the client, feeding its body to the recorder.
        indirect case relay(Relay)
    }

    /// What the host must do, the store work done, when no response came from the origin.
    public enum FailureHostWork: Sendable {
        /// Send this stored response instead (stale, RFC 9111 §4.2.4).
        case serve(ServedResponse)
        /// Send this response the cache made (a `504`).
        indirect case answer(CacheAnswer)
        /// The request fails for these reasons: pass the transport's error on.
        case fail([Reason])
    }

    /// The origin's response on its way to the client, and what stores it.
    public struct Relay: Sendable {
        /// The status sent (`200` for a stored part completed by a `206`).
        public var status: Int
        /// The fields sent: the origin's, with `Date` when it sent none.
        public var fields: HeaderFields
        public var outcome: CacheOutcome
        public var cacheStatus: CacheStatus
        public var reasons: [Reason]
        /// The body length the framing announces; `nil` when it ends with the connection or
        /// the last chunk.
        public var expectedLength: Int64?
        /// Stores the body while it is relayed; `nil` when it is not stored.
        public var recorder: ResponseRecorder?
        /// A stored part to send (and store again) before the origin's bytes (RFC 9111 §3.4).
        public var storedPart: (any StoredBody)?
        /// What the application keeps with the stored entry.
        public var userInfo: [UInt8]?
    }

    /// A stale-while-revalidate validation to run in the background (RFC 5861 §3): run its
    /// exchange like any other (``start(_:)`` forwards it) with no client, then call
    /// ``finish(_:)`` — always, or waiting for background work never ends.
    public struct BackgroundRevalidation: Sendable {
        public var exchange: ExchangeStateMachine
        let key: String
    }

    /// The store.
    public let store: any CacheStore
    /// The configuration.
    public let configuration: Configuration
    private let reader: CandidateReader
    private let builder: ServedResponseBuilder
    private let updates: StoredResponseUpdates
    /// The configuration's advisor, or RFC 9111's: made once, not per exchange.
    private let advisor: any StorageAdvisor
    private let coalescing: CoalescingRegistry
    private let revalidations = BackgroundRevalidations()
    private let trace: ExchangeTrace?

    /// A driver for exchanges over `store`.
    public init(store: any CacheStore, configuration: Configuration) {
        self.store = store
        self.configuration = configuration
        advisor = configuration.advisor ?? RFC9111Storage(engine: configuration.engine)
        trace = configuration.trace
        coalescing = CoalescingRegistry(shared: store as? any CollapsingStore)
        let builder = ServedResponseBuilder(
            engine: configuration.engine, name: configuration.name, addsCacheStatus: configuration.addsCacheStatus,
            transform: configuration.storedFieldsTransform, serializer: configuration.storedFieldsSerializer)
        self.builder = builder
        let reader = CandidateReader(
            store: store, capacity: configuration.memoCapacity, byteLimit: configuration.memoByteLimit,
            log: configuration.log, makeBase: builder.base)
        self.reader = reader
        updates = StoredResponseUpdates(
            store: store, engine: configuration.engine, log: configuration.log, remember: reader.remembered)
    }

    private var now: Timestamp { Timestamp(secondsSince1970: configuration.clock()) }

    /// How many keys the exchange remembers the candidates of, and the bytes they are charged
    /// together (of three quarters of ``Configuration/memoByteLimit``).
    public var rememberedKeys: (count: Int, bytes: Int) { reader.rememberedKeys }

    /// The stored responses of `primaryKey` with their facts (remembered while the store is
    /// unchanged).
    public func candidates(_ primaryKey: String) -> [StoredCandidate] { reader.candidates(primaryKey) }

    /// A new exchange for `request`, storing what `advisor` says (by default the
    /// configuration's).
    public func exchange(for request: consuming ExchangeRequest, advisor: (any StorageAdvisor)? = nil)
        -> ExchangeStateMachine
    {
        // Consumed: the machine keeps the request itself, not a copy of it.
        var machine = ExchangeStateMachine(
            request, engine: configuration.engine, name: configuration.name,
            addsCacheStatus: configuration.addsCacheStatus, storing: advisor ?? self.advisor)
        if let trace { machine.traceID = trace.begin(machine.request.head) }
        return machine
    }

    // MARK: Events

    /// Starts `exchange`.
    public func start(_ exchange: inout ExchangeStateMachine) -> HostWork {
        advance(&exchange, feed(&exchange, .start) { $0.start() })
    }

    /// Joins the requests in flight for `identity`: `true` when this one leads (continue with
    /// ``joinedAsLeader(_:)``); `false` when it waits, and `waiter` is called when its turn
    /// comes (continue with ``resume(_:_:)``).
    public func join(_ identity: String, waiter: @escaping @Sendable (JoinTurn) -> Void) -> Bool {
        coalescing.join(identity, waiter: waiter)
    }

    /// This exchange leads the requests for its key: it is sent.
    public func joinedAsLeader(_ exchange: inout ExchangeStateMachine) -> HostWork {
        let action = feed(&exchange, .joinedAsLeader) { $0.joinedAsLeader() }
        numberFlight(&exchange)
        return advance(&exchange, action)
    }

    /// Gives `exchange`, which has just come to lead its key, the number of the fetch it leads.
    private func numberFlight(_ exchange: inout ExchangeStateMachine) {
        if let leads = exchange.leads { exchange.flight = coalescing.leadership(of: leads).flight }
    }

    /// The leader `exchange` goes on, but those waiting for it stop: they look up again and go
    /// on by themselves (to the origin, without storing, when nothing stored answers them:
    /// ``JoinTurn/leaderHeldBack``), later requests for the key do not join it, and its own end
    /// settles nothing. For a host whose leader's response goes no faster than its client
    /// reads: one client that stops reading would otherwise hold every request for the key
    /// until it is cut.
    public func releaseWaiters(_ exchange: inout ExchangeStateMachine) {
        guard let leadership = exchange.leadership else { return }
        coalescing.release(leadership)
        if let trace { trace.record(exchange.traceID, "\(exchange.stateName) waiters released") }
    }

    /// The turn of this exchange, which waited for a leader, came.
    public func resume(_ exchange: inout ExchangeStateMachine, _ turn: JoinTurn) -> HostWork {
        switch turn {
        case .leaderSettled(let collapsed):
            // The leader is done: look again, with what it stored.
            return advance(
                &exchange, feed(&exchange, .leaderSettled(stored: collapsed != nil)) { $0.leaderSettled(collapsed) })
        case .leaderHeldBack:
            // The leader's client holds it back: go on alone.
            return advance(&exchange, feed(&exchange, .leaderHeldBack) { $0.leaderHeldBack() })
        case .leaderLost:
            // The leader vanished: this request takes its place.
            let action = feed(&exchange, .leaderLost) { $0.leaderLost() }
            numberFlight(&exchange)
            return advance(&exchange, action)
        }
    }

    /// The origin's response head arrived (now); the request was sent at `requestTime`.
    /// - Parameters:
    ///   - exchange: The request's exchange.
    ///   - head: The origin's response head.
    ///   - requestTime: When the request was sent (RFC 9111 §4.2.3's `request_time`).
    ///   - decodedCodings: The content codings the host undoes before the body reaches the
    ///     recorder (an app's transport that decodes gzip): the digest fields (RFC 9530) the
    ///     response states describe the coded bytes, so they are not checked.
    public func originResponded(
        _ exchange: inout ExchangeStateMachine, _ head: ResponseHead, requestTime: Timestamp,
        decodedCodings: [String] = []
    ) -> ResponseHostWork {
        let now = self.now
        let action = feed(&exchange, .originResponded(status: head.status)) {
            $0.originResponded(head, requestTime: requestTime, responseTime: now, now: now)
        }
        return advance(&exchange, action, decodedCodings: decodedCodings)
    }

    /// No response came from the origin.
    public func originFailed(_ exchange: inout ExchangeStateMachine) -> FailureHostWork {
        advance(&exchange, feed(&exchange, .originFailed) { $0.originFailed(now: now) })
    }

    /// The host gives `exchange` up (its caller went away): requests waiting for it go on by
    /// themselves.
    public func abandon(_ exchange: inout ExchangeStateMachine) {
        settle(exchange.leadership, nil)
        if let trace {
            trace.record(exchange.traceID, "\(exchange.stateName) \(ExchangeStateMachine.Event.abandon) → done")
        }
        exchange.abandon()
    }

    // MARK: Inspecting and removing by key

    /// The stored responses that answer `primaryKey`: its own, or those stored under the key
    /// its path's No-Vary-Search simplifies it to that are equivalent to it.
    public func storedEntries(for primaryKey: String) -> [StoredEntry] {
        reader.candidates(primaryKey).map(\.entry)
    }

    /// Whether `entry` is the exchange's own bookkeeping (a No-Vary-Search marker), not a
    /// stored response to list.
    public func isInternal(_ entry: StoredEntry) -> Bool { SearchVariance.isMarker(entry.head.primaryKey) }

    /// Removes the stored responses of `primaryKey`, the `QUERY` responses of its URI (RFC 10008)
    /// and the variants kept apart for it (dictionary-compressed deltas), and those that answer it
    /// by No-Vary-Search (invalidation, RFC 9111 §4.4, and purging);
    /// returns how many.
    @discardableResult
    public func removeStored(primaryKey: String) throws(StorageError) -> Int {
        var removed =
            try store.remove(primaryKey: primaryKey) + store.remove(tag: PartitionedKeys.aliasTag(getKey: primaryKey))
        if let simplified = SearchVariance.simplifiedKey(primaryKey, read: reader.candidates) {
            for entry in SearchVariance.equivalent(reader.candidates(simplified.key), to: simplified.uri).map(\.entry) {
                try store.remove(entry.id)
                removed += 1
            }
        }
        return removed
    }

    /// The background revalidation is over (whatever came of it).
    public func finish(_ revalidation: BackgroundRevalidation) {
        revalidations.end(revalidation.key)
    }

    /// Calls `action` once no background revalidation runs (at once when none does).
    public func whenBackgroundIdle(_ action: @escaping @Sendable () -> Void) {
        revalidations.whenIdle(action)
    }

    // MARK: Performing store actions

    /// Feeds `exchange` an event with `apply`, writing the transition when a trace is on: the
    /// state the event met, the event, the action it returned.
    @inline(__always)
    private func feed<Action: TracedAction>(
        _ exchange: inout ExchangeStateMachine, _ event: @autoclosure () -> ExchangeStateMachine.Event,
        _ apply: (inout ExchangeStateMachine) -> Action
    ) -> Action {
        guard let trace else { return apply(&exchange) }
        let state = exchange.stateName
        let action = apply(&exchange)
        trace.record(exchange.traceID, "\(state) \(event()) → \(action.traceDescription)")
        return action
    }

    private func advance(_ exchange: inout ExchangeStateMachine, _ first: ExchangeStateMachine.Action) -> HostWork {
        var action = first
        while true {
            switch action {
            case .readCandidates(let primaryKey):
                // Read what is stored under the key (remembered while the store is unchanged).
                let read = reader.candidatesWithFacts(primaryKey)
                action = feed(&exchange, .candidatesRead(count: read.candidates.count)) {
                    $0.candidatesRead(read.candidates, facts: read.facts, now: now)
                }
            case .serveStored(let answer):
                guard let served = serve(answer, exchange) else {
                    // Its body is gone or damaged: the exchange decides again without it.
                    action = feed(&exchange, .storedBodyUnavailable) { $0.storedBodyUnavailable(now: now) }
                    continue
                }
                // A hit: the host serves it, and validates it in the background when it was
                // served stale-while-revalidate (RFC 5861 §3).
                return .serve(
                    served, background: answer.revalidation.flatMap { background(exchange, $0, of: answer.candidate) })
            case .answer(let answer):
                // The cache answers itself (a 504): no one waiting for this request gets a response.
                settle(exchange.leadership, nil)
                return .answer(answer)
            case .join(let identity):
                // A miss others may share: the host asks the registry whether it leads or waits.
                return .join(identity: identity)
            case .forward(let request):
                // To the origin.
                return .forward(forward(request))
            }
        }
    }

    private func advance(
        _ exchange: inout ExchangeStateMachine, _ first: ExchangeStateMachine.ResponseAction, decodedCodings: [String]
    ) -> ResponseHostWork {
        var action = first
        while true {
            switch action {
            case .serveStored(let answer):
                guard let served = serve(answer, exchange) else {
                    // The stored stand-in for the origin's answer cannot be opened.
                    action = feed(&exchange, .replacementUnavailable) { $0.replacementUnavailable() }
                    continue
                }
                // A freshened or stale stored response replaces the origin's.
                return .serve(served)
            case .applyNotModified(let notModified):
                // Freshen the stored responses the 304 selects (RFC 9111 §4.3.4), reading the key
                // again when the ones it names were replaced meanwhile.
                let request = exchange.request
                let updated = updates.applyNotModified(notModified, request: request.head.fields) { [reader] in
                    request.primaryKey.map(reader.candidates) ?? []
                }
                action = feed(&exchange, .notModifiedApplied(count: updated?.count)) {
                    $0.notModifiedApplied(updated, now: now)
                }
            case .forward(let request):
                // The origin is asked again (without validators, or for the whole response).
                return .forward(forward(request))
            case .relay(let plan):
                guard let relay = relay(plan, exchange, decodedCodings: decodedCodings) else {
                    // The stored part this response continues cannot be opened.
                    action = feed(&exchange, .storedPartUnavailable) { $0.storedPartUnavailable() }
                    continue
                }
                // The store work is done: the host relays the origin's response, which the
                // recorder stores as it passes.
                return .relay(relay)
            }
        }
    }

    private func advance(_ exchange: inout ExchangeStateMachine, _ first: ExchangeStateMachine.FailureAction)
        -> FailureHostWork
    {
        var action = first
        while true {
            switch action {
            case .serveStored(let answer):
                guard let served = serve(answer, exchange) else {
                    // The stale stand-in cannot be opened either.
                    action = feed(&exchange, .fallbackUnavailable) { $0.fallbackUnavailable() }
                    continue
                }
                // Disconnected, but something stored may answer (RFC 9111 §4.2.4).
                return .serve(served)
            case .answer(let answer):
                // A 504 the cache makes: nothing stored may be served stale.
                settle(exchange.leadership, nil)
                return .answer(answer)
            case .fail(let reasons):
                // Nothing can answer: the host passes the transport's error on.
                settle(exchange.leadership, nil)
                return .fail(reasons)
            }
        }
    }

    /// Removes the stored entries a forwarded request discards, and passes it on.
    private func forward(_ request: ExchangeStateMachine.ForwardedRequest) -> ExchangeStateMachine.ForwardedRequest {
        // A stored part the origin showed to be out of date is removed before asking for the whole.
        for id in request.discard { try? store.remove(id) }
        return request
    }

    /// Opens the chosen stored response's body and builds the response, settling the requests
    /// that waited for `exchange`; `nil` when the body cannot be opened (the exchange decides
    /// again without it).
    private func serve(_ answer: ExchangeStateMachine.StoredAnswer, _ exchange: ExchangeStateMachine)
        -> ServedResponse?
    {
        // The entry is read in place through the candidate, never copied (a retain per string
        // and array it holds).
        let candidate = answer.candidate
        let body: any StoredBody
        do {
            // Opened now, so it stays this version even if the entry is replaced while it is sent.
            body = try store.openBody(for: candidate.entry)
        } catch {
            unreadable(candidate.entry, error)
            return nil
        }
        // Made when this version is first served, then kept with it for the key's next answers.
        let base = candidate.base ?? builder.base(candidate.entry)
        guard let served = builder.serve(answer, base: base, body: body, request: exchange.request.head) else {
            // A body shorter or longer than its Content-Length is never served: it goes.
            let head = candidate.entry.head
            configuration.log(
                "the stored response for \(head.url) is damaged (its Content-Length says "
                    + "\(head.fields[.contentLength] ?? "?") bytes, \(body.size) are stored); it was removed")
            try? store.remove(candidate.entry.id)
            return nil
        }
        if candidate.base == nil, let primaryKey = exchange.request.primaryKey {
            reader.keep(base, for: candidate, primaryKey: primaryKey)
        }
        // A hit counts for eviction (LRU), and those waiting for this request learn what it got.
        store.recordAccess(candidate.entry.id, at: configuration.clock())
        settle(exchange.leadership, served.outcome == .revalidated ? answer.cacheStatus.collapsedAs(.revalidated) : nil)
        return served
    }

    /// A stored body that could not be opened: one log line with its URL and why. One that is
    /// gone or damaged (a Redis chunk evicted or expired while its record stayed, a checksum
    /// that fails, a junk description) is removed, so no later request meets it; one whose
    /// store did not answer (a timeout, a cluster failing over) is left for when it does.
    private func unreadable(_ entry: StoredEntry, _ error: StorageError) {
        switch error.kind {
        case .notFound, .corrupted:
            // Gone or damaged for good: remove it so no later request meets it.
            var removal = "it was removed"
            do {
                try store.remove(entry.id)
            } catch {
                removal = "removing it failed too (\(error))"
            }
            configuration.log(
                "the stored body of \(entry.head.url) could not be read (\(error)); \(removal), and the request "
                    + "is answered as if it were not stored")
        default:
            // The store did not answer: leave the entry for when it does.
            configuration.log(
                "the stored body of \(entry.head.url) could not be read (\(error)); the request is answered as if "
                    + "it were not stored; check that the store is reachable")
        }
    }

    /// A background revalidation of `served`, which `exchange` served stale, unless one runs
    /// for its key or `served` is no longer what is stored: a revalidation that ended between
    /// this exchange's lookup and now may have freshened it already.
    private func background(
        _ exchange: ExchangeStateMachine, _ revalidation: Forwarding, of served: StoredCandidate
    ) -> BackgroundRevalidation? {
        // One revalidation per key at a time: the others serve stale and leave it to the first.
        guard let key = exchange.request.primaryKey, revalidations.begin(key) else { return nil }
        let candidates = reader.candidates(key)
        guard
            candidates.contains(where: {
                $0.entry.id == served.entry.id && $0.entry.head.facts == served.entry.head.facts
            })
        else {
            // What was served was freshened or replaced meanwhile: nothing left to validate.
            revalidations.end(key)
            return nil
        }
        // The revalidation's indices refer to the candidates of the lookup that chose it.
        var machine = exchange.revalidation(revalidation, candidates: exchange.storedCandidates)
        if let trace {
            machine.traceID = trace.begin(
                exchange.request.head, note: "background revalidation for \(exchange.traceID)")
        }
        return BackgroundRevalidation(exchange: machine, key: key)
    }

    /// Performs the store work before a relay and opens what stores the body; `nil` when a
    /// stored part to complete cannot be opened.
    private func relay(
        _ plan: ExchangeStateMachine.RelayPlan, _ exchange: ExchangeStateMachine, decodedCodings: [String]
    ) -> Relay? {
        let request = exchange.request
        var storedPart: (any StoredBody)?
        if let part = plan.storedPart {
            // A 206 that continues a stored part: its bytes go out first (RFC 9111 §3.4).
            guard let body = try? store.openBody(of: part.entry.id) else { return nil }
            storedPart = body
        }
        // Unsafe methods make what is stored for their URIs stale (RFC 9111 §4.4): removed.
        for primaryKey in plan.invalidated {
            do {
                try removeStored(primaryKey: primaryKey)
            } catch {
                configuration.log("could not invalidate \(SearchVariance.describe(primaryKey)): \(error)")
            }
        }
        // And the cache groups the response names (RFC 9875 §3).
        for tag in plan.invalidatedTags {
            do {
                try store.remove(tag: tag)
            } catch {
                configuration.log("could not invalidate cache group \(tag): \(error)")
            }
        }
        // `Clear-Site-Data: "cache"`: the origin's stored responses go (W3C Clear Site Data §4.2),
        // and the variants kept apart for them.
        for prefix in plan.clearedKeyPrefixes {
            do {
                try store.remove(primaryKeyPrefix: prefix)
            } catch {
                configuration.log(
                    "could not remove the stored responses Clear-Site-Data asked to clear (\(prefix)): \(error)")
            }
        }
        for tag in plan.clearedTags {
            do {
                try store.remove(tag: tag)
            } catch {
                configuration.log("could not remove the variants Clear-Site-Data asked to clear (\(tag)): \(error)")
            }
        }
        // A 200 to HEAD freshens the stored GET response (RFC 9111 §4.3.5).
        if let stored = plan.headFreshens {
            updates.applyHeadResponse(plan.fields, to: stored, request: request.head.fields, times: plan.times)
        }
        var freshened = false
        // The client's own validators got a 304: it freshens what it selects (RFC 9111 §4.3.4).
        if !plan.notModifiedFreshens.isEmpty {
            let notModified = ExchangeStateMachine.NotModified(
                fields: plan.fields, candidates: plan.notModifiedFreshens, validated: [], times: plan.times)
            freshened =
                updates.applyNotModified(notModified, request: request.head.fields) { [reader] in
                    request.primaryKey.map(reader.candidates) ?? []
                } != nil
        }
        var relay = Relay(
            status: plan.status, fields: plan.fields, outcome: plan.outcome, cacheStatus: plan.cacheStatus,
            reasons: plan.reasons, expectedLength: plan.expectedLength, recorder: nil, storedPart: storedPart,
            userInfo: plan.storage?.head?.userInfo)
        // Whether the store may still refuse the response once its body is whole.
        var commitMayBeRefused = false
        // A storable response: open the writer its body goes to as it is relayed (RFC 9111 §3).
        if let storage = plan.storage, var head = storage.head {
            // The digests the response states are checked as its body is stored (RFC 9530).
            let digests = IntegrityDigests(plan.fields)
            let integrity = IntegrityPlan(
                digests: digests, checksRepresentation: head.isComplete, decodedCodings: decodedCodings)
            integrity.note(in: &head)
            do {
                if let marker = plan.varianceMarker,
                    reader.candidates(marker.primaryKey).first?.entry.head.fields != marker.fields
                {
                    // The path's No-Vary-Search marker changed: store it first, so lookups find it.
                    try store.makeWriter(for: marker).commit()
                }
                let writer = try store.makeWriter(for: head)
                commitMayBeRefused = writer.commitMayBeRefused
                relay.recorder = recorder(writer, storage, plan, exchange, integrity: integrity)
                if let leadership = exchange.leadership, !answersWithoutValidation(head) {
                    // Stored, but it cannot answer those waiting for it without validation
                    // (no-cache, or no freshness: an event stream, a long poll): they go on by
                    // themselves now, not when it ends, which may be never (RFC 9111 §4.2,
                    // §5.2.2.4), and later requests do not wait for it either.
                    coalescing.release(leadership)
                }
            } catch {
                // The store refused it: the response is relayed all the same, and says why.
                configuration.log(
                    "could not store the response for \(head.url): \(error) (it is served, not stored)"
                        + ResponseRecorder.advice(error))
                configuration.storeObserver?(false)
                relay.reasons.append(.configured("not stored: \(error)"))
            }
        }
        // Cache-Status `stored` says what happened, not what was planned (RFC 9211 §2.5). The
        // head goes out before the body is committed: a store that may still refuse it then
        // (Redis, with no local tier to keep it) leaves it unknown, and it is not said.
        if plan.cacheStatus.stored != nil {
            if freshened || (relay.recorder != nil && !commitMayBeRefused) {
                relay.cacheStatus.stored = true
            } else {
                relay.cacheStatus.stored = relay.recorder != nil ? nil : false
            }
        }
        // Nothing will be stored: those waiting for this request go on by themselves now.
        if relay.recorder == nil { settle(exchange.leadership, nil) }
        return relay
    }

    /// Whether a response stored with `head` may answer a request now without validation:
    /// fresh, and without `no-cache` (RFC 9111 §4.2, §5.2.2.4).
    private func answersWithoutValidation(_ head: EntryHead) -> Bool {
        guard let facts = StoredResponseFacts(serialized: head.facts) else { return false }
        return !facts.flags.has(.noCache) && facts.freshnessLifetime > facts.currentAge(at: now)
    }

    private func recorder(
        _ writer: any EntryWriter, _ storage: StoragePlan, _ plan: ExchangeStateMachine.RelayPlan,
        _ exchange: ExchangeStateMachine, integrity: IntegrityPlan
    ) -> ResponseRecorder {
        let leadership = exchange.leadership
        let collapsed = CollapsedResponse(
            outcome: plan.outcome, reason: plan.cacheStatus.forward ?? .miss, status: plan.originStatus)
        let pinKey = storage.pin ? storage.head?.primaryKey : nil
        let superseded = plan.supersededParts
        let part = storage.head.flatMap { $0.isComplete ? nil : $0 }
        // A body the host decoded from its content coding is not kept when cut off: its bytes
        // are not the representation's (RFC 9110 §8.4), so a `Range` asking for the rest would
        // continue them with the coded bytes after the same offset (RFC 9111 §3.3, §3.4).
        let incompleteFacts = integrity.decodedCodings.isEmpty ? storage.incompleteFacts : nil
        return ResponseRecorder(
            writer: writer, expectedLength: plan.expectedLength, incompleteFacts: incompleteFacts,
            integrity: integrity.check(url: exchange.request.head.uri), url: exchange.request.head.uri,
            log: configuration.log
        ) { [store, coalescing, reader, configuration] outcome in
            switch outcome {
            case .stored: configuration.storeObserver?(true)
            case .refused: configuration.storeObserver?(false)
            case .notStored: break
            }
            let committed = outcome == .stored
            // Stored whole: pin it when the manifest says, drop the parts it replaces, and join a
            // part to the parts beside it (RFC 9111 §3.4).
            if committed, let pinKey { _ = try? store.setPinned(true, primaryKey: pinKey) }
            if committed {
                for id in superseded { try? store.remove(id) }
                if let part {
                    let candidates = reader.candidates(part.primaryKey)
                    if let entry = candidates.first(where: { $0.entry.head.variantKey == part.variantKey })?.entry {
                        StoredParts.combine(
                            after: entry, store: store, candidates: candidates, engine: configuration.engine,
                            log: configuration.log)
                    }
                }
            }
            // Those waiting for this request look again, now that it is stored (or is not).
            if let leadership { coalescing.settle(leadership, committed ? collapsed : nil) }
        }
    }

    /// Tells the requests that waited for the exchange of `leadership` (if it leads any) what
    /// came of it. Takes the leadership, not the exchange, so the exchange is not copied on a hit.
    private func settle(_ leadership: Leadership?, _ collapsed: CollapsedResponse?) {
        if let leadership { coalescing.settle(leadership, collapsed) }
    }
}

extension CacheStatus {
    /// What waiters are told of a forwarded request that ended with this status.
    fileprivate func collapsedAs(_ outcome: CacheOutcome) -> CollapsedResponse? {
        guard let forward, let forwardStatus else { return nil }
        return CollapsedResponse(outcome: outcome, reason: forward, status: forwardStatus)
    }
}
