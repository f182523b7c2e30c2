/// A request prepared for lookups: its head, cache policy and parsed directives.
public struct CacheRequest: Hashable, Sendable {
    /// The request.
    public var head: RequestHead
    /// The cache policy the caller asked for.
    public var policy: CachePolicy
    /// The request's cache directives (with `Pragma: no-cache` folded in, RFC 9111 §5.4).
    public var cacheControl: RequestCacheControl
    /// The client's own `If-None-Match`, if any (RFC 9110 §13.1.2).
    public var ifNoneMatch: EntityTagList?
    /// The client's own `If-Modified-Since`, if valid (RFC 9110 §13.1.3).
    public var ifModifiedSince: Timestamp?

    /// Parses what a lookup needs from `head`.
    public init(_ head: RequestHead, policy: CachePolicy = .useProtocolCachePolicy) {
        self.head = head
        self.policy = policy
        cacheControl = RequestCacheControl(fields: head.fields)
        ifNoneMatch = EntityTagList(fields: head.fields, name: .ifNoneMatch)
        // If-Modified-Since is ignored with If-None-Match, and for methods other than GET
        // and HEAD (RFC 9110 §13.1.3) and QUERY, whose conditional form RFC 10008 §2.6 defines.
        if ifNoneMatch == nil, isStoredMethod(head.method) || head.method == "HEAD",
            let text = head.fields[.ifModifiedSince]
        {
            ifModifiedSince = HTTPDate.parse(text)
        }
    }

    /// Whether the client sent its own validators.
    public var isConditional: Bool { ifNoneMatch != nil || ifModifiedSince != nil }
}

/// Serving a stored response.
public struct CachedUse: Hashable, Sendable {
    /// The index of the stored response in the candidates.
    public var candidate: Int
    /// `current_age` in seconds (RFC 9111 §4.2.3); send it as `Age` (§4).
    public var currentAge: Double
    /// The response's freshness lifetime in seconds.
    public var freshnessLifetime: Double
    /// When `true`, the client's own validators match: answer `304` from the stored
    /// response (RFC 9111 §4.3.2).
    public var notModified: Bool
    /// Why.
    public var reasons: [Reason] {
        get {
            let staleness = currentAge - freshnessLifetime
            switch basis {
            case .fresh: return [.fresh(age: currentAge, lifetime: freshnessLifetime)]
            case .freshImmutable: return [.fresh(age: currentAge, lifetime: freshnessLifetime), .immutable]
            case .maxStale: return [.maxStaleAllows(by: staleness)]
            case .staleWhileRevalidate(let allowance):
                return [.staleWhileRevalidate(by: staleness, allowance: allowance)]
            case .staleIfError(let allowance): return [.staleIfError(by: max(0, staleness), allowance: allowance)]
            case .disconnected: return [.disconnected(by: max(0, staleness))]
            case .savedForOffline: return [.savedForOffline(stale: staleness > 0)]
            case .policy(let policy): return [.policyServesAnyStoredResponse(policy)]
            case .given(let reasons): return reasons
            }
        }
        set { basis = .given(newValue) }
    }

    /// What allowed serving; ``reasons`` is derived from it with the age and lifetime, so
    /// a hit carries no array until someone asks why.
    enum Basis: Hashable, Sendable {
        case fresh, freshImmutable, maxStale, disconnected, savedForOffline
        case staleWhileRevalidate(allowance: Int)
        case staleIfError(allowance: Int)
        case policy(CachePolicy)
        case given([Reason])
    }

    private var basis: Basis

    init(candidate: Int, currentAge: Double, freshnessLifetime: Double, notModified: Bool, reasons: [Reason]) {
        self.init(
            candidate: candidate, currentAge: currentAge, freshnessLifetime: freshnessLifetime,
            notModified: notModified, basis: .given(reasons))
    }

    init(candidate: Int, currentAge: Double, freshnessLifetime: Double, notModified: Bool, basis: Basis) {
        self.candidate = candidate
        self.currentAge = currentAge
        self.freshnessLifetime = freshnessLifetime
        self.notModified = notModified
        self.basis = basis
    }

