import CacheExchange
import CacheSemantics
import CacheStorage
import CacheSystem
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A `URLProtocol` that answers `http` and `https` requests of a `URLSession` through an
/// ``HTTPCache``, so any URLSession client, and the libraries built on it, get the cache.
///
/// ```swift
/// let configuration = URLSessionConfiguration.default
/// configuration.useHTTPCache(cache)
/// let session = URLSession(configuration: configuration)
/// ```
///
/// Responses reach the session with `Cache-Status` (and `Age` when served from the cache).
/// The session's own `URLCache` is switched off; the protocol relies neither on it nor on
/// `willCacheResponse`, which swift-corelibs-foundation calls only for per-task delegates.
/// Redirects are followed by the cache, each hop cached under its own URL (a task delegate's
/// `willPerformHTTPRedirection` is not asked; a loop fails with
/// `URLError(.httpTooManyRedirects)`). Requests the cache itself sends go through a session
/// without this protocol, so it never intercepts itself. The protocol serves one cache per
/// process: the one last installed, for every session configured with `useHTTPCache(_:)`.
///
/// On Linux, what swift-corelibs-foundation applies inside its own HTTP protocol does not
/// reach the requests this one answers, whose `URLRequest` it receives as the task was made:
/// the configuration's `httpAdditionalHeaders`, `httpCookieStorage` (cookies are neither sent
/// nor kept), `timeoutIntervalForRequest` and `requestCachePolicy`. Set fields (`Authorization`,
/// `Cookie`), `timeoutInterval` and `cachePolicy` on each `URLRequest` instead.
///
/// A load with `.returnCacheDataDontLoad` and nothing stored fails with
/// `URLError(.resourceUnavailable)`, the error Apple's loading system gives for it (Apple
/// documents that "the load is considered to have failed"), so an app that checks only for
/// an error never takes a body for content. ``HTTPCache/data(for:)-(URLRequest)`` answers the same
/// request with the cache's own `504`, which RFC 9111 §5.2.1.7 prescribes for
/// `only-if-cached`; a request with `Cache-Control: only-if-cached` gets that `504` here too.
///
/// ## Bodies on Linux (swift-corelibs-foundation)
///
/// Every URLSession API gets the whole body, but corelibs handles a custom protocol's body
/// differently by task kind (measured with Swift 6.3.1):
/// - A data or upload task with a completion handler — and so `data(for:)`, `data(from:)`
///   and `upload(for:from:)`, which corelibs builds on completion handlers — is given only
///   the data of the last `urlProtocol(_:didLoad:)` call: each call replaces the previous
///   one (a 70 KB body arrived as its last 4.5 KB).
/// - A data task driven by a delegate gets every call, as `urlSession(_:dataTask:didReceive:)`.
/// - A download task gets a file only when corelibs' own HTTP protocol loads it: with any
///   other protocol the completion handler gets no file and no error, and a delegate or
///   `download(for:)` traps.
///
/// A protocol cannot see whether a task has a completion handler, so on Linux the body is
/// passed on in pieces as it comes (a delegate streams) and kept whole: the load is then
/// finished through a second protocol instance whose one `didLoad` holds the whole body
/// (made while it stands for a task of its own with no delegate, which ignores it), so a
/// completion handler gets that. The cost is the body in memory until the load ends, which
/// a completion handler needs anyway. Download tasks are handed to corelibs' HTTP protocol:
/// their bodies come from the origin, not from the cache, and are not stored (for cached,
/// resumable downloads use ``HTTPCache/download(_:to:retries:)-(URLRequest,_,_)``). So are
/// upload tasks, whose body corelibs gives only to its own protocol; what is stored for their
/// URL is removed first, as for any unsafe method (RFC 9111 §4.4). On Apple platforms,
/// whose loading system gathers the pieces itself, the body is passed on in pieces only.
public final class CachingURLProtocol: URLProtocol {
    private static let installed = Locked<HTTPCache?>(nil)
    // Set in startLoading, read in stopLoading; URLSession calls both on one thread.
    private let loading = Locked<Task<Void, Never>?>(nil)
    /// The platform's protocol loading a download task (Linux).
    private let delegated = Locked<URLProtocol?>(nil)

    /// The cache requests are answered through; `nil` lets every request pass to the next
    /// protocol. Its stale-while-revalidate refreshes that land post
    /// ``HTTPCache/didRefreshNotification``.
    public static var cache: HTTPCache? {
        get { installed.withLock { $0 } }
        set {
            let previous = installed.withLock { installed in
                defer { installed = newValue }
                return installed
            }
            if previous !== newValue { previous?.observeRefreshes(nil) }
            newValue?.observeRefreshes { [weak newValue] response in
                NotificationCenter.default.post(
                    name: HTTPCache.didRefreshNotification, object: newValue,
                    userInfo: [HTTPCache.refreshedURLKey: response.url, HTTPCache.refreshedResponseKey: response])
            }
        }
    }

