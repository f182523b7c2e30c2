import CacheSemantics
import CacheStorage

/// When a forwarded request went out and its response came back (RFC 9111 §4.2.3).
public struct ExchangeTimes: Hashable, Sendable {
    /// When the request was sent.
    public var requestTime: Timestamp
    /// When the response head arrived.
    public var responseTime: Timestamp
}

/// Applies what the origin answered to what is stored: a `304` (RFC 9111 §4.3.4) and a `200`
/// to `HEAD` (§4.3.5) freshen stored responses, with their fields updated (§3.2). A failure to
/// write is reported to `log` and otherwise ignored: the response is still answered.
struct StoredResponseUpdates {
    let store: any CacheStore
    let engine: CacheEngine
    let log: @Sendable (String) -> Void
    /// A candidate as freshened and stored, with the fields its answers start with made and
    /// remembered (``CandidateReader/remembered(_:)``).
    let remember: @Sendable (StoredCandidate) -> StoredCandidate

    /// Updates the stored responses a `304` selects: the candidates as updated, or `nil` when it
    /// selects none.
    ///
    /// `current` reads the candidates stored now. When a selected response was replaced or
    /// removed after the candidates were read (another request stored a newer one while the
    /// origin answered), the update is applied to what is stored now: the `304` freshens those
    /// its own validators select; `nil` when it selects none of them either (the request is then
    /// sent again without validators). Whether a selected response is still stored is read
    /// before it is updated, not left to the update: a store that writes updates behind cannot
    /// always tell at once that an identity is gone.
    func applyNotModified(
        _ notModified: ExchangeStateMachine.NotModified, request: HeaderFields, current: () -> [StoredCandidate]
    ) -> [StoredCandidate]? {
        switch freshen(notModified, request: request, stillStored: current()) {
        case .updated(let updated): return updated
        case .selectsNone: return nil
        case .replaced:
            // The validators sent belonged to responses no longer stored: only the 304's own
            // validators can select among the current ones.
            var now = notModified
            now.candidates = current()
            now.validated = []
            guard case .updated(let updated) = freshen(now, request: request, stillStored: nil) else { return nil }
            return updated
        }
    }

    /// What a `304` did to the stored responses it was compared with.
    private enum Outcome {
        /// These were freshened (all candidates, updated ones replaced).
        case updated([StoredCandidate])
        /// Its validators select none of them.
        case selectsNone
        /// A selected one is no longer stored.
        case replaced
    }

    /// Freshens the candidates the `304` selects, which must be among `stored`, the candidates
    /// stored now, when given (`nil`: the candidates were just read).
    private func freshen(
        _ notModified: ExchangeStateMachine.NotModified, request: HeaderFields, stillStored stored: [StoredCandidate]?
    ) -> Outcome {
        let candidates = notModified.candidates
        var updated = candidates
        let indexes = engine.responsesToUpdate(
            notModified: notModified.fields, request: request, candidates: candidates.map(\.facts),
            validated: notModified.validated
        ).filter {
            // A 304 whose Repr-Digest differs from the stored one's describes another
            // representation than the body stored (RFC 9530 §3): it does not select it.
            !IntegrityDigests.reprDigestConflicts(
                stored: candidates[$0].entry.head.fields, notModified: notModified.fields)
        }
        guard !indexes.isEmpty else { return .selectsNone }
        if let stored {
            let stillStored = indexes.allSatisfy { index in
                stored.contains { $0.entry.id == candidates[index].entry.id }
            }
            guard stillStored else { return .replaced }
        }
        let freshened = indexes.map { index in
            engine.freshen(
                storedFields: candidates[index].entry.head.fields, storedFacts: candidates[index].facts,
                with: notModified.fields, request: request, requestTime: notModified.times.requestTime,
                responseTime: notModified.times.responseTime)
        }
        // The 304 made a selected response one that must not be stored (it brought no-store, or
        // private to a shared cache): it is removed, and no stored response answers; the request
        // goes again without validators.
        let unstorable = zip(indexes, freshened).filter { !$0.1.mayStayStored }.map { candidates[$0.0] }
        guard unstorable.isEmpty else {
            for candidate in unstorable { remove(candidate, because: "a 304 made it one not to store") }
            return .selectsNone
        }
        for (index, freshened) in zip(indexes, freshened) {
            let candidate = candidates[index]
            let (fields, facts) = (freshened.fields, freshened.facts)
            do {
                updated[index].entry = try update(candidate, fields: fields, facts: facts)
                updated[index].facts = facts
                updated[index] = remember(updated[index])
            } catch  where error.kind == .notFound {
                return .replaced
            } catch {
                log("could not freshen the stored response for \(candidate.entry.head.url): \(error)")
                updated[index].entry.head.fields = fields
                updated[index].facts = facts
            }
        }
        return .updated(updated)
    }

    /// Stores `fields` and `facts` for `candidate`, in place; or, when the updated fields put
    /// it in other cache groups (RFC 9875: a `304` may carry a new `Cache-Groups`), as the
    /// entry again with its body copied, so that the groups it is found by are those its fields
    /// list. Returns the entry as stored.
    private func update(
        _ candidate: StoredCandidate, fields: HeaderFields, facts: StoredResponseFacts
    ) throws(StorageError) -> StoredEntry {
        var entry = candidate.entry
        entry.head.fields = fields
        entry.head.facts = facts.serialized()
        let tags = PartitionedKeys.groupTags(uri: entry.head.url, fields: fields, primaryKey: entry.head.primaryKey)
        guard tags != candidate.entry.head.tags else {
            try store.update(entry.id, fields: fields, facts: entry.head.facts)
            return entry
        }
        entry.head.tags = tags
        let body = try store.openBody(for: candidate.entry)
        let writer = try store.makeWriter(for: entry.head)
        if body.size > 0 { try body.copy(0...(body.size - 1), to: writer) }
        return try writer.commit()
    }

    /// A `200` answering `HEAD` freshens the stored `GET` response when its validators and
    /// length match, and makes it need validation when they differ (RFC 9111 §4.3.5).
    func applyHeadResponse(
        _ head: HeaderFields, to candidate: StoredCandidate, request: HeaderFields, times: ExchangeTimes
    ) {
        do {
            switch engine.headFreshening(head: head, stored: candidate.facts) {
            case .update:
                let freshened = engine.freshen(
                    storedFields: candidate.entry.head.fields, storedFacts: candidate.facts, with: head,
                    request: request, requestTime: times.requestTime, responseTime: times.responseTime)
                guard freshened.mayStayStored else {
                    return remove(candidate, because: "a HEAD response made it one not to store")
                }
                _ = try update(candidate, fields: freshened.fields, facts: freshened.facts)
            case .markStale:
                var facts = candidate.facts
                facts.flags.formUnion(.invalidated)
                try store.update(candidate.entry.id, fields: candidate.entry.head.fields, facts: facts.serialized())
            }
        } catch {
            log("could not apply a HEAD response to the stored response for \(candidate.entry.head.url): \(error)")
        }
    }

    /// Removes a stored response that must not stay stored; one already gone is left so.
    private func remove(_ candidate: StoredCandidate, because reason: String) {
        do {
            try store.remove(candidate.entry.id)
        } catch {
            // Removed meanwhile: as wanted.
            guard error.kind != .notFound else { return }
            log(
                "could not remove the stored response for \(candidate.entry.head.url), though \(reason): \(error); "
                    + "it may answer requests until it expires or is purged")
        }
    }
}
