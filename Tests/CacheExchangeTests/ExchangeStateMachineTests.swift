import CacheSemantics
import CacheStorage
import CacheSystem
import CacheTestSupport
import Testing

@testable import CacheExchange

/// The exchange's decisions with no I/O: each event fed by hand, each action checked.
@Suite("ExchangeStateMachine: one request's way through the cache, without I/O")
struct ExchangeStateMachineTests {
    static let engine = CacheEngine(configuration: .sharedCache)
    static let url = "http://origin.test/a"
    static let now = Fixtures.epoch

    /// A stored response for `url`, received at `now - age` with `fields`.
    static func candidate(
        _ fields: HeaderFields, age: Double = 0, status: Int = 200, url: String = url
    ) -> StoredCandidate {
        let received = now - age
        var dated = fields
        if !dated.contains("Date") { dated["Date"] = HTTPDate.format(received) }
        let decision = engine.storageDecision(
            for: RequestHead(uri: url), response: ResponseHead(status: status, fields: dated), requestTime: received,
            responseTime: received)
        guard case .store(let storable) = decision else { preconditionFailure("not storable: \(decision)") }
        let entry = StoredEntry(
            id: EntryID(),
            head: EntryHead(
                primaryKey: url, variantKey: storable.facts.variantKey, url: url, status: status,
                fields: storable.fields, facts: storable.facts.serialized()),
            bodySize: 5, storedAt: received.secondsSince1970, lastAccess: received.secondsSince1970)
        return StoredCandidate(entry: entry, facts: storable.facts)
    }

    static func machine(
        method: String = "GET", fields: HeaderFields = [:], policy: CachePolicy = .useProtocolCachePolicy,
        url: String = url
    ) -> ExchangeStateMachine {
        let request = ExchangeRequest(
            head: RequestHead(method: method, uri: url, fields: fields), policy: policy,
            primaryKey: CacheKey(method: method, uri: url)?.primaryKey)
        return ExchangeStateMachine(request, engine: engine, name: "cache")
    }

    @Test("a request first reads what is stored under its key (RFC 9111 §4)")
    func startsByReadingCandidates() {
        var machine = Self.machine()
        guard case .readCandidates(let key) = machine.start() else { Issue.record("not a read"); return }
        #expect(key == Self.url)
    }

    @Test("a request the cache does not handle is sent on at once and stores nothing (fwd=bypass)")
    func bypass() {
        let request = ExchangeRequest(
            head: RequestHead(uri: Self.url), primaryKey: nil, bypassReasons: [.configured("a rule")])
        var machine = ExchangeStateMachine(request, engine: Self.engine, name: "cache")
        guard case .forward(let forwarded) = machine.start() else { Issue.record("not forwarded"); return }
        #expect(forwarded.reason == .bypass)
        guard
            case .relay(let relay) = machine.originResponded(
                ResponseHead(status: 200, fields: ["Cache-Control": "max-age=60"]), requestTime: Self.now,
                responseTime: Self.now, now: Self.now)
        else { Issue.record("not relayed"); return }
        #expect(relay.storage == nil)
        #expect(relay.outcome == .bypass)
        #expect(relay.cacheStatus.fieldValue == "cache; fwd=bypass; fwd-status=200")
    }

    @Test("a miss joins the requests in flight; the leader forwards and its response is to be stored (RFC 9111 §3)")
    func missLeadsAndStores() {
        var machine = Self.machine()
        _ = machine.start()
        guard case .join(let identity) = machine.candidatesRead([], now: Self.now) else {
            Issue.record("a miss should join"); return
        }
        #expect(identity == Self.url)
        guard case .forward(let forwarded) = machine.joinedAsLeader() else { Issue.record("not forwarded"); return }
        #expect(forwarded.reason == .uriMiss && !forwarded.isValidation)
        #expect(machine.leads == Self.url)
        guard
            case .relay(let relay) = machine.originResponded(
                ResponseHead(status: 200, fields: ["Cache-Control": "max-age=60", "Content-Length": "5"]),
                requestTime: Self.now, responseTime: Self.now, now: Self.now)
        else { Issue.record("not relayed"); return }
        #expect(relay.storage?.head != nil)
        #expect(relay.expectedLength == 5)
        #expect(relay.outcome == .miss)
        #expect(relay.fields["Date"] == HTTPDate.format(Self.now), "RFC 9110 §6.6.1: Date added")
        #expect(machine.isDone)
    }