    public static func == (lhs: CachedUse, rhs: CachedUse) -> Bool {
        lhs.candidate == rhs.candidate && lhs.currentAge == rhs.currentAge
            && lhs.freshnessLifetime == rhs.freshnessLifetime && lhs.notModified == rhs.notModified
            && lhs.reasons == rhs.reasons
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(candidate)
        hasher.combine(currentAge)
        hasher.combine(freshnessLifetime)
        hasher.combine(notModified)
        hasher.combine(reasons)
    }

    /// Whether the response is stale (RFC 9111 §4.2).
    public var isStale: Bool { freshnessLifetime <= currentAge }
    /// Remaining freshness in seconds, negative when stale (RFC 9211 `ttl`).
    public var timeToLive: Double { freshnessLifetime - currentAge }
    /// The `Age` field value: whole seconds, capped at 2^31 (RFC 9111 §1.2.2, §5.1).
    public var ageFieldValue: String { String(Int(min(max(0, currentAge), Double(deltaSecondsLimit)))) }
}

/// Sending the request on to the origin.
public struct Forwarding: Hashable, Sendable {
    /// Why it goes forward, for `Cache-Status` (RFC 9211 §2.2).
    public var reason: CacheStatus.ForwardReason
    /// The selected stored response: the one being validated, or the one to fall back on
    /// when the origin cannot be reached (see ``CacheEngine/fallback(after:request:candidate:savedForOffline:now:)``).
    public var candidate: Int?
    /// The stored responses whose validators ``fields`` carry; a `304` may update them.
    public var validated: [Int]
    /// Fields to set on the forwarded request (preconditions, or the no-cache fields of
    /// ``CachePolicy/reloadIgnoringLocalAndRemoteCacheData``); they replace fields of the
    /// same name.
    public var fields: HeaderFields
    /// Why.
    public var reasons: [Reason]

    /// Whether the forwarded request is a validation request (RFC 9111 §4.3.1).
    public var isValidation: Bool { !validated.isEmpty }

    /// A forwarding a cache decides itself: a request it does not handle
    /// (``CacheStatus/ForwardReason/bypass``), or one sent again without preconditions.
    public init(
        reason: CacheStatus.ForwardReason, candidate: Int? = nil, validated: [Int] = [], fields: HeaderFields = [:],
        reasons: [Reason]
    ) {
        self.reason = reason
        self.candidate = candidate
        self.validated = validated
        self.fields = fields
        self.reasons = reasons
    }
}

/// What to do with a request (RFC 9111 §4).
public enum LookupDecision: Hashable, Sendable {
    /// Serve the stored response without contacting the origin.
    case serve(CachedUse)
    /// Serve the stale stored response now and validate it in the background
    /// (RFC 5861 §3) with the given forwarding.
    case serveStaleWhileRevalidate(CachedUse, revalidation: Forwarding)
    /// Send the request on, conditional when ``Forwarding/isValidation``.
    case forward(Forwarding)
    /// Answer `504 (Gateway Timeout)` without contacting the origin (RFC 9111 §5.2.1.7).
    case gatewayTimeout([Reason])

    /// The reasons behind the decision.
    public var reasons: [Reason] {
        switch self {
        case .serve(let use), .serveStaleWhileRevalidate(let use, _): return use.reasons
        case .forward(let forwarding): return forwarding.reasons
        case .gatewayTimeout(let reasons): return reasons
        }
    }
}

/// What failed when a request went forward.
public enum OriginFailure: Hashable, Sendable {
    /// No response: connection refused, DNS failure, timeout, no network.
    case unreachable
    /// The origin answered with this 5xx status.
    case serverError(status: Int)
}

