/// A response that may be stored, with the fields to keep and its precomputed facts.
public struct StorableResponse: Hashable, Sendable {
    /// The header fields to store: as received, less those RFC 9111 §3.1 excludes, with a
    /// `Date` added when the response had none (RFC 9110 §6.6.1).
    public var fields: HeaderFields
    /// The facts a lookup needs.
    public var facts: StoredResponseFacts
    /// What was dropped or assumed while preparing the response, for logs and `explain`.
    public var notes: [Reason]
}

/// Whether and how to store a response (RFC 9111 §3).
public enum StorageDecision: Hashable, Sendable {
    /// Store ``StorableResponse/fields`` and ``StorableResponse/facts`` with the body.
    case store(StorableResponse)
    /// Do not store; the reasons say why.
    case doNotStore([Reason])

    /// The reasons behind the decision.
    public var reasons: [Reason] {
        switch self {
        case .store(let response): return response.notes
        case .doNotStore(let reasons): return reasons
        }
    }
}

/// The response directives in force for some fields and the targeted field they came from,
/// if any (``CacheEngine/effectiveDirectives(_:)`` without its notes).
typealias DirectivesInForce = (directives: ResponseCacheControl, targetedField: String?)

extension CacheEngine {
    /// The response directives in force for `fields`: the first valid, non-empty targeted
    /// field of the configuration (RFC 9213 §2.2), else `Cache-Control`.
    ///
    /// - Returns: The directives, the name of the targeted field used (if any), and notes.
    public func effectiveDirectives(_ fields: HeaderFields) -> (
        directives: ResponseCacheControl, targetedField: String?, notes: [Reason]
    ) {
        var notes: [Reason] = []
        for name in configuration.targetedFieldNames where fields.contains(name) {
            if let directives = targetedDirectives(fields, name: name) {
                notes.append(.targetedFieldUsed(name))
                let parsed = ResponseCacheControl(CacheControl(directives: directives), field: name)
                return (parsed, name, notes + parsed.notes)
            }
            notes.append(.invalidTargetedField(name))
        }
        let parsed = ResponseCacheControl(CacheControl(fields: fields))
        return (parsed, nil, notes + parsed.notes)
    }

    /// A targeted field parsed as a Structured Field Dictionary and mapped to directives
    /// (RFC 9213 §2.1); `nil` when empty, when it does not parse, or when a directive this
    /// cache knows has a value of the wrong type: RFC 9213 §2.1 says not to consume such
    /// values, and the whole field is then ignored so that `Cache-Control` applies.
    private func targetedDirectives(_ fields: HeaderFields, name: String) -> [CacheDirective]? {
        let lines = fields.values(named: name)
        guard let dictionary = StructuredFields.parseDictionary(lines.joined(separator: ", ")), !dictionary.isEmpty
        else { return nil }
        var directives: [CacheDirective] = []
        for (key, member) in dictionary {
            // Parameters are ignored (§2.1); an inner list is no directive value at all.
            guard case .item(let item, _) = member else {
                if TargetedValueType.of(key) == nil { continue }
                return nil
            }
            if case .boolean(false) = item, TargetedValueType.of(key) == nil { continue }  // an absent extension
            guard let directive = TargetedValueType.directive(key, item) else { return nil }
            directives.append(directive)
        }
        return directives
    }