    @Test("a fresh stored response is served as a hit with its ttl (RFC 9111 §4.2, RFC 9211 §2.1)")
    func freshHit() {
        var machine = Self.machine()
        _ = machine.start()
        let stored = Self.candidate(["Cache-Control": "max-age=60"], age: 10)
        guard case .serveStored(let answer) = machine.candidatesRead([stored], now: Self.now) else {
            Issue.record("not served"); return
        }
        #expect(answer.outcome == .hit)
        #expect(answer.cacheStatus.fieldValue == "cache; hit; ttl=50")
        #expect(answer.revalidation == nil)
    }

    @Test(
        "a chosen stored response gone before its body opens is looked up again: a replacement stored meanwhile is served"
    )
    func vanishingBodyIsLookedUpAgain() {
        var machine = Self.machine()
        _ = machine.start()
        let stored = Self.candidate(["Cache-Control": "max-age=60"])
        guard case .serveStored = machine.candidatesRead([stored], now: Self.now) else {
            Issue.record("not served"); return
        }
        guard case .readCandidates = machine.storedBodyUnavailable(now: Self.now) else {
            Issue.record("not read again"); return
        }
        let replacement = Self.candidate(["Cache-Control": "max-age=60"])
        guard case .serveStored(let answer) = machine.candidatesRead([stored, replacement], now: Self.now) else {
            Issue.record("the replacement was not served"); return
        }
        #expect(answer.candidate.entry.id == replacement.entry.id)
    }

    @Test(
        "a stored response whose body cannot be opened is a miss when the store keeps offering it, never a failure (RFC 9111 §4)"
    )
    func unreadableBodyIsAMiss() {
        var machine = Self.machine()
        _ = machine.start()
        let stored = Self.candidate(["Cache-Control": "max-age=60"])
        guard case .serveStored = machine.candidatesRead([stored], now: Self.now) else {
            Issue.record("not served"); return
        }
        guard case .readCandidates = machine.storedBodyUnavailable(now: Self.now) else {
            Issue.record("not read again"); return
        }
        // The store offers the same unreadable response again (a Redis record whose chunk was
        // evicted): it is left out, so nothing stored answers.
        guard case .join = machine.candidatesRead([stored], now: Self.now),
            case .forward(let forwarded) = machine.joinedAsLeader()
        else { Issue.record("not forwarded as a miss"); return }
        #expect(forwarded.reason == .uriMiss && !forwarded.isValidation)
        guard
            case .relay(let relay) = machine.originResponded(
                ResponseHead(status: 200, fields: ["Cache-Control": "max-age=60"]), requestTime: Self.now,
                responseTime: Self.now, now: Self.now)
        else { Issue.record("not relayed"); return }
        #expect(relay.storage?.head != nil)
    }

    @Test("a store that offers only unreadable responses, lookup after lookup, makes a miss after the last lookup")
    func unreadableAtEveryLookup() {
        var machine = Self.machine()
        _ = machine.start()
        var action = machine.candidatesRead([Self.candidate(["Cache-Control": "max-age=60"])], now: Self.now)
        for _ in 1...ExchangeStateMachine.maximumLookups {
            guard case .serveStored = action else { Issue.record("not served"); return }
            action = machine.storedBodyUnavailable(now: Self.now)
            if case .readCandidates = action {
                // Each lookup finds another response, unreadable too.
                action = machine.candidatesRead([Self.candidate(["Cache-Control": "max-age=60"])], now: Self.now)
            }
        }
        guard case .join = action else {
            Issue.record("not a miss after \(ExchangeStateMachine.maximumLookups) lookups: \(action)"); return
        }
    }

