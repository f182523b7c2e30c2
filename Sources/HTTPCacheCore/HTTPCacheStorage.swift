import CacheExchange
import CacheSemantics
import CacheStorage
import Foundation

/// What an app's cache stores of a response: its rules (a forced lifetime, a pin), then the
/// will-store hook, then RFC 9111 §3; a manifest's pre-fetch stores even what RFC 9111 would not
/// (as `max-age=0`); a `200` with a strong validator is kept when cut off, to be completed later
/// (RFC 9111 §3.3).
struct HTTPCacheStorage: StorageAdvisor {
    let engine: CacheEngine
    let prepared: PreparedRequest
    let willStore: (@Sendable (OfferedResponse) -> StoreChoice)?

    func plan(
        for request: ExchangeRequest, response: ResponseHead, requestTime: Timestamp, responseTime: Timestamp
    ) -> StoragePlan {
        guard let primaryKey = request.primaryKey else { return StoragePlan(head: nil, reasons: []) }
        var fields = response.fields
        var reasons: [Reason] = []
        func decide() -> StorageDecision {
            engine.storageDecision(
                for: request.head, response: ResponseHead(status: response.status, fields: fields),
                requestTime: requestTime, responseTime: responseTime)
        }
        if let seconds = prepared.forcedLifetime {
            fields = Self.replacingCacheControl(fields, with: "max-age=\(seconds)")
            reasons.append(.configured("a rule forces max-age=\(seconds)"))
        }
        var decision = decide()
        var choice = StoreChoice.store
        if let willStore {
            choice = willStore(
                OfferedResponse(
                    request: prepared.request, status: response.status, url: prepared.url,
                    fields: fields.map { ($0.name, $0.value) }, refusals: Self.refusals(decision)))
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
            return StoragePlan(
                head: nil, reasons: reasons + [.configured("not stored: the will-store hook refused it")])
        }
        // The transport hands whole responses over decoded from their content coding, with no
        // `Content-Encoding`, as URLSession does; a part (no transport decodes one) keeps its
        // coding, and joined with the rest it would make a whole response stored coded and
        // served coded to a request that otherwise gets the decoded bytes. Not stored (a cache
        // may always decline to, RFC 9111 §3).
        if response.status == 206, let coding = fields[.contentEncoding],
            !["", "identity"].contains(ASCII.lowercased(ASCII.trimmed(Substring(coding))))
        {
            return StoragePlan(
                head: nil,
                reasons: reasons + [
                    .configured(
                        "not stored: a part of a response in the content coding \(coding), which whole responses "
                            + "are stored decoded from")
                ])
        }
        switch decision {
        case .doNotStore(let refusals):
            return StoragePlan(head: nil, reasons: reasons + refusals)
        case .store(let storable):
            let head = EntryHead(
                primaryKey: primaryKey, variantKey: storable.facts.variantKey, url: prepared.urlString,
                status: storable.facts.status, fields: storable.fields, facts: storable.facts.serialized(),
                storagePolicy: choice.action == .memoryOnly ? .memoryOnly : .allowed,
                userInfo: choice.userInfo.map { Array($0) }, isComplete: !storable.facts.flags.has(.incomplete))
            var incompleteFacts: [UInt8]?
            if response.status == 200, request.head.method == "GET",
                engine.resumptionFields(stored: storable.facts, storedLength: 0) != nil
            {
                var facts = storable.facts
                facts.flags.formUnion(.incomplete)
                incompleteFacts = facts.serialized()
            }
            return StoragePlan(
                head: head, reasons: reasons + storable.notes, pin: prepared.pin, incompleteFacts: incompleteFacts)
        }
    }

    /// Why a response may not be stored; empty when it may.
    static func refusals(_ decision: StorageDecision) -> [Reason] {
        if case .doNotStore(let reasons) = decision { return reasons }
        return []
    }

    static func replacingCacheControl(_ fields: HeaderFields, with value: String) -> HeaderFields {
        var fields = fields
        fields.removeAll(namedAnyOf: [.cacheControl, .expires, .pragma])
        fields.append(name: .cacheControl, value: value)
        return fields
    }
}