    /// Decides whether a response may be stored and prepares what to store (RFC 9111 §3,
    /// §3.1, §3.5, §4.1).
    ///
    /// - Parameters:
    ///   - request: The request that produced the response.
    ///   - response: The response's status and fields (for a `HEAD` or `304`, see
    ///     ``freshen(storedFields:storedFacts:with:request:requestTime:responseTime:)``).
    ///   - requestTime: When the request was sent (`request_time`, §4.2.3).
    ///   - responseTime: When the response was received (`response_time`).
    public func storageDecision(
        for request: RequestHead, response: ResponseHead, requestTime: Timestamp, responseTime: Timestamp
    ) -> StorageDecision {
        if request.method == "POST" {
            return postStorageDecision(
                for: request, response: response, requestTime: requestTime, responseTime: responseTime)
        }
        if response.status == 206, let part = incompletePart(request, response) {
            return partStorageDecision(
                for: request, response: part.head, isWhole: part.isWhole, requestTime: requestTime,
                responseTime: responseTime)
        }
        var refusals: [Reason] = []
        if !isStoredMethod(request.method) { refusals.append(.methodNotStored(request.method)) }
        let status = response.status
        if status < 200 {
            refusals.append(.statusNotFinal(status))
        }
        let (directives, targeted, directiveNotes) = effectiveDirectives(response.fields)
        let understood = understoodStatuses.contains(status)
        if status == 206 || status == 304 {
            refusals.append(.statusNotStoredAsComplete(status))
        } else if status == 412 || status == 416 {
            // The outcome of evaluating the request's own If-Match, If-Unmodified-Since or
            // Range (RFC 9110 §13.2.2): none is in the key, so a stored one would answer
            // every later request for the URL with another request's failed condition (and a
            // response newly stored replaces the one there, §4).
            refusals.append(.statusAnswersOnlyThisRequest(status))
        } else if directives.mustUnderstand && !understood && status >= 200 {
            refusals.append(.mustUnderstandUnknownStatus(status))
        }
        // must-understand with an understood status overrides no-store (§5.2.2.3).
        if directives.noStore && !(directives.mustUnderstand && understood) {
            refusals.append(.responseNoStore)
        }
        if RequestCacheControl(fields: request.fields).noStore { refusals.append(.requestNoStore) }
        let shared = configuration.isShared
        if shared && directives.isPrivate { refusals.append(.privateInSharedCache) }
        if shared && request.fields.contains(.authorization)
            && !(directives.isPublic || directives.mustRevalidate || directives.sMaxAge != nil)
        {
            refusals.append(.authorizationInSharedCache)
        }
        // A targeted field in force makes the cache ignore Expires (RFC 9213 §2.2).
        let explicitlyCacheable =
            directives.isPublic || (!shared && directives.isPrivate) || directives.maxAge != nil
            || (shared && directives.sMaxAge != nil) || (targeted == nil && response.fields.contains(.expires))
        if !explicitlyCacheable && !heuristicallyCacheableStatuses.contains(status) {
            refusals.append(.notExplicitlyCacheable(status))
        }
        let vary = Vary(fields: response.fields)
        if vary.isAny { refusals.append(.varyStar) }
        if !refusals.isEmpty { return .doNotStore(refusals) }

        var fields = response.fields
        var notes = directiveNotes
        let named = namedFieldsNotStored(fields, directives: directives)
        let dropped = fields.extractLines { Self.isNotStored($0.lowercasedName, named: named) }
        if !dropped.isEmpty { notes.append(.fieldsNotStored(dropped.map(\.name))) }
        if !fields.contains(.date) {
            fields.append(name: .date, value: HTTPDate.format(responseTime))
            notes.append(.dateAddedFromResponseTime)
        }
        // Parsed once: dropping fields changes the directives only when it drops a directive field.
        var inForce: DirectivesInForce = (directives, targeted)
        if dropped.contains(where: { isDirectiveFieldName($0.lowercasedName) }) {
            let parsed = effectiveDirectives(fields)
            inForce = (parsed.directives, parsed.targetedField)
        }
        let (facts, factNotes) = makeFacts(
            status: status, fields: fields, requestFields: request.fields, requestTime: requestTime,
            responseTime: responseTime, inForce: inForce)
        return .store(StorableResponse(fields: fields, facts: facts, notes: notes + factNotes))
    }

    /// The names (lowered) of the fields a response with `fields` and `directives` keeps out of
    /// storage besides ``fieldNamesNeverStored`` (RFC 9111 §3.1): those its `Connection` names
    /// (RFC 9110 §7.6.1), those a qualified `no-cache` names and, in a shared cache, those a
    /// qualified `private` names. Usually one name or none: the fixed list is not copied in.
    func namedFieldsNotStored(_ fields: HeaderFields, directives: ResponseCacheControl) -> [String] {
        var named: [String] = []
        for member in fields.listMembers(named: .connection) where ASCII.isToken(member) {
            named.append(ASCII.lowercased(member))
        }
        named += directives.noCacheFieldNames
        if configuration.isShared { named += directives.privateFieldNames }
        return named
    }

