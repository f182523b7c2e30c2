import CacheSemantics
import CacheStorage

/// One request's way through a cache, as a value: events in, actions out.
///
/// It decides with the `CacheEngine` (RFC 9111, RFC 5861, RFC 9211) and holds what it has
/// learnt (the stored candidates, the plan of a forwarded request, the origin's answer), but it
/// does no I/O and reads no clock: the caller performs each action and reports what came of it
/// with the matching event. ``ExchangeDriver`` performs the store actions; a host (the app's
/// `HTTPCache`, the proxy) performs the rest: network and client I/O.
///
/// Each event returns only the actions that can follow it, so a caller never meets an action it
/// cannot perform at that point: ``Action`` before anything came from the origin,
/// ``ResponseAction`` once the origin's response head arrived, ``FailureAction`` once no
/// response came.
///
/// The order, as OkHttp's cache interceptor reads it, for both hosts:
///
/// 1. ``start()`` → ``Action/readCandidates(primaryKey:)`` (or ``Action/forward(_:)`` for a
///    request that bypasses the cache).
/// 2. ``candidatesRead(_:now:)`` → the lookup (RFC 9111 §4): ``Action/serveStored(_:)``,
///    ``Action/answer(_:)`` (`504`, only-if-cached), ``Action/join(identity:)`` (a miss others
///    may share) or ``Action/forward(_:)``.
/// 3. ``originResponded(_:requestTime:responseTime:now:)`` → a stale response instead of a `5xx`
///    (RFC 5861 §4), ``ResponseAction/applyNotModified(_:)`` for a `304` (RFC 9111 §4.3.4), or
///    ``ResponseAction/relay(_:)``: the response goes to the client while it is stored (§3),
///    after the stored responses it invalidates are removed (§4.4) and a `HEAD` response
///    freshened its `GET` (§4.3.5). ``originFailed(now:)`` → a stale response (§4.2.4), a `504`,
///    or ``FailureAction/fail(_:)``.
///
/// States and the events each accepts:
///
/// | state | entered by | events |
/// | --- | --- | --- |
/// | idle | init | ``start()`` |
/// | looking up | ``Action/readCandidates(primaryKey:)`` | ``candidatesRead(_:now:)`` |
/// | serving | ``Action/serveStored(_:)`` | ``storedBodyUnavailable(now:)`` (or done) |
/// | joining | ``Action/join(identity:)`` | ``joinedAsLeader()``, ``leaderSettled(_:)``, ``leaderHeldBack()``, ``leaderLost()`` |
/// | forwarding | a `forward` action | ``originResponded(_:requestTime:responseTime:now:)``, ``originFailed(now:)`` |
/// | freshening | ``ResponseAction/applyNotModified(_:)`` | ``notModifiedApplied(_:now:)`` |
/// | replacing | ``ResponseAction/serveStored(_:)`` | ``replacementUnavailable()`` (or done) |
/// | completing | ``ResponseAction/relay(_:)`` with a stored part | ``storedPartUnavailable()`` (or done) |
/// | falling back | ``FailureAction/serveStored(_:)`` | ``fallbackUnavailable()`` (or done) |
/// | done | an answer, a failure, a relay, a served response | none |
///
/// A stored response whose body cannot be opened (replaced, evicted, corrupted, or its store
/// unreachable) is never a failure of the request: the lookup is made again without it, up to
/// ``maximumLookups`` times, and then decided on what remains, so that a store that keeps
/// offering an unreadable response makes a miss, not an error.
///
/// ## Tracing
///
/// With `HTTPCACHE_TRACE=1` in a process's environment, every exchange writes its transitions to
/// standard error, one line each (as Varnish's `cnt_diag` does): the request first, then the
/// state it was in, the event and the action that followed.
///
/// ```
/// trace 7 GET http://127.0.0.1:8080/a
/// trace 7 idle start → readCandidates
/// trace 7 lookingUp candidatesRead(1) → join
/// trace 7 joining joinedAsLeader → forward(stale, conditional)
/// trace 7 forwarding originResponded(304) → applyNotModified(1)
/// trace 7 freshening notModifiedApplied(1) → serveStored(revalidated)
/// ```
///
/// The machine only names its state and describes its actions; ``ExchangeDriver`` writes the
/// lines to its ``ExchangeDriver/Configuration/trace`` (an ``ExchangeTrace``), which is read
/// from the environment once, when the configuration is made.
public struct ExchangeStateMachine: Sendable {
    /// What to do next, before anything came from the origin.
    public enum Action: Sendable {
        /// Store: read the stored responses of `primaryKey` → ``candidatesRead(_:now:)``.
        case readCandidates(primaryKey: String)
        /// Store, then client: open the body of a stored response and serve it (→
        /// ``storedBodyUnavailable(now:)`` when it cannot be opened).
        case serveStored(StoredAnswer)
        /// Client: answer with a response the cache makes itself.
        indirect case answer(CacheAnswer)
        /// Join the identical requests in flight: lead (→ ``joinedAsLeader()``) or wait for the
        /// leader (→ ``leaderSettled(_:)``).
        case join(identity: String)
        /// Network: send the request with these fields set → ``originResponded(_:requestTime:responseTime:now:)``
        /// or ``originFailed(now:)``.
        indirect case forward(ForwardedRequest)
    }

