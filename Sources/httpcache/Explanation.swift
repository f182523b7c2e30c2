import CacheExchange
import CacheSemantics
import Foundation
import HTTPCacheCore

/// The plain-words account `httpcache explain` prints: the decisions of the ``CacheEngine`` on
/// the response just obtained, what the next requests will do and when, and warnings about the
/// origin's fields in the spirit of REDbot.
struct Explanation {
    /// The request as sent (its URL the final one after redirects).
    var request: RequestHead
    var result: CachedResponse
    /// The stored responses for the URL now.
    var entries: [CacheEntryInfo]
    var engine: CacheEngine
    var now: Timestamp
    var elapsed: Duration
    /// For a `QUERY`: the part of its key its content makes (RFC 10008 §2.7).
    var contentKey: QueryContentKey?

    /// The stored response that answers ``request`` (its `Vary` fields match), if any.
    var entry: CacheEntryInfo? {
        let readable = entries.filter { $0.facts != nil }
        guard isStoredMethod(request.method) || request.method == "HEAD",
            let index = engine.selectVariant(request.fields, candidates: readable.compactMap(\.facts))
        else { return nil }
        return readable[index]
    }

    /// The fields as the origin sent them: the stored ones when the response came from the
    /// store, else those received without this cache's `Cache-Status` member.
    var originFields: HeaderFields {
        if let entry, [.hit, .stale, .revalidated].contains(result.outcome) { return entry.fields }
        let ours = result.cacheStatus.fieldValue
        var fields: [(String, String)] = []
        for field in result.head.combinedFields {
            guard field.name.lowercased() == "cache-status" else {
                fields.append((field.name, field.value))
                continue
            }
            if field.value == ours { continue }
            if field.value.hasSuffix(", " + ours) {
                fields.append((field.name, String(field.value.dropLast(ours.count + 2))))
            } else {
                fields.append((field.name, field.value))
            }
        }
        return HeaderFields(fields)
    }

    /// The whole account.
    var text: String {
        let fields = originFields
        let status = result.statusCode
        var text = "\(request.method) \(request.uri)\n"
        text += "→ \(Report.statusLine(status).dropFirst(9)), \(result.outcome), in \(Format.elapsed(elapsed))\n"
        text += "  Cache-Status: \(result.cacheStatus.fieldValue)\n"
        for reason in result.reasons { text += "  because: \(reason)\n" }
        text += "\n"

        let decision = engine.storageDecision(
            for: RequestHead(method: request.method, uri: request.uri, fields: request.fields),
            response: ResponseHead(status: status, fields: fields), requestTime: now, responseTime: now)
        var facts: StoredResponseFacts?
        var rows: [[String]] = []
        if let contentKey { rows.append(["Content key:", contentKey.description]) }
        // A response the cache made itself (the 504 of only-cache) says nothing about the origin.
        let madeByCache = !result.cacheStatus.hit && result.cacheStatus.forward == nil
        if madeByCache {
            rows.append([
                "Stored:",
                "nothing that answers this request; the cache answered \(status) without contacting the origin",
            ])
        } else if let entry, let stored = entry.facts {
            facts = stored
            var location = entry.isMemoryOnly ? "in memory only" : "on disk"
            if entry.isPinned { location += ", pinned" }
            rows.append([
                "Stored:",
                "yes, \(Format.bytes(entry.bodySize)) \(location), stored "
                    + "\(Format.seconds(now.secondsSince1970 - entry.storedAt)) ago, "
                    + "\(Format.count(entry.hits, "hit"))",
            ])
        } else {
            switch decision {
            case .doNotStore(let reasons):
                rows.append(["Stored:", "no: " + reasons.map(\.description).joined(separator: "; ")])
            case .store(let storable):
                facts = storable.facts
                let why = result.reasons.filter { if case .configured = $0 { true } else { false } }
                let detail = why.isEmpty ? "" : ": " + why.map(\.description).joined(separator: "; ")
                rows.append(["Stored:", "no, although RFC 9111 allows storing it\(detail)"])
            }
        }
        if let facts {
            rows.append(["Lifetime:", Self.lifetime(facts)])
            let age = facts.currentAge(at: now)
            let remaining = facts.freshnessLifetime - age
            let state =
                remaining > 0
                ? "fresh for \(Format.seconds(remaining)) more (until \(Self.clockTime(now + remaining)))"
                : "stale by \(Format.seconds(-remaining))"
            rows.append(["Age now:", "\(Format.seconds(age)), \(state)"])
            rows.append(["Validators:", Self.validators(facts)])
            rows.append(["Vary:", Self.vary(facts)])
            if let entry, entry.facts != nil { rows.append(["Digest:", Self.digest(facts, fields: entry.fields)]) }
            let directives = Self.notableDirectives(facts)
            if !directives.isEmpty { rows.append(["Also:", directives.joined(separator: ", ")]) }
        }
        text += Format.table(rows)

        text += "\nNext requests (with the default policy, as `httpcache get` sends them):\n"
        if let entry, let stored = entry.facts {
            let others = entries.count > 1 ? " (\(entries.count) variants stored for this URL)" : ""
            for line in timeline(stored) { text += "  - \(line)\n" }
            if !others.isEmpty { text += "  -\(others)\n" }
        } else if !isStoredMethod(request.method) && request.method != "HEAD" {
            text += "  - go to the origin: \(request.method) requests are not answered from the cache\n"
        } else {
            text += "  - go to the origin: nothing stored answers them\n"
        }

        let warnings =
            madeByCache
            ? []
            : warnings(
                fields: fields, status: status, decision: decision, facts: facts,
                fromOrigin: [.miss, .bypass].contains(result.outcome))
        text += "\nWarnings:" + (warnings.isEmpty ? " none\n" : "\n")
        for warning in warnings { text += "  - \(warning)\n" }
        return text
    }

