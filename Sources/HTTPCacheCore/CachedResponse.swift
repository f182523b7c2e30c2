import CacheExchange
import CacheSemantics
import CacheStorage
import CacheSystem
import Foundation
import HTTPWire

/// A response and how it was obtained.
public struct CachedResponse: Sendable {
    /// The body. Empty for `HEAD` and for a `304` answering a conditional request.
    public var data: Data
    /// The status, fields and URL, and how the response was obtained.
    public var head: CachedResponseHead

    /// The status code.
    public var statusCode: Int { head.statusCode }
    /// The response fields. They include `Cache-Status` unless
    /// ``HTTPCache/Configuration/addsCacheStatusField`` is off, and `Age` when the response
    /// was served from the cache.
    public var fields: HeaderFields { head.fields }
    /// The URL of the response (the last one when redirects were followed).
    public var url: URL { head.url }
    /// How the response was obtained.
    public var outcome: CacheOutcome {
        get { head.outcome }
        set { head.outcome = newValue }
    }
    /// The RFC 9211 `Cache-Status` entry this cache added.
    public var cacheStatus: CacheStatus {
        get { head.cacheStatus }
        set { head.cacheStatus = newValue }
    }
    /// The bytes a will-store hook kept with the entry (``StoreChoice/userInfo``), on a
    /// response served from or just written to the cache.
    public var userInfo: Data? {
        get { head.userInfo }
        set { head.userInfo = newValue }
    }
    /// Why the cache did what it did (freshness, staleness, the rule that applied).
    public var reasons: [Reason] {
        get { head.reasons }
        set { head.reasons = newValue }
    }
    /// Whether this request waited for an identical one already in flight instead of making
    /// its own origin request (RFC 9211 `collapsed`).
    public var collapsed: Bool { cacheStatus.collapsed == true }
    /// For a response served stale-while-revalidate, the response the refresh behind it stored
    /// once it ends (see ``CachedResponseHead/refreshed``); `nil` at once otherwise.
    public var refreshed: CachedResponse? {
        get async { await head.refreshed }
    }
}

/// The head of a streamed response (``HTTPCache/bytes(for:)-(FetchRequest)``).
public struct CachedResponseHead: Sendable {
    /// The status code.
    public let statusCode: Int
    /// The response fields. They include `Cache-Status` unless
    /// ``HTTPCache/Configuration/addsCacheStatusField`` is off, and `Age` when the response
    /// was served from the cache.
    public let fields: HeaderFields
    /// The URL of the response.
    public let url: URL
    /// How the response was obtained.
    public var outcome: CacheOutcome
    /// The RFC 9211 `Cache-Status` entry this cache added.
    public var cacheStatus: CacheStatus
    /// The bytes a will-store hook kept with the entry.
    public var userInfo: Data?
    /// Why the cache did what it did.
    public var reasons: [Reason]
    /// The body length when known in advance.
    public var expectedLength: Int64?
    /// The stale-while-revalidate refresh running behind this response, when it was served stale.
    private let refresh: BackgroundRefresh?
    /// Where the head in a platform's own type comes from (``platformResponse``).
    private let platformSource: PlatformSource

    private enum PlatformSource: Sendable {
        /// A memo of its own, shared by the copies of this head.
        case own(Memo)
        /// The memo `PlatformResponses` keeps for answers from the stored entry `EntryID`, looked
        /// up when asked for, so an answer whose platform response no one asks for costs nothing.
        case stored(EntryID, PlatformResponses)
    }

    /// The head in a platform's own type (HTTPCaching's `HTTPURLResponse`), made on first use
    /// and shared by the copies of this head; an answer from a stored entry shares it with the
    /// other answers from that entry with the same status, URL and fields (``PlatformResponses``).
    package var platformResponse: Memo {
        switch platformSource {
        case .own(let memo): memo
        case .stored(let entry, let responses):
            responses.memo(for: entry, status: statusCode, url: url, fields: fields)
        }
    }

