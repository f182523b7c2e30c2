internal import CCurlHTTPCache
import CEpollHTTPCache
import CacheSemantics

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The state of one ``UpstreamClient/perform(_:_:)`` call, which libcurl's callbacks reach
/// through their data pointer. Used only by the thread that called `perform`.
final class UpstreamTransfer {
    /// Why a callback stopped the transfer.
    enum Stop: Equatable {
        /// The receiver returned `false`.
        case receiverDeclined
        /// The head could not be parsed (the reason), or body bytes came before a head.
        case malformed(String)
        /// libcurl was about to send the request again, which is not allowed (see
        /// ``UpstreamTransfer/allowedSends``).
        case resendRefused
        /// No byte moved for the stall timeout.
        case stalled
    }

    let receiver: any UpstreamReceiver
    /// How many times the request may be sent. libcurl sends a request again on a new
    /// connection when a kept-alive one closed before any byte of the response came
    /// (`Curl_retry_request`), for every method and even with a body it has in memory.
    /// That is allowed once for idempotent methods (RFC 9110 §9.2.2) and never otherwise.
    let allowedSends: Int
    /// Nanoseconds without a byte in either direction after which the transfer stops; 0: never.
    private let stallNanoseconds: UInt64

    private var parser = ResponseHeadParser()
    /// Whether the final head went to the receiver.
    private(set) var receivedHead = false
    /// Set when a callback stopped the transfer.
    private(set) var stop: Stop?
    /// How many times libcurl started sending the request.
    private(set) var sends = 0
    private var headBytes: Int64 = 0
    private var lastActivityCount: Int64 = -1
    private var lastActivityTime: UInt64 = 0

    init(receiver: any UpstreamReceiver, idempotent: Bool, stallTimeout: Double) {
        self.receiver = receiver
        allowedSends = idempotent ? 2 : 1
        stallNanoseconds =
            stallTimeout > 0 && stallTimeout < 1e9 ? UInt64((stallTimeout * 1e9).rounded(.up)) : 0
    }

    /// Whether a connection was made (or reused) and the request sent at least once.
    var connected: Bool { sends > 0 }

    // MARK: Events

    /// Before each send: counts it and refuses one too many.
    func willSend() -> Bool {
        sends += 1
        guard sends <= allowedSends else {
            stop = .resendRefused
            return false
        }
        // libcurl sends again only when nothing of a response came; start the head afresh anyway.
        parser.restart()
        lastActivityCount = -1
        return true
    }

    /// One head line; false stops the transfer.
    func headLine(_ line: UnsafeRawBufferPointer) -> Bool {
        headBytes += Int64(line.count)
        switch parser.consume(line) {
        case .none:
            return true
        case .malformed(let reason):
            stop = .malformed(reason)
            return false
        case .head(let status, let reason, let fields):
            receivedHead = true
            let head = UpstreamResponseHead(status: status, reason: reason, fields: HeaderFields(fields))
            guard receiver.receive(head: head) else {
                stop = .receiverDeclined
                return false
            }
            return true
        }
    }

    /// Body bytes; false stops the transfer.
    func body(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard receivedHead else {
            stop = .malformed("body bytes before the response head")
            return false
        }
        guard receiver.receive(body: bytes) else {
            stop = .receiverDeclined
            return false
        }
        return true
    }

    /// Progress, at least about once a second; false stops a transfer that stalled.
    func progress(downloaded: Int64, uploaded: Int64) -> Bool {
        guard stallNanoseconds > 0, connected else { return true }
        let count = headBytes &+ downloaded &+ uploaded
        let now = Self.monotonicNanoseconds()
        if count != lastActivityCount {
            lastActivityCount = count
            lastActivityTime = now
            return true
        }
        guard now &- lastActivityTime < stallNanoseconds else {
            stop = .stalled
            return false
        }
        return true
    }

    static func monotonicNanoseconds() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }

    // MARK: libcurl callbacks

    /// The transfer behind a callback's data pointer.
    static func from(_ context: UnsafeMutableRawPointer?) -> UpstreamTransfer {
        guard let context else { preconditionFailure("libcurl callback without its transfer") }
        return Unmanaged<UpstreamTransfer>.fromOpaque(context).takeUnretainedValue()
    }

    /// Installs the callbacks on `handle`, with `self` as their data. The caller keeps `self`
    /// alive until `curl_easy_perform` returns.
    func install(on handle: UnsafeMutableRawPointer, _ check: (CURLcode) -> Void) {
        let context = Unmanaged.passUnretained(self).toOpaque()
        // Returning anything but the byte count stops the transfer with CURLE_WRITE_ERROR.
        check(
            httpcache_curl_set_header_function(handle) { bytes, size, count, context in
                let length = size * count
                let line = UnsafeRawBufferPointer(start: bytes, count: length)
                return UpstreamTransfer.from(context).headLine(line) ? length : length &+ 1
            })
        check(httpcache_curl_setopt_pointer(handle, CURLOPT_HEADERDATA, context))
        check(
            httpcache_curl_set_write_function(handle) { bytes, size, count, context in
                let length = size * count
                guard length > 0 else { return 0 }
                let chunk = UnsafeRawBufferPointer(start: bytes, count: length)
                return UpstreamTransfer.from(context).body(chunk) ? length : 0
            })
        check(httpcache_curl_setopt_pointer(handle, CURLOPT_WRITEDATA, context))
        check(
            httpcache_curl_set_prereq_function(handle) { context, _, _, _, _ in
                UpstreamTransfer.from(context).willSend() ? CURL_PREREQFUNC_OK : CURL_PREREQFUNC_ABORT
            })
        check(httpcache_curl_setopt_pointer(handle, CURLOPT_PREREQDATA, context))
        check(
            httpcache_curl_set_xferinfo_function(handle) { context, _, downloaded, _, uploaded in
                UpstreamTransfer.from(context).progress(downloaded: Int64(downloaded), uploaded: Int64(uploaded))
                    ? 0 : 1
            })
        check(httpcache_curl_setopt_pointer(handle, CURLOPT_XFERINFODATA, context))
        check(httpcache_curl_setopt_long(handle, CURLOPT_NOPROGRESS, 0))
    }
}