    /// What to do next, once the origin's response head arrived.
    public enum ResponseAction: Sendable {
        /// Store, then client: serve a stored response instead of the origin's (freshened by a
        /// `304`, or stale instead of a `5xx`); → ``replacementUnavailable()`` when its body
        /// cannot be opened.
        case serveStored(StoredAnswer)
        /// Store: apply a `304` to the stored responses it selects → ``notModifiedApplied(_:now:)``.
        indirect case applyNotModified(NotModified)
        /// Network: send the request again with these fields set (without validators, or for
        /// the whole instead of a part) → ``originResponded(_:requestTime:responseTime:now:)`` or
        /// ``originFailed(now:)``.
        indirect case forward(ForwardedRequest)
        /// Store, then client: apply the updates, then relay the origin's response, storing it
        /// when the plan says (→ ``storedPartUnavailable()`` when a stored part to complete
        /// cannot be opened).
        indirect case relay(RelayPlan)
    }

    /// What to do next, when no response came from the origin.
    public enum FailureAction: Sendable {
        /// Store, then client: serve a stored response instead (RFC 9111 §4.2.4); →
        /// ``fallbackUnavailable()`` when its body cannot be opened.
        case serveStored(StoredAnswer)
        /// Client: answer with a response the cache makes itself (a `504`).
        indirect case answer(CacheAnswer)
        /// Client: the request fails, for these reasons; the host passes its transport's error
        /// on (nothing stored may answer instead).
        case fail([Reason])
    }

    /// A stored response chosen to answer.
    public struct StoredAnswer: Sendable {
        public var candidate: StoredCandidate
        public var use: CachedUse
        public var cacheStatus: CacheStatus
        public var outcome: CacheOutcome
        /// Stale-while-revalidate (RFC 5861 §3): validate it in the background.
        public var revalidation: Forwarding?
        /// The request went to the origin first; what it answered is dropped.
        public var replacesOriginResponse: Bool
    }

    /// A request to send to the origin.
    public struct ForwardedRequest: Sendable {
        /// Fields to set on the request, replacing fields of the same name (preconditions,
        /// `Range` and `If-Range` to complete a stored part, a policy's `Cache-Control`).
        public var fields: HeaderFields
        /// Why it goes forward (RFC 9211 `fwd`).
        public var reason: CacheStatus.ForwardReason
        /// Whether it validates stored responses (RFC 9111 §4.3.1).
        public var isValidation: Bool
        /// Stored entries to remove first (a stored part that the origin's answer showed to be
        /// out of date).
        public var discard: [EntryID]
    }

    /// A `304` to apply to the stored responses (RFC 9111 §4.3.4).
    public struct NotModified: Sendable {
        public var fields: HeaderFields
        public var candidates: [StoredCandidate]
        /// The candidates whose validators the request carried.
        public var validated: [Int]
        public var times: ExchangeTimes
    }

    /// The origin's response as it goes to the client, and the store work that comes first.
    public struct RelayPlan: Sendable {
        /// The status sent (`200` for a stored part completed by a `206`).
        public var status: Int
        /// The origin's status.
        public var originStatus: Int
        /// The fields sent: the origin's, with `Date` when it sent none (RFC 9110 §6.6.1).
        public var fields: HeaderFields
        public var outcome: CacheOutcome
        /// `stored` is settled by the driver once it knows whether the response is stored.
        public var cacheStatus: CacheStatus
        public var reasons: [Reason]
        /// What to store; `nil` when nothing may be (another method, a bypass, a `HEAD`).
        public var storage: StoragePlan?
        /// Primary keys whose stored responses the response invalidates (RFC 9111 §4.4).
        public var invalidated: [String]
        /// Tags of the cache groups whose stored responses the response invalidates (RFC 9875 §3).
        public var invalidatedTags: [String] = []
        /// Prefixes of the primary keys whose stored responses `Clear-Site-Data` removes (W3C
        /// Clear Site Data §4.2): the response's origin, in the request's partition.
        public var clearedKeyPrefixes: [String] = []
        /// The tag of the origin's variants kept in partitions of their own
        /// (``ExchangeRequest/partitionHoldsVariants``), which `Clear-Site-Data` removes too.
        public var clearedTags: [String] = []
        /// The No-Vary-Search marker of the stored response's path, stored with it
        /// (`SearchVariance`).
        public var varianceMarker: EntryHead?
        /// Stored parts of the variant a complete response replaces (RFC 9111 §3.4), removed
        /// once it is stored.
        public var supersededParts: [EntryID] = []
        /// The stored `GET` response a `200` to `HEAD` freshens or marks stale (§4.3.5).
        public var headFreshens: StoredCandidate?
        /// A `304` answering the client's own validators freshens these (§4.3.4).
        public var notModifiedFreshens: [StoredCandidate]
        /// A stored part that the response completes (§3.4): its bytes go first.
        public var storedPart: StoredCandidate?
        /// The body length the framing announces (`0` when there is none); `nil` when it ends
        /// with the connection or the last chunk.
        public var expectedLength: Int64?
        public var times: ExchangeTimes
    }

    /// How many lookups an exchange makes when the stored responses it chooses cannot be opened.
    public static let maximumLookups = 3

