/// One intermediary's member of the `Proxy-Status` response field
/// ([RFC 9209 §2](https://www.rfc-editor.org/rfc/rfc9209#section-2)): who handled the response
/// and, for one it made itself, what went wrong.
///
/// ```swift
/// let status = ProxyStatusMember(proxy: "edge-1", error: .connectionRefused)
/// status.fieldValue  // "edge-1; error=connection_refused"
/// ```
public struct ProxyStatusMember: Hashable, Sendable {
    /// The proxy error types of RFC 9209 §2.3 that a caching proxy can meet.
    public enum ErrorType: String, Hashable, Sendable, CaseIterable {
        /// §2.3.2: the next hop's name did not resolve.
        case dnsError = "dns_error"
        /// §2.3.3: no next hop for the request (a gateway without one configured).
        case destinationNotFound = "destination_not_found"
        /// §2.3.4: the next hop is considered unavailable.
        case destinationUnavailable = "destination_unavailable"
        /// §2.3.5: connections to the next hop's IP address are prohibited.
        case destinationIPProhibited = "destination_ip_prohibited"
        /// §2.3.6: no route to the next hop's IP address.
        case destinationIPUnroutable = "destination_ip_unroutable"
        /// §2.3.7: the next hop refused the connection.
        case connectionRefused = "connection_refused"
        /// §2.3.8: the connection closed before any part of the response came.
        case connectionTerminated = "connection_terminated"
        /// §2.3.9: connecting to the next hop timed out.
        case connectionTimeout = "connection_timeout"
        /// §2.3.10: no data arrived on the connection within the time limit.
        case connectionReadTimeout = "connection_read_timeout"
        /// §2.3.13: a TLS handshake or connection error with the next hop.
        case tlsProtocolError = "tls_protocol_error"
        /// §2.3.14: the next hop's certificate was refused.
        case tlsCertificateError = "tls_certificate_error"
        /// §2.3.16: the intermediary makes a client error (4xx) response itself.
        case httpRequestError = "http_request_error"
        /// §2.3.17: the request was denied by the intermediary (access control).
        case httpRequestDenied = "http_request_denied"
        /// §2.3.18: the next hop's response was incomplete.
        case httpResponseIncomplete = "http_response_incomplete"
        /// §2.3.26: the complete response did not arrive within the time limit.
        case httpResponseTimeout = "http_response_timeout"
        /// §2.3.28: an HTTP protocol error with the next hop (no more specific type fits).
        case httpProtocolError = "http_protocol_error"
        /// §2.3.29: the intermediary made the response locally, without trying the next hop.
        case proxyInternalResponse = "proxy_internal_response"
        /// §2.3.30: an internal error of the intermediary, unrelated to the origin.
        case proxyInternalError = "proxy_internal_error"
    }

    /// The intermediary's name, a Token when it is one, else a String (§2).
    public var proxy: String
    /// What went wrong (§2.1.1).
    public var error: ErrorType?
    /// The status the next hop sent (§2.1.4).
    public var receivedStatus: Int?
    /// More words for people (§2.1.5).
    public var details: String?
    /// `status-code` of `http_request_error` (§2.3.16): the 4xx status made.
    public var statusCode: Int?

    public init(
        proxy: String, error: ErrorType? = nil, receivedStatus: Int? = nil, details: String? = nil,
        statusCode: Int? = nil
    ) {
        self.proxy = proxy
        self.error = error
        self.receivedStatus = receivedStatus
        self.details = details
        self.statusCode = statusCode
    }

    /// The member as RFC 9651 §4.1.1 serializes a List member with parameters.
    public var fieldValue: String {
        var parameters: [(String, StructuredItem)] = []
        if let error { parameters.append(("error", .token(error.rawValue))) }
        if let statusCode { parameters.append(("status-code", .integer(Int64(statusCode)))) }
        if let receivedStatus { parameters.append(("received-status", .integer(Int64(receivedStatus)))) }
        if let details { parameters.append(("details", .string(details))) }
        return StructuredFields.member(proxy, parameters)
    }

    /// `existing` with this member appended: the intermediary closest to the user comes last
    /// (RFC 9209 §2), and the members already there are kept.
    public func appended(to existing: String?) -> String {
        StructuredFields.appending(fieldValue, to: existing)
    }
}
