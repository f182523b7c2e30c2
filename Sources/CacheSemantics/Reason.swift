/// Why the engine decided what it did, in words a person can read.
///
/// Every decision (store or not, serve, revalidate, forward) carries reasons, and parsers
/// note what they ignored. `description` gives the sentence; the case and its values are
/// for code that wants to react.
public enum Reason: Hashable, Sendable, CustomStringConvertible {
    // Parsing (the RFC's "ignore it" and "treat as stale" rules).
    case malformedDirective(field: String, text: String)
    case invalidDirectiveValue(field: String, directive: String, value: String?)
    case conflictingDirective(field: String, directive: String)
    case invalidExpires(String)
    case conflictingExpires
    case invalidDate(String)
    case invalidAge(String)
    case invalidLastModified(String)
    case invalidEntityTag(String)
    case invalidTargetedField(String)
    case targetedFieldUsed(String)
    case dateAddedFromResponseTime

    // Storage (RFC 9111 §3).
    case methodNotStored(String)
    case postResponseNotReusable
    case postResponseStoredForTarget
    case statusNotFinal(Int)
    case statusNotStoredAsComplete(Int)
    case statusAnswersOnlyThisRequest(Int)
    case mustUnderstandUnknownStatus(Int)
    case responseNoStore
    case requestNoStore
    case privateInSharedCache
    case authorizationInSharedCache
    case notExplicitlyCacheable(Int)
    case varyStar
    case fieldsNotStored([String])
    case storedAsIncomplete

    // Reuse (RFC 9111 §4).
    case uncacheableMethod(String)
    case noStoredResponse
    case noVariantMatches
    case incompleteStoredResponse
    case policy(CachePolicy)
    case policyServesAnyStoredResponse(CachePolicy)
    case fresh(age: Double, lifetime: Double)
    case stale(by: Double)
    case responseNoCache
    case requestNoCache
    case requestMaxAge(age: Double, maxAge: Int)
    case requestMinFresh(remaining: Double, minFresh: Int)
    case mustRevalidate
    case proxyRevalidate
    case sMaxAgeRevalidate
    case maxStaleAllows(by: Double)
    case staleWhileRevalidate(by: Double, allowance: Int)
    case staleIfError(by: Double, allowance: Int)
    case disconnected(by: Double)
    /// No response came from the origin (refused, unreachable, timed out): what the cache
    /// answers instead says why it could not use what it stores.
    case originUnreachable
    case savedForOffline(stale: Bool)
    case staleNotAllowed
    case onlyIfCached
    case authorizationNeedsSharedDirective
    case immutable
    case noValidator
    case invalidated

    // Decisions of the application or the cache around the engine (a rule, a hook, the
    // store), in its own words.
    case configured(String)