    /// Whether the field `name` (lowered) is not stored: it is one of ``fieldNamesNeverStored``
    /// (hop-by-hop fields, `Trailer` among them, and the proxy authentication fields) or of
    /// `named` (``namedFieldsNotStored(_:directives:)``).
    static func isNotStored(_ name: String, named: [String]) -> Bool {
        ASCII.contains(fieldNamesNeverStored, name) || ASCII.contains(named, name)
    }

    /// Computes the facts of a response about to be stored or just freshened.
    ///
    /// - Parameters:
    ///   - status: The response's status code.
    ///   - fields: The fields as they will be stored.
    ///   - requestFields: The request's fields, for the values `Vary` nominates (§4.1).
    ///   - requestTime: When the request was sent (`request_time`, §4.2.3).
    ///   - responseTime: When the response was received (`response_time`).
    public func makeFacts(
        status: Int, fields: HeaderFields, requestFields: HeaderFields, requestTime: Timestamp,
        responseTime: Timestamp
    ) -> (facts: StoredResponseFacts, notes: [Reason]) {
        let (directives, targeted, _) = effectiveDirectives(fields)
        return makeFacts(
            status: status, fields: fields, requestFields: requestFields, requestTime: requestTime,
            responseTime: responseTime, inForce: (directives, targeted))
    }

    /// ``makeFacts(status:fields:requestFields:requestTime:responseTime:)`` with the
    /// directives in force for `fields` already parsed.
    func makeFacts(
        status: Int, fields: HeaderFields, requestFields: HeaderFields, requestTime: Timestamp,
        responseTime: Timestamp, inForce: DirectivesInForce
    ) -> (facts: StoredResponseFacts, notes: [Reason]) {
        let (directives, targeted) = inForce
        var notes: [Reason] = []
        let shared = configuration.isShared

        var date = responseTime
        if let dateText = fields[.date] {
            if let parsed = HTTPDate.parse(dateText, now: responseTime) {
                date = parsed
            } else {
                notes.append(.invalidDate(dateText))
            }
        }

        var ageValue = 0.0
        if let firstAge = fields.listMembers(named: .age).first {
            if let age = ASCII.parseDigits(firstAge, cap: deltaSecondsLimit) {
                ageValue = Double(age)
            } else {
                notes.append(.invalidAge(String(firstAge)))
            }
        }

        var lastModified: Timestamp?
        if let text = fields[.lastModified] {
            lastModified = HTTPDate.parse(text, now: responseTime)
            if lastModified == nil { notes.append(.invalidLastModified(text)) }
        }

        // Freshness lifetime: the first match of RFC 9111 §4.2.1.
        var lifetime = 0.0
        var source = LifetimeSource.none
        if shared, let sMaxAge = directives.sMaxAge {
            (lifetime, source) = (Double(sMaxAge), .sMaxAge)
        } else if let maxAge = directives.maxAge {
            (lifetime, source) = (Double(maxAge), .maxAge)
        } else if targeted == nil, fields.contains(.expires) {
            let values = fields.values(named: .expires)
            if Set(values).count > 1 {
                notes.append(.conflictingExpires)
                source = .invalid
            } else if let expires = HTTPDate.parse(values[0], now: responseTime) {
                (lifetime, source) = (expires - date, .expires)
            } else {
                notes.append(.invalidExpires(values[0]))
                source = .invalid
            }
        } else if heuristicallyCacheableStatuses.contains(status) || directives.isPublic
            || (!shared && directives.isPrivate)
        {
            // §4.2.2: a fraction of the time since Last-Modified, capped.
            if let lastModified, lastModified < date {
                lifetime = min(
                    (date - lastModified) * configuration.heuristicFraction, configuration.maximumHeuristicLifetime)
                source = .heuristic
            }
        }
        if source == .maxAge || source == .sMaxAge {
            let directive = source == .sMaxAge ? "s-maxage" : "max-age"
            let invalid = directives.notes.contains { note in
                switch note {
                case .conflictingDirective(_, let name), .invalidDirectiveValue(_, let name, _):
                    return name == directive
                default: return false
                }
            }
            if invalid { source = .invalid }
        }

        var flags: StoredResponseFacts.Flags = []
        if directives.noCache { flags.insert(.noCache) }
        if directives.mustRevalidate { flags.insert(.mustRevalidate) }
        if directives.proxyRevalidate { flags.insert(.proxyRevalidate) }
        if directives.sMaxAge != nil { flags.insert(.hasSMaxAge) }
        if directives.immutable { flags.insert(.immutable) }
        if directives.isPublic { flags.insert(.isPublic) }
        if directives.isPrivate { flags.insert(.isPrivate) }
        if targeted != nil { flags.insert(.targeted) }

        var entityTag: EntityTag?
        if let text = fields[.eTag] {
            entityTag = EntityTag(text)
            if entityTag == nil { notes.append(.invalidEntityTag(text)) }
        }
        let vary = Vary(fields: fields)
        var contentLength: Int64?
        if let text = fields[.contentLength], let length = ASCII.parseDigits(text, cap: Int(Int64.max / 2)) {
            contentLength = Int64(length)
        }
        let facts = StoredResponseFacts(
            status: status, requestTime: requestTime, responseTime: responseTime, date: date, ageValue: ageValue,
            freshnessLifetime: lifetime, lifetimeSource: source, staleWhileRevalidate: directives.staleWhileRevalidate,
            staleIfError: directives.staleIfError, flags: flags, entityTag: entityTag, lastModified: lastModified,
            vary: vary, varyValues: vary.requestValues(requestFields),
            varyRawValues: vary.fieldNames.map { requestFields[$0] }, contentLength: contentLength)
        return (facts, notes)
    }
}

