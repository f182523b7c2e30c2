import CacheSemantics
import Foundation
import HTTPCacheCore

/// What `get` and `explain` send: the URL, method, fields, body, cache policy and timeout.
struct RequestOptions: Sendable {
    /// The option specs shared by `get` and `explain`.
    static let specs: [OptionSpec] =
        [
            .value("-X", "--request"), .value("-H", "--header"), .value("-d", "--data"), .value("--policy"),
            .flag("--offline"), .flag("--shared"), .value("--timeout"),
        ] + Network.specs

    var url: URL
    var method: String
    var fields: [(name: String, value: String)]
    var body: Data?
    var policy: CachePolicy
    var isShared: Bool
    var timeout: Double?
    /// `--partition NAME` (`get` only): the cache partition the request is answered in.
    var partition: String?

    /// The policy names `--policy` accepts: short ones, then every `URLRequest.CachePolicy` name.
    static let policyNames: [(name: String, policy: CachePolicy)] =
        [
            ("protocol", .useProtocolCachePolicy), ("reload", .reloadIgnoringLocalCacheData),
            ("reload-all", .reloadIgnoringLocalAndRemoteCacheData), ("revalidate", .reloadRevalidatingCacheData),
            ("prefer-cache", .returnCacheDataElseLoad), ("only-cache", .returnCacheDataDontLoad),
        ] + CachePolicy.allCases.map { ($0.rawValue, $0) }

    init(_ arguments: ParsedArguments) throws(Failure) {
        let command = arguments.command
        url = try Self.url(try arguments.positionals("URL", minimum: 1, maximum: 1)[0], command: command)
        fields = []
        for text in arguments.all("-H") {
            fields.append(try Self.field(text, command: command))
        }
        if let data = arguments.value("-d") {
            if data.hasPrefix("@") {
                let path = String(data.dropFirst())
                guard let contents = FileManager.default.contents(atPath: path) else {
                    throw .usage(command, "-d \(data): cannot read the file '\(path)'")
                }
                body = contents
            } else {
                body = Data(data.utf8)
            }
        }
        let method = arguments.value("-X") ?? (body == nil ? "GET" : "POST")
        guard !method.isEmpty, method.utf8.allSatisfy(Self.isTokenByte) else {
            throw .usage(command, "'\(method)' is not a method name (-X takes a token such as GET, HEAD, POST)")
        }
        self.method = method
        if arguments.has("--offline") {
            if let given = arguments.value("--policy"), Self.policy(named: given) != .returnCacheDataDontLoad {
                throw .usage(
                    command, "--offline means --policy only-cache; it cannot be combined with --policy \(given)")
            }
            policy = .returnCacheDataDontLoad
        } else if let name = arguments.value("--policy") {
            guard let policy = Self.policy(named: name) else {
                let names = Self.policyNames.prefix(6).map(\.name).joined(separator: ", ")
                throw .usage(command, "unknown policy '\(name)'; use one of \(names), or a URLRequest.CachePolicy name")
            }
            self.policy = policy
        } else {
            policy = .useProtocolCachePolicy
        }
        isShared = arguments.has("--shared")
        partition = try Self.partition(arguments)
        if let text = arguments.value("--timeout") {
            guard let seconds = Double(text), seconds > 0, seconds.isFinite else {
                throw .usage(command, "--timeout takes a number of seconds above 0, not '\(text)'")
            }
            timeout = seconds
        }
    }

    /// The partition `--partition` names, checked; `nil` without the option.
    ///
    /// - Throws: ``Failure`` with ``ExitCode/usage`` for a name no partition can have.
    static func partition(_ arguments: ParsedArguments) throws(Failure) -> String? {
        guard let name = arguments.value("--partition") else { return nil }
        if let problem = CachePartition.problem(with: name) {
            throw .usage(arguments.command, "--partition: \(problem)")
        }
        return name
    }

    /// The policy called `name` (short or `URLRequest.CachePolicy` name, any case).
    static func policy(named name: String) -> CachePolicy? {
        policyNames.first { $0.name.lowercased() == name.lowercased() }?.policy
    }

    /// The short name of `policy`, e.g. `only-cache`.
    static func shortName(_ policy: CachePolicy) -> String {
        policyNames.first { $0.policy == policy }?.name ?? policy.rawValue
    }

    /// `text` as an absolute `http` or `https` URL with a host.
    ///
    /// - Throws: ``Failure`` with ``ExitCode/usage`` for anything else.
    static func url(_ text: String, command: String) throws(Failure) -> URL {
        guard let url = URL(string: percentEncodingInvalidBytes(text), encodingInvalidCharacters: false),
            let scheme = url.scheme?.lowercased()
        else {
            throw .usage(command, "'\(text)' is not a valid URL; give an absolute http:// or https:// URL")
        }
        guard scheme == "http" || scheme == "https" else {
            throw .usage(command, "'\(text)' is not an http or https URL")
        }
        guard let host = url.host, !host.isEmpty else {
            throw .usage(command, "'\(text)' has no host; give an absolute http:// or https:// URL")
        }
        return url
    }