    /// What requests for the URL with the default policy will do from now on, by the engine's
    /// own decisions at the moments they change. (A request's own policy is for that request;
    /// `explain --offline` asks what is stored without asking the origin.)
    func timeline(_ facts: StoredResponseFacts) -> [String] {
        let lookup = CacheRequest(RequestHead(method: "GET", uri: request.uri, fields: request.fields))
        var lines: [String] = []
        var time = now
        for _ in 0..<4 {
            let when = time == now ? "now" : "from \(Self.clockTime(time)) (in \(Format.seconds(time - now)))"
            switch engine.lookup(lookup, candidates: [facts], now: time) {
            case .serve(let use):
                guard use.timeToLive > 0 else {
                    lines.append("\(when): served stale: " + use.reasons.map(\.description).joined(separator: "; "))
                    return lines
                }
                lines.append(
                    "\(when): served from the cache without contacting the origin, for "
                        + "\(Format.seconds(use.timeToLive)) "
                        + "more (until \(Self.clockTime(time + use.timeToLive)))")
                time = time + use.timeToLive + 0.5
            case .serveStaleWhileRevalidate(let use, _):
                let allowance = Double(facts.staleWhileRevalidate ?? 0)
                let left = max(0, allowance + use.timeToLive)
                lines.append(
                    "\(when): served stale at once while it is revalidated in the background "
                        + "(stale-while-revalidate=\(Int(allowance))), for \(Format.seconds(left)) more")
                time = time + left + 0.5
            case .forward(let forwarding):
                if forwarding.isValidation {
                    let conditions = forwarding.fields.filter { $0.name.lowercased().hasPrefix("if-") }
                        .map { "\($0.name): \($0.value)" }.joined(separator: ", ")
                    lines.append(
                        "\(when): revalidated with \(conditions): a 304 refreshes the stored response "
                            + "without resending the body")
                } else {
                    lines.append(
                        "\(when): fetched again in full from the origin ("
                            + forwarding.reasons.map(\.description).joined(separator: "; ") + ")")
                }
                lines.append(fallbackLine(lookup, facts, at: time))
                return lines
            case .gatewayTimeout(let reasons):
                lines.append(
                    "\(when): answered 504 without contacting the origin ("
                        + reasons.map(\.description).joined(separator: "; ") + ")")
                return lines
            }
        }
        return lines
    }

