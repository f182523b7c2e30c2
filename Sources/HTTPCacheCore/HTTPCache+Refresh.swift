import CacheExchange
import CacheSemantics
import CacheStorage
import CacheSystem
import Foundation

// Apps told when a stale-while-revalidate refresh (RFC 5861 §3) lands, as Workbox's
// broadcast-update tells pages: `updates(for:)`, `CachedResponse.refreshed`, and the observer
// CachingURLProtocol posts its notification from.
//
// A refresh *lands* when the origin answered the background validation with a full response,
// the cache stored it, and it is another representation than the one served stale: its
// `ETag` does not match the served one's (weak comparison, RFC 9110 §8.8.3.2) when both have
// one, else its status or its body bytes differ. A `304` (which only freshens), a response
// with the same `ETag` or the same bytes, one not stored, and a refresh that failed land
// nothing.

extension HTTPCache {
    /// The new responses stale-while-revalidate refreshes (RFC 5861 §3) store for `request`'s
    /// key, from now on: each time a refresh running behind a stale response stores another
    /// representation (another `ETag`, or without one other bytes; a `304` that only freshens
    /// is no update), the response as now stored.
    ///
    /// ```swift
    /// for await update in try cache.updates(for: request) {
    ///     show(update.data)   // the page shown stale gets the new content
    /// }
    /// ```
    ///
    /// The sequence keeps only the newest update not yet read, so a subscriber that stops reading
    /// holds one response at most. It ends when the task reading it is cancelled, which also
    /// removes the subscription; a request the cache does not store (no key) gets a sequence
    /// that ends at once. Every variant of the key (RFC 9111 §4.1) is reported, whichever
    /// request's refresh stored it.
    ///
    /// - Throws: `URLError` when the URL is not an `http` or `https` URL with a host;
    ///   ``InvalidPartition`` for a partition that cannot be used.
    public func updates(for request: FetchRequest) throws -> AsyncStream<CachedResponse> {
        let prepared = try prepare(request)
        let (stream, continuation) = AsyncStream.makeStream(
            of: CachedResponse.self, bufferingPolicy: .bufferingNewest(1))
        guard let key = prepared.primaryKey else {
            continuation.finish()
            return stream
        }
        refreshes.subscribe(continuation, to: key)
        return stream
    }

    /// Sets the one function told of every refresh that lands (CachingURLProtocol's
    /// notification), or removes it (`nil`).
    package func observeRefreshes(_ observer: (@Sendable (CachedResponse) -> Void)?) {
        refreshes.setObserver(observer)
    }

    /// How many ``updates(for:)`` sequences are subscribed to `request`'s key.
    package func updateSubscriberCount(for request: FetchRequest) throws -> Int {
        try prepare(request).primaryKey.map(refreshes.subscriberCount) ?? 0
    }

    /// The refresh running for `prepared`'s key, when `served`, stale, was served
    /// stale-while-revalidate while another request's refresh runs (one runs per key at a time).
    func runningRefresh(_ prepared: PreparedRequest, served: ServedResponse) -> BackgroundRefresh? {
        guard let key = prepared.primaryKey,
            served.reasons.contains(where: { if case .staleWhileRevalidate = $0 { true } else { false } }),
            let task = refreshes.running(key)
        else { return nil }
        return BackgroundRefresh(task: task, cache: self, prepared: prepared, replaced: served.entry.id)
    }

    /// Reads `response`, a background refresh's answer, to its end (which stores it) and says
    /// whether it landed: stored from the origin, and another representation than `served`.
    func readLanded(_ response: PendingResponse, replacing served: ServedResponse) async throws -> Bool {
        // A stored response answered (a 304 freshened it, or it stands in for an error).
        guard case .source(let source) = response.body else { return false }
        var change =
            response.entry == nil && response.cacheStatus.stored == true
            ? RepresentationChange(from: served, to: response.status, response.fields, store: store) : nil
        while let chunk = try await source.next() { change?.compare(chunk) }
        return change?.isDifferent ?? false
    }

    /// What the store now holds for `prepared`, whole, as ``storedAnswer(_:declining:)`` gives
    /// it without sending anything (so never another refresh), unless it is still the entry
    /// `replaced` (the new one could not be stored). The request's own validators and range are
    /// left out: they would make a `304` or a part of it.
    func refreshedResponse(_ prepared: PreparedRequest, excluding replaced: EntryID) -> CachedResponse? {
        var lookup = prepared
        lookup.exchange.policy = .returnCacheDataDontLoad
        lookup.exchange.head.fields.removeAll(namedAnyOf: [.ifNoneMatch, .ifModifiedSince, .ifRange, .range])
        guard let (answer, entry) = storedAnswer(lookup, declining: { _, _, _ in false }), let entry,
            entry != replaced
        else { return nil }
        return answer
    }
}