    private enum State {
        case idle
        case lookingUp
        /// The stored response `EntryID` chosen at the lookup is being served.
        case serving(EntryID)
        /// A stored response is served instead of the origin's response `head` (a freshened
        /// one after a `304`, a stale one after a `5xx`); the request went forward with `plan`.
        indirect case replacing(ResponseHead, ExchangeTimes, plan: ForwardPlan)
        /// A stored response is served because no response came from the origin; the request
        /// fails for these reasons if it cannot be.
        case fallingBack([Reason])
        indirect case joining(ForwardPlan)
        indirect case forwarding(ForwardPlan)
        indirect case freshening(ForwardPlan, ResponseHead, ExchangeTimes)
        indirect case completing(ForwardPlan)
        case done
    }

    /// A forwarded request: the engine's forwarding and what the exchange adds to it.
    private struct ForwardPlan {
        var forwarding: Forwarding
        /// Whether responses may be stored and stale ones served: not for methods the cache does
        /// not handle (RFC 9111 §2) nor for a bypass.
        var caching: Bool
        /// A stored incomplete response whose rest is asked for (RFC 9111 §3.3).
        var resuming: Int?

        /// The plan sent again without preconditions (after a `304` that selects nothing).
        var withoutValidators: ForwardPlan {
            var plan = self
            plan.forwarding.fields = [:]
            plan.forwarding.validated = []
            return plan
        }
    }

    /// The request.
    public let request: ExchangeRequest
    private let engine: CacheEngine
    private let name: String
    private let addsCacheStatus: Bool
    private let advisor: any StorageAdvisor
    private var state = State.idle
    /// The stored candidates last read.
    private var candidates: [StoredCandidate] = []
    private var lookups = 0
    /// Stored responses whose bodies could not be opened: left out of every later lookup.
    private var unreadable: Set<EntryID> = []
    /// What the leader this request waited for stored.
    private var collapsed: CollapsedResponse?
    private var mayJoin = true
    /// `false` once this request went on without the leader it waited for, whose client held it
    /// back: the leader stores the response, this one only relays it.
    private var mayStore = true
    /// The coalescing identity this request leads, which it must settle when done.
    public private(set) var leads: String?
    /// Which fetch of ``leads`` this request leads (the driver's coalescing registry numbers
    /// them), so that settling it never settles a later one.
    var flight: UInt64?
    /// What this request settles when done, if it leads.
    var leadership: Leadership? { leads.map { Leadership(identity: $0, flight: flight) } }
    /// The number the driver's trace gives this request (`0` when no trace is on); the machine
    /// only carries it.
    var traceID = 0

    /// An exchange for `request` in a cache named `name` (RFC 9211), deciding with `engine` and
    /// storing what `advisor` says.
    public init(
        _ request: ExchangeRequest, engine: CacheEngine, name: String, addsCacheStatus: Bool = true,
        advisor: (any StorageAdvisor)? = nil
    ) {
        self.init(
            request, engine: engine, name: name, addsCacheStatus: addsCacheStatus,
            storing: advisor ?? RFC9111Storage(engine: engine))
    }

    /// The same, with the advisor decided (the driver makes the default once, not per request).
    init(
        _ request: ExchangeRequest, engine: CacheEngine, name: String, addsCacheStatus: Bool,
        storing advisor: any StorageAdvisor
    ) {
        self.request = request
        self.engine = engine
        self.name = name
        self.addsCacheStatus = addsCacheStatus
        self.advisor = advisor
    }

    /// An exchange, with this one's engine, name and storage, that validates in the background
    /// what this one served stale-while-revalidate (RFC 5861 §3): it starts with
    /// ``Action/forward(_:)`` of `revalidation`.
    public func revalidation(_ revalidation: Forwarding, candidates: [StoredCandidate]) -> ExchangeStateMachine {
        var machine = ExchangeStateMachine(
            request, engine: engine, name: name, addsCacheStatus: addsCacheStatus, storing: advisor)
        machine.candidates = candidates
        machine.mayJoin = false
        machine.state = .forwarding(ForwardPlan(forwarding: revalidation, caching: true))
        return machine
    }

    /// The stored candidates of the last lookup (what the indices of its decision refer to).
    var storedCandidates: [StoredCandidate] { candidates }

    /// Whether the exchange is over.
    public var isDone: Bool {
        if case .done = state { return true }
        return false
    }

    /// The state's name, as the trace writes it.
    var stateName: String {
        switch state {
        case .idle: "idle"
        case .lookingUp: "lookingUp"
        case .serving: "serving"
        case .replacing: "replacing"
        case .fallingBack: "fallingBack"
        case .joining: "joining"
        case .forwarding: "forwarding"
        case .freshening: "freshening"
        case .completing: "completing"
        case .done: "done"
        }
    }

    // MARK: Events

    /// The request arrived.
    public mutating func start() -> Action {
        // A background revalidation was decided before it started: it goes straight to the origin.
        if case .forwarding(let plan) = state { return .forward(sending(plan)) }
        precondition(isIdle, "start() called twice")
        guard let primaryKey = request.primaryKey else {
            // The cache does not handle this request (a rule, the manifest): send it on, store nothing.
            let bypass = Forwarding(reason: .bypass, reasons: request.bypassReasons)
            return .forward(sending(ForwardPlan(forwarding: bypass, caching: false)))
        }
        // Otherwise, see what is stored under the request's key first (RFC 9111 §4).
        state = .lookingUp
        return .readCandidates(primaryKey: primaryKey)
    }

