#if os(Linux)
import CacheSemantics
import Foundation
import Glibc

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
        guard let address = try? Messages.absoluteTarget(proxy),
            let (host, port) = OriginSocket.authority(address.authority, defaultPort: 80)
        else {
            throw ConfigurationError(
                description: "the proxy \"\(proxy)\" is not an http URL such as http://127.0.0.1:8080")
        }
        let fd: Int32
        switch OriginSocket.connect(host: host, port: port, timeout: timeout) {
        case .success(let socket): fd = socket
        case .failure(let failure):
            throw ConfigurationError(
                description: "could not connect to the proxy at \(proxy): \(failure); is `httpcache serve` running?")
        }
        defer { close(fd) }
        var limit = timeval(tv_sec: Int(timeout), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var request = "PURGE \(url) HTTP/1.1\r\nHost: \(address.authority)\r\nConnection: close\r\n"
        if let token { request += "Authorization: Bearer \(token)\r\n" }
        if !groups.isEmpty {
            request += "Cache-Group-Invalidation: \(CacheGroups.fieldValue(groups))\r\n"
        }
        request += "\r\n"
        let bytes = Array(request.utf8)
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else {
                throw ConfigurationError(description: "the proxy at \(proxy) closed the connection")
            }
            sent += count
        }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while response.count < 1 << 20 {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { break }
            response += buffer[..<count]
        }
        let text = String(decoding: response, as: UTF8.self)
        let parts = text.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            throw ConfigurationError(description: "the proxy at \(proxy) did not answer with HTTP")
        }
        let body = text.range(of: "\r\n\r\n").map { String(text[$0.upperBound...]) } ?? ""
        return PurgeAnswer(status: status, message: body.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
#endif