    @Test(
        "a conditional request whose stored answer cannot be opened goes to the origin with its own validators; the origin's 304 is its answer (RFC 9111 §4.3.2)"
    )
    func unreadableBodyForConditionalRequest() {
        var machine = Self.machine(fields: ["If-None-Match": "\"v1\""])
        _ = machine.start()
        let stored = Self.candidate(["Cache-Control": "max-age=60", "ETag": "\"v1\""])
        guard case .serveStored = machine.candidatesRead([stored], now: Self.now) else {
            Issue.record("not served"); return
        }
        _ = machine.storedBodyUnavailable(now: Self.now)
        guard case .join = machine.candidatesRead([stored], now: Self.now),
            case .forward(let forwarded) = machine.joinedAsLeader()
        else { Issue.record("not forwarded"); return }
        // The exchange adds no validators of its own: the client's go as they are.
        #expect(forwarded.fields["If-None-Match"] == nil && !forwarded.isValidation)
        guard
            case .relay(let relay) = machine.originResponded(
                ResponseHead(status: 304, fields: ["ETag": "\"v1\""]), requestTime: Self.now, responseTime: Self.now,
                now: Self.now)
        else { Issue.record("the 304 was not relayed"); return }
        #expect(relay.status == 304)
        #expect(relay.notModifiedFreshens.isEmpty)
    }

    @Test("a stale response chosen instead of a 503 whose body cannot be opened: the 503 is passed on (RFC 5861 §4)")
    func unreadableReplacementOfServerError() {
        var machine = Self.machine()
        _ = machine.start()
        _ = machine.candidatesRead(
            [Self.candidate(["Cache-Control": "max-age=60, stale-if-error=600"], age: 120)], now: Self.now)
        _ = machine.joinedAsLeader()
        guard
            case .serveStored = machine.originResponded(
                ResponseHead(status: 503), requestTime: Self.now, responseTime: Self.now, now: Self.now)
        else { Issue.record("not served stale"); return }
        guard case .relay(let relay) = machine.replacementUnavailable() else {
            Issue.record("the 503 was not relayed"); return
        }
        #expect(relay.status == 503)
        #expect(machine.isDone)
    }

    @Test("a freshened response whose body cannot be opened is asked for again without validators (RFC 9111 §4.3.4)")
    func unreadableFreshenedResponse() {
        var machine = Self.machine()
        _ = machine.start()
        let stored = Self.candidate(["Cache-Control": "max-age=60", "ETag": "\"v1\""], age: 120)
        _ = machine.candidatesRead([stored], now: Self.now)
        _ = machine.joinedAsLeader()
        _ = machine.originResponded(
            ResponseHead(status: 304, fields: ["ETag": "\"v1\""]), requestTime: Self.now, responseTime: Self.now,
            now: Self.now)
        let freshened = Self.candidate(["Cache-Control": "max-age=60", "ETag": "\"v1\""])
        guard case .serveStored = machine.notModifiedApplied([freshened], now: Self.now) else {
            Issue.record("not served"); return
        }
        guard case .forward(let retry) = machine.replacementUnavailable() else {
            Issue.record("not sent again"); return
        }
        #expect(!retry.isValidation && retry.fields["If-None-Match"] == nil)
    }

    @Test(
        "a stale response chosen when the origin is unreachable whose body cannot be opened: the request fails as with nothing stored"
    )
    func unreadableFallback() {
        var machine = Self.machine()
        _ = machine.start()
        _ = machine.candidatesRead([Self.candidate(["Cache-Control": "max-age=60"], age: 120)], now: Self.now)
        _ = machine.joinedAsLeader()
        guard case .serveStored = machine.originFailed(now: Self.now) else { Issue.record("not served stale"); return }
        guard case .fail = machine.fallbackUnavailable() else { Issue.record("did not fail"); return }
        #expect(machine.isDone)
    }