    /// The stored responses of the key, read at `now`.
    public mutating func candidatesRead(_ candidates: [StoredCandidate], now: Timestamp) -> Action {
        candidatesRead(candidates, facts: candidates.map(\.facts), now: now)
    }

    /// The same, with `facts` the facts of `candidates` in order (the driver remembers them
    /// with the candidates).
    mutating func candidatesRead(
        _ candidates: [StoredCandidate], facts: [StoredResponseFacts], now: Timestamp
    ) -> Action {
        guard case .lookingUp = state else { unexpected("candidatesRead") }
        lookups += 1
        return decide(candidates, facts: facts, now: now)
    }

    /// Whether a request forwarded for `reason` may wait for another's response instead: a
    /// miss or a stale response (a switch, not a set built on every miss).
    private static func isCollapsible(_ reason: CacheStatus.ForwardReason) -> Bool {
        switch reason {
        case .uriMiss, .varyMiss, .miss, .stale: true
        default: false
        }
    }

    /// The lookup (RFC 9111 §4) over `candidates`, without those found unreadable.
    private mutating func decide(
        _ candidates: [StoredCandidate], facts: [StoredResponseFacts], now: Timestamp
    ) -> Action {
        var candidates = candidates
        var facts = facts
        // A stored response whose body could not be opened is never chosen again.
        if !unreadable.isEmpty, candidates.contains(where: { unreadable.contains($0.entry.id) }) {
            let kept = candidates.indices.filter { !unreadable.contains(candidates[$0].entry.id) }
            candidates = kept.map { candidates[$0] }
            facts = kept.map { facts[$0] }
        }
        self.candidates = candidates
        let cacheRequest = CacheRequest(request.head, policy: request.policy)
        switch engine.lookup(cacheRequest, candidates: facts, now: now) {
        case .serve(let use):
            // A stored response may be used (fresh, or stale as the request or policy allows,
            // RFC 9111 §4.2.4): serve it without asking the origin.
            let candidate = candidates[use.candidate]
            // A hit No-Vary-Search made says so (RFC 9211 §2.8).
            var status = CacheStatus(
                cache: name, hit: true, ttl: Int(use.timeToLive.rounded(.down)),
                detail: SearchVariance.madeMatch(candidate, for: request) ? SearchVariance.detail : nil)
            var outcome: CacheOutcome = use.isStale ? .stale : .hit
            if let collapsed {
                // Answered from what the request it waited for stored (RFC 9211 §2.5).
                status = CacheStatus(
                    cache: name, forward: collapsed.reason, forwardStatus: collapsed.status, stored: true)
                status.collapsed = true
                outcome = collapsed.outcome
            }
            return serve(StoredAnswer(candidate: candidate, use: use, cacheStatus: status, outcome: outcome))
        case .serveStaleWhileRevalidate(let use, let revalidation):
            // Stale, but within stale-while-revalidate: serve it now and validate it in the
            // background (RFC 5861 §3).
            var status = CacheStatus(cache: name, hit: true, ttl: Int(use.timeToLive.rounded(.down)))
            status.detail = "stale-while-revalidate"
            if SearchVariance.madeMatch(candidates[use.candidate], for: request) { SearchVariance.note(&status) }
            return serve(
                StoredAnswer(
                    candidate: candidates[use.candidate], use: use, cacheStatus: status, outcome: .stale,
                    revalidation: revalidation))
        case .gatewayTimeout(let reasons):
            if reasons.contains(.incompleteStoredResponse),
                let part = servedPart(cacheRequest, facts, now: now)
            {
                // The request may not go to the origin (only-if-cached, RFC 9111 §5.2.1.7), and a
                // stored part that holds its range is a stored response for it (§3.4).
                return part
            }
            // Nothing usable is stored and the request may not go to the origin
            // (only-if-cached, RFC 9111 §5.2.1.7, or the policy): answer 504 ourselves.
            state = .done
            let status = CacheStatus(
                cache: name, hit: false,
                detail: request.policy == .returnCacheDataDontLoad ? "policy" : "only-if-cached")
            return .answer(
                .gatewayTimeout(
                    reasons, cacheStatus: status, addsCacheStatus: addsCacheStatus, replacesOriginResponse: false))
        case .forward(let forwarding):
            if forwarding.reason == .partial, let part = servedPart(cacheRequest, facts, now: now) {
                // A range wholly within a stored incomplete response (RFC 9111 §3.4).
                return part
            }
            // The origin must be asked. A method the cache does not handle stores nothing
            // (RFC 9111 §2); a stored incomplete response may ask only for its rest (§3.3).
            var plan = ForwardPlan(forwarding: forwarding, caching: forwarding.reason != .method)
            if forwarding.reason == .partial, request.resumesIncomplete { resume(&plan) }
            if mayJoin, collapsed == nil, plan.caching, plan.resuming == nil,
                isStoredMethod(request.head.method),
                !request.head.fields.contains(.range), Self.isCollapsible(forwarding.reason),
                let primaryKey = request.primaryKey
            {
                // A plain GET (or QUERY) miss others may be making too: one request goes to the
                // origin, the rest wait for what it stores.
                state = .joining(plan)
                return .join(identity: primaryKey)
            }
            // Anything else goes to the origin now, with the fields the lookup chose
            // (validators to revalidate, RFC 9111 §4.3.1).
            return .forward(sending(plan))
        }
    }