    override public class func canInit(with request: URLRequest) -> Bool {
        guard let scheme = request.url?.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            return false
        }
        return cache != nil
    }

    override public class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override public func startLoading() {
        guard let cache = Self.cache else {
            client?.urlProtocol(self, didFailWithError: URLError(.unsupportedURL))
            return
        }
        #if canImport(FoundationNetworking)
        if let download = task as? URLSessionDownloadTask {
            return loadFromTheOrigin(download, cache)
        }
        // swift-corelibs-foundation keeps an upload task's body from the protocol's request (it
        // has neither `httpBody` nor `httpBodyStream`): sent by the cache, the upload would go
        // out empty. It goes to corelibs' own protocol, which has the body; what is stored for
        // its URL is invalidated first, as the cache does for an unsafe method (RFC 9111 §4.4).
        if let upload = task as? URLSessionUploadTask {
            if let url = request.url, !safeMethods.contains(request.httpMethod ?? "GET") {
                _ = try? cache.remove(url: url)
            }
            return loadFromTheOrigin(upload, cache)
        }
        #endif
        var request = self.request
        if request.httpBody == nil, let stream = request.httpBodyStream {
            let body = Self.read(stream)
            // In this order: swift-corelibs-foundation's `httpBodyStream = nil` clears `httpBody`
            // too, and the request went out with no body.
            request.httpBodyStream = nil
            request.httpBody = body
        }
        // What the store answers at once with a body of at most 1 MiB is answered here, as a
        // URLProtocol answering from memory does (no hop to a task: a hit costs little more
        // than URLSession itself); a larger one streams from a task, in pieces.
        guard let fetch = fetchRequest(request) else { return }
        if let stored = cache.storedData(for: fetch, upTo: 1 << 20) { return answer(stored) }
        // Never start network work synchronously inside startLoading (it traps in
        // swift-corelibs-foundation): a task runs it elsewhere.
        let this = Unchecked(self)
        let task = Task {
            let protocolInstance = this.value
            let client = protocolInstance.client
            do {
                let (head, body) = try await cache.bytes(for: fetch)
                if let failure = protocolInstance.nothingStored(head) { throw failure }
                client?.urlProtocol(protocolInstance, didReceive: head.response, cacheStoragePolicy: .notAllowed)
                try await protocolInstance.deliver(body, to: client)
            } catch is CancellationError {
                // stopLoading: the session no longer listens.
            } catch {
                client?.urlProtocol(protocolInstance, didFailWithError: error)
            }
        }
        loading.withLock { $0 = task }
    }

    /// `request` as the cache takes it; `nil` when it cannot be (the load has failed with why).
    private func fetchRequest(_ request: URLRequest) -> FetchRequest? {
        do {
            return try FetchRequest(fetching: request)
        } catch {
            client?.urlProtocol(self, didFailWithError: error)
            return nil
        }
    }

    /// Hands `stored` to the client now: the response, its body in one piece, the end.
    private func answer(_ stored: CachedResponse) {
        if let failure = nothingStored(stored.head) {
            client?.urlProtocol(self, didFailWithError: failure)
            return
        }
        client?.urlProtocol(self, didReceive: stored.head.response, cacheStoragePolicy: .notAllowed)
        if !stored.data.isEmpty { client?.urlProtocol(self, didLoad: stored.data) }
        client?.urlProtocolDidFinishLoading(self)
    }

    override public func stopLoading() {
        loading.withLock { $0 }?.cancel()
        delegated.withLock { $0 }?.stopLoading()
    }

    /// Passes `body` on and finishes the load (see "Bodies on Linux" above).
    private func deliver(_ body: ResponseBody, to client: (any URLProtocolClient)?) async throws {
        #if canImport(FoundationNetworking)
        var whole = Data()
        var chunks = 0
        for try await chunk in body {
            try Task.checkCancellation()
            client?.urlProtocol(self, didLoad: chunk)
            whole.append(chunk)
            chunks += 1
        }
        try Task.checkCancellation()
        // One piece or none: the last didLoad a completion handler keeps is the whole body
        // already, so the load finishes here (most hits: no second instance).
        guard let task, chunks > 1 else {
            client?.urlProtocolDidFinishLoading(self)
            return
        }
        let finishing = WholeBody(request: request, cachedResponse: nil, client: nil)
        finishing.task = WholeBody.noDelegateTask
        client?.urlProtocol(finishing, didLoad: whole)
        finishing.task = task
        client?.urlProtocolDidFinishLoading(finishing)
        #else
        for try await chunk in body {
            try Task.checkCancellation()
            client?.urlProtocol(self, didLoad: chunk)
        }
        client?.urlProtocolDidFinishLoading(self)
        #endif
    }

    /// The error a `returnCacheDataDontLoad` load with nothing stored fails with, when `head`
    /// is the cache's `504` for it; nil for any other answer.
    private func nothingStored(_ head: CachedResponseHead) -> URLError? {
        guard head.statusCode == 504, head.reasons.contains(.policy(.returnCacheDataDontLoad)) else { return nil }
        return resourceUnavailable(
            "nothing is stored for this URL, and the cache policy returnCacheDataDontLoad never loads it")
    }

    /// How a `returnCacheDataDontLoad` load with nothing to use fails on Apple platforms.
    private func resourceUnavailable(_ why: String) -> URLError {
        var userInfo: [String: Any] = [NSLocalizedDescriptionKey: why]
        if let url = request.url { userInfo[NSURLErrorFailingURLErrorKey] = url }
        return URLError(.resourceUnavailable, userInfo: userInfo)
    }

    #if canImport(FoundationNetworking)
    /// Hands a download task to corelibs' own HTTP protocol, the only one it gives a file to,
    /// or an upload task, the only one it gives the body to (see "Bodies on Linux" above).
    private func loadFromTheOrigin(_ task: URLSessionTask, _ cache: HTTPCache) {
        let policy = CachePolicy(request.cachePolicy)
        if policy == .returnCacheDataDontLoad
            || (policy == .useProtocolCachePolicy && cache.configuration.defaultPolicy == .returnCacheDataDontLoad)
        {
            client?.urlProtocol(
                self,
                didFailWithError: resourceUnavailable(
                    "download and upload tasks are not answered from the cache on this platform, and the cache "
                        + "policy returnCacheDataDontLoad never loads from the origin"))
            return
        }
        let loader = URLSessionConfiguration.default.protocolClasses?.lazy
            .compactMap { $0 as? URLProtocol.Type }
            .first { $0 != CachingURLProtocol.self && $0.canInit(with: self.request) }
        guard let loader else {
            client?.urlProtocol(self, didFailWithError: URLError(.unsupportedURL))
            return
        }
        let platform = loader.init(task: task, cachedResponse: nil, client: client)
        delegated.withLock { $0 = platform }
        platform.startLoading()
    }
    #endif

    private static func read(_ stream: InputStream) -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        stream.open()
        defer { stream.close() }
        while true {
            let count = stream.read(&buffer, maxLength: buffer.count)
            if count <= 0 { break }
            data.append(buffer, count: count)
        }
        return data
    }
}

