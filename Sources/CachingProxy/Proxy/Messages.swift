#if os(Linux)
import CacheSemantics
import CacheSystem
import CacheTLS
import Glibc
import HTTPClient

enum Messages {
    /// Fields that describe one connection, never forwarded or stored (RFC 9110 §7.6.1):
    /// CacheSemantics' list, and every field `Connection` names.
    static let hopByHop = Set(hopByHopFieldNames)

    /// A bit for each length of a name in ``hopByHop``: a field whose name has none of them is
    /// not one, found without hashing its name (most fields of most messages).
    private static let hopByHopLengths = hopByHopFieldNames.reduce(UInt64(0)) { $0 | 1 << $1.utf8.count }

    /// `fields` without hop-by-hop fields and the ones `Connection` nominates.
    static func removingHopByHop(_ fields: HeaderFields) -> HeaderFields {
        let nominated = fields.listMembers(named: .connection).map { ASCII.lowercased(String($0)) }
        func isHopByHop(_ field: HeaderField) -> Bool {
            let length = field.lowercasedName.utf8.count
            return (length < 64 && hopByHopLengths & 1 << length != 0 && hopByHop.contains(field.lowercasedName))
                || nominated.contains(field.lowercasedName)
        }
        guard let first = fields.firstIndex(where: isHopByHop) else { return fields }
        // Reserved, not filtered: a filter grew its array three or four times a head. Two more
        // for what a relay adds (`Via`, `Cache-Status`).
        var kept = HeaderFields()
        kept.reserveCapacity(fields.count + 1)
        for field in fields[..<first] { kept.append(field) }
        for field in fields[(first + 1)...] where !isHopByHop(field) { kept.append(field) }
        return kept
    }

    /// Appends this proxy to `Via` (RFC 9110 §7.6.3): `1.1 name` for a message received
    /// over HTTP/1.1, `2 name` over HTTP/2.
    static func addingVia(_ fields: inout HeaderFields, version: String, name: String) {
        fields.append(name: .via, value: viaValue(version: version, name: name))
    }

    /// `version SP name`, this proxy's `Via` member, written at once (interpolation cost a
    /// miss two of its general appends).
    static func viaValue(version: String, name: String) -> String {
        String(unsafeUninitializedCapacity: version.utf8.count + 1 + name.utf8.count) { buffer in
            var text = TextWriter(buffer)
            text.append(version)
            text.append(" ")
            text.append(name)
            return text.count
        }
    }

    /// A path as the most lenient origin might read it, for telling the proxy's own paths and
    /// dot segments apart from everything else; never what is forwarded or keyed.
    ///
    /// Percent-escapes are decoded until none is left (`%255F` is `_`), `\` counts as `/`,
    /// runs of `/` as one, `;parameters` are dropped from each segment, and dot segments are
    /// removed (RFC 3986 §5.2.4).
    /// - Returns: The path so read, and whether a `..` reached above the root.
    static func lenientReading(ofPath path: Substring) -> (path: String, climbsAboveRoot: Bool) {
        readsAsItIs(path) ? (String(path), false) : fullReading(ofPath: path)
    }

    /// ``lenientReading(ofPath:)`` the long way, for any path.
    static func fullReading(ofPath path: Substring) -> (path: String, climbsAboveRoot: Bool) {
        var bytes = Array(path.utf8)
        while let decoded = percentDecoded(bytes) { bytes = decoded }
        var segments: [ArraySlice<UInt8>] = []
        var climbsAboveRoot = false
        var endsWithSlash = false
        for raw in bytes.split(omittingEmptySubsequences: false, whereSeparator: { $0 == 0x2F || $0 == 0x5C }) {
            let segment = raw.prefix { $0 != UInt8(ascii: ";") }
            endsWithSlash = segment.isEmpty || segment.elementsEqual(".".utf8) || segment.elementsEqual("..".utf8)
            if segment.elementsEqual("..".utf8) {
                if segments.popLast() == nil { climbsAboveRoot = true }
            } else if !endsWithSlash {
                segments.append(segment)
            }
        }
        var reading = segments.reduce(into: [UInt8]()) { $0 += [UInt8(ascii: "/")] + $1 }
        if endsWithSlash || reading.isEmpty { reading.append(UInt8(ascii: "/")) }
        return (String(decoding: reading, as: UTF8.self), climbsAboveRoot)
    }

    /// Whether the lenient reading of `path` is `path` itself, found in one pass without
    /// copying it: it begins with `/` and has no `%`, `\`, `;`, run of `/` or dot segment. A
    /// request's path nearly always does; anything else goes the long way.
    static func readsAsItIs(_ path: Substring) -> Bool {
        ASCII.withUTF8(path) { bytes in
            guard bytes.first == UInt8(ascii: "/") else { return false }
            // The length of the segment so far, and whether it is only dots.
            var (length, onlyDots) = (0, true)
            // By index rather than over `bytes.dropFirst()`: a debug build steps through a slice
            // in the standard library's unspecialized code, with a type-metadata lookup per
            // byte, each a process-wide lock under ThreadSanitizer (and this runs per request).
            for index in 1..<bytes.count {
                let byte = bytes[index]
                switch byte {
                case UInt8(ascii: "/"):
                    // An empty segment (a run of `/`) or `.` / `..` before this slash.
                    if length == 0 || (onlyDots && length <= 2) { return false }
                    (length, onlyDots) = (0, true)
                case UInt8(ascii: "%"), UInt8(ascii: "\\"), UInt8(ascii: ";"):
                    return false
                default:
                    length += 1
                    onlyDots = onlyDots && byte == UInt8(ascii: ".")
                }
            }
            // The last segment: empty (a trailing slash, kept as it is) or not a dot segment.
            return length == 0 || !(onlyDots && length <= 2)
        }
    }