/// What to do when a forwarded request failed (RFC 9111 §4.2.4, §4.3.3; RFC 5861 §4).
public enum FallbackDecision: Hashable, Sendable {
    /// Serve the stored response.
    case serve(CachedUse)
    /// Answer `504 (Gateway Timeout)`: the stored response may not be served stale
    /// (RFC 9111 §5.2.2.2).
    case gatewayTimeout([Reason])
    /// Pass the failure (the transport's error, or the 5xx response) on.
    case passThrough([Reason])
}

extension CacheEngine {
    /// Decides how to answer `request` given the stored responses for its cache key
    /// (RFC 9111 §4, §4.1, §4.2, §4.3.1; RFC 5861; RFC 8246; the six cache policies).
    ///
    /// - Parameters:
    ///   - request: The prepared request.
    ///   - candidates: The facts of every stored response under the request's
    ///     ``CacheKey``, in any order.
    ///   - now: The current time.
    public func lookup(_ request: CacheRequest, candidates: [StoredResponseFacts], now: Timestamp) -> LookupDecision {
        let method = request.head.method
        guard isStoredMethod(method) || method == "HEAD" else {
            return .forward(Forwarding(reason: .method, reasons: [.uncacheableMethod(method)]))
        }
        let directives = request.cacheControl
        let policy = request.policy
        guard let index = selectVariant(request.head.fields, candidates: candidates) else {
            let missReason: CacheStatus.ForwardReason
            let reasons: [Reason]
            if candidates.isEmpty {
                (missReason, reasons) = (.uriMiss, [.noStoredResponse])
            } else if candidates.contains(where: {
                $0.flags.has(.incomplete) && $0.varyMatches(request.head.fields)
            }) {
                // Only an incomplete response matches (§3.3): RFC 9211 §2.2 calls this `partial`.
                (missReason, reasons) = (.partial, [.incompleteStoredResponse])
            } else {
                (missReason, reasons) = (.varyMiss, [.noVariantMatches])
            }
            if policy == .returnCacheDataDontLoad { return .gatewayTimeout(reasons + [.policy(policy)]) }
            if directives.onlyIfCached { return .gatewayTimeout(reasons + [.onlyIfCached]) }
            return .forward(Forwarding(reason: missReason, fields: policyFields(policy), reasons: reasons))
        }
        return candidates.withUnsafeBufferPointer { stored in
            decide(request, index, stored.baseAddress! + index, candidates, now: now)
        }
    }