    /// `text` with the bytes a URL's path, query and fragment cannot hold (space, controls,
    /// non-ASCII, `"<>\^`{|}`, a `%` that begins no escape) percent-encoded, and its own escapes
    /// (`%20`) kept as they are; the scheme and authority as given (a host with a space is no
    /// URL). Foundation's encoding of such a string also encoded every `%`: `?q=1%20 x` was sent
    /// as `?q=1%2520%20x`, another resource.
    static func percentEncodingInvalidBytes(_ text: String) -> String {
        let bytes = Array(text.utf8)
        // Where the authority ends: the first `/`, `?` or `#` after `://`.
        let authority = text.range(of: "://").map { text.utf8.distance(from: text.startIndex, to: $0.upperBound) }
        let start =
            authority.map { from in
                bytes[from...].firstIndex { [UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#")].contains($0) }
                    ?? bytes.count
            } ?? bytes.count
        let excluded = Array(#""<>\^`{|}"#.utf8)
        let hex = Array("0123456789ABCDEF".utf8)
        func isHex(_ index: Int) -> Bool {
            index < bytes.count && ((0x30...0x39).contains(bytes[index]) || (0x61...0x66).contains(bytes[index] | 0x20))
        }
        var out = Array(bytes[..<start])
        out.reserveCapacity(bytes.count)
        for (index, byte) in bytes.enumerated().dropFirst(start) {
            let kept =
                byte == UInt8(ascii: "%")
                ? isHex(index + 1) && isHex(index + 2) : byte > 0x20 && byte < 0x7F && !excluded.contains(byte)
            if kept {
                out.append(byte)
            } else {
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// A `Name: value` argument of `-H` as a field.
    static func field(_ text: String, command: String) throws(Failure) -> (name: String, value: String) {
        guard let colon = text.firstIndex(of: ":") else {
            throw .usage(command, "-H '\(text)' is not a field; write -H 'Name: value'")
        }
        let name = String(text[..<colon])
        let value = text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty, name.utf8.allSatisfy(isTokenByte) else {
            throw .usage(command, "-H '\(text)': '\(name)' is not a field name; write -H 'Name: value'")
        }
        guard !value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
            throw .usage(command, "-H '\(name)': a field value cannot hold CR, LF or NUL")
        }
        return (name, value)
    }

    /// `tchar` of RFC 9110 §5.6.2.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    /// The request to send through the cache: the fields in the order given, repeated names kept.
    var request: FetchRequest {
        // Appended one by one: `HeaderFields(some Sequence)`, generic across modules, has the
        // Swift runtime look up an associated type's conformance, a scan of every conformance in
        // the binary (0.2M instructions of a hit).
        var given = HeaderFields()
        for field in fields { given.append(name: field.name, value: field.value) }
        var request = FetchRequest(url: url, method: method, fields: given, body: body, cachePolicy: policy)
        if let timeout { request.timeoutInterval = timeout }
        request.partition = partition
        return request
    }

    /// The request as the engine sees it, for `explain`.
    var head: RequestHead {
        RequestHead(method: method, uri: url.absoluteString, fields: HeaderFields(fields.map { ($0.name, $0.value) }))
    }
}

/// Runs a request through the cache and turns what cannot be answered into a ``Failure``.
enum Fetching {
    /// The ``Failure`` for an error thrown by ``HTTPCache/data(for:)`` or
    /// ``HTTPCache/bytes(for:)`` for `url`.
    static func failure(_ error: any Error, url: URL) -> Failure {
        if let urlError = error as? URLError {
            let target = origin(of: url)
            switch urlError.code {
            case .unsupportedURL, .badURL:
                return .usage(nil, "\(url.absoluteString): \(urlError.localizedDescription)")
            case .httpTooManyRedirects:
                // The server answered, with redirects that went on and on.
                return Failure(.failure, "\(url.absoluteString): \(urlError.localizedDescription)")
            default:
                return Failure(
                    .unreachable,
                    "could not reach \(target) (\(urlError.localizedDescription)) and nothing stored could be "
                        + "served for \(url.absoluteString); check the URL and that the server is running")
            }
        }
        return Failure(.failure, "\(url.absoluteString): \(error)")
    }

    /// What a message calls the server of `url`: `host:port`, `host`, or the URL itself.
    static func origin(of url: URL) -> String {
        url.host.map { host in url.port.map { "\(host):\($0)" } ?? host } ?? url.absoluteString
    }
}
