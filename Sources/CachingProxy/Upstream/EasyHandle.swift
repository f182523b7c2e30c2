internal import CCurlHTTPCache
import CacheSemantics

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// libcurl's process-wide set-up, done once before the first handle is made.
enum CurlLibrary {
    /// Whether `curl_global_init` succeeded. Swift runs the initializer once, whichever thread
    /// comes first (libcurl's own global init is thread-safe only from 7.84 on).
    static let isReady: Bool = {
        // A write to a connection the origin closed must fail with EPIPE, not kill the process.
        // libcurl sends with MSG_NOSIGNAL on Linux, but TLS writes and other code may not.
        signal(SIGPIPE, SIG_IGN)
        return curl_global_init(Int(CURL_GLOBAL_ALL)) == CURLE_OK
    }()
}

/// One libcurl easy handle and its error buffer. Its connection cache (with any kept-alive
/// connections) and DNS cache survive `curl_easy_reset`, so a pooled handle reuses them.
///
/// Used by one thread at a time: ``UpstreamClient`` hands it out from its pool under a lock.
final class EasyHandle {
    let curl: UnsafeMutableRawPointer
    private let errorBuffer: UnsafeMutablePointer<CChar>

    /// A new handle; nil when libcurl could not make one.
    init?() {
        guard CurlLibrary.isReady, let curl = curl_easy_init() else { return nil }
        self.curl = curl
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    deinit {
        curl_easy_cleanup(curl)  // closes its connections
        errorBuffer.deallocate()
    }

    /// What libcurl wrote about the last failure, or its text for `code` when it wrote nothing.
    func detail(for code: CURLcode) -> String {
        if errorBuffer[0] != 0 { return String(cString: errorBuffer) }
        return String(cString: curl_easy_strerror(code))
    }

    /// The `errno` of the last failed connect or socket call (CURLINFO_OS_ERRNO); 0 when none.
    var osErrno: Int32 {
        var value = 0
        guard httpcache_curl_getinfo_long(curl, CURLINFO_OS_ERRNO, &value) == CURLE_OK else { return 0 }
        return Int32(truncatingIfNeeded: value)
    }

    /// Sends `request` and runs the transfer to its end on this thread; then resets every
    /// option (the caches stay), so no pointer into this call's memory outlives it.
    func perform(
        _ request: UpstreamRequest, transfer: UpstreamTransfer, configuration: UpstreamClient.Configuration
    ) -> CURLcode {
        defer { curl_easy_reset(curl) }
        errorBuffer[0] = 0
        var failure = CURLE_OK
        func check(_ code: CURLcode) {
            if failure == CURLE_OK && code != CURLE_OK { failure = code }
        }
        guard let list = RequestFieldList.make(request.fields) else { return CURLE_OUT_OF_MEMORY }
        defer { curl_slist_free_all(list) }  // curl reads it only during curl_easy_perform
        check(httpcache_curl_setopt_pointer(curl, CURLOPT_ERRORBUFFER, errorBuffer))
        check(httpcache_curl_setopt_pointer(curl, CURLOPT_URL, request.url))
        // http and https only: a proxy must never fetch file:, ftp: or other URLs.
        check(httpcache_curl_setopt_pointer(curl, CURLOPT_PROTOCOLS_STR, "http,https"))
        // A URL with user:password would make libcurl add `Authorization: Basic …` of its own.
        check(httpcache_curl_setopt_long(curl, CURLOPT_DISALLOW_USERNAME_IN_URL, 1))
        check(httpcache_curl_setopt_long(curl, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1)))
        // The URL's path as given: no removal of dot segments (`/a/../b` stays).
        check(httpcache_curl_setopt_long(curl, CURLOPT_PATH_AS_IS, 1))
        // Never through a proxy from the environment (`http_proxy`): the origin is the URL's.
        check(httpcache_curl_setopt_pointer(curl, CURLOPT_PROXY, ""))
        check(httpcache_curl_setopt_long(curl, CURLOPT_FOLLOWLOCATION, 0))
        // Bodies as sent: no Content-Encoding decoding (and no CURLOPT_ACCEPT_ENCODING, so no
        // Accept-Encoding is added); chunked framing is removed.
        check(httpcache_curl_setopt_long(curl, CURLOPT_HTTP_CONTENT_DECODING, 0))
        check(httpcache_curl_setopt_long(curl, CURLOPT_HTTP_TRANSFER_DECODING, 1))
        check(httpcache_curl_setopt_long(curl, CURLOPT_NOSIGNAL, 1))
        check(
            httpcache_curl_setopt_long(curl, CURLOPT_CONNECTTIMEOUT_MS, Self.milliseconds(configuration.connectTimeout))
        )
        check(httpcache_curl_setopt_pointer(curl, CURLOPT_HTTPHEADER, list))
        transfer.install(on: curl, check)

        let method = request.method
        if method == "HEAD" {
            // No body is read whatever the head says (RFC 9110 §9.3.2); a request body is not sent.
            check(httpcache_curl_setopt_long(curl, CURLOPT_NOBODY, 1))
        } else if method != "GET" || request.body != nil {
            check(httpcache_curl_setopt_pointer(curl, CURLOPT_CUSTOMREQUEST, method))
        }
        guard failure == CURLE_OK else { return failure }
        guard method != "HEAD", let body = request.body else {
            return withExtendedLifetime(transfer) { curl_easy_perform(curl) }
        }
        // CURLOPT_POSTFIELDS: the body from memory with `Content-Length: N` (0 for an empty
        // one); curl reads it during the call, so the pointer need not outlive it. An empty
        // array may have no storage, and a NULL POSTFIELDS would make curl read stdin.
        let empty: UInt8 = 0
        return withUnsafeBytes(of: empty) { placeholder in
            body.withUnsafeBytes { bytes in
                check(httpcache_curl_setopt_off(curl, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bytes.count)))
                check(
                    httpcache_curl_setopt_pointer(
                        curl, CURLOPT_POSTFIELDS, bytes.baseAddress ?? placeholder.baseAddress))
                guard failure == CURLE_OK else { return failure }
                return withExtendedLifetime(transfer) { curl_easy_perform(curl) }
            }
        }
    }

    /// `seconds` as whole milliseconds for libcurl, rounded up; 0 (libcurl's default) when not positive.
    static func milliseconds(_ seconds: Double) -> Int {
        guard seconds.isFinite, seconds > 0 else { return 0 }
        return Int(min(seconds * 1000, Double(Int32.max)).rounded(.up))
    }
}