/// A stale-while-revalidate refresh running behind a response served stale
/// (``CachedResponseHead/refreshed``).
final class BackgroundRefresh: Sendable {
    /// Whether the refresh landed.
    private let task: Task<Bool, Never>
    private let cache: HTTPCache
    private let prepared: PreparedRequest
    /// The entry served stale.
    private let replaced: EntryID

    init(task: Task<Bool, Never>, cache: HTTPCache, prepared: PreparedRequest, replaced: EntryID) {
        self.task = task
        self.cache = cache
        self.prepared = prepared
        self.replaced = replaced
    }

    /// The response the refresh stored, once it ends; `nil` when it landed nothing.
    var response: CachedResponse? {
        get async {
            guard await task.value else { return nil }
            return cache.refreshedResponse(prepared, excluding: replaced)
        }
    }
}

/// Whether a refresh's response is another representation than the one served stale: `ETag`s
/// compared when both have one, else status and body bytes, the body compared piece by piece
/// with the stored one as it is read (no copy kept).
struct RepresentationChange {
    private var stored: (any StoredBody)?
    private var offset: Int64 = 0
    private var differs: Bool

    /// - Parameter store: Where the body served is read from when none of it was served (a
    ///   `304` to the client's own validators, a `HEAD`).
    init(from served: ServedResponse, to status: Int, _ fields: HeaderFields, store: any CacheStore) {
        let old = served.entry.head
        if let tag = fields[.eTag].flatMap(EntityTag.init), let oldTag = old.fields[.eTag].flatMap(EntityTag.init) {
            differs = !tag.weakMatches(oldTag)
            return
        }
        if case .stored(let body, _) = served.body {
            stored = body
        } else {
            // Still stored: the new response replaces it only once its body is read.
            stored = try? store.openBody(for: served.entry)
        }
        differs = status != old.status || stored == nil
    }

    /// Compares the next piece of the new body with the stored body at the same place.
    mutating func compare(_ piece: Data) {
        guard !differs, let stored, !piece.isEmpty else { return }
        let end = offset + Int64(piece.count)
        guard end <= stored.size, let old = try? stored.read(offset...(end - 1)), old.elementsEqual(piece) else {
            differs = true
            return
        }
        offset = end
    }

    /// Whether the two differ, once the whole new body was compared.
    var isDifferent: Bool { differs || (stored.map { offset != $0.size } ?? false) }
}

/// Who hears of refreshes: the ``HTTPCache/updates(for:)`` subscribers by key, the one observer
/// of every refresh, and the refreshes running by key (for stale responses served meanwhile).
final class RefreshListeners: Sendable {
    /// Those to tell of one landed refresh.
    struct Listeners {
        var subscribers: [AsyncStream<CachedResponse>.Continuation]
        var observer: (@Sendable (CachedResponse) -> Void)?

        var isEmpty: Bool { subscribers.isEmpty && observer == nil }

        func tell(_ update: CachedResponse) {
            for subscriber in subscribers { subscriber.yield(update) }
            observer?(update)
        }
    }

    private struct State {
        var nextID = 0
        var subscribers: [String: [Int: AsyncStream<CachedResponse>.Continuation]] = [:]
        var observer: (@Sendable (CachedResponse) -> Void)?
        /// The refresh running per key, with its token (the task once it is made).
        var running: [String: (token: Int, task: Task<Bool, Never>?)] = [:]
    }

    private let state = Locked(State())

    /// Tells `continuation` of the refreshes of `key` that land, until it terminates.
    func subscribe(_ continuation: AsyncStream<CachedResponse>.Continuation, to key: String) {
        let id = state.withLock { state in
            state.nextID += 1
            state.subscribers[key, default: [:]][state.nextID] = continuation
            return state.nextID
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { state in
                state.subscribers[key]?[id] = nil
                if state.subscribers[key]?.isEmpty == true { state.subscribers[key] = nil }
            }
        }
    }

    func setObserver(_ observer: (@Sendable (CachedResponse) -> Void)?) {
        state.withLock { $0.observer = observer }
    }

    func subscriberCount(_ key: String) -> Int { state.withLock { $0.subscribers[key]?.count ?? 0 } }

    /// A refresh of `key` starts: its token.
    func begin(_ key: String) -> Int {
        state.withLock { state in
            state.nextID += 1
            state.running[key] = (state.nextID, nil)
            return state.nextID
        }
    }

    /// The task of refresh `token`, unless it has ended already.
    func started(_ task: Task<Bool, Never>, _ key: String, _ token: Int) {
        state.withLock { state in
            if state.running[key]?.token == token { state.running[key]?.task = task }
        }
    }

    /// Refresh `token` of `key` ended: who to tell if it landed.
    func end(_ key: String, _ token: Int) -> Listeners {
        state.withLock { state in
            if state.running[key]?.token == token { state.running[key] = nil }
            return Listeners(
                subscribers: state.subscribers[key].map { Array($0.values) } ?? [], observer: state.observer)
        }
    }

    /// The refresh of `key` running now.
    func running(_ key: String) -> Task<Bool, Never>? { state.withLock { $0.running[key]?.task } }
}