    /// What happens when the origin cannot be reached at `time`.
    private func fallbackLine(_ lookup: CacheRequest, _ facts: StoredResponseFacts, at time: Timestamp) -> String {
        switch engine.fallback(after: .unreachable, request: lookup, candidate: (0, facts), now: time) {
        case .serve(let use):
            for reason in use.reasons {
                if case .staleIfError(_, let allowance) = reason {
                    return
                        "if the origin cannot be reached then: served stale within "
                        + "stale-if-error=\(allowance) (RFC 5861 §4)"
                }
            }
            return "if the origin cannot be reached then: served stale anyway (RFC 9111 §4.2.4)"
        case .gatewayTimeout(let reasons):
            return "if the origin cannot be reached then: 504 Gateway Timeout ("
                + reasons.map(\.description).joined(separator: "; ") + ")"
        case .passThrough:
            return "if the origin cannot be reached then: the error is passed on"
        }
    }

    // MARK: Facts in words

    /// `60 s, from max-age`; `1 h, heuristic: 10% of the time since Last-Modified`.
    static func lifetime(_ facts: StoredResponseFacts) -> String {
        let span = Format.seconds(max(0, facts.freshnessLifetime))
        let targeted = facts.flags.has(.targeted) ? " in a targeted field such as CDN-Cache-Control (RFC 9213)" : ""
        switch facts.lifetimeSource {
        case .maxAge: return "\(span), from max-age\(targeted) (RFC 9111 §4.2.1)"
        case .sMaxAge: return "\(span), from s-maxage\(targeted): this is a shared cache (RFC 9111 §4.2.1)"
        case .expires: return "\(span), from Expires minus Date (RFC 9111 §4.2.1)"
        case .heuristic:
            return "\(span), heuristic: a fraction of the time since Last-Modified, as no max-age or Expires was given "
                + "(RFC 9111 §4.2.2)"
        case .none: return "none: no max-age, Expires or Last-Modified, so it is stale at once (RFC 9111 §4.2)"
        case .invalid: return "0 s: the freshness fields are invalid or conflicting, so it is stale (RFC 9111 §4.2.1)"
        }
    }

    /// `ETag "v1" (strong), Last-Modified …` or `none`.
    static func validators(_ facts: StoredResponseFacts) -> String {
        var parts: [String] = []
        if let tag = facts.entityTag { parts.append("ETag \(tag) (\(tag.isWeak ? "weak" : "strong"))") }
        if let modified = facts.lastModified { parts.append("Last-Modified \(HTTPDate.format(modified))") }
        return parts.isEmpty
            ? "none: when stale it is revalidated with its Date as If-Modified-Since, which origins rarely answer "
                + "with 304, so it is usually fetched again in full (RFC 9111 §4.3.1)"
            : parts.joined(separator: ", ") + ": when stale it is revalidated, and a 304 saves the body"
    }

    /// `none`, `*`, or the nominated fields with the values this response was stored for.
    /// What was checked of a stored body against its response's digests (RFC 9530).
    static func digest(_ facts: StoredResponseFacts, fields: HeaderFields) -> String {
        if let integrity = facts.integrity { return integrity }
        guard fields.contains(.contentDigest) || fields.contains(.reprDigest) else { return "no digest sent" }
        return "not checked (stored before this version checked digests)"
    }

    static func vary(_ facts: StoredResponseFacts) -> String {
        if facts.vary.isAny { return "* (never matches a later request)" }
        if facts.vary.isEmpty { return "none: one stored response answers every request for the URL" }
        return facts.vary.fieldNames.enumerated().map { index, name in
            let value = index < facts.varyValues.count ? facts.varyValues[index] : nil
            return "\(name) (stored for \(value.map { "'\($0)'" } ?? "requests without it"))"
        }.joined(separator: ", ")
    }

    /// The directives that change how the response is reused.
    static func notableDirectives(_ facts: StoredResponseFacts) -> [String] {
        var names: [String] = []
        let flags: [(StoredResponseFacts.Flags, String)] = [
            (.noCache, "no-cache"), (.mustRevalidate, "must-revalidate"), (.proxyRevalidate, "proxy-revalidate"),
            (.immutable, "immutable"), (.isPublic, "public"), (.isPrivate, "private"),
            (.invalidated, "invalidated (validated before reuse)"), (.incomplete, "incomplete body"),
        ]
        for (flag, name) in flags where facts.flags.has(flag) { names.append(name) }
        if let seconds = facts.staleWhileRevalidate { names.append("stale-while-revalidate=\(seconds)") }
        if let seconds = facts.staleIfError { names.append("stale-if-error=\(seconds)") }
        return names
    }

