import CacheSemantics

/// A stored response and its decoded facts: what the engine decides over.
package struct StoredCandidate: Sendable {
    package var entry: StoredEntry
    package var facts: StoredResponseFacts

    package init(entry: StoredEntry, facts: StoredResponseFacts) {
        self.entry = entry
        self.facts = facts
    }
}

/// Applying what the origin answered to what is stored, the same for every cache built on a
/// store (`HTTPCache`, the proxy). Failures to write are reported to `log` and otherwise
/// ignored: the response is still answered.
extension CacheStore {
    /// Updates the stored responses a `304` selects (RFC 9111 §4.3.4, §3.2): the candidates
    /// as updated, or `nil` when it selects none.
    package func applyNotModified(
        _ notModified: HeaderFields, to candidates: [StoredCandidate], validated: [Int], request: HeaderFields,
        engine: CacheEngine, requestTime: Timestamp, responseTime: Timestamp, log: (String) -> Void
    ) -> [StoredCandidate]? {
        var updated = candidates
        let indexes = engine.responsesToUpdate(
            notModified: notModified, request: request, candidates: candidates.map(\.facts), validated: validated)
        guard !indexes.isEmpty else { return nil }
        for index in indexes {
            let candidate = candidates[index]
            let (fields, facts) = engine.freshen(
                storedFields: candidate.entry.head.fields, storedFacts: candidate.facts, with: notModified,
                request: request, requestTime: requestTime, responseTime: responseTime)
            do {
                try update(candidate.entry.id, fields: fields, facts: facts.serialized())
            } catch {
                log("could not freshen the stored response for \(candidate.entry.head.url): \(error)")
            }
            updated[index].entry.head.fields = fields
            updated[index].facts = facts
        }
        return updated
    }

    /// A `200` answering `HEAD` freshens the stored `GET` response when its validators and
    /// length match, and makes it need validation when they differ (RFC 9111 §4.3.5).
    package func applyHeadResponse(
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
    package func invalidate(
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