    /// The decision once stored response `index` (`facts`) is selected.
    @inline(__always)
    func decide(
        _ request: CacheRequest, _ index: Int, _ stored: UnsafePointer<StoredResponseFacts>,
        _ candidates: [StoredResponseFacts], now: Timestamp
    ) -> LookupDecision {
        let policy = request.policy
        let age = stored.pointee.currentAge(at: now)
        let lifetime = stored.pointee.freshnessLifetime

        switch policy {
        case .reloadIgnoringLocalCacheData, .reloadIgnoringLocalAndRemoteCacheData:
            return .forward(
                Forwarding(reason: .request, candidate: index, fields: policyFields(policy), reasons: [.policy(policy)])
            )
        case .returnCacheDataElseLoad, .returnCacheDataDontLoad:
            return .serve(use(index, stored, age: age, request, basis: .policy(policy)))
        case .reloadRevalidatingCacheData:
            return revalidate(request, index, candidates, reason: .request, reasons: [.policy(policy)])
        case .useProtocolCachePolicy:
            break
        }

        let fresh = lifetime > age
        let shared = configuration.isShared
        // RFC 8246 §2: a fresh immutable response is not revalidated on reload (request
        // max-age, or no-cache in a private cache). A shared cache still validates it when the
        // client signals that validation is necessary, as request no-cache does (§2.1).
        let immutableFresh = fresh && stored.pointee.flags.has(.immutable)
        if stored.pointee.flags.has(.noCache) {
            return revalidate(request, index, candidates, reason: .stale, reasons: [.responseNoCache])
        }
        if stored.pointee.flags.has(.invalidated) {
            return revalidate(request, index, candidates, reason: .stale, reasons: [.invalidated])
        }
        if request.cacheControl.noCache && !(immutableFresh && !shared) {
            return revalidate(
                request, index, candidates, reason: fresh ? .request : .stale, reasons: [.requestNoCache])
        }
        if let maxAge = request.cacheControl.maxAge, age > Double(maxAge), !immutableFresh {
            return revalidate(
                request, index, candidates, reason: fresh ? .request : .stale,
                reasons: [.requestMaxAge(age: age, maxAge: maxAge)])
        }
        if let minFresh = request.cacheControl.minFresh, lifetime - age < Double(minFresh) {
            return revalidate(
                request, index, candidates, reason: fresh ? .request : .stale,
                reasons: [.requestMinFresh(remaining: lifetime - age, minFresh: minFresh)])
        }
        if fresh {
            let reloadIgnored = immutableFresh && (request.cacheControl.noCache || request.cacheControl.maxAge != nil)
            return .serve(use(index, stored, age: age, request, basis: reloadIgnored ? .freshImmutable : .fresh))
        }

        // Stale (§4.2.4).
        let staleness = age - lifetime
        if let prohibition = staleProhibition(stored.pointee) {
            return revalidate(
                request, index, candidates, reason: .stale, reasons: [.stale(by: staleness), prohibition])
        }
        switch request.cacheControl.maxStale {
        case .any?:
            return .serve(use(index, stored, age: age, request, basis: .maxStale))
        case .seconds(let allowed)? where staleness <= Double(allowed):
            return .serve(use(index, stored, age: age, request, basis: .maxStale))
        default:
            break
        }
        if let allowance = stored.pointee.staleWhileRevalidate, staleness <= Double(allowance) {
            let reasons: [Reason] = [.staleWhileRevalidate(by: staleness, allowance: allowance)]
            let served = use(index, stored, age: age, request, basis: .staleWhileRevalidate(allowance: allowance))
            let background = validation(request, index, candidates, reason: .stale, reasons: reasons)
            return .serveStaleWhileRevalidate(served, revalidation: background)
        }
        return revalidate(request, index, candidates, reason: .stale, reasons: [.stale(by: staleness)])
    }

    /// After a forwarded request failed, whether the selected stored response may be served
    /// instead (RFC 9111 §4.2.4, §4.3.3; RFC 5861 §4).
    ///
    /// Under ``CachePolicy/reloadIgnoringLocalCacheData`` and
    /// ``CachePolicy/reloadIgnoringLocalAndRemoteCacheData`` nothing stored is served: those
    /// policies promise a load from the origin (Apple: "the URL load should be loaded only from
    /// the originating source"), so the failure is passed on.
    ///
    /// A response that has no-cache or was invalidated (§4.4), or a stale one with
    /// must-revalidate (or, in a shared cache, proxy-revalidate or s-maxage), is not served:
    /// an unreachable origin then gives 504 — unless it was saved for offline use
    /// (`savedForOffline`: a pinned entry, such as a manifest's `CACHE` URL or a saved page's
    /// resource), which an unreachable origin never keeps from the user who saved it, whatever
    /// its freshness and directives (the app's explicit choice, as with
    /// ``CachePolicy/returnCacheDataElseLoad``). Within `stale-if-error` (of the response or the request) it is served after an
    /// unreachable origin or a 500, 502, 503 or 504. Otherwise an unreachable origin means
    /// the cache is disconnected, and the stale response is served (§4.2.4); other 5xx
    /// responses are passed on.
    public func fallback(
        after failure: OriginFailure, request: CacheRequest, candidate: (index: Int, facts: StoredResponseFacts),
        savedForOffline: Bool = false, now: Timestamp
    ) -> FallbackDecision {
        if request.policy == .reloadIgnoringLocalCacheData || request.policy == .reloadIgnoringLocalAndRemoteCacheData {
            return .passThrough([.policy(request.policy)])
        }
        let facts = candidate.facts
        let age = facts.currentAge(at: now)
        let staleness = age - facts.freshnessLifetime
        if failure == .unreachable, savedForOffline {
            return .serve(
                withUnsafePointer(to: facts) { use(candidate.index, $0, age: age, request, basis: .savedForOffline) })
        }
        if facts.flags.has(.noCache) {
            return failure == .unreachable ? .gatewayTimeout([.responseNoCache]) : .passThrough([.responseNoCache])
        }
        // An invalidated response needs "a mandatory validation" before it is sent (§4.4).
        if facts.flags.has(.invalidated) {
            return failure == .unreachable ? .gatewayTimeout([.invalidated]) : .passThrough([.invalidated])
        }
        if staleness >= 0, let prohibition = staleProhibition(facts) {
            let reasons: [Reason] = [.stale(by: staleness), prohibition]
            return failure == .unreachable ? .gatewayTimeout(reasons) : .passThrough(reasons)
        }
        let allowance = [facts.staleIfError, request.cacheControl.staleIfError].compactMap { $0 }.max()
        let errorStatus: Bool
        switch failure {
        case .unreachable: errorStatus = true
        case .serverError(let status): errorStatus = [500, 502, 503, 504].contains(status)
        }
        if errorStatus, let allowance, staleness <= Double(allowance) {
            return .serve(
                withUnsafePointer(to: facts) { facts in
                    use(candidate.index, facts, age: age, request, basis: .staleIfError(allowance: allowance))
                })
        }
        if failure == .unreachable {
            return .serve(
                withUnsafePointer(to: facts) { use(candidate.index, $0, age: age, request, basis: .disconnected) })
        }
        return .passThrough([.stale(by: staleness), .staleNotAllowed])
    }