    /// A time of day in UTC with the date, e.g. `2025-05-01T12:00:05Z`.
    static func clockTime(_ time: Timestamp) -> String { Format.timestamp(time.secondsSince1970) }

    // MARK: Warnings

    /// Problems with the origin's fields, each with what it means and what to do.
    func warnings(
        fields: HeaderFields, status: Int, decision: StorageDecision, facts: StoredResponseFacts?, fromOrigin: Bool
    ) -> [String] {
        var warnings: [String] = []
        let (directives, _, directiveNotes) = engine.effectiveDirectives(fields)
        let (parsed, factNotes) = engine.makeFacts(
            status: status, fields: fields, requestFields: [:], requestTime: now, responseTime: now)
        for note in directiveNotes + factNotes {
            switch note {
            case .malformedDirective, .invalidDirectiveValue, .conflictingDirective, .invalidExpires,
                .conflictingExpires, .invalidDate, .invalidAge, .invalidLastModified, .invalidEntityTag,
                .invalidTargetedField:
                let text = note.description
                if !warnings.contains(text) { warnings.append(text) }
            default:
                break
            }
        }
        let storable: Bool
        if case .store = decision { storable = true } else { storable = false }
        let hasValidator = parsed.hasValidator
        let date = fields[.date].flatMap { HTTPDate.parse($0, now: now) }

        if storable && !hasValidator && !directives.noCache {
            warnings.append(
                "no validator (ETag or Last-Modified): once stale it can only be revalidated with its Date as "
                    + "If-Modified-Since, so it is usually fetched again in full (RFC 9111 §4.3.1); send an ETag")
        }
        if directives.noCache && !hasValidator && !directives.noStore {
            warnings.append(
                "no-cache without a validator: every reuse needs the whole body again, as if nothing were cached; "
                    + "send an ETag, or use no-store if that is the intent (RFC 9111 §5.2.2.4)")
        }
        if parsed.lifetimeSource == .maxAge, let maxAge = directives.maxAge, let expiresText = fields[.expires],
            let expires = HTTPDate.parse(expiresText, now: now)
        {
            let reference = date ?? now
            if expires < reference {
                warnings.append(
                    "Expires (\(expiresText)) is in the past beside max-age=\(maxAge): caches that know Cache-Control "
                        + "use max-age (RFC 9111 §5.3), HTTP/1.0 caches treat the response as expired")
            } else if abs((expires - reference) - Double(maxAge)) > 60 {
                warnings.append(
                    "Expires (\(Format.seconds(expires - reference)) after Date) and max-age=\(maxAge) disagree; "
                        + "max-age "
                        + "wins (RFC 9111 §5.3): make them agree or drop Expires")
            }
        }
        if Vary(fields: fields).isAny {
            warnings.append(
                "Vary: * means no later request can match, so no cache stores the response (RFC 9111 §4.1); "
                    + "name the request fields it varies on")
        }
        for name in Vary(fields: fields).fieldNames where ["user-agent", "cookie"].contains(name) {
            warnings.append(
                "Vary: \(name == "cookie" ? "Cookie" : "User-Agent") stores a separate response for almost every "
                    + "client, so few requests hit; vary on fewer fields")
        }
        if directives.noStore && (directives.maxAge != nil || directives.sMaxAge != nil || directives.isPublic) {
            warnings.append("no-store beside max-age, s-maxage or public: no-store wins and the others do nothing")
        }
        if directives.isPublic && directives.isPrivate {
            warnings.append("both public and private: contradictory; say one (private keeps it out of shared caches)")
        }
        if fields.contains(.pragma) {
            warnings.append(
                "Pragma in a response means nothing to caches (RFC 9111 §5.4); use Cache-Control (no-cache, no-store)")
        }
        if !fields.contains(.date) {
            warnings.append(
                "no Date field: an origin with a clock must send one (RFC 9110 §6.6.1); "
                    + "the time it was received is used"
            )
        } else if let date, fromOrigin, abs(date - now) > 60 {
            let direction = date < now ? "behind" : "ahead of"
            warnings.append(
                "Date is \(Format.seconds(abs(date - now))) \(direction) this machine's clock: ages and lifetimes "
                    + "computed from Expires may be off; check the origin's clock")
        }
        if let modified = parsed.lastModified, let date, modified > date {
            warnings.append("Last-Modified is later than Date: the origin's clock or its Last-Modified is wrong")
        }
        if storable, let facts {
            switch facts.lifetimeSource {
            case .heuristic:
                warnings.append(
                    "no explicit freshness: a heuristic lifetime of "
                        + "\(Format.seconds(facts.freshnessLifetime)) is guessed "
                        + "from Last-Modified (RFC 9111 §4.2.2); say what you mean with max-age")
            case .none where !directives.noCache:
                warnings.append(
                    "no freshness information (max-age, Expires or Last-Modified): it is stale at once and "
                        + "checked with the origin on every use; give it a max-age")
            default:
                break
            }
        }
        if directives.sMaxAge != nil && !engine.configuration.isShared {
            warnings.append("s-maxage applies to shared caches only; this private cache ignores it (try --shared)")
        }
        if storable && engine.configuration.isShared && fields.contains(.setCookie) {
            warnings.append(
                "Set-Cookie on a response a shared cache stores: every user would receive this cookie; add "
                    + "Cache-Control: private or no-store")
        }
        return warnings
    }
}