    /// Serves a range wholly within a stored incomplete response, when one holds it and may be
    /// used without asking the origin (RFC 9111 §3.4); `nil` otherwise, or for a request that
    /// waited for another's response.
    private mutating func servedPart(_ cacheRequest: CacheRequest, _ facts: [StoredResponseFacts], now: Timestamp)
        -> Action?
    {
        guard collapsed == nil,
            let use = engine.partialUse(
                cacheRequest, candidates: facts, held: candidates.map(StoredParts.held), now: now)
        else { return nil }
        let status = CacheStatus(cache: name, hit: true, ttl: Int(use.timeToLive.rounded(.down)))
        return serve(StoredAnswer(candidate: candidates[use.candidate], use: use, cacheStatus: status, outcome: .hit))
    }

    /// The body of the stored response chosen could not be opened: it was replaced or evicted
    /// since the lookup, found corrupted, or the store could not be read. The lookup is made
    /// again without it (a replacement may have been stored meanwhile); once
    /// ``maximumLookups`` were made, the request is decided on the candidates that remain, so
    /// it goes to the origin as a miss rather than failing, a conditional request too.
    public mutating func storedBodyUnavailable(now: Timestamp) -> Action {
        guard case .serving(let id) = state else { unexpected("storedBodyUnavailable") }
        unreadable.insert(id)
        state = .lookingUp
        // Look again: a replacement may have been stored since.
        if lookups < Self.maximumLookups, let primaryKey = request.primaryKey {
            return .readCandidates(primaryKey: primaryKey)
        }
        // The store keeps offering what cannot be read: decide on what remains, a miss at worst.
        return decide(candidates, facts: candidates.map(\.facts), now: now)
    }

    /// This request leads: it is sent, and the others wait for it.
    public mutating func joinedAsLeader() -> Action {
        guard case .joining(let plan) = state, let primaryKey = request.primaryKey else {
            unexpected("joinedAsLeader")
        }
        // No one else is fetching it: this request goes to the origin for all who join later.
        leads = primaryKey
        return .forward(sending(plan))
    }

    /// The request this one waited for is done: `collapsed` when its response is stored. The
    /// request is decided again on what is stored now (a leader's decision, made for other
    /// candidates, is never reused).
    public mutating func leaderSettled(_ collapsed: CollapsedResponse?) -> Action {
        guard case .joining = state, let primaryKey = request.primaryKey else { unexpected("leaderSettled") }
        // The leader is done: look up again, once, and serve what it stored if that answers
        // this request (RFC 9211 §2.6 `collapsed`); never join twice.
        self.collapsed = collapsed
        mayJoin = false
        lookups = 0
        state = .lookingUp
        return .readCandidates(primaryKey: primaryKey)
    }

    /// The leader this request waited for goes on at its own client's pace, which holds it back:
    /// this request looks up again, and when nothing stored answers it, goes to the origin by
    /// itself, storing nothing (the leader stores the response once it has it all).
    public mutating func leaderHeldBack() -> Action {
        mayStore = false
        return leaderSettled(nil)
    }

    /// The leader this request waited for, another cache sharing the store, vanished without
    /// ending its fetch, and this request leads in its place: it looks up again (the fetch may
    /// have been stored after all), then goes to the origin for the requests that wait for it.
    public mutating func leaderLost() -> Action {
        guard case .joining = state, let primaryKey = request.primaryKey else { unexpected("leaderLost") }
        // The leader vanished: lead in its place, after looking whether it stored something.
        leads = primaryKey
        mayJoin = false
        lookups = 0
        state = .lookingUp
        return .readCandidates(primaryKey: primaryKey)
    }

    /// No response came from the origin (refused, unreachable, timed out, cut before the head).
    public mutating func originFailed(now: Timestamp) -> FailureAction {
        guard case .forwarding(let plan) = state else { unexpected("originFailed") }
        guard let (index, stored) = fallbackCandidate(plan) else {
            // Nothing stored to fall back on: the request fails as the transport failed.
            state = .done
            return .fail(plan.forwarding.reasons)
        }
        let cacheRequest = CacheRequest(request.head, policy: request.policy)
        switch engine.fallback(
            after: .unreachable, request: cacheRequest, candidate: (index, stored.facts),
            savedForOffline: stored.entry.isPinned, now: now)
        {
        case .serve(let use):
            // Disconnected: a stale response may be served when the origin cannot be reached
            // (RFC 9111 §4.2.4, stale-if-error RFC 5861 §4, or one pinned for offline use).
            state = .fallingBack(plan.forwarding.reasons)
            return .serveStored(
                StoredAnswer(
                    candidate: stored, use: use,
                    cacheStatus: CacheStatus(
                        cache: name, servedStale: use, after: .unreachable, forward: plan.forwarding.reason),
                    outcome: .stale, revalidation: nil, replacesOriginResponse: true))
        case .gatewayTimeout(let reasons):
            // The stored response may not be served stale (must-revalidate, §4.2.4): a 504.
            state = .done
            var status = CacheStatus(cache: name, forward: plan.forwarding.reason)
            status.detail = "stale-not-allowed"
            return .answer(
                .gatewayTimeout(
                    [.originUnreachable] + reasons, cacheStatus: status, addsCacheStatus: addsCacheStatus,
                    replacesOriginResponse: true))
        case .passThrough(let reasons):
            // The policy promised a load from the origin: its failure is the answer.
            state = .done
            return .fail(reasons)
        }
    }