    @Test("a stale response with an ETag is validated; a 304 freshens it and it is served (RFC 9111 §4.3.1, §4.3.4)")
    func validationWithNotModified() {
        var machine = Self.machine()
        _ = machine.start()
        let stored = Self.candidate(["Cache-Control": "max-age=60", "ETag": "\"v1\""], age: 120)
        guard case .join = machine.candidatesRead([stored], now: Self.now),
            case .forward(let forwarded) = machine.joinedAsLeader()
        else { Issue.record("not forwarded"); return }
        #expect(forwarded.isValidation && forwarded.reason == .stale)
        #expect(forwarded.fields["If-None-Match"] == "\"v1\"")
        guard
            case .applyNotModified(let notModified) = machine.originResponded(
                ResponseHead(status: 304, fields: ["ETag": "\"v1\"", "Cache-Control": "max-age=60"]),
                requestTime: Self.now, responseTime: Self.now, now: Self.now)
        else { Issue.record("the 304 was not applied"); return }
        #expect(notModified.validated == [0])
        let freshened = Self.candidate(["Cache-Control": "max-age=60", "ETag": "\"v1\""], age: 0)
        guard case .serveStored(let answer) = machine.notModifiedApplied([freshened], now: Self.now) else {
            Issue.record("not served"); return
        }
        #expect(answer.outcome == .revalidated)
        #expect(answer.replacesOriginResponse)
        #expect(answer.cacheStatus.fieldValue == "cache; fwd=stale; fwd-status=304; stored; ttl=60")
    }

    @Test("a 304 that selects no stored response sends the request again without validators (RFC 9111 §4.3.4)")
    func notModifiedSelectingNothingRetries() {
        var machine = Self.machine()
        _ = machine.start()
        let stored = Self.candidate(["Cache-Control": "max-age=60", "ETag": "\"v1\""], age: 120)
        _ = machine.candidatesRead([stored], now: Self.now)
        _ = machine.joinedAsLeader()
        _ = machine.originResponded(
            ResponseHead(status: 304, fields: ["ETag": "\"v2\""]), requestTime: Self.now, responseTime: Self.now,
            now: Self.now)
        guard case .forward(let retry) = machine.notModifiedApplied(nil, now: Self.now) else {
            Issue.record("not sent again"); return
        }
        #expect(!retry.isValidation)
        #expect(retry.fields["If-None-Match"] == nil)
    }

    @Test("a stale response is served when the origin cannot be reached (RFC 9111 §4.2.4): hit, detail=disconnected")
    func disconnected() {
        var machine = Self.machine()
        _ = machine.start()
        _ = machine.candidatesRead([Self.candidate(["Cache-Control": "max-age=60"], age: 120)], now: Self.now)
        _ = machine.joinedAsLeader()
        guard case .serveStored(let answer) = machine.originFailed(now: Self.now) else {
            Issue.record("not served stale"); return
        }
        #expect(answer.outcome == .stale && answer.replacesOriginResponse)
        #expect(answer.cacheStatus.fieldValue == "cache; hit; ttl=-60; detail=disconnected")
    }

    @Test(
        "must-revalidate forbids serving stale when the origin is unreachable: a 504 with Cache-Status (RFC 9111 §5.2.2.2)"
    )
    func mustRevalidateGivesGatewayTimeout() {
        var machine = Self.machine()
        _ = machine.start()
        _ = machine.candidatesRead(
            [Self.candidate(["Cache-Control": "max-age=60, must-revalidate"], age: 120)], now: Self.now)
        _ = machine.joinedAsLeader()
        guard case .answer(let answer) = machine.originFailed(now: Self.now) else { Issue.record("no 504"); return }
        #expect(answer.status == 504)
        #expect(answer.fields["Cache-Status"] == "cache; fwd=stale; detail=stale-not-allowed")
    }