    /// For a response served stale-while-revalidate (RFC 5861 §3), the response the refresh
    /// running behind it stored, once the refresh ends: the new representation as the store now
    /// holds it (read without sending anything). `nil` when the refresh landed nothing (the
    /// origin answered `304`, or sent the same `ETag` or, without one, the same bytes; the
    /// response was not stored; the refresh failed), and at once for a response not served
    /// stale-while-revalidate. The refresh runs whether or not this is awaited; awaiting it
    /// does not keep the new body in memory after it returns.
    ///
    /// ```swift
    /// let response = try await cache.data(for: request)
    /// show(response.data)
    /// if let newer = await response.refreshed { show(newer.data) }
    /// ```
    public var refreshed: CachedResponse? {
        get async { await refresh?.response }
    }

    /// - Parameters:
    ///   - entry: The stored entry the head is an answer from, if it is one.
    ///   - responses: Where the platform responses of that entry's answers are kept.
    ///   - refresh: The stale-while-revalidate refresh running behind it.
    init(
        head: ResponseHeadParts, outcome: CacheOutcome, cacheStatus: CacheStatus, userInfo: Data?, reasons: [Reason],
        expectedLength: Int64?, entry: EntryID? = nil, responses: PlatformResponses? = nil,
        refresh: BackgroundRefresh? = nil
    ) {
        self.refresh = refresh
        if let entry, let responses {
            platformSource = .stored(entry, responses)
        } else {
            platformSource = .own(Memo())
        }
        statusCode = head.status
        fields = head.fields
        url = head.url
        self.outcome = outcome
        self.cacheStatus = cacheStatus
        self.userInfo = userInfo
        self.reasons = reasons
        self.expectedLength = expectedLength
    }

    /// The fields with repeated names combined into one line (RFC 9110 §5.3), sorted by name
    /// without regard to case: as a dictionary of fields (`HTTPURLResponse`) holds them.
    package var combinedFields: [(name: String, value: String)] {
        var combined: [(name: String, value: String)] = []
        var positions: [String: Int] = [:]
        for field in fields {
            let key = field.name.lowercased()
            if let position = positions[key] {
                combined[position].value += ", " + field.value
            } else {
                positions[key] = combined.count
                combined.append((field.name, field.value))
            }
        }
        return combined.sorted { $0.name.lowercased() < $1.name.lowercased() }
    }
}

/// What a response head is made of.
struct ResponseHeadParts: Sendable {
    var status: Int
    var fields: HeaderFields
    var url: URL
}

/// An object made once, when first asked for, and shared by every copy of what holds it. What
/// it holds is never changed after it is made (`HTTPURLResponse` is immutable; swift-corelibs-
/// foundation does not mark it `Sendable`).
package final class Memo: @unchecked Sendable {
    private let made = Locked<AnyObject?>(nil)

    package init() {}

    /// The object made earlier, or `make`'s, kept.
    package func value<Value: AnyObject>(_ make: () -> Value) -> Value {
        made.withLock { made in
            if let value = made as? Value { return value }
            let value = make()
            made = value
            return value
        }
    }
}

/// The platform response (``Memo``) of the last answer from each stored entry whose platform
/// response was asked for, so that the next answer from it with the same status, URL and fields
/// shares it rather than making its own: an `HTTPURLResponse` costs more to make than the rest
/// of a hit. Answers differ in `Age`
/// (RFC 9111 §4.2.3, §5.1) and in `Cache-Status`'s `ttl` each second, and an entry replaced or
/// freshened has other fields: the whole head is compared, so an answer never gets a response
/// made for other fields. Bounded in count and bytes, least recently used first out.
final class PlatformResponses: Sendable {
    private struct Answer {
        var status: Int
        var url: URL
        var fields: HeaderFields
        var memo: Memo
    }

    private let answers: Locked<LRUCache<EntryID, Answer>>