#if canImport(FoundationNetworking)
/// The instance a load on Linux is finished through, holding the whole body in one `didLoad`
/// (see ``CachingURLProtocol``). It never loads anything itself.
private final class WholeBody: URLProtocol {
    /// A data task that is never resumed, of a session with no delegate: corelibs keeps the
    /// data given for it and passes it to no one.
    static let noDelegateTask: URLSessionDataTask = {
        let session = URLSession(configuration: .ephemeral)
        let task = session.dataTask(with: URL(string: "http://127.0.0.1/")!)
        // corelibs registers a new task on the session's serial queue after returning it, and
        // answers getAllTasks through that queue: once it has answered, the task is registered.
        let registered = DispatchSemaphore(value: 0)
        session.getAllTasks { _ in registered.signal() }
        registered.wait()
        return task
    }()

    override class func canInit(with request: URLRequest) -> Bool { false }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }
    override func startLoading() {}
    override func stopLoading() {}
}
#endif

/// A value handed to another task although its type is not `Sendable`: the URL loading
/// system owns a protocol instance and calls its client from any thread.
private struct Unchecked<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

extension HTTPCache {
    /// Posted on `NotificationCenter.default` when a stale-while-revalidate refresh (RFC 5861
    /// §3) of the cache ``CachingURLProtocol`` answers through lands: the origin sent another
    /// representation than the one served stale, and it is stored (as for
    /// ``HTTPCache/updates(for:)-(URLRequest)``; a `304` posts nothing). The `object` is the
    /// cache; `userInfo` holds the response's `URL` under ``refreshedURLKey`` and the
    /// ``CachedResponse`` as now stored under ``refreshedResponseKey``. It is posted from the
    /// task that ran the refresh, not the main thread: hop to the main actor to update a view.
    ///
    /// ```swift
    /// NotificationCenter.default.addObserver(forName: HTTPCache.didRefreshNotification, object: nil, queue: .main) {
    ///     guard let response = $0.userInfo?[HTTPCache.refreshedResponseKey] as? CachedResponse else { return }
    ///     reload(response.url, with: response.data)
    /// }
    /// ```
    public static let didRefreshNotification = Notification.Name("HTTPCacheDidRefresh")
    /// The `userInfo` key of the refreshed response's `URL` in ``didRefreshNotification``.
    public static let refreshedURLKey = "url"
    /// The `userInfo` key of the refreshed ``CachedResponse`` in ``didRefreshNotification``.
    public static let refreshedResponseKey = "response"
}

extension URLSessionConfiguration {
    /// Answers this configuration's sessions through `cache`: installs
    /// ``CachingURLProtocol`` first among the protocol classes and switches the session's own
    /// `URLCache` off.
    public func useHTTPCache(_ cache: HTTPCache) {
        CachingURLProtocol.cache = cache
        protocolClasses = [CachingURLProtocol.self] + (protocolClasses ?? []).filter { $0 != CachingURLProtocol.self }
        urlCache = nil
        requestCachePolicy = .useProtocolCachePolicy
    }
}
