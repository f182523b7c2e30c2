import CacheExchange
import CacheLocking
import CacheStorage
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
/// Redirects are followed by the cache, each hop cached under its own URL. Requests the
/// cache itself sends go through a session without this protocol, so it never intercepts
/// itself. The protocol serves one cache per process: the one last installed.
public final class CachingURLProtocol: URLProtocol {
    private static let installed = Locked<HTTPCache?>(nil)
    // Set in startLoading, read in stopLoading; URLSession calls both on one thread.
    private let loading = Locked<Task<Void, Never>?>(nil)

    /// The cache requests are answered through; `nil` lets every request pass to the next
    /// protocol.
    public static var cache: HTTPCache? {
        get { installed.withLock { $0 } }
        set { installed.withLock { $0 = newValue } }
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
        var request = self.request
        if request.httpBody == nil, let stream = request.httpBodyStream {
            request.httpBody = Self.read(stream)
            request.httpBodyStream = nil
        }
        // Never start network work synchronously inside startLoading (it traps in
        // swift-corelibs-foundation): a task runs it elsewhere.
        let this = Unchecked(self)
        let task = Task {
            let protocolInstance = this.value
            let client = protocolInstance.client
            do {
                let (head, body) = try await cache.bytes(for: request)
                client?.urlProtocol(protocolInstance, didReceive: head.response, cacheStoragePolicy: .notAllowed)
                for try await chunk in body {
                    try Task.checkCancellation()
                    client?.urlProtocol(protocolInstance, didLoad: chunk)
                }
                client?.urlProtocolDidFinishLoading(protocolInstance)
            } catch is CancellationError {
                // stopLoading: the session no longer listens.
            } catch {
                client?.urlProtocol(protocolInstance, didFailWithError: error)
            }
        }
        loading.withLock { $0 = task }
    }

    override public func stopLoading() {
        loading.withLock { $0 }?.cancel()
    }

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

/// A value handed to another task although its type is not `Sendable`: the URL loading
/// system owns a protocol instance and calls its client from any thread.
private struct Unchecked<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
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