/// The value a response directive takes in a targeted field (RFC 9213 §2.1): "max-age
/// has an integer value; no-store always has a Boolean true value, and no-cache has a value
/// that can be either Boolean true or a string".
enum TargetedValueType {
    /// A non-negative Integer (delta-seconds, RFC 9111 §1.2.2).
    case seconds
    /// Boolean true only.
    case flag
    /// Boolean true, or a String listing field names (§5.2.2.4, §5.2.2.7).
    case flagOrFieldNames

    /// The type of a directive this cache implements; `nil` for extensions, which may take
    /// any value (RFC 9111 §5.2.3).
    static func of(_ name: String) -> TargetedValueType? {
        switch name {
        case "max-age", "s-maxage", "stale-while-revalidate", "stale-if-error": return .seconds
        case "no-cache", "private": return .flagOrFieldNames
        case "no-store", "must-revalidate", "proxy-revalidate", "public", "immutable", "must-understand",
            "no-transform":
            return .flag
        default: return nil
        }
    }

    /// `name` with value `item` as a directive, or `nil` when the value violates the
    /// directive's type: a String or Decimal `max-age`, a `no-store=?0`, a negative lifetime.
    static func directive(_ name: String, _ item: StructuredItem) -> CacheDirective? {
        switch (of(name), item) {
        case (.seconds, .integer(let value)) where value >= 0:
            return CacheDirective(name: name, argument: String(value))
        case (.flag, .boolean(true)), (.flagOrFieldNames, .boolean(true)):
            return CacheDirective(name: name)
        case (.flagOrFieldNames, .string(let value)):
            return CacheDirective(name: name, argument: value)
        case (nil, .boolean(true)):
            return CacheDirective(name: name)
        case (nil, .integer(let value)):
            return CacheDirective(name: name, argument: String(value))
        case (nil, .string(let value)), (nil, .token(let value)):
            return CacheDirective(name: name, argument: value)
        case (nil, _):
            return CacheDirective(name: name, argument: StructuredFields.serialize(item))
        default:
            return nil
        }
    }
}