    /// The origin's response head arrived.
    public mutating func originResponded(
        _ head: ResponseHead, requestTime: Timestamp, responseTime: Timestamp, now: Timestamp
    ) -> ResponseAction {
        guard case .forwarding(let plan) = state else { unexpected("originResponded") }
        let times = ExchangeTimes(requestTime: requestTime, responseTime: responseTime)
        var head = head
        // A recipient with a clock adds Date when forwarding or storing a response without one
        // (RFC 9110 §6.6.1).
        if !head.fields.contains(.date) { head.fields.append(name: .date, value: HTTPDate.format(responseTime)) }
        let status = head.status
        // A server error with a stored response behind it: it may be served stale instead
        // (stale-if-error, RFC 5861 §4).
        if (500..<600).contains(status), let (index, stored) = fallbackCandidate(plan) {
            let cacheRequest = CacheRequest(request.head, policy: request.policy)
            let failure = OriginFailure.serverError(status: status)
            switch engine.fallback(after: failure, request: cacheRequest, candidate: (index, stored.facts), now: now) {
            case .serve(let use):
                // Stale-if-error allows it: the stored response stands in for the 5xx.
                state = .replacing(head, times, plan: plan)
                return .serveStored(
                    StoredAnswer(
                        candidate: stored, use: use,
                        cacheStatus: CacheStatus(
                            cache: name, servedStale: use, after: failure, forward: plan.forwarding.reason),
                        outcome: .stale, revalidation: nil, replacesOriginResponse: true))
            case .gatewayTimeout, .passThrough:
                break  // The 5xx is passed on.
            }
        }
        // Our validators went forward and the origin says nothing changed: freshen what is
        // stored with the 304's fields, then serve it (RFC 9111 §4.3.4).
        if status == 304, plan.caching, !plan.forwarding.validated.isEmpty {
            state = .freshening(plan, head, times)
            return .applyNotModified(
                NotModified(
                    fields: head.fields, candidates: candidates, validated: plan.forwarding.validated, times: times))
        }
        // We asked for the rest of a stored part (RFC 9111 §3.3).
        if let index = plan.resuming {
            let part = candidates[index]
            if engine.continues(stored: part.facts, storedLength: part.entry.bodySize, response: head) {
                // The rest of the stored part (RFC 9111 §3.4): combined, with the stored fields
                // updated by the new ones (§3.2).
                var combined = head
                combined.status = 200
                combined.fields = engine.updatedFields(
                    stored: part.entry.head.fields, with: head.fields, responseTime: responseTime)
                // A stored 206's Content-Digest covered its part only, not the whole now sent
                // (RFC 9530 §2); a cut 200's covered the whole content, and stays.
                if part.entry.head.status != 200 { combined.fields.removeAll(named: .contentDigest) }
                state = .completing(plan)
                var relay = relayPlan(plan, combined, times)
                relay.originStatus = status
                relay.cacheStatus.forwardStatus = status
                relay.storedPart = part
                relay.expectedLength = combined.fields[.contentLength].flatMap { Int64($0) }
                return .relay(relay)
            }
            if status != 200 {
                // Not the rest of the stored part: drop the part and ask for the whole.
                var retry = plan
                retry.resuming = nil
                retry.forwarding.fields.removeAll(namedAnyOf: [.range, .ifRange])
                return .forward(sending(retry, discarding: [part.entry.id]))
            }
            // A 200: the representation changed (If-Range did not hold); it replaces the part.
        }
        // Anything else is the origin's answer: relay it, storing it when RFC 9111 §3 allows.
        return relay(plan, head, times)
    }

    /// The `304` was applied: `updated` are the candidates as freshened, `nil` when it selects
    /// none of them (RFC 9111 §4.3.4).
    public mutating func notModifiedApplied(_ updated: [StoredCandidate]?, now: Timestamp) -> ResponseAction {
        guard case .freshening(let plan, let head, let times) = state else { unexpected("notModifiedApplied") }
        // The 304 freshened stored responses: serve the one that now answers the request.
        if let updated {
            candidates = updated
            // Served from the freshened responses; the client's own validators still apply.
            let lookup = CacheRequest(request.head, policy: .returnCacheDataElseLoad)
            if case .serve(var use) = engine.lookup(lookup, candidates: updated.map(\.facts), now: now) {
                use.reasons = plan.forwarding.reasons
                var status = CacheStatus(cache: name, forward: plan.forwarding.reason, forwardStatus: 304, stored: true)
                status.ttl = Int(use.timeToLive.rounded(.down))
                state = .replacing(head, times, plan: plan)
                return .serveStored(
                    StoredAnswer(
                        candidate: updated[use.candidate], use: use, cacheStatus: status, outcome: .revalidated,
                        revalidation: nil, replacesOriginResponse: true))
            }
        }
        // It matches nothing stored: ask again without validators.
        return .forward(sending(plan.withoutValidators))
    }

