#if os(Linux)
import CEpollHTTPCache  // dup3
import CacheSemantics
import CacheSystem
import Glibc

/// One request as an access log records it, made once its response ended (or was cut off):
/// what ``CachingProxy/Configuration/accessLog`` receives.
///
/// ```swift
/// let file = try AccessLogFile(path: "/var/log/httpcache/access.log")
/// configuration.accessLog = { record in file.write(record.formatted(.json)) }
/// ```
public struct AccessLogRecord: Sendable {
    /// When the response ended, in seconds since 1970.
    public var time: Double
    /// The client's address as the connection came from it (`192.0.2.7`, `::1`); `-` when
    /// unknown.
    public var client: String
    /// Whether the client connected from 127.0.0.0/8 or ::1.
    public var clientIsLoopback: Bool
    /// The method, as sent.
    public var method: String
    /// The request-target, as sent (RFC 9112 §3.2).
    public var target: String
    /// The HTTP version: `1.0`, `1.1` or `2`.
    public var version: String
    /// Whether the request came over TLS.
    public var isTLS: Bool
    /// The response's status; `499` when no response was sent (the client went away first),
    /// as nginx logs it.
    public var status: Int
    /// Body bytes handed to the client's connection (none for `HEAD`, `204`, `304`).
    public var bodyBytes: Int64
    /// Seconds from the moment the request was complete to the end of its response.
    public var duration: Double
    /// Whether the whole response was handed to the connection while the client was there;
    /// `false` for a response cut off (the origin failed mid-body, the client left, an
    /// HTTP/2 stream was reset).
    public var completed: Bool
    /// The response's `Cache-Status` (RFC 9211), if it had one.
    public var cacheStatus: String?
    /// Seconds spent waiting for an origin's response head (nginx's `$upstream_header_time`),
    /// summed over the origin requests this request made; `nil` when it made none.
    public var originTime: Double?
    /// The request's `User-Agent`, if any.
    public var userAgent: String?
    /// The request's `Referer`, if any.
    public var referer: String?

    /// A record of every field; the defaults make a complete `GET` answered `200` at once.
    public init(
        time: Double, client: String, clientIsLoopback: Bool = false, method: String, target: String,
        version: String = "1.1", isTLS: Bool = false, status: Int = 200, bodyBytes: Int64 = 0, duration: Double = 0,
        completed: Bool = true, cacheStatus: String? = nil, originTime: Double? = nil, userAgent: String? = nil,
        referer: String? = nil
    ) {
        self.time = time
        self.client = client
        self.clientIsLoopback = clientIsLoopback
        self.method = method
        self.target = target
        self.version = version
        self.isTLS = isTLS
        self.status = status
        self.bodyBytes = bodyBytes
        self.duration = duration
        self.completed = completed
        self.cacheStatus = cacheStatus
        self.originTime = originTime
        self.userAgent = userAgent
        self.referer = referer
    }

    /// `HTTP/1.1`, `HTTP/1.0`, `HTTP/2`, with `+TLS` over TLS.
    public var protocolName: String { "HTTP/" + version + (isTLS ? "+TLS" : "") }

    /// The record as one line (no line feed) in `format`.
    public func formatted(_ format: AccessLogFormat) -> String {
        switch format {
        case .default: defaultLine
        case .combined: combinedLine
        case .json: jsonLine
        }
    }

    /// `TIME CLIENT METHOD TARGET PROTOCOL STATUS "CACHE-STATUS"`, the format since the first
    /// access log: client `loopback` or `remote`.
    private var defaultLine: String {
        let status = cacheStatus.map { "\"\($0)\"" } ?? "-"
        let client = clientIsLoopback ? "loopback" : "remote"
        return "\(HTTPDate.iso8601(Timestamp(secondsSince1970: time))) \(client) \(method) \(target) "
            + "\(protocolName) \(self.status) \(status)"
    }

    /// NCSA combined (`%h - - [%d/%b/%Y:%H:%M:%S %z] "%r" %>s %b "%{Referer}i"
    /// "%{User-Agent}i"`) and `"CACHE-STATUS"`. Quoted values escape `"`, `\` and bytes
    /// outside printable ASCII as `\xHH`, as nginx does; an absent one is `-`.
    private var combinedLine: String {
        let requestLine = "\(method) \(target) HTTP/\(version == "2" ? "2.0" : version)"
        let bytes = bodyBytes == 0 ? "-" : String(bodyBytes)
        return "\(client) - - [\(HTTPDate.commonLogFormat(Timestamp(secondsSince1970: time)))] "
            + "\(Self.quoted(requestLine)) \(status) \(bytes) \(Self.quoted(referer)) \(Self.quoted(userAgent)) "
            + Self.quoted(cacheStatus)
    }