    @Test(
        "the reload policies never fall back on a stored response when the origin is unreachable",
        arguments: [CachePolicy.reloadIgnoringLocalCacheData, .reloadIgnoringLocalAndRemoteCacheData])
    func reloadPoliciesFail(policy: CachePolicy) {
        var machine = Self.machine(policy: policy)
        _ = machine.start()
        guard case .forward = machine.candidatesRead([Self.candidate(["Cache-Control": "max-age=60"])], now: Self.now)
        else { Issue.record("not forwarded"); return }
        guard case .fail = machine.originFailed(now: Self.now) else {
            Issue.record("a reload must fail, not serve what is stored"); return
        }
    }

    @Test(
        "a 503 within stale-if-error is replaced by the stale response: fwd with fwd-status (RFC 5861 §4, RFC 9211 §2.3-§2.4)"
    )
    func staleIfErrorAfterServerError() {
        var machine = Self.machine()
        _ = machine.start()
        _ = machine.candidatesRead(
            [Self.candidate(["Cache-Control": "max-age=60, stale-if-error=600"], age: 120)], now: Self.now)
        _ = machine.joinedAsLeader()
        guard
            case .serveStored(let answer) = machine.originResponded(
                ResponseHead(status: 503), requestTime: Self.now, responseTime: Self.now, now: Self.now)
        else { Issue.record("not served stale"); return }
        #expect(answer.cacheStatus.fieldValue == "cache; fwd=stale; fwd-status=503; ttl=-60; detail=stale-if-error")
        #expect(answer.cacheStatus.hit == false)
    }

    @Test("a follower whose leader stored nothing decides again on what is stored now, and does not wait again")
    func followerDecidesAgain() {
        var machine = Self.machine()
        _ = machine.start()
        guard case .join = machine.candidatesRead([], now: Self.now) else { Issue.record("no join"); return }
        guard case .readCandidates = machine.leaderSettled(nil) else { Issue.record("not read again"); return }
        guard case .forward(let forwarded) = machine.candidatesRead([], now: Self.now) else {
            Issue.record("should forward on its own"); return
        }
        #expect(forwarded.reason == .uriMiss)
        #expect(machine.leads == nil)
    }

    @Test("a follower whose leader stored a response is served from it: collapsed (RFC 9211 §2.5)")
    func followerServedCollapsed() {
        var machine = Self.machine()
        _ = machine.start()
        _ = machine.candidatesRead([], now: Self.now)
        _ = machine.leaderSettled(CollapsedResponse(outcome: .miss, reason: .uriMiss, status: 200))
        guard
            case .serveStored(let answer) = machine.candidatesRead(
                [Self.candidate(["Cache-Control": "max-age=60"])], now: Self.now)
        else { Issue.record("not served"); return }
        #expect(answer.outcome == .miss)
        #expect(answer.cacheStatus.fieldValue == "cache; fwd=uri-miss; fwd-status=200; stored; collapsed")
    }

    @Test("only-if-cached with nothing stored is a 504 the cache makes, never forwarded (RFC 9111 §5.2.1.7)")
    func onlyIfCached() {
        var machine = Self.machine(fields: ["Cache-Control": "only-if-cached"])
        _ = machine.start()
        guard case .answer(let answer) = machine.candidatesRead([], now: Self.now) else {
            Issue.record("no 504"); return
        }
        #expect(answer.status == 504)
        #expect(answer.cacheStatus.fieldValue == "cache; detail=only-if-cached")
    }

    @Test(
        "within stale-while-revalidate the stale response is served and a background validation planned (RFC 5861 §3)")
    func staleWhileRevalidate() {
        var machine = Self.machine()
        _ = machine.start()
        guard
            case .serveStored(let answer) = machine.candidatesRead(
                [
                    Self.candidate(
                        ["Cache-Control": "max-age=60, stale-while-revalidate=600", "ETag": "\"v1\""], age: 90)
                ],
                now: Self.now)
        else { Issue.record("not served"); return }
        #expect(answer.outcome == .stale)
        #expect(answer.cacheStatus.detail == "stale-while-revalidate")
        #expect(answer.revalidation?.fields["If-None-Match"] == "\"v1\"")
    }