    /// The stored response chosen instead of the origin's could not be opened. A `304` is
    /// asked again without validators (RFC 9111 §4.3.4: it freshened what is now gone); a `5xx`
    /// is passed on as it came.
    public mutating func replacementUnavailable() -> ResponseAction {
        guard case .replacing(let head, let times, let plan) = state else { unexpected("replacementUnavailable") }
        // The 304 freshened what is now gone: only a full response can answer.
        if head.status == 304 { return .forward(sending(plan.withoutValidators)) }
        // The stale stand-in for a 5xx is gone: the 5xx itself is the answer.
        return relay(plan, head, times)
    }

    /// The stored response chosen because the origin gave no response could not be opened:
    /// the request fails as it would have with nothing stored.
    public mutating func fallbackUnavailable() -> FailureAction {
        guard case .fallingBack(let reasons) = state else { unexpected("fallbackUnavailable") }
        // Nothing else may stand in for the origin: the request fails.
        state = .done
        return .fail(reasons)
    }

    /// The stored part to complete could not be opened: it is dropped and the whole asked for.
    public mutating func storedPartUnavailable() -> ResponseAction {
        guard case .completing(var plan) = state, let index = plan.resuming else {
            unexpected("storedPartUnavailable")
        }
        // The part is gone or damaged: forget it and ask for the whole response.
        plan.resuming = nil
        plan.forwarding.fields.removeAll(namedAnyOf: [.range, .ifRange])
        return .forward(sending(plan, discarding: [candidates[index].entry.id]))
    }

    /// The host gave the exchange up; it leads nothing any more.
    mutating func abandon() {
        leads = nil
        state = .done
    }

    // MARK: Transitions

    private var isIdle: Bool {
        if case .idle = state { return true }
        return false
    }

    private mutating func serve(_ answer: StoredAnswer) -> Action {
        state = .serving(answer.candidate.entry.id)
        return .serveStored(answer)
    }

    /// The request `plan` sends; the exchange waits for the origin.
    private mutating func sending(_ plan: ForwardPlan, discarding: [EntryID] = []) -> ForwardedRequest {
        state = .forwarding(plan)
        return ForwardedRequest(
            fields: plan.forwarding.fields, reason: plan.forwarding.reason, isValidation: plan.forwarding.isValidation,
            discard: discarding)
    }

    /// The stored response the engine may fall back on when the origin fails (RFC 9111
    /// §4.2.4): none for a request the cache does not handle. (The engine refuses it under the
    /// policies that promise a load from the origin.)
    private func fallbackCandidate(_ plan: ForwardPlan) -> (Int, StoredCandidate)? {
        guard plan.caching, let index = plan.forwarding.candidate, candidates.indices.contains(index) else {
            return nil
        }
        return (index, candidates[index])
    }

    private mutating func relay(_ plan: ForwardPlan, _ head: ResponseHead, _ times: ExchangeTimes) -> ResponseAction {
        state = .done
        return .relay(relayPlan(plan, head, times))
    }

    private func relayPlan(_ plan: ForwardPlan, _ head: ResponseHead, _ times: ExchangeTimes) -> RelayPlan {
        let requestTime = times.requestTime
        let responseTime = times.responseTime
        let status = head.status
        var relay = RelayPlan(
            status: status, originStatus: status, fields: head.fields, outcome: plan.caching ? .miss : .bypass,
            cacheStatus: CacheStatus(
                cache: name, forward: plan.forwarding.reason, forwardStatus: status, stored: plan.caching ? false : nil),
            reasons: plan.forwarding.reasons, storage: nil, invalidated: [], headFreshens: nil,
            notModifiedFreshens: [], storedPart: nil, expectedLength: Self.expectedLength(request.head.method, head),
            times: times)
        if !plan.caching { relay.cacheStatus.detail = request.bypassDetail }
        // An unsafe method that succeeded makes what is stored for its URIs stale (RFC 9111
        // §4.4), and the cache groups it names (RFC 9875 §3).
        if request.invalidates {
            relay.invalidated = engine.invalidatedURIs(request: request.head, response: head).compactMap {
                CacheKey(method: "GET", uri: $0).map { CachePartition.key($0.primaryKey, in: request.partition) }
            }
            relay.invalidatedTags = engine.invalidatedGroupTags(request: request.head, response: head).map {
                CachePartition.key($0, in: request.partition)
            }
        }
        // `Clear-Site-Data: "cache"` removes what the request's partition holds of the origin
        // (W3C Clear Site Data §4.2), before the response itself is stored.
        if let origin = ClearSiteData.clearedOrigin(uri: request.head.uri, fields: head.fields) {
            relay.clearedKeyPrefixes = CachePartition.keyPrefixes(of: origin, in: request.partition)
            relay.clearedTags = [PartitionedKeys.originAliasTag(origin, in: request.partition)]
        }
        if request.head.method == "HEAD", status == 200, let index = plan.forwarding.candidate,
            candidates.indices.contains(index)
        {
            // A 200 to HEAD updates the stored GET response it selects (RFC 9111 §4.3.5).
            relay.headFreshens = candidates[index]
        }
        if plan.caching, status == 304 {
            // The client's own validators went forward: the 304 is its answer, and it still
            // freshens the stored responses it selects (RFC 9111 §4.3.4).
            relay.notModifiedFreshens = candidates
        }
        // A GET (or QUERY, RFC 10008 §2.7) response is stored as far as the advisor and RFC
        // 9111 §3 allow.
        if plan.caching, mayStore, isStoredMethod(request.head.method) {
            let storage = prepared(
                advisor.plan(for: request, response: head, requestTime: requestTime, responseTime: responseTime),
                &relay)
            relay.storage = storage
            relay.reasons += storage.reasons
        } else if request.head.method == "POST", let targetKey = request.targetKey {
            // Stored, after the invalidation above, as the target URI's response when
            // RFC 9110 §9.3.3 allows it.
            var asTarget = request
            asTarget.primaryKey = targetKey
            let storage = prepared(
                advisor.plan(for: asTarget, response: head, requestTime: requestTime, responseTime: responseTime),
                &relay)
            if storage.head != nil {
                relay.storage = storage
                relay.cacheStatus.stored = false
                relay.reasons += storage.reasons
            }
        }
        return relay
    }

