#if os(Linux)
import CacheSemantics
import HTTPClient
import Foundation
@_spi(Wire) import HTTPWire

extension CachingProxy {
    /// What a proxy answered to `PURGE`.
    public struct PurgeAnswer: Sendable {
        /// `200` when something was removed, `404` when nothing was stored, `403` when the
        /// client may not purge.
        public var status: Int
        /// The proxy's explanation.
        public var message: String
    }

    /// Sends `PURGE url` to a running proxy at `proxy` (`http://host:port`), with
    /// `Authorization: Bearer token` when given: absolute-form, so it works for reverse and
    /// forward proxies alike. With `groups`, the proxy removes the stored responses of
    /// `url`'s origin in those cache groups (RFC 9875) instead of `url`'s.
    public static func purge(
        _ url: String, proxy: String, token: String?, groups: [String] = [], timeout: Double = 10
    ) throws -> PurgeAnswer {
        var fields = HeaderFields()
        if !groups.isEmpty { fields.append(name: .cacheGroupInvalidation, value: CacheGroups.fieldValue(groups)) }
        // The proxy's answer is a line of text; more than 1 MiB is not read.
        let (status, body) = try ask(
            "PURGE", url, proxy: proxy, token: token, fields: fields, timeout: timeout, limit: 1 << 20)
        let message = String(decoding: body, as: UTF8.self)
        return PurgeAnswer(status: status, message: message.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Reads the figures of the status page from a running proxy at `proxy`
    /// (`http://host:port`), with `Authorization: Bearer token` when given.
    ///
    /// - Throws: ``ConfigurationError`` saying what to do when the proxy cannot be reached,
    ///   refuses, or answers with something else than the status JSON.
    public static func status(proxy: String, token: String?, timeout: Double = 10) throws -> ProxyStatus {
        var base = proxy
        while base.hasSuffix("/") { base.removeLast() }
        let url = base + ProxyHandler.statusJSONPath
        let (status, body) = try ask(
            "GET", url, proxy: proxy, token: token, fields: HeaderFields(), timeout: timeout, limit: 16 << 20)
        guard status == 200 else {
            let message = String(decoding: body.prefix(300), as: UTF8.self).trimmingCharacters(
                in: .whitespacesAndNewlines)
            throw ConfigurationError(
                description: "the proxy at \(proxy) answered \(status) to \(url): \(message)"
                    + (status == 403 ? " (give its admin token with --admin-token or $HTTPCACHE_ADMIN_TOKEN)" : ""))
        }
        do {
            return try JSONDecoder().decode(ProxyStatus.self, from: Data(body))
        } catch {
            throw ConfigurationError(
                description: "the proxy at \(proxy) answered \(url) with no status this version reads (\(error)); "
                    + "is it an httpcache serve of the same version?")
        }
    }

    /// Sends `method url` (absolute-form) to the proxy at `proxy`: its status and at most
    /// `limit` bytes of its body.
    private static func ask(
        _ method: String, _ url: String, proxy: String, token: String?, fields more: HeaderFields, timeout: Double,
        limit: Int
    ) throws -> (status: Int, body: [UInt8]) {
        guard let address = try? Target.absolute(proxy), address.scheme == .http,
            OriginSocket.authority(address.authority, defaultPort: 80) != nil
        else {
            throw ConfigurationError(
                description: "the proxy \"\(proxy)\" is not an http URL such as http://127.0.0.1:8080")
        }
        var fields = HeaderFields()
        fields.append(name: .host, value: address.authority)
        fields.append(name: .connection, value: "close")
        if let token { fields.append(name: .authorization, value: "Bearer \(token)") }
        for field in more { fields.append(name: field.name, value: field.value) }
        var configuration = UpstreamClient.Configuration()
        configuration.connectTimeout = timeout
        configuration.stallTimeout = timeout
        configuration.maxIdleConnections = 0
        let answer = ResponseCollector(stopAfterBodyBytes: limit)
        let client: UpstreamClient
        do { client = try UpstreamClient(configuration: configuration) } catch {
            throw ConfigurationError(description: error.description)
        }
        do {
            try client.perform(
                UpstreamRequest(method: method, url: url, fields: fields, proxy: proxy, tunnelsThroughProxy: false),
                answer)
        } catch  where error.connectFailure != nil {
            throw ConfigurationError(
                description: "could not connect to the proxy at \(proxy): \(error.connectFailure ?? ""); "
                    + "is `httpcache serve` running?")
        } catch  where error.kind == .other {
            throw ConfigurationError(description: error.description)
        } catch  where !error.receivedHead {
            throw ConfigurationError(
                description: "the proxy at \(proxy) did not answer with HTTP (\(error.description)); "
                    + "is it an httpcache serve, and is it overloaded?")
        } catch {
            // A head arrived: its status counts, with what came of the message.
        }
        guard let head = answer.heads.first else {
            throw ConfigurationError(description: "the proxy at \(proxy) did not answer with HTTP")
        }
        return (head.status, answer.body)
    }
}
#endif
