#if os(Linux)
import CacheSemantics
@_spi(Wire) import HTTPWire

extension UpstreamRequest {
    /// A request as it goes to the origin: where, and the bytes of its head (RFC 9112 §3).
    struct Wire {
        var host: String
        var port: UInt16
        /// Idle connections are pooled under this: the lower-cased host and the port.
        var poolKey: String
        /// The request line, the field lines and the empty line; the body too when small.
        var head: [UInt8]
        /// Whether the body still has to be sent after `head`.
        var sendsBodyApart: Bool
        /// Whether the request said `Connection: close`, so the connection is not reused
        /// after its response (RFC 9112 §9.6).
        var closesConnection: Bool
    }

    /// Bodies up to this size are copied into the head's buffer and go out in one `send`.
    static let inlineBodyLimit = 16 * 1024

    /// The request in origin-form (RFC 9112 §3.2.1), or in absolute-form to ``proxy`` when set.
    ///
    /// What goes out: `METHOD /path?query HTTP/1.1`, `Host` from the URL (the proxy's, through
    /// a proxy) first when the fields have none (RFC 9112 §3.2), the field lines in order with repeated names, an
    /// empty value as `Name:`, then `Content-Length` when there is a body (even an empty one;
    /// never for `HEAD`, whose body is not sent). `Content-Length` and `Transfer-Encoding`
    /// among the fields are dropped: the body's framing is the client's to write (RFC 9112 §6).
    ///
    /// Nothing that could be read as more than one request is ever sent: a method that is not
    /// a token (RFC 9110 §9.1), `CONNECT` (tunnels connect directly), a URL that is not `http`
    /// or whose authority is not `host[:port]` (RFC 3986 §3.2), a target with a byte that is
    /// not visible ASCII, a field name that is not a token or a value with CR, LF or NUL (RFC
    /// 9110 §5.5) are refused. The path and query go out as the URL has them (RFC 9110 §7.7).
    /// - Throws: ``UpstreamError/Kind/other``, saying what cannot be sent.
    func wire() throws(UpstreamError) -> Wire {
        guard !method.isEmpty, method.utf8.allSatisfy(HTTPBytes.isToken) else {
            throw refusal("\(method.debugDescription) is not a method token (RFC 9110 §9.1)")
        }
        guard method != "CONNECT" else {
            throw refusal("CONNECT is not sent upstream; tunnels connect directly")
        }
        let parsed: Target?
        do { parsed = try Target.absolute(proxy ?? url) } catch {
            throw refusal("the \(proxy == nil ? "URL" : "proxy")'s authority: \(error)")
        }
        guard let target = parsed else { throw refusal("only http URLs are sent") }
        let authority = target.authority
        // Through a proxy, the URL as given is the request-target (RFC 9112 §3.2.2).
        let path = proxy == nil ? target.pathAndQuery.utf8 : Substring(url).utf8
        guard !path.isEmpty, path.allSatisfy(HTTPBytes.isTarget),
            let (host, port) = OriginSocket.authority(authority, defaultPort: 80)
        else {
            throw refusal("the URL has a byte that cannot be sent in a request line (RFC 9112 §3)")
        }
        var closesConnection = false
        for field in fields {
            guard !field.name.isEmpty, field.name.utf8.allSatisfy(HTTPBytes.isToken) else {
                throw refusal("the field name \(field.name.debugDescription) is not a token (RFC 9110 §5.1)")
            }
            guard !field.value.utf8.contains(where: { $0 == HTTPBytes.cr || $0 == HTTPBytes.lf || $0 == 0 }) else {
                throw refusal("the value of the field \(field.name) holds CR, LF or NUL (RFC 9110 §5.5)")
            }
            if field.lowercasedName == HeaderField.Name.connection.lowercasedName,
                field.value.split(separator: ",").contains(where: {
                    ASCII.equalsIgnoringCase(ASCII.trimmed($0), "close")
                })
            {
                closesConnection = true
            }
        }
        let body = method == "HEAD" ? nil : body
        var head: [UInt8] = []
        head.reserveCapacity(256 + (body.map { $0.count <= Self.inlineBodyLimit ? $0.count : 0 } ?? 0))
        HeadWriter.appendRequestLine(method: method, target: path, to: &head)
        if !fields.contains(.host) { HeadWriter.appendField(name: "Host", value: authority, to: &head) }
        for field in fields
        where field.lowercasedName != HeaderField.Name.contentLength.lowercasedName
            && field.lowercasedName != HeaderField.Name.transferEncoding.lowercasedName
        {
            HeadWriter.appendField(name: field.name, value: field.value, to: &head)
        }
        if let body { HeadWriter.appendField(name: "Content-Length", value: String(body.count), to: &head) }
        HeadWriter.appendEnd(to: &head)
        let sendsBodyApart = (body?.count ?? 0) > Self.inlineBodyLimit
        if let body, !sendsBodyApart { head += body }
        return Wire(
            host: host, port: port, poolKey: ASCII.lowercased(host) + ":\(port)", head: head,
            sendsBodyApart: sendsBodyApart, closesConnection: closesConnection)
    }

    private func refusal(_ reason: String) -> UpstreamError {
        UpstreamError(
            kind: .other, description: "cannot send a request to \(url): \(reason); nothing was sent",
            receivedHead: false)
    }
}
#endif