extension CacheEngine {
    /// Whether a response to `POST` is stored as the response for its target URI, for later
    /// `GET` and `HEAD` requests (RFC 9110 §9.3.3): only "when they include explicit
    /// freshness information and a Content-Location header field that has the same value as
    /// the POST's target URI". It is then decided as the response to a `GET` of that URI
    /// would be, and stored under that URI's key; a later `POST` is never answered from it.
    func postStorageDecision(
        for request: RequestHead, response: ResponseHead, requestTime: Timestamp, responseTime: Timestamp
    ) -> StorageDecision {
        var get = request
        get.method = "GET"
        let decision = storageDecision(
            for: get, response: response, requestTime: requestTime, responseTime: responseTime)
        guard case .store(var storable) = decision else {
            return .doNotStore([.postResponseNotReusable] + decision.reasons)
        }
        let explicit: Set<LifetimeSource> = [.sMaxAge, .maxAge, .expires]
        guard let target = URIParts(request.uri), let location = response.fields[.contentLocation],
            let resolved = target.resolve(location), resolved.normalized == target.normalized,
            explicit.contains(storable.facts.lifetimeSource)
        else { return .doNotStore([.postResponseNotReusable]) }
        storable.notes.append(.postResponseStoredForTarget)
        return .store(storable)
    }
}

extension CacheEngine {
    /// A `206` as the incomplete `200` it is part of (RFC 9111 §3.3: "a 206 (Partial Content)
    /// response MAY be stored as if it were an incomplete 200 (OK) response"): the answer to a
    /// `GET` with `Range`, one part of a known complete length. Its fields with the complete
    /// `Content-Length`, and its `Content-Range` only when the part does not start at byte 0 (a
    /// first part is the incomplete response a cut-off `200` leaves). `nil` for any other `206`
    /// (not stored), and for one whose `Content-Length` is not the size of its range.
    ///
    /// Any validator will do, or none: the part answers ranges wholly within it while it is
    /// fresh (§3.3), like any stored response. Only parts with the same strong validator are
    /// ever combined (§3.4, ``partsCombine(_:_:)``) or resumed (``resumptionFields(stored:storedLength:)``),
    /// so one without is kept alone, and, having nothing to validate with, is fetched again
    /// once stale.
    ///
    /// A part that is the whole representation (`bytes 0-N/N+1`, what a browser's media
    /// request `Range: bytes=0-` usually gets) is that complete `200` (``partStorageDecision``
    /// stores it so), and answers every later request for the URL.
    func incompletePart(_ request: RequestHead, _ response: ResponseHead) -> (head: ResponseHead, isWhole: Bool)? {
        guard request.method == "GET", request.fields.contains(.range),
            let text = response.fields[.contentRange], response.fields.values(named: .contentRange).count == 1,
            let contentRange = ContentRange(text), let range = contentRange.range,
            let length = contentRange.completeLength, range.count <= length
        else { return nil }
        // A Content-Length other than the range's size leaves unknown which bytes came
        // (RFC 9110 §14.4: Content-Range describes the enclosed part): not stored.
        if let declared = response.fields[.contentLength], Int64(declared) != Int64(range.count) { return nil }
        var fields = response.fields
        if range.lowerBound == 0 { fields.removeAll(named: .contentRange) }
        fields[.contentLength] = String(length)
        return (ResponseHead(status: 200, fields: fields), range.count == length)
    }

    /// The decision for a part (``incompletePart(_:_:)``): as for the complete `200`, then
    /// marked incomplete unless it holds every byte. It answers later requests for ranges
    /// wholly within it (§3.4).
    func partStorageDecision(
        for request: RequestHead, response part: ResponseHead, isWhole: Bool, requestTime: Timestamp,
        responseTime: Timestamp
    ) -> StorageDecision {
        var whole = request
        whole.fields.removeAll(named: .range)
        whole.fields.removeAll(named: .ifRange)
        let decision = storageDecision(
            for: whole, response: part, requestTime: requestTime, responseTime: responseTime)
        guard !isWhole, case .store(var storable) = decision else { return decision }
        storable.facts.flags.insert(.incomplete)
        storable.notes.append(.storedAsIncomplete)
        return .store(storable)
    }
}