    /// The index of the stored response to use for a request with `fields`: one whose
    /// nominated fields match (§4.1), never one with `Vary: *` or an incomplete body, those
    /// with a `Vary` field preferred, then the most recent by `Date` (§4).
    public func selectVariant(_ fields: HeaderFields, candidates: [StoredResponseFacts]) -> Int? {
        candidates.withUnsafeBufferPointer { stored in
            var best: Int?
            // `canAnswer(_:)` spelled out on the element's fields: calling the method on
            // `stored[index]` copies the whole element (measured: ~185 instructions a lookup).
            for index in stored.indices
            where !stored[index].flags.has(.incomplete)
                && stored[index].vary.matches(
                    fields, values: stored[index].varyValues, rawValues: stored[index].varyRawValues)
            {
                guard let current = best else {
                    best = index
                    continue
                }
                let aHasVary = !stored[index].vary.isEmpty
                let bHasVary = !stored[current].vary.isEmpty
                if aHasVary != bHasVary {
                    if aHasVary { best = index }
                } else if stored[index].date > stored[current].date
                    || (stored[index].date == stored[current].date
                        && stored[index].responseTime > stored[current].responseTime)
                {
                    best = index
                }
            }
            return best
        }
    }

    /// The directive that forbids serving `facts` stale, if any (RFC 9111 §4.2.4).
    @inline(__always)
    func staleProhibition(_ facts: StoredResponseFacts) -> Reason? {
        if facts.flags.has(.mustRevalidate) { return .mustRevalidate }
        if configuration.isShared {
            if facts.flags.has(.hasSMaxAge) { return .sMaxAgeRevalidate }
            if facts.flags.has(.proxyRevalidate) { return .proxyRevalidate }
        }
        return nil
    }

    private func policyFields(_ policy: CachePolicy) -> HeaderFields {
        policy == .reloadIgnoringLocalAndRemoteCacheData
            ? [HeaderField(name: .cacheControl, value: "no-cache"), HeaderField(name: .pragma, value: "no-cache")] : []
    }

    @inline(__always)
    private func use(
        _ index: Int, _ facts: UnsafePointer<StoredResponseFacts>, age: Double, _ request: CacheRequest,
        basis: CachedUse.Basis
    ) -> CachedUse {
        CachedUse(
            candidate: index, currentAge: age, freshnessLifetime: facts.pointee.freshnessLifetime,
            notModified: request.isConditional && clientPreconditionHolds(request, facts.pointee), basis: basis)
    }

