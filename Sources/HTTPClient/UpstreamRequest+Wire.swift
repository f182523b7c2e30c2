#if os(Linux)
import CacheSemantics
@_spi(Wire) import HTTPWire

extension UpstreamRequest {
    /// A request as it goes to the origin: where, how, and the bytes of its head (RFC 9112 §3).
    struct Wire {
        /// Where the TCP connection goes: the origin, or the proxy when there is one.
        var host: String
        var port: UInt16
        /// The URL's scheme: `https` runs TLS to the origin (RFC 9110 §4.2.2).
        var scheme: Target.Scheme
        /// The origin's host (an IP literal without brackets) and port: the name TLS checks
        /// the certificate against and sends as SNI, and the target of a tunnel.
        var originHost: String
        var originPort: UInt16
        /// For an `https` URL through a proxy: the `CONNECT` request-target, `host:port` (RFC
        /// 9110 §9.3.6), and the proxy's URL for messages.
        var tunnel: (target: String, proxy: String)?
        /// Idle connections are pooled under this: the scheme, the lower-cased host and the
        /// port of what the connection reaches, and the proxy it goes through; an `http` and an
        /// `https` connection to one `host:port` never share a key.
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

    /// The request in origin-form (RFC 9112 §3.2.1); in absolute-form (RFC 9112 §3.2.2) to
    /// ``proxy`` when set, except an `https` URL, which goes in origin-form through a tunnel
    /// the proxy opens (RFC 9110 §9.3.6) unless ``tunnelsThroughProxy`` is false.
    ///
    /// What goes out: `METHOD /path?query HTTP/1.1` (or the URL as given, to a proxy), `Host`
    /// from the URL's authority first when the fields have none (RFC 9112 §3.2), the field
    /// lines in order with repeated names, an empty value as `Name:`, then `Content-Length`
    /// when there is a body (even an empty one; never for `HEAD`, whose body is not sent).
    /// `Content-Length` and `Transfer-Encoding` among the fields are dropped: the body's framing
    /// is the client's to write (RFC 9112 §6).
    ///
    /// Nothing that could be read as more than one request is ever sent: a method that is not
    /// a token (RFC 9110 §9.1), `CONNECT` (tunnels are the client's to open), a URL that is
    /// not `http` or `https` or whose authority is not `host[:port]` (RFC 3986 §3.2), a proxy
    /// that is not an `http` URL, a target with a byte that is not visible ASCII, a field name
    /// that is not a token or a value with CR, LF or NUL (RFC 9110 §5.5) are refused. The path
    /// and query go out as the URL has them (RFC 9110 §7.7).
    /// - Throws: ``UpstreamError/Kind/other``, saying what cannot be sent.
    func wire() throws(UpstreamError) -> Wire {
        guard ASCII.withUTF8(method, { !$0.isEmpty && $0.allSatisfy(HTTPBytes.isToken) }) else {
            throw refusal("\(method.debugDescription) is not a method token (RFC 9110 §9.1)")
        }
        guard method != "CONNECT" else {
            throw refusal("CONNECT is not sent as a request; tunnels are opened by the client")
        }
        let parsed: Target?
        if let target {
            parsed = target
        } else {
            do { parsed = try Target.absolute(url) } catch { throw refusal("the URL's authority: \(error)") }
        }
        guard let target = parsed else { throw refusal("only http and https URLs are sent") }
        guard
            let (originHost, originPort) = OriginSocket.authority(
                target.authority, defaultPort: target.scheme.defaultPort)
        else {
            throw refusal("the URL's authority \(target.authority) names no host and port")
        }
        var via: (host: String, port: UInt16)?
        if let proxy {
            let parsedProxy: Target?
            do { parsedProxy = try Target.absolute(proxy) } catch { throw refusal("the proxy's authority: \(error)") }
            guard let proxyTarget = parsedProxy, proxyTarget.scheme == .http,
                let (host, port) = OriginSocket.authority(proxyTarget.authority, defaultPort: 80)
            else {
                throw refusal("the proxy \(proxy) is not an http URL such as http://127.0.0.1:3128")
            }
            via = (host, port)
        }
        let tunnels = via != nil && target.scheme == .https && tunnelsThroughProxy
        // To a proxy, the URL as given is the request-target (RFC 9112 §3.2.2); through a tunnel
        // or to the origin, the path and query (RFC 9112 §3.2.1).
        let path = via != nil && !tunnels ? Substring(url) : target.pathAndQuery
        guard !path.isEmpty, path.utf8.allSatisfy(HTTPBytes.isTarget) else {
            throw refusal("the URL has a byte that cannot be sent in a request line (RFC 9112 §3)")
        }
        var closesConnection = false
        // Each line read where it is (a copy of each costs a retain and a release of each of its
        // strings), over each string's bytes in place: its UTF-8 view, a byte at a time, costs
        // several times as much on every request.
        let invalid = fields.withLines { lines -> String? in
            for index in lines.indices {
                guard ASCII.withUTF8(lines[index].name, { !$0.isEmpty && $0.allSatisfy(HTTPBytes.isToken) }) else {
                    return "the field name \(lines[index].name.debugDescription) is not a token (RFC 9110 §5.1)"
                }
                guard
                    !ASCII.withUTF8(
                        lines[index].value, { $0.contains { $0 == HTTPBytes.cr || $0 == HTTPBytes.lf || $0 == 0 } })
                else {
                    return "the value of the field \(lines[index].name) holds CR, LF or NUL (RFC 9110 §5.5)"
                }
                if lines[index].isNamed(HeaderField.Name.connection.lowercasedName),
                    lines[index].value.split(separator: ",").contains(where: {
                        ASCII.equalsIgnoringCase(ASCII.trimmed($0), "close")
                    })
                {
                    closesConnection = true
                }
            }
            return nil
        }
        if let invalid { throw refusal(invalid) }
        let body = method == "HEAD" ? nil : body
        let sendsBodyApart = (body?.count ?? 0) > Self.inlineBodyLimit
        let head = Self.head(
            method: method, target: path, host: fields.contains(.host) ? nil : target.authority, fields: fields,
            body: body, inline: !sendsBodyApart)
        let origin = Self.authority(originHost, originPort)
        let reachesOrigin = "\(target.scheme.rawValue)://" + ASCII.lowercased(origin)
        let poolKey: String
        let host: String
        let port: UInt16
        if let via {
            (host, port) = (via.host, via.port)
            let reachesProxy = "http://" + ASCII.lowercased(Self.authority(via.host, via.port))
            poolKey = tunnels ? reachesOrigin + " via " + reachesProxy : reachesProxy
        } else {
            (host, port) = (originHost, originPort)
            poolKey = reachesOrigin
        }
        return Wire(
            host: host, port: port, scheme: target.scheme, originHost: originHost, originPort: originPort,
            tunnel: tunnels ? (origin, proxy ?? "") : nil, poolKey: poolKey, head: head,
            sendsBodyApart: sendsBodyApart, closesConnection: closesConnection)
    }

