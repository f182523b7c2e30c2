import CacheSemantics
import CacheStorage

/// A request as the exchange handles it: what the host worked out of what its client sent.
public struct ExchangeRequest: Sendable {
    /// The request as the engine sees it: method, absolute URI and fields. (A `POST` that
    /// the host keys by its body, as a query, is a `GET` here.)
    public var head: RequestHead
    /// The request cache policy (the six `URLRequest.CachePolicy` values).
    public var policy: CachePolicy
    /// The key its responses are stored under (RFC 9111 §2); `nil` when the cache is
    /// bypassed: the request goes to the origin and nothing is stored.
    public var primaryKey: String?
    /// Why the cache is bypassed, when ``primaryKey`` is `nil`.
    public var bypassReasons: [Reason]
    /// The `detail` of the response's `Cache-Status` when the cache is bypassed (RFC 9211 §2.8),
    /// e.g. `query-content-too-large`; `nil`: none.
    public var bypassDetail: String?
    /// Whether a response to an unsafe method removes the stored responses it invalidates
    /// (RFC 9111 §4.4); `false` for a `POST` used as a query.
    public var invalidates: Bool
    /// Whether, when only an incomplete stored response matches (RFC 9111 §3.3), the rest of
    /// it is asked for with `Range` and `If-Range` instead of the whole.
    public var resumesIncomplete: Bool
    /// For a `POST`: the key a `GET` of the same target URI is stored under. A response to
    /// the `POST` with explicit freshness and a `Content-Location` equal to that URI is
    /// stored there for later `GET` and `HEAD` requests (RFC 9110 §9.3.3); `nil`: never.
    public var targetKey: String?
    /// The cache partition the request is answered in (`CachePartition`); `nil`: none. The
    /// host puts it in ``primaryKey`` and ``targetKey``; the exchange in the keys it derives from
    /// URIs (those a response invalidates, its cache groups, its No-Vary-Search keys) and in
    /// what a `Clear-Site-Data` response removes, so that nothing done in one partition reaches
    /// another.
    public var partition: String?
    /// Whether ``partition`` holds variants of the unpartitioned cache's responses rather than
    /// responses of its own (the proxy keeps each dictionary's `dcz` deltas in a partition, RFC
    /// 9842): the responses stored there are then removed when their URI is invalidated (RFC 9111
    /// §4.4) or purged without a partition, as the responses they are variants of are.
    public var partitionHoldsVariants = false

    /// A request.
    public init(
        head: RequestHead, policy: CachePolicy = .useProtocolCachePolicy, primaryKey: String?,
        bypassReasons: [Reason] = [], invalidates: Bool = true, resumesIncomplete: Bool = false
    ) {
        self.head = head
        self.policy = policy
        self.primaryKey = primaryKey
        self.bypassReasons = bypassReasons
        self.invalidates = invalidates
        self.resumesIncomplete = resumesIncomplete
    }
}

/// What to store of a response from the origin, as the host decides it: by default what
/// RFC 9111 §3 allows (``RFC9111Storage``); an app's cache may apply its rules and hooks.
public struct StoragePlan: Sendable {
    /// The head to store the response under; `nil`: do not store it.
    public var head: EntryHead?
    /// Why (the refusals when it is not stored, notes when it is).
    public var reasons: [Reason]
    /// Pin every variant of the key once the response is stored.
    public var pin: Bool
    /// When set, a body the network cuts off is kept as an incomplete response with these
    /// facts (RFC 9111 §3.3), to be completed later.
    public var incompleteFacts: [UInt8]?

    /// A plan.
    public init(head: EntryHead?, reasons: [Reason], pin: Bool = false, incompleteFacts: [UInt8]? = nil) {
        self.head = head
        self.reasons = reasons
        self.pin = pin
        self.incompleteFacts = incompleteFacts
    }
}

/// Decides what to store of a response from the origin.
public protocol StorageAdvisor: Sendable {
    /// What to store of `response`, the answer to `request`.
    func plan(
        for request: ExchangeRequest, response: ResponseHead, requestTime: Timestamp, responseTime: Timestamp
    ) -> StoragePlan
}

/// Stores what RFC 9111 §3 allows, as the engine decides.
public struct RFC9111Storage: StorageAdvisor {
    let engine: CacheEngine

    /// Storage by `engine`'s rules.
    public init(engine: CacheEngine) { self.engine = engine }

    public func plan(
        for request: ExchangeRequest, response: ResponseHead, requestTime: Timestamp, responseTime: Timestamp
    ) -> StoragePlan {
        guard let primaryKey = request.primaryKey else { return StoragePlan(head: nil, reasons: []) }
        switch engine.storageDecision(
            for: request.head, response: response, requestTime: requestTime, responseTime: responseTime)
        {
        case .doNotStore(let refusals):
            return StoragePlan(head: nil, reasons: refusals)
        case .store(let storable):
            let head = EntryHead(
                primaryKey: primaryKey, variantKey: storable.facts.variantKey, url: request.head.uri,
                status: storable.facts.status, fields: storable.fields, facts: storable.facts.serialized(),
                isComplete: !storable.facts.flags.has(.incomplete))
            return StoragePlan(head: head, reasons: storable.notes)
        }
    }
}