    public var description: String {
        switch self {
        case .malformedDirective(let field, let text):
            return "\(field): '\(text)' is not a valid directive; ignored (RFC 9111 §5.2)"
        case .invalidDirectiveValue(let field, let directive, let value):
            let shown = value.map { "'\($0)'" } ?? "no value"
            return "\(field): \(directive) has \(shown), not delta-seconds (RFC 9111 §1.2.2, §4.2.1)"
        case .conflictingDirective(let field, let directive):
            return
                "\(field): \(directive) appears more than once with different values; response treated as stale (RFC 9111 §4.2.1)"
        case .invalidExpires(let value):
            return "Expires '\(value)' is not a valid HTTP-date; treated as already expired (RFC 9111 §5.3)"
        case .conflictingExpires:
            return "Expires appears more than once with different values; response treated as stale (RFC 9111 §4.2.1)"
        case .invalidDate(let value):
            return "Date '\(value)' is not a valid HTTP-date; the response time is used instead (RFC 9110 §6.6.1)"
        case .invalidAge(let value):
            return "Age '\(value)' is not a non-negative integer; ignored (RFC 9111 §5.1)"
        case .invalidLastModified(let value):
            return "Last-Modified '\(value)' is not a valid HTTP-date; ignored (RFC 9110 §8.8.2)"
        case .invalidEntityTag(let value):
            return "ETag '\(value)' is not a valid entity-tag; ignored (RFC 9110 §8.8.3)"
        case .invalidTargetedField(let name):
            return "\(name) is empty or not a valid structured dictionary; ignored (RFC 9213 §2.1)"
        case .targetedFieldUsed(let name):
            return "\(name) is used; Cache-Control and Expires are ignored (RFC 9213 §2.2)"
        case .dateAddedFromResponseTime:
            return "the response has no Date; the time it was received is recorded as its Date (RFC 9110 §6.6.1)"
        case .methodNotStored(let method):
            return "not stored: responses to \(method) are not stored by this cache (RFC 9111 §3)"
        case .postResponseNotReusable:
            return
                "not stored: a response to POST is stored only with explicit freshness and a Content-Location equal to the target URI (RFC 9110 §9.3.3)"
        case .postResponseStoredForTarget:
            return
                "a response to POST with explicit freshness and Content-Location equal to the target URI is stored for later GET and HEAD requests (RFC 9110 §9.3.3)"
        case .statusNotFinal(let status):
            return "not stored: \(status) is not a final status code (RFC 9111 §3)"
        case .statusNotStoredAsComplete(let status):
            return "not stored: a \(status) response is not a complete response (RFC 9111 §3, §3.4)"
        case .statusAnswersOnlyThisRequest(let status):
            return status == 416
                ? "not stored: a 416 answers this request's Range (RFC 9110 §15.5.17), which the cache key does not hold: "
                    + "stored, it would answer requests for the whole representation"
                : "not stored: a \(status) answers this request's preconditions (RFC 9110 §15.5.13), which the cache key "
                    + "does not hold: stored, it would answer requests without them"
        case .mustUnderstandUnknownStatus(let status):
            return "not stored: must-understand and status \(status) is not understood (RFC 9111 §5.2.2.3)"
        case .responseNoStore:
            return "not stored: Cache-Control no-store (RFC 9111 §5.2.2.5)"
        case .requestNoStore:
            return "not stored: the request has Cache-Control no-store (RFC 9111 §5.2.1.5)"
        case .privateInSharedCache:
            return "not stored: Cache-Control private and this cache is shared (RFC 9111 §5.2.2.7)"
        case .authorizationInSharedCache:
            return
                "not stored: the request has Authorization and the response has none of public, must-revalidate, s-maxage (RFC 9111 §3.5)"
        case .notExplicitlyCacheable(let status):
            return
                "not stored: no max-age, Expires or public, and status \(status) is not heuristically cacheable (RFC 9111 §3, RFC 9110 §15.1)"
        case .varyStar:
            return "not stored: Vary: * never matches a later request (RFC 9111 §4.1)"
        case .fieldsNotStored(let names):
            return "fields not stored: \(names.joined(separator: ", ")) (RFC 9111 §3.1)"
        case .storedAsIncomplete:
            return
                "stored as incomplete: the body was not received in full, or is the first part of the representation (RFC 9111 §3.3)"
        case .uncacheableMethod(let method):
            return "\(method) is not answered from the cache; forwarded (RFC 9111 §4)"
        case .noStoredResponse:
            return "nothing stored for this URL"
        case .noVariantMatches:
            return "stored responses exist but none matches this request's Vary fields (RFC 9111 §4.1)"
        case .incompleteStoredResponse:
            return "the stored response is incomplete (RFC 9111 §3.3)"
        case .policy(let policy):
            switch policy {
            case .returnCacheDataDontLoad:
                return "cache policy \(policy) never uses the network"
            case .reloadRevalidatingCacheData:
                return "cache policy \(policy) validates every stored response with the origin"
            default:
                return "cache policy \(policy) does not use stored responses"
            }
        case .policyServesAnyStoredResponse(let policy):
            return "cache policy \(policy) uses a stored response whatever its age (RFC 9111 §6)"
        case .fresh(let age, let lifetime):
            return "fresh: age \(Int(age)) s of a \(Int(lifetime)) s lifetime (RFC 9111 §4.2)"
        case .stale(let by):
            return "stale by \(Int(by.rounded(.up))) s (RFC 9111 §4.2)"
        case .responseNoCache:
            return "the stored response has no-cache: it must be validated before reuse (RFC 9111 §5.2.2.4)"
        case .requestNoCache:
            return "the request has no-cache: the stored response is validated first (RFC 9111 §5.2.1.4)"
        case .requestMaxAge(let age, let maxAge):
            return "the request's max-age=\(maxAge) is below the response's age \(Int(age)) s (RFC 9111 §5.2.1.1)"
        case .requestMinFresh(let remaining, let minFresh):
            return
                "the request's min-fresh=\(minFresh) exceeds the \(Int(remaining)) s of freshness left (RFC 9111 §5.2.1.3)"
        case .mustRevalidate:
            return "must-revalidate forbids serving it stale (RFC 9111 §5.2.2.2)"
        case .proxyRevalidate:
            return "proxy-revalidate forbids a shared cache serving it stale (RFC 9111 §5.2.2.8)"
        case .sMaxAgeRevalidate:
            return "s-maxage forbids a shared cache serving it stale (RFC 9111 §5.2.2.10)"
        case .maxStaleAllows(let by):
            return "served stale by \(Int(by.rounded(.up))) s: the request's max-stale allows it (RFC 9111 §5.2.1.2)"
        case .staleWhileRevalidate(let by, let allowance):
            return
                "served stale by \(Int(by.rounded(.up))) s within stale-while-revalidate=\(allowance); revalidating in the background (RFC 5861 §3)"
        case .staleIfError(let by, let allowance):
            return
                "served stale by \(Int(by.rounded(.up))) s within stale-if-error=\(allowance) after an error (RFC 5861 §4)"
        case .savedForOffline(let stale):
            return
                "served while the origin cannot be reached: it was saved for offline use (pinned)\(stale ? ", stale," : ",") whatever its directives; an app's or operator's choice, as returnCacheDataElseLoad is (RFC 9111 §4.2.4 otherwise forbids it after no-cache or must-revalidate)"
        case .disconnected(let by):
            return "served stale by \(Int(by.rounded(.up))) s: the origin could not be reached (RFC 9111 §4.2.4)"
        case .originUnreachable:
            return "the origin could not be reached"
        case .staleNotAllowed:
            return
                "serving stale is not allowed without max-stale, stale-while-revalidate or stale-if-error (RFC 9111 §4.2.4)"
        case .onlyIfCached:
            return "the request has only-if-cached and no stored response can be used: 504 (RFC 9111 §5.2.1.7)"
        case .authorizationNeedsSharedDirective:
            return
                "the request has Authorization: a shared cache reuses only responses with public, must-revalidate or s-maxage (RFC 9111 §3.5)"
        case .immutable:
            return "immutable: the request's reload directives are not applied while it is fresh (RFC 8246 §2)"
        case .noValidator:
            return
                "the stored response has neither ETag nor Last-Modified: it is validated with its Date as If-Modified-Since, which many origins answer in full (RFC 9111 §4.3.1)"
        case .configured(let text):
            return text
        case .invalidated:
            return
                "the stored response was invalidated (RFC 9111 §4.4) or found stale by a HEAD response (§4.3.5): it must be validated before reuse"
        }
    }
}
