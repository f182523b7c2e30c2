/// A stored response as a `304` or a `HEAD` response updated it (RFC 9111 §3.2, §4.3.4,
/// §4.3.5): ``CacheEngine/freshen(storedFields:storedFacts:with:request:requestTime:responseTime:)``.
public struct FreshenedResponse: Hashable, Sendable {
    /// The stored fields updated with the newer response's (§3.2).
    public var fields: HeaderFields
    /// The facts of the updated response, computed anew.
    public var facts: StoredResponseFacts
    /// Whether the updated response may stay stored: not when the directives now in force say
    /// `no-store` (§5.2.2.5; `must-understand` with an understood status overrides it, §5.2.2.3)
    /// or, in a shared cache, an unqualified `private` (§5.2.2.7), which the update brought.
    /// Such a response must not be stored (§3), so the cache removes it rather than keep
    /// answering other requests with it.
    public var mayStayStored: Bool
}

/// What a `HEAD` response means for a stored `GET` response (RFC 9111 §4.3.5).
public enum HeadFreshening: Hashable, Sendable {
    /// The validators and length match: update the stored fields as for a `304`.
    case update
    /// They differ: the stored response must be validated before reuse
    /// (``StoredResponseFacts/Flags/invalidated``).
    case markStale
}

extension CacheEngine {
    /// Which stored responses a `304 (Not Modified)` updates (RFC 9111 §4.3.4).
    ///
    /// - Parameters:
    ///   - notModified: The 304's fields.
    ///   - request: The request the 304 answers; only stored responses it could have selected
    ///     are considered (the initial set).
    ///   - candidates: All stored responses under the request's cache key.
    ///   - validated: The responses whose validators the conditional request carried
    ///     (``Forwarding/validated``). When the 304 carries no validator and exactly one
    ///     response was validated, that one is updated: the 304 answers the question the
    ///     cache asked about it. (RFC 9111 states the rule for a stored response that has no
    ///     validator either; a validated response is the same situation.)
    /// - Returns: Indexes into `candidates`.
    public func responsesToUpdate(
        notModified: HeaderFields, request: HeaderFields, candidates: [StoredResponseFacts], validated: [Int] = []
    ) -> [Int] {
        let initial = candidates.indices.filter { candidates[$0].canAnswer(request) }
        let tag = notModified[.eTag].flatMap { EntityTag($0) }
        let lastModified = notModified[.lastModified].flatMap { HTTPDate.parse($0) }
        if let tag, !tag.isWeak {
            return initial.filter { candidates[$0].entityTag.map(tag.strongMatches) ?? false }
        }
        if tag != nil || lastModified != nil {
            let matching = initial.filter { index in
                let facts = candidates[index]
                if let tag { return facts.entityTag.map(tag.weakMatches) ?? false }
                return facts.lastModified == lastModified
            }
            let mostRecent = matching.max { candidates[$0].date < candidates[$1].date }
            return mostRecent.map { [$0] } ?? []
        }
        if initial.count == 1 && !candidates[initial[0]].hasValidator { return initial }
        if validated.count == 1 && initial.contains(validated[0]) { return validated }
        return []
    }

    /// The stored fields updated with those of a newer response, a `304` or a `HEAD`
    /// response (RFC 9111 §3.2): each field the new response has replaces the stored lines
    /// of that name, except `Content-Length`, `Content-Range`, `Content-Digest` (it describes
    /// the new response's own content, which a `304` or `HEAD` response does not have: RFC 9530
    /// §2) and the fields §3.1 keeps out of storage. Those include the fields named by a qualified `no-cache` or, in a shared
    /// cache, `private` of the updated response: the newer response's directives when it
    /// has some, else the stored ones, which stay in force (a `304` without `Cache-Control`
    /// must not bring a `Set-Cookie` that the stored `private="Set-Cookie"` keeps out,
    /// §5.2.2.4, §5.2.2.7). A stored `Age` the new response lacks is removed, since the
    /// response was just validated at the origin (§4.2.3, "age").
    public func updatedFields(stored: HeaderFields, with newer: HeaderFields, responseTime: Timestamp) -> HeaderFields {
        updatedFieldsInForce(stored: stored, with: newer, responseTime: responseTime).fields
    }

    /// ``updatedFields(stored:with:responseTime:)`` and the directives in force for the fields
    /// it returns (as ``effectiveDirectives(_:)`` gives them), parsed once: a `304` that
    /// brings its own `Cache-Control` (the common case) leaves the stored fields with the same
    /// directive lines, whose parse is then reused.
    func updatedFieldsInForce(
        stored: HeaderFields, with newer: HeaderFields, responseTime: Timestamp
    ) -> (fields: HeaderFields, inForce: DirectivesInForce) {
        let newerInForce = effectiveDirectives(newer)
        let keptOut = namedFieldsNotStored(newer, directives: newerInForce.directives)
        // The names the newer response replaces: every line of these is dropped from the
        // stored fields, and the newer lines follow the stored ones that remain, in order.
        var replaced: [String] = []
        replaced.reserveCapacity(newer.count)
        for field in newer {
            let name = field.lowercasedName
            guard !Self.isNotStored(name, named: keptOut), !ASCII.contains(Self.contentDescribingFieldNames, name),
                !ASCII.contains(replaced, name)
            else { continue }
            replaced.append(name)
        }
        let dropsAge = !newer.contains(.age)
        let ageName = HeaderField.Name.age.lowercasedName
        var result = HeaderFields()
        result.reserveCapacity(stored.count + newer.count + 1)
        for field in stored where !ASCII.contains(replaced, field.lowercasedName) {
            // A stored `Age` the new response lacks goes: it was just validated (§4.2.3).
            if dropsAge && field.isNamed(ageName) { continue }
            result.append(field)
        }
        for field in newer where ASCII.contains(replaced, field.lowercasedName) {
            result.append(field)
        }
        if !newer.contains(.date) { result[.date] = HTTPDate.format(responseTime) }
        // The directives now in force may name fields the newer response brought (§3.1).
        var inForce = sameDirectiveLines(result, newer) ? newerInForce : effectiveDirectives(result)
        var named = inForce.directives.noCacheFieldNames
        if configuration.isShared { named += inForce.directives.privateFieldNames }
        if !named.isEmpty {
            result.removeAll(lowercasedNamesIn: named)
            // Removing a directive field itself changes what is in force.
            if named.contains(where: isDirectiveFieldName) { inForce = effectiveDirectives(result) }
        }
        return (result, (inForce.directives, inForce.targetedField))
    }