    /// One JSON object (RFC 8259): times in RFC 3339 with milliseconds, durations in seconds.
    private var jsonLine: String {
        var line = ""
        line.reserveCapacity(320 + target.utf8.count + (userAgent?.utf8.count ?? 0) + (referer?.utf8.count ?? 0))
        line +=
            "{\"time\":" + JSONString.quoted(HTTPDate.iso8601(Timestamp(secondsSince1970: time), milliseconds: true))
        line += ",\"client\":" + JSONString.quoted(client)
        line += ",\"method\":" + JSONString.quoted(method)
        line += ",\"target\":" + JSONString.quoted(target)
        line += ",\"protocol\":" + JSONString.quoted(protocolName)
        line += ",\"status\":\(status),\"bytes\":\(bodyBytes)"
        line += ",\"duration\":" + Self.seconds(duration)
        line += ",\"completed\":\(completed)"
        line += ",\"cache_status\":" + JSONString.quoted(cacheStatus)
        line += ",\"origin_time\":" + (originTime.map(Self.seconds) ?? "null")
        line += ",\"user_agent\":" + JSONString.quoted(userAgent)
        line += ",\"referer\":" + JSONString.quoted(referer)
        return line + "}"
    }

    /// `value` in double quotes with `"`, `\` and bytes outside printable ASCII as `\xHH`;
    /// `"-"` for `nil`.
    private static func quoted(_ value: String?) -> String {
        guard let value else { return "\"-\"" }
        // Most values need no escape: copied whole.
        if value.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) {
            return "\"" + value + "\""
        }
        var out = "\""
        for byte in value.utf8 {
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 || byte >= 0x7F {
                out += "\\x" + hex(byte)
            } else {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            }
        }
        return out + "\""
    }

    private static func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789abcdef".unicodeScalars)
        return String(digits[Int(byte >> 4)]) + String(digits[Int(byte & 0xF)])
    }

    /// Seconds with six decimals (microseconds): `0.001250`.
    private static func seconds(_ value: Double) -> String {
        let micros = value.isFinite ? Int64(max(0, value * 1_000_000).rounded()) : 0
        let fraction = String(micros % 1_000_000)
        return "\(micros / 1_000_000)." + String(repeating: "0", count: 6 - fraction.count) + fraction
    }
}

/// How ``AccessLogRecord/formatted(_:)`` writes a record (`httpcache serve --access-log-format`).
public enum AccessLogFormat: String, Sendable, CaseIterable {
    /// `TIME CLIENT METHOD TARGET PROTOCOL STATUS "CACHE-STATUS"`, e.g.
    /// `2026-12-02T10:00:00Z loopback GET /a.css HTTP/1.1 200 "httpcache; hit"`.
    case `default`
    /// NCSA combined, as Apache and nginx write it, with `Cache-Status` appended in quotes:
    /// `192.0.2.7 - - [02/Dec/2026:10:00:00 +0000] "GET /a.css HTTP/1.1" 200 512 "-" "curl/8.5.0" "httpcache; hit"`.
    case combined
    /// One JSON object per line: `time`, `client`, `method`, `target`, `protocol`, `status`,
    /// `bytes`, `duration`, `completed`, `cache_status`, `origin_time`, `user_agent`, `referer`.
    case json
}

/// A file that access-log lines are appended to, one `write` per line (lines from several
/// threads never interleave), which ``reopen()`` opens again at the same path: after
/// logrotate renamed it, new lines go to a new file there and none is lost.
public final class AccessLogFile: Sendable {
    /// The file's path.
    public let path: String
    private let descriptor: Int32

    /// Opens `path` for appending, creating it (mode 0644) when missing.
    /// - Throws: ``CachingProxy/ConfigurationError`` naming the file and why it cannot be opened.
    public init(path: String) throws(CachingProxy.ConfigurationError) {
        self.path = path
        descriptor = try Self.open(path)
    }

    deinit { close(descriptor) }

    private static func open(_ path: String) throws(CachingProxy.ConfigurationError) -> Int32 {
        let descriptor = Glibc.open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw CachingProxy.ConfigurationError(
                description: "cannot open the access log \(path): \(errnoText()); choose a writable file")
        }
        return descriptor
    }

    /// Appends `line` and a line feed.
    public func write(_ line: String) {
        var bytes = Array(line.utf8)
        bytes.append(UInt8(ascii: "\n"))
        _ = bytes.withUnsafeBytes { FileDescriptor.writeAll(descriptor, $0) }
    }

    /// Opens the file at ``path`` again and writes there from now on (for logrotate: `SIGUSR1`
    /// or `SIGHUP` to `httpcache serve`). The new file takes the descriptor's place in one
    /// step (`dup3`): a line being written goes whole to the old file or whole to the new one.
    /// - Throws: ``CachingProxy/ConfigurationError`` when the path cannot be opened; lines
    ///   then go on to the file open before.
    public func reopen() throws(CachingProxy.ConfigurationError) {
        let fresh = try Self.open(path)
        defer { close(fresh) }
        guard dup3(fresh, descriptor, O_CLOEXEC) >= 0 else {
            throw CachingProxy.ConfigurationError(
                description: "cannot reopen the access log \(path): \(errnoText()); lines go on to the file open before"
            )
        }
    }
}
#endif