    @Test("an unsafe method is forwarded, its response never stored, and it invalidates the target URI (RFC 9111 §4.4)")
    func unsafeMethodInvalidates() {
        var machine = Self.machine(method: "POST")
        guard case .readCandidates = machine.start(),
            case .forward(let forwarded) = machine.candidatesRead([], now: Self.now)
        else { Issue.record("not forwarded"); return }
        #expect(forwarded.reason == .method)
        guard
            case .relay(let relay) = machine.originResponded(
                ResponseHead(status: 200), requestTime: Self.now, responseTime: Self.now, now: Self.now)
        else { Issue.record("not relayed"); return }
        #expect(relay.storage == nil)
        #expect(relay.invalidated == [Self.url])
        #expect(relay.cacheStatus.fieldValue == "cache; fwd=method; fwd-status=200")
    }

    @Test("a 200 answering HEAD freshens the stored GET response it validated (RFC 9111 §4.3.5); nothing is stored")
    func headFreshens() {
        var machine = Self.machine(method: "HEAD")
        _ = machine.start()
        let stored = Self.candidate(["Cache-Control": "max-age=60", "ETag": "\"v1\""], age: 120)
        guard case .forward = machine.candidatesRead([stored], now: Self.now) else {
            Issue.record("not forwarded"); return
        }
        guard
            case .relay(let relay) = machine.originResponded(
                ResponseHead(status: 200, fields: ["ETag": "\"v1\"", "Cache-Control": "max-age=60"]),
                requestTime: Self.now, responseTime: Self.now, now: Self.now)
        else { Issue.record("not relayed"); return }
        #expect(relay.headFreshens?.entry.id == stored.entry.id)
        #expect(relay.storage == nil)
        #expect(relay.expectedLength == 0, "a response to HEAD has no body (RFC 9110 §9.3.2)")
    }
}

@Suite("BackgroundRevalidations: one per key, and waiting until none runs (RFC 5861 §3)")
struct BackgroundRevalidationsTests {
    @Test("a key runs one revalidation at a time; waiters are told once the last one ends, also across overlaps")
    func overlappingRevalidations() {
        let registry = BackgroundRevalidations()
        #expect(registry.begin("a"))
        #expect(!registry.begin("a"), "one at a time per key")
        #expect(registry.begin("b"))
        let told = Locked(0)
        registry.whenIdle { told.withLock { $0 += 1 } }
        registry.end("a")
        // "a" ended and starts again before "b" ends: the waiter waits for both.
        #expect(registry.begin("a"))
        registry.end("b")
        #expect(told.withLock { $0 } == 0)
        registry.end("a")
        #expect(told.withLock { $0 } == 1)
        registry.whenIdle { told.withLock { $0 += 1 } }
        #expect(told.withLock { $0 } == 2, "told at once when none runs")
    }
}

@Suite("ServedResponseBuilder: the fields a hit goes out with")
struct ServedResponseFieldsTests {
    @Test("RFC 9211 §2.4: a hit's ttl is written in decimal after the member's prefix, negative when stale")
    func ttlIsDecimal() {
        let prefix = "httpcache; hit; ttl="
        #expect(ServedResponseBuilder.joined(prefix, 0) == prefix + "0")
        #expect(ServedResponseBuilder.joined(prefix, 3599) == prefix + "3599")
        #expect(ServedResponseBuilder.joined(prefix, -42) == prefix + "-42")
        #expect(ServedResponseBuilder.joined(prefix, Int.max) == prefix + String(Int.max))
        #expect(ServedResponseBuilder.joined(prefix, Int.min) == prefix + String(Int.min))
        #expect(ServedResponseBuilder.joined("", 7) == "7")
    }
}