    /// The fields describing a response's own content, which a `304` or `HEAD` response
    /// does not have (lowered): never taken from them into the stored fields.
    private static let contentDescribingFieldNames = [HeaderField.Name.contentLength, .contentRange, .contentDigest]
        .map(\.lowercasedName)

    /// Whether `name` is `Cache-Control` or one of the configuration's targeted fields, the
    /// fields ``effectiveDirectives(_:)`` reads (case ignored).
    func isDirectiveFieldName(_ name: String) -> Bool {
        ASCII.equalsIgnoringCase(name, HeaderField.Name.cacheControl.rawName)
            || configuration.targetedFieldNames.contains { ASCII.equalsIgnoringCase($0, name) }
    }

    /// Whether `a` and `b` have the same lines of every field ``effectiveDirectives(_:)``
    /// reads, so that the directives in force for one are those for the other.
    private func sameDirectiveLines(_ a: HeaderFields, _ b: HeaderFields) -> Bool {
        let cacheControl = HeaderField.Name.cacheControl.lowercasedName
        guard a.hasSameLines(as: b, where: { $0 == cacheControl }) else { return false }
        return configuration.targetedFieldNames.allSatisfy { name in
            a.hasSameLines(as: b, where: { ASCII.isLowercased($0, of: name) })
        }
    }

    /// Freshens a stored response with a `304` or a matching `HEAD` response
    /// (RFC 9111 §4.3.4, §4.3.5): the fields updated per §3.2 and the facts computed anew
    /// with the validation's request and response times, and whether the response so updated
    /// may stay stored.
    public func freshen(
        storedFields: HeaderFields, storedFacts: StoredResponseFacts, with newer: HeaderFields,
        request: HeaderFields, requestTime: Timestamp, responseTime: Timestamp
    ) -> FreshenedResponse {
        let (fields, inForce) = updatedFieldsInForce(stored: storedFields, with: newer, responseTime: responseTime)
        var (facts, _) = makeFacts(
            status: storedFacts.status, fields: fields, requestFields: request, requestTime: requestTime,
            responseTime: responseTime, inForce: inForce)
        facts.flags.formUnion(storedFacts.flags.intersection(.incomplete))
        // The body is the one checked when it was stored.
        facts.integrity = storedFacts.integrity
        let directives = inForce.directives
        // As when it was stored (§3): must-understand with an understood status overrides no-store.
        let noStore = directives.noStore && !(directives.mustUnderstand && understoodStatuses.contains(facts.status))
        let mayStayStored = !noStore && !(configuration.isShared && directives.isPrivate)
        return FreshenedResponse(fields: fields, facts: facts, mayStayStored: mayStayStored)
    }

    /// Compares a `200` response to `HEAD` with a stored `GET` response (RFC 9111 §4.3.5):
    /// every validator the HEAD response has (`ETag`, `Last-Modified`) and its
    /// `Content-Length`, if any, must equal the stored one's.
    public func headFreshening(head: HeaderFields, stored: StoredResponseFacts) -> HeadFreshening {
        if let text = head[.eTag] {
            guard let tag = EntityTag(text), let storedTag = stored.entityTag, tag == storedTag else {
                return .markStale
            }
        }
        if let text = head[.lastModified] {
            guard let time = HTTPDate.parse(text), time == stored.lastModified else { return .markStale }
        }
        if let text = head[.contentLength] {
            guard let length = ASCII.parseDigits(text, cap: Int(Int64.max / 2)), Int64(length) == stored.contentLength
            else { return .markStale }
        }
        return .update
    }

    /// The URIs whose stored responses a response to `request` invalidates (RFC 9111 §4.4):
    /// for an unsafe method (anything but GET, HEAD, OPTIONS, TRACE) with a 2xx or 3xx
    /// status, the target URI and the `Location` and `Content-Location` URIs that share its
    /// origin. Normalized, as ``CacheKey/uri`` is.
    public func invalidatedURIs(request: RequestHead, response: ResponseHead) -> [String] {
        guard !safeMethods.contains(request.method), (200..<400).contains(response.status),
            let target = URIParts(request.uri)
        else { return [] }
        var uris = [target.normalized]
        for name: HeaderField.Name in [.location, .contentLocation] {
            guard let reference = response.fields[name], let resolved = target.resolve(reference),
                resolved.origin == target.origin
            else { continue }
            let uri = resolved.normalized
            if !uris.contains(uri) { uris.append(uri) }
        }
        return uris
    }
}