    /// `bytes` with each `%XX` decoded; `nil` when there is none.
    private static func percentDecoded(_ bytes: [UInt8]) -> [UInt8]? {
        var out: [UInt8] = []
        var index = 0
        var decodedAny = false
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count, let high = ASCII.hexValue(bytes[index + 1]),
                let low = ASCII.hexValue(bytes[index + 2])
            {
                out.append(high << 4 | low)
                index += 3
                decodedAny = true
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return decodedAny ? out : nil
    }

    /// The methods the proxy handles, as its own `OPTIONS` answer lists them in `Allow`
    /// ([RFC 9110 §9.3.7](https://www.rfc-editor.org/rfc/rfc9110#section-9.3.7)): those it
    /// caches or sends on, and `CONNECT` in forward mode (RFC 9110 §9.3.6).
    static func allowedMethods(forward: Bool) -> String {
        "GET, HEAD, QUERY, POST, PUT, PATCH, DELETE, OPTIONS, TRACE" + (forward ? ", CONNECT" : "")
    }

    /// The value of a request's `Max-Forwards`
    /// ([RFC 9110 §7.6.2](https://www.rfc-editor.org/rfc/rfc9110#section-7.6.2)): `nil` when
    /// there is none, or when it is not one `1*DIGIT` (then it is ignored, as any field a
    /// recipient cannot parse). A value too large for an `Int` counts as `Int.max`.
    static func maxForwards(_ fields: HeaderFields) -> Int? {
        let values = fields.values(named: .maxForwards)
        guard values.count == 1 else { return nil }
        return ASCII.parseDigits(values[0], cap: .max)
    }

    /// Request fields a `TRACE` reflection leaves out: those likely to hold credentials
    /// ([RFC 9110 §9.3.8](https://www.rfc-editor.org/rfc/rfc9110#section-9.3.8)).
    private static let notReflected = [HeaderField.Name.authorization, .proxyAuthorization, .cookie].map(
        \.lowercasedName)

    /// The content of the proxy's answer to a `TRACE` it is the final recipient of: the
    /// request-line and fields as received, as `message/http` (RFC 9112 §10.1), without
    /// `Authorization`, `Proxy-Authorization` and `Cookie`
    /// ([RFC 9110 §9.3.8](https://www.rfc-editor.org/rfc/rfc9110#section-9.3.8)).
    static func traceReflection(_ request: ServerRequest) -> [UInt8] {
        var text = "\(request.method) \(request.target) HTTP/\(request.version)\r\n"
        for field in request.fields where !notReflected.contains(field.lowercasedName) {
            text += "\(field.name): \(field.value)\r\n"
        }
        return Array((text + "\r\n").utf8)
    }

    /// The fields and body of the proxy's own answers (errors, purge results): a line of plain
    /// text saying what happened, never stored.
    static func plainText(_ text: String) -> (fields: HeaderFields, body: [UInt8]) {
        (["Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-store"], Array((text + "\n").utf8))
    }

    /// The RFC 9209 §2.3 error type of an origin request that got no response: what the
    /// proxy's `502` or `504` says in `Proxy-Status`.
    static func proxyError(_ error: UpstreamError?) -> ProxyStatusMember.ErrorType {
        guard let error else { return .proxyInternalError }
        switch error.kind {
        case .connect:
            return proxyError(connecting: error.connectFailureKind)
        case .timeout:
            // While connecting (TCP or the TLS handshake, §2.3.9), else no byte within the
            // stall time once connected (§2.3.10).
            return error.connectFailure != nil ? .connectionTimeout : .connectionReadTimeout
        case .tls:
            switch error.tlsFailure {
            case .certificateExpired?, .certificateNotYetValid?, .wrongHost?, .unknownIssuer?, .untrustedCertificate?:
                return .tlsCertificateError  // §2.3.14
            default:
                return .tlsProtocolError  // §2.3.13
            }
        // Closed before any response (§2.3.8), or a part came and the rest did not (§2.3.18).
        case .closed: return error.receivedHead ? .httpResponseIncomplete : .connectionTerminated
        case .protocolError: return .httpProtocolError  // §2.3.28
        case .aborted, .other: return .proxyInternalError  // §2.3.30
        }
    }

    /// `description` of an origin's failure, with what to do when it does not say already.
    static func withAdvice(_ description: String, _ error: ProxyStatusMember.ErrorType) -> String {
        let advice: String? =
            switch error {
            case .connectionReadTimeout: "check the origin's load and logs"
            case .connectionTerminated, .httpResponseIncomplete, .httpProtocolError: "check the origin's logs"
            case .tlsProtocolError: "check that the origin speaks TLS 1.2 or later on that port"
            case .tlsCertificateError: "fix the origin's certificate, or trust its CA with --origin-cacert FILE"
            default: nil
            }
        guard let advice, !description.contains(advice) else { return description }
        return description + "; " + advice
    }

    /// The RFC 9209 §2.3 error type of a connection to an origin that was not made.
    static func proxyError(connecting failure: ConnectFailure.Kind?) -> ProxyStatusMember.ErrorType {
        switch failure {
        case .unresolved?: .dnsError  // §2.3.2
        case .timedOut?: .connectionTimeout  // §2.3.9
        case .failed(ECONNREFUSED)?: .connectionRefused  // §2.3.7
        case .failed(ENETUNREACH)?, .failed(EHOSTUNREACH)?: .destinationIPUnroutable  // §2.3.6
        // Another reason no connection was made: the origin counts as unavailable (§2.3.4).
        case .failed?, nil: .destinationUnavailable
        }
    }
}
#endif