/// `httpcache explain URL`.
struct ExplainCommand {
    static let name = "explain"
    static let summary = "fetch a URL, then explain how it is cached and why"
    static let specs = RequestOptions.specs + CacheOptions.specs
    static let help = """
        Usage: httpcache explain URL [options]

        Fetches URL through the cache (as `get` does, without printing the body), then says in
        plain words: whether the response is stored and why (or why not); its freshness
        lifetime and where it came from (s-maxage, max-age, Expires, heuristic); its age now;
        its validators; Vary; what the next requests will do and when (served, revalidated,
        fetched again, and what happens if the origin is down then); and warnings about the
        origin's fields (no validator, Expires in the past beside max-age, Vary: *, no-cache
        without a validator, invalid directives, and more).

        With --offline it explains what is stored without contacting the origin.

        Options: -X, -H, -d, --policy, --offline, --shared, --timeout, --cache-dir, as for
        `httpcache get` (see httpcache get --help).

        Exit status as for get: 0 when a response was obtained, 7 when the origin could not be
        reached and nothing stored could be served, 2 for usage errors.
        """

    let options: RequestOptions
    let cacheOptions: CacheOptions

    init(_ arguments: ParsedArguments) throws(Failure) {
        options = try RequestOptions(arguments)
        cacheOptions = try CacheOptions(arguments)
    }

    func run() async throws(Failure) {
        let cache = try cacheOptions.open(isShared: options.isShared)
        let clock = ContinuousClock()
        let started = clock.now
        let fetched: Result<CachedResponse, Failure>
        do {
            fetched = .success(try await cache.data(for: options.request))
        } catch {
            fetched = .failure(Fetching.failure(error, url: options.url))
        }
        let elapsed = clock.now - started
        await cache.waitForBackgroundWork()
        cache.flushToDisk()
        let fromOrigin =
            (try? fetched.get()).map { [.miss, .bypass].contains($0.outcome) ? Int64($0.data.count) : 0 } ?? 0
        PersistentStatistics.add(cache.statistics, bytesFromOrigin: fromOrigin, in: cacheOptions.directory)
        let result = try fetched.get()
        var fetch = options.request
        fetch.url = result.url
        let entries = (try? cache.entries(answering: fetch)) ?? []
        var request = options.head
        request.uri = result.url.absoluteString
        request.method = options.method.uppercased()  // as the cache sends and keys it
        let explanation = Explanation(
            request: request, result: result, entries: entries,
            engine: CacheEngine(configuration: options.isShared ? .sharedCache : .privateCache),
            now: Timestamp(secondsSince1970: Date().timeIntervalSince1970), elapsed: elapsed,
            contentKey: request.method == "QUERY"
                ? QueryContentKey(content: Array(options.body ?? Data()), fields: request.fields) : nil)
        Console.out(explanation.text)
    }
}
