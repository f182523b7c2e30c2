internal import CCurlHTTPCache

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension UpstreamError {
    /// The error for a transfer that ended with `code`, or stopped in a callback for
    /// `transfer.stop`.
    /// - Parameters:
    ///   - code: What `curl_easy_perform` returned.
    ///   - transfer: The transfer's state: whether the head was delivered, why a callback stopped.
    ///   - request: The request, for its URL and method.
    ///   - detail: libcurl's message (its error buffer, else its text for `code`).
    ///   - osErrno: The `errno` of the failed socket call, 0 when none.
    ///   - configuration: The timeouts, named in timeout messages.
    init(
        code: CURLcode, transfer: UpstreamTransfer, request: UpstreamRequest, detail: String, osErrno: Int32,
        configuration: UpstreamClient.Configuration
    ) {
        let url = request.url
        let receivedHead = transfer.receivedHead
        func error(_ kind: Kind, _ description: String) -> UpstreamError {
            UpstreamError(kind: kind, description: description, receivedHead: receivedHead)
        }
        switch transfer.stop {
        case .receiverDeclined:
            self = error(.aborted, "the transfer from \(url) was stopped by its receiver")
            return
        case .malformed(let reason):
            self = error(.protocolError, "\(url) sent a response that could not be parsed: \(reason)")
            return
        case .stalled:
            let what = receivedHead ? "the response body" : "a response"
            self = error(
                .timeout,
                "no byte from \(url) for \(Self.seconds(configuration.stallTimeout)) while waiting for \(what)")
            return
        case .resendRefused:
            let method = request.method
            let description =
                transfer.allowedSends > 1
                ? "the connection to \(url) closed before any response to \(method), on a kept-alive connection"
                    + " and again on a new one"
                : "the kept-alive connection to \(url) closed before any response to \(method); \(method) is not"
                    + " idempotent, so it was not sent again (RFC 9110 §9.2.2)"
            self = error(.closed, description)
            return
        case nil:
            break
        }
        switch code {
        case CURLE_COULDNT_CONNECT:
            let reason = osErrno != 0 ? String(cString: strerror(osErrno)) : detail
            self = error(.connect, "could not connect to \(url) (\(reason)); is the origin running?")
        case CURLE_COULDNT_RESOLVE_HOST:
            self = error(.connect, "could not resolve the host of \(url) (\(detail))")
        case CURLE_OPERATION_TIMEDOUT:
            self =
                transfer.connected
                ? error(.timeout, "timed out waiting for \(url) (\(detail))")
                : error(
                    .timeout,
                    "could not connect to \(url) within \(Self.seconds(configuration.connectTimeout)) (\(detail))")
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CIPHER:
            self = error(.connect, "could not set up TLS with \(url) (\(detail))")
        case CURLE_GOT_NOTHING:
            self = error(.closed, "the connection to \(url) closed before any response (\(detail))")
        case CURLE_PARTIAL_FILE:
            self = error(.closed, "the response from \(url) ended before its body was complete (\(detail))")
        case CURLE_RECV_ERROR where detail.contains("chunk"):
            self = error(.protocolError, "\(url) sent a body with broken chunked framing (\(detail))")
        case CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_SEND_FAIL_REWIND:
            self = error(
                .closed, "the connection to \(url) was closed or reset before the response was complete (\(detail))")
        case CURLE_WEIRD_SERVER_REPLY, CURLE_BAD_CONTENT_ENCODING:
            self = error(.protocolError, "\(url) sent a response that could not be parsed (\(detail))")
        case CURLE_UNSUPPORTED_PROTOCOL where transfer.connected:
            // No status line: libcurl takes the bytes for HTTP/0.9, which it refuses.
            self = error(.protocolError, "\(url) sent a response that could not be parsed (\(detail))")
        case CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT:
            self = error(.other, "cannot send a request to \(url): only http and https URLs are sent (\(detail))")
        case CURLE_LOGIN_DENIED where !transfer.connected:
            self = error(.other, "cannot send a request to \(url): a URL with user information is not sent (\(detail))")
        case CURLE_OK:
            // Finished without a head: nothing a caller could use.
            self = error(.protocolError, "\(url) ended the exchange without a response head")
        default:
            self = error(.other, "the request to \(url) failed: \(detail) (libcurl error \(code.rawValue))")
        }
    }

    /// `10 s`, `0.5 s`.
    static func seconds(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? "\(Int(value)) s" : "\(value) s"
    }
}