    /// Evaluates the client's If-None-Match, else If-Modified-Since, against a stored
    /// response: `true` means "not modified" (RFC 9111 §4.3.2, RFC 9110 §13.2.2). Only a
    /// stored 200 or 206 is evaluated (§4.3.2); preconditions never turn another status
    /// into a 304 (RFC 9110 §13.2.1).
    func clientPreconditionHolds(_ request: CacheRequest, _ facts: StoredResponseFacts) -> Bool {
        guard facts.status == 200 || facts.status == 206 else { return false }
        if let list = request.ifNoneMatch {
            guard let tag = facts.entityTag else { return list == .any }
            return list.weakMatches(tag)
        }
        if let since = request.ifModifiedSince {
            return (facts.lastModified ?? facts.date) <= since
        }
        return false
    }

    /// A validation request, or a 504 when the request has only-if-cached (§5.2.1.7).
    private func revalidate(
        _ request: CacheRequest, _ index: Int, _ candidates: [StoredResponseFacts],
        reason: CacheStatus.ForwardReason, reasons: [Reason]
    ) -> LookupDecision {
        if request.cacheControl.onlyIfCached { return .gatewayTimeout(reasons + [.onlyIfCached]) }
        return .forward(validation(request, index, candidates, reason: reason, reasons: reasons))
    }

    /// The forwarding that validates the selected response and every other stored response
    /// that matches the request (§4.3.1). A request that carries the client's own
    /// validators is forwarded with them alone.
    private func validation(
        _ request: CacheRequest, _ index: Int, _ candidates: [StoredResponseFacts],
        reason: CacheStatus.ForwardReason, reasons: [Reason]
    ) -> Forwarding {
        if request.isConditional {
            return Forwarding(reason: reason, candidate: index, reasons: reasons)
        }
        var validated = [index]
        for other in candidates.indices
        where other != index && candidates[other].entityTag != nil && candidates[other].canAnswer(request.head.fields) {
            validated.append(other)
        }
        let fields = conditionalFields(validated.map { candidates[$0] })
        return Forwarding(reason: reason, candidate: index, validated: validated, fields: fields, reasons: reasons)
    }

    /// The precondition fields that validate `responses` (RFC 9111 §4.3.1): `If-None-Match`
    /// with their entity tags; for a single response also `If-Modified-Since` from its
    /// `Last-Modified`, or from its `Date` when it has no validator at all (RFC 9110 §13.1.3).
    public func conditionalFields(_ responses: [StoredResponseFacts]) -> HeaderFields {
        var fields: HeaderFields = [:]
        var tags: [EntityTag] = []
        for tag in responses.compactMap(\.entityTag) where !tags.contains(tag) { tags.append(tag) }
        if !tags.isEmpty { fields[.ifNoneMatch] = EntityTagList.tags(tags).fieldValue }
        if responses.count == 1 {
            if let lastModified = responses[0].lastModified {
                fields[.ifModifiedSince] = HTTPDate.format(lastModified)
            } else if tags.isEmpty {
                fields[.ifModifiedSince] = HTTPDate.format(responses[0].date)
            }
        }
        return fields
    }
}

extension StoredResponseFacts {
    /// Whether the request fields this response's `Vary` nominates match those of `fields`
    /// (RFC 9111 §4.1; `Vary: *` never does), whatever the state of its body.
    @inline(__always)
    func varyMatches(_ fields: HeaderFields) -> Bool {
        vary.matches(fields, values: varyValues, rawValues: varyRawValues)
    }

    /// Whether this response can answer a request with `fields`: its `Vary` matches and its
    /// body is complete (§3.3).
    @inline(__always)
    func canAnswer(_ fields: HeaderFields) -> Bool {
        !flags.has(.incomplete) && varyMatches(fields)
    }
}