    init(capacity: Int, byteLimit: Int) {
        answers = Locked(LRUCache(capacity: capacity, byteLimit: byteLimit))
    }

    /// The memo of the last answer from `entry` when it had this status, URL and fields; else a
    /// new one, kept as that of `entry`'s last answer.
    func memo(for entry: EntryID, status: Int, url: URL, fields: HeaderFields) -> Memo {
        if let last = answers.withLock({ $0.value(for: entry) }), last.status == status, last.fields == fields,
            last.url == url
        {
            return last.memo
        }
        let memo = Memo()
        // The fields twice (they are held, and the platform response holds them as it wants),
        // the URL and the response object.
        let cost = 2 * MemoryCost.fields(fields) + MemoryCost.string(url.absoluteString) + MemoryCost.allocation(256)
        answers.withLock {
            $0.set(Answer(status: status, url: url, fields: fields, memo: memo), for: entry, cost: cost)
        }
        return memo
    }
}

/// One request handled by the cache, for logging (``HTTPCache/Configuration/onEvent``).
public struct CacheEvent: Sendable, CustomStringConvertible {
    /// The request method.
    public var method: String
    /// The request URL.
    public var url: String
    /// The status code of the response, or `nil` when the request failed with an error.
    public var status: Int?
    /// How the response was obtained, when one was.
    public var outcome: CacheOutcome?
    /// The `Cache-Status` entry, when a response was produced.
    public var cacheStatus: String?
    /// The error the caller received, if any.
    public var error: String?
    /// Seconds from the call until the response head was ready.
    public var duration: Double
    /// Why.
    public var reasons: [Reason]

    public var description: String {
        let result = status.map { "\($0) \(outcome?.rawValue ?? "")" } ?? "failed: \(error ?? "unknown error")"
        let micros = Int((duration * 1_000_000).rounded())
        return "\(method) \(url) → \(result) (\(cacheStatus ?? "no Cache-Status")) in \(micros) µs"
    }
}

/// Counters since the cache was created.
public struct CacheStatistics: Hashable, Sendable, Codable {
    /// Responses served from the cache without contacting the origin (`CacheOutcome.hit`).
    public var hits = 0
    /// `CacheOutcome.miss` responses.
    public var misses = 0
    /// `CacheOutcome.revalidated` responses.
    public var revalidated = 0
    /// `CacheOutcome.stale` responses.
    public var stale = 0
    /// `CacheOutcome.bypass` responses.
    public var bypassed = 0
    /// Requests that ended in an error instead of a response.
    public var errors = 0
    /// Requests that waited for an identical one instead of making their own.
    public var collapsed = 0
    /// Body bytes served from the store (hits, stale and revalidated responses).
    public var bytesServedFromCache: Int64 = 0
    /// Body bytes the origin did not send because it answered `304` (the stored body's size).
    public var bytesSavedByRevalidation: Int64 = 0

    /// Zeroed counters.
    public init() {}

    /// Responses whose body came from the store, over all responses.
    public var hitRatio: Double {
        let served = hits + stale + revalidated
        let total = served + misses + bypassed
        return total == 0 ? 0 : Double(served) / Double(total)
    }

    mutating func count(_ outcome: CacheOutcome) {
        switch outcome {
        case .hit: hits += 1
        case .miss: misses += 1
        case .revalidated: revalidated += 1
        case .stale: stale += 1
        case .bypass: bypassed += 1
        }
    }
}

extension HTTPCache {
    /// The reason phrase of `status` (RFC 9110 §15), or its class for a code without one:
    /// `Not Found`, `Client Error`.
    package static func reasonPhrase(for status: Int) -> String {
        if let phrase = HTTPWire.reasonPhrase(status) { return "\(phrase)" }
        switch status {
        case 100..<200: return "Informational"
        case 200..<300: return "Success"
        case 300..<400: return "Redirection"
        case 400..<500: return "Client Error"
        case 500..<600: return "Server Error"
        default: return "Unknown Status"
        }
    }
}
