import CacheSemantics
import FuzzSupport

/// The whole engine on arbitrary request and response fields: store, look up at several
/// times, fall back after failures, update after a 304, invalidate. Never traps, and a
/// stored response with its own request is always selectable.
runFuzzer { data, size in
    let bytes = fuzzBytes(data, size)
    guard bytes.count >= 2 else { return 0 }
    let status = 100 + Int(bytes[0]) * 2
    let policy = CachePolicy.allCases[Int(bytes[1]) % CachePolicy.allCases.count]
    let text = String(decoding: bytes.dropFirst(2), as: UTF8.self)
    let halves = text.split(separator: "\u{0}", maxSplits: 1, omittingEmptySubsequences: false)
    let requestFields = fuzzFields(halves[0])
    let responseFields = halves.count > 1 ? fuzzFields(halves[1]) : HeaderFields()
    let request = RequestHead(uri: "https://example.com/r", fields: requestFields)
    let response = ResponseHead(status: status, fields: responseFields)
    let start = Timestamp(secondsSince1970: 1_700_000_000)
    for engine in [CacheEngine(), CacheEngine(configuration: .sharedCache)] {
        let decision = engine.storageDecision(
            for: request, response: response, requestTime: start, responseTime: start + 1)
        _ = decision.reasons.map(\.description)
        guard case .store(let stored) = decision else { continue }
        precondition(engine.selectVariant(requestFields, candidates: [stored.facts]) == 0)
        let prepared = CacheRequest(request, policy: policy)
        for offset in [0.0, 1, 60, 86_400, 1e10] {
            let lookup = engine.lookup(prepared, candidates: [stored.facts], now: start + offset)
            _ = lookup.reasons.map(\.description)
            for failure in [OriginFailure.unreachable, .serverError(status: 503)] {
                _ = engine.fallback(
                    after: failure, request: prepared, candidate: (0, stored.facts), now: start + offset)
            }
        }
        let updated = engine.responsesToUpdate(
            notModified: responseFields, request: requestFields, candidates: [stored.facts], validated: [0])
        precondition(updated.allSatisfy { $0 == 0 })
        _ = engine.freshen(
            storedFields: stored.fields, storedFacts: stored.facts, with: responseFields, request: requestFields,
            requestTime: start + 10, responseTime: start + 11)
        _ = engine.headFreshening(head: responseFields, stored: stored.facts)
        // Ranges (RFC 9110 §14.2) and resuming (RFC 9111 §3.3, §3.4): answers always lie
        // inside the body; a continuation is only ever recognised with a strong validator.
        for length in [0, 1, 1_000] as [Int64] {
            switch engine.rangeAnswer(method: "GET", request: requestFields, stored: stored.facts, length: length) {
            case .partial(let ranges):
                precondition(!ranges.isEmpty && ranges.allSatisfy { $0.lowerBound >= 0 && $0.upperBound < length })
            case .unsatisfiable(let reported):
                precondition(reported == length)
            case .whole:
                break
            }
            let fields = engine.resumptionFields(stored: stored.facts, storedLength: length)
            if engine.continues(
                stored: stored.facts, storedLength: length, response: ResponseHead(status: 206, fields: responseFields))
            {
                precondition(fields != nil)
            }
        }
        _ = engine.resumableVariant(requestFields, candidates: [stored.facts])
    }
    _ = CacheEngine().invalidatedURIs(
        request: RequestHead(method: "DELETE", uri: "https://example.com/r"), response: response)
    return 0
}