    /// `storage` with its entry tagged by the cache groups its stored fields list, in the
    /// URL's origin (RFC 9875 §2.1); a part under its own variant key (`StoredParts`), a
    /// complete response with the parts it supersedes in `relay`; and placed under its
    /// simplified URI's key when it has a No-Vary-Search config (with the path's marker in
    /// `relay`).
    private func prepared(_ storage: StoragePlan, _ relay: inout RelayPlan) -> StoragePlan {
        guard var head = storage.head else { return storage }
        var storage = storage
        // A variant kept apart is tagged as the responses it is a variant of: outside its partition.
        let taggedKey = request.partitionHoldsVariants ? CachePartition.split(head.primaryKey).key : head.primaryKey
        head.tags = PartitionedKeys.groupTags(uri: head.url, fields: head.fields, primaryKey: taggedKey)
        if request.partitionHoldsVariants, let origin = CacheGroups.origin(of: head.url) {
            head.tags.append(PartitionedKeys.originAliasTag(origin, in: nil))
        }
        if request.head.method == "QUERY" || request.partitionHoldsVariants,
            let key = CacheKey(method: "GET", uri: head.url)
        {
            // Found again by what invalidates or purges the URI where it is not partitioned
            // apart: in the request's partition, or, for variants, outside any.
            let partition = request.partitionHoldsVariants ? nil : request.partition
            head.tags.append(PartitionedKeys.aliasTag(getKey: CachePartition.key(key.primaryKey, in: partition)))
        }
        head = StoredParts.placed(head)
        if head.isComplete, head.primaryKey == request.primaryKey {
            relay.supersededParts = StoredParts.superseded(by: head.variantKey, in: candidates)
        }
        (head, relay.varianceMarker) = SearchVariance.placed(head, request: request)
        storage.head = head
        return storage
    }

    /// The body length a response's framing announces: none for `HEAD`, `1xx`, `204` and
    /// `304` (RFC 9112 §6.3); its `Content-Length` otherwise; `nil` when it has none.
    static func expectedLength(_ method: String, _ head: ResponseHead) -> Int64? {
        if method == "HEAD" || head.status == 204 || head.status == 304 || head.status < 200 { return 0 }
        guard let text = head.fields[.contentLength], let length = Int64(text), length >= 0 else { return nil }
        return length
    }

    /// Asks for the rest of the incomplete stored response that matches (RFC 9111 §3.3) with
    /// `Range` and `If-Range`, unless the request has its own `Range` or validators.
    private func resume(_ plan: inout ForwardPlan) {
        let fields = request.head.fields
        guard request.head.method == "GET", !fields.contains(.range), !fields.contains(.ifRange),
            !CacheRequest(request.head).isConditional,
            // Only a first part continues with `Range: bytes=N-`; later parts are not offered.
            let index = engine.resumableVariant(
                fields, candidates: candidates.map { StoredParts.offset($0.entry.head.fields) == 0 ? $0.facts : nil }),
            let resumption = engine.resumptionFields(
                stored: candidates[index].facts, storedLength: candidates[index].entry.bodySize)
        else { return }
        plan.resuming = index
        for field in resumption { plan.forwarding.fields[field.name] = field.value }
    }

    private func unexpected(_ event: String) -> Never {
        preconditionFailure("ExchangeStateMachine: \(event) in state \(state)")
    }
}

extension ExchangeStateMachine.StoredAnswer {
    init(
        candidate: StoredCandidate, use: CachedUse, cacheStatus: CacheStatus, outcome: CacheOutcome,
        revalidation: Forwarding? = nil
    ) {
        self.init(
            candidate: candidate, use: use, cacheStatus: cacheStatus, outcome: outcome, revalidation: revalidation,
            replacesOriginResponse: false)
    }
}