    /// `host:port`, an IPv6 literal in brackets (RFC 3986 §3.2.2): an authority with its port.
    static func authority(_ host: String, _ port: UInt16) -> String {
        // Bytes in place, not Characters (`String.contains(_:)` walks grapheme clusters) nor
        // the UTF-8 view's general `contains`.
        let isIPv6 = ASCII.withUTF8(host) { $0.contains(UInt8(ascii: ":")) }
        return isIPv6 ? "[" + host + "]:" + String(port) : host + ":" + String(port)
    }

    /// The request line, `Host` when `host` is given, the fields but their framing
    /// (`Content-Length`, `Transfer-Encoding`), `Content-Length` when there is a body, the
    /// empty line and, when `inline`, the body (RFC 9112 §3, §5, §6.3): written into one array
    /// of the size they add up to. Appended a part at a time, each append cost ~90
    /// instructions, ~500 a field (callgrind).
    private static func head(
        method: String, target: Substring, host: String?, fields: HeaderFields, body: [UInt8]?, inline: Bool
    ) -> [UInt8] {
        func isFraming(_ field: HeaderField) -> Bool {
            field.isNamed(HeaderField.Name.contentLength.lowercasedName)
                || field.isNamed(HeaderField.Name.transferEncoding.lowercasedName)
        }
        // CRLF at the end, a length of at most 20 digits.
        var size = HeadWriter.requestLineSize(method: method, target: target) + 2
        if let host { size += HeadWriter.fieldLineSize(name: "Host", value: host) }
        // The lines read where they are, as in `wire()`.
        fields.withLines { lines in
            for index in lines.indices where !isFraming(lines[index]) {
                size += HeadWriter.fieldLineSize(
                    nameCount: lines[index].name.utf8.count, valueCount: lines[index].value.utf8.count)
            }
        }
        if let body { size += "Content-Length: ".utf8.count + 20 + 2 + (inline ? body.count : 0) }
        return [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            var writer = TextWriter(buffer)
            HeadWriter.writeRequestLine(method: method, target: target, to: &writer)
            if let host { HeadWriter.writeField(name: "Host", value: host, to: &writer) }
            fields.withLines { lines in
                for index in lines.indices where !isFraming(lines[index]) {
                    ASCII.withUTF8(lines[index].name) { name in
                        ASCII.withUTF8(lines[index].value) { HeadWriter.writeField(name: name, value: $0, to: &writer) }
                    }
                }
            }
            if let body {
                writer.append("Content-Length: " as StaticString)
                writer.append(body.count)
                writer.append("\r\n" as StaticString)
            }
            writer.append("\r\n" as StaticString)
            if let body, inline { body.withUnsafeBufferPointer { writer.append($0) } }
            count = writer.count
        }
    }

    private func refusal(_ reason: String) -> UpstreamError {
        UpstreamError(
            kind: .other, description: "cannot send a request to \(url): \(reason); nothing was sent",
            receivedHead: false)
    }
}
#endif
