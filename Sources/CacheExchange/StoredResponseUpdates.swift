import CacheSemantics
import CacheStorage

/// Applying what the origin answered to what is stored, the same for every cache built on a
/// store (`HTTPCache`, the proxy). Failures to write are reported to `log` and otherwise
/// ignored: the response is still answered.
extension CacheStore {
    /// Updates the stored responses a `304` selects (RFC 9111 §4.3.4, §3.2): the candidates
    /// as updated, or `nil` when it selects none.
    ///
    /// When a selected response was replaced or removed after `candidates` were read (another
    /// request stored a newer one meanwhile), the update is applied to what is stored now:
    /// `reread` gives the current candidates, and the `304` freshens those its validators
    /// select; `nil` when it selects none of them either (the request is then sent again
    /// without validators).
    func applyNotModified(
        _ notModified: HeaderFields, to candidates: [StoredCandidate], validated: [Int], request: HeaderFields,
        engine: CacheEngine, requestTime: Timestamp, responseTime: Timestamp, log: (String) -> Void,
        reread: () -> [StoredCandidate]
    ) -> [StoredCandidate]? {
        switch freshen(
            notModified, candidates, validated: validated, request: request, engine: engine,
            requestTime: requestTime, responseTime: responseTime, log: log)
        {
        case .updated(let updated): return updated
        case .selectsNone: return nil
        case .replaced:
            // The validators sent belonged to responses no longer stored: only the 304's own
            // validators can select among the current ones.
            guard case .updated(let updated) = freshen(
                notModified, reread(), validated: [], request: request, engine: engine, requestTime: requestTime,
                responseTime: responseTime, log: log)
            else { return nil }
            return updated
        }
    }

    private func freshen(
        _ notModified: HeaderFields, _ candidates: [StoredCandidate], validated: [Int], request: HeaderFields,
        engine: CacheEngine, requestTime: Timestamp, responseTime: Timestamp, log: (String) -> Void
    ) -> NotModifiedUpdate {
        var updated = candidates
        let indexes = engine.responsesToUpdate(
            notModified: notModified, request: request, candidates: candidates.map(\.facts), validated: validated)
        guard !indexes.isEmpty else { return .selectsNone }
        for index in indexes {
            let candidate = candidates[index]
            let (fields, facts) = engine.freshen(
                storedFields: candidate.entry.head.fields, storedFacts: candidate.facts, with: notModified,
                request: request, requestTime: requestTime, responseTime: responseTime)
            do {
                try update(candidate.entry.id, fields: fields, facts: facts.serialized())
            } catch where error.kind == .notFound {
                return .replaced
            } catch {
                log("could not freshen the stored response for \(candidate.entry.head.url): \(error)")
            }
            updated[index].entry.head.fields = fields
            updated[index].facts = facts
        }
        return .updated(updated)
    }

    /// A `200` answering `HEAD` freshens the stored `GET` response when its validators and
    /// length match, and makes it need validation when they differ (RFC 9111 §4.3.5).
    func applyHeadResponse(
        _ head: HeaderFields, to candidate: StoredCandidate, request: HeaderFields, engine: CacheEngine,
        requestTime: Timestamp, responseTime: Timestamp, log: (String) -> Void
    ) {
        do {
            switch engine.headFreshening(head: head, stored: candidate.facts) {
            case .update:
                let (fields, facts) = engine.freshen(
                    storedFields: candidate.entry.head.fields, storedFacts: candidate.facts, with: head,
                    request: request, requestTime: requestTime, responseTime: responseTime)
                try update(candidate.entry.id, fields: fields, facts: facts.serialized())
            case .markStale:
                var facts = candidate.facts
                facts.flags.formUnion(.invalidated)
                try update(candidate.entry.id, fields: candidate.entry.head.fields, facts: facts.serialized())
            }
        } catch {
            log("could not apply a HEAD response to the stored response for \(candidate.entry.head.url): \(error)")
        }
    }

    /// Removes what an unsafe request's response invalidates (RFC 9111 §4.4).
    func invalidate(
        after request: RequestHead, response: ResponseHead, engine: CacheEngine, log: (String) -> Void
    ) {
        for uri in engine.invalidatedURIs(request: request, response: response) {
            guard let key = CacheKey(method: "GET", uri: uri) else { continue }
            do {
                try remove(primaryKey: key.primaryKey)
            } catch {
                log("could not invalidate \(uri): \(error)")
            }
        }
    }
}

/// What a `304` did to the stored responses it was compared with.
private enum NotModifiedUpdate {
    /// These were freshened (all candidates, updated ones replaced).
    case updated([StoredCandidate])
    /// Its validators select none of them (RFC 9111 §4.3.4).
    case selectsNone
    /// A selected one is no longer stored.
    case replaced
}
