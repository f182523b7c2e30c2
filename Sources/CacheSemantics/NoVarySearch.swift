/// The `No-Vary-Search` response field (draft-ietf-httpbis-no-vary-search): which parts of a
/// URL's query do not change the response, so that a stored response answers requests whose
/// URLs are "equivalent modulo URL variation config" (§6, §7).
public struct URLVariationConfig: Hashable, Sendable {
    /// A list of query parameter names, or every name.
    public enum Params: Hashable, Sendable {
        case wildcard
        case list([String])
    }

    /// The parameters that do not matter (`params`).
    public var noVaryParams: Params
    /// The parameters that matter, when all others do not (`except`).
    public var varyParams: Params
    /// Whether the order of the parameters matters (`key-order` absent or false).
    public var varyOnKeyOrder: Bool

    /// Creates a config; ``parse(_:)`` is how a field becomes one.
    public init(noVaryParams: Params, varyParams: Params, varyOnKeyOrder: Bool) {
        self.noVaryParams = noVaryParams
        self.varyParams = varyParams
        self.varyOnKeyOrder = varyOnKeyOrder
    }

    /// The default: every parameter and their order matter (§4): plain URL equality.
    public static let `default` = URLVariationConfig(
        noVaryParams: .list([]), varyParams: .wildcard, varyOnKeyOrder: true)

    /// Whether this is the default: the field changes nothing.
    public var isDefault: Bool { self == .default }

    /// The config of a response (§5.2, "obtain a URL variation config"): its `No-Vary-Search`
    /// lines parsed as one Structured Field Dictionary; the default when absent or invalid.
    public init(fields: HeaderFields) {
        let lines = fields.values(named: .noVarySearch)
        guard !lines.isEmpty, let dictionary = StructuredFields.parseDictionary(lines.joined(separator: ", ")) else {
            self = .default
            return
        }
        self = Self.parse(dictionary)
    }

    /// "Parse a URL variation config" (§5.1), as the draft's algorithm: anything it does not
    /// recognise gives the default; unknown keys are ignored. (A field with `key-order` and
    /// neither `params` nor `except` is read as the draft's examples read it.)
    public static func parse(_ value: [(key: String, value: StructuredMember)]) -> URLVariationConfig {
        func member(_ key: String) -> StructuredMember? { value.last { $0.key == key }?.value }
        var result = URLVariationConfig(noVaryParams: .list([]), varyParams: .wildcard, varyOnKeyOrder: true)
        if let keyOrder = member("key-order") {
            guard case .item(.boolean(let flag), _) = keyOrder else { return .default }
            result.varyOnKeyOrder = !flag
        }
        let params = member("params")
        let except = member("except")
        // The algorithm's text says "if both … exist or neither exists, return the default";
        // read literally, `No-Vary-Search: key-order` would change nothing, which contradicts
        // the draft's own introduction and its examples (`key-order=?1` is the conventional
        // `key-order`, and only `key-order=?0` may be omitted). Both present is the error.
        guard params == nil || except == nil else { return .default }
        if let params {
            guard let keys = keys(params) else { return .default }
            result.noVaryParams = .list(keys)
            result.varyParams = .wildcard
        } else if let except {
            guard let keys = keys(except) else { return .default }
            result.varyParams = .list(keys)
            result.noVaryParams = .wildcard
        }
        return result
    }

    /// The keys of an inner list of Strings, each through "parse a key" (§5.3); `nil` when the
    /// member is not an inner list of Strings.
    private static func keys(_ member: StructuredMember) -> [String]? {
        guard case .innerList(let items, _) = member else { return nil }
        var keys: [String] = []
        for (item, _) in items {
            guard case .string(let text) = item else { return nil }
            keys.append(FormURLEncoding.decode(Array(text.utf8)))
        }
        return keys
    }

    // MARK: Comparing (§6)

    /// Whether `a` and `b` (absolute URIs) are "equivalent modulo variation config" (§6): the
    /// same but for the query, and the same query parameters once those that do not matter are
    /// dropped (and sorted by name when their order does not matter).
    public func equivalent(_ a: String, _ b: String) -> Bool {
        guard let first = URIParts(a), let second = URIParts(b) else { return false }
        guard Self.withoutQuery(first) == Self.withoutQuery(second) else { return false }
        if isDefault { return first.query == second.query }
        let (left, right) = (significant(first.query), significant(second.query))
        return left.count == right.count && zip(left, right).allSatisfy { $0.name == $1.name && $0.value == $1.value }
    }

    /// `uri` with the parameters that do not matter dropped, sorted when their order does not
    /// matter, and the rest written in one canonical form: equivalent URIs have the same
    /// simplified URI. `nil` when `uri` is not absolute.
    public func simplified(_ uri: String) -> String? {
        guard let parts = URIParts(uri) else { return nil }
        let pairs = significant(parts.query)
        let base = Self.withoutQuery(parts)
        guard !pairs.isEmpty else { return base }
        return base + "?"
            + pairs.map { FormURLEncoding.encode($0.name) + "=" + FormURLEncoding.encode($0.value) }
            .joined(separator: "&")
    }

    /// The normalized URI without its query: where `No-Vary-Search` responses of one path are
    /// looked for.
    public static func pathKey(_ uri: String) -> String? {
        guard URIParts.isNormalized(uri) else { return URIParts(uri).map(withoutQuery) }
        return ASCII.firstIndex(of: UInt8(ascii: "?"), in: uri).map { String(uri[..<$0]) } ?? uri
    }

    private static func withoutQuery(_ parts: URIParts) -> String {
        var parts = parts
        parts.query = nil
        return parts.normalized
    }

    /// The query's parameters (the application/x-www-form-urlencoded parser of the WHATWG URL
    /// standard), filtered by the config and sorted when key order does not matter.
    private func significant(_ query: String?) -> [(name: String, value: String)] {
        var pairs = FormURLEncoding.parse(query.map { Array($0.utf8) } ?? [])
        switch (noVaryParams, varyParams) {
        case (.list(let ignored), _): pairs.removeAll { ignored.contains($0.name) }
        case (_, .list(let kept)): pairs.removeAll { !kept.contains($0.name) }
        default: break
        }
        if !varyOnKeyOrder {
            // Stable, by UTF-16 code units ("code unit less than").
            pairs = pairs.enumerated().sorted { lhs, rhs in
                if lhs.element.name == rhs.element.name { return lhs.offset < rhs.offset }
                return lhs.element.name.utf16.lexicographicallyPrecedes(rhs.element.name.utf16)
            }.map(\.element)
        }
        return pairs
    }
}

/// The application/x-www-form-urlencoded format of the WHATWG URL standard, as No-Vary-Search
/// uses it: parsing a query into name–value pairs, and writing one.
enum FormURLEncoding {
    /// Splits on `&`, drops empty pieces, splits each on its first `=`, and decodes both parts.
    static func parse(_ bytes: [UInt8]) -> [(name: String, value: String)] {
        bytes.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true).map { piece in
            if let equals = piece.firstIndex(of: UInt8(ascii: "=")) {
                return (decode(Array(piece[..<equals])), decode(Array(piece[(equals + 1)...])))
            }
            return (decode(Array(piece)), "")
        }
    }

    /// `+` → space, then percent-decoding, then UTF-8 decoding with U+FFFD for bad bytes
    /// ("parse a key", §5.3, and the form parser).
    static func decode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%"), index + 2 < bytes.count, let high = ASCII.hexValue(bytes[index + 1]),
                let low = ASCII.hexValue(bytes[index + 2])
            {
                out.append(high << 4 | low)
                index += 3
                continue
            }
            out.append(byte == UInt8(ascii: "+") ? 0x20 : byte)
            index += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The form serializer: alphanumerics and `*-._` as they are, space as `+`, every other
    /// byte of the UTF-8 as `%XX`.
    static func encode(_ text: String) -> String {
        var out: [UInt8] = []
        for byte in text.utf8 {
            if ASCII.isAlpha(byte) || ASCII.isDigit(byte) || [0x2A, 0x2D, 0x2E, 0x5F].contains(byte) {
                out.append(byte)
            } else if byte == 0x20 {
                out.append(UInt8(ascii: "+"))
            } else {
                out += [UInt8(ascii: "%"), ASCII.upperHex(byte >> 4), ASCII.upperHex(byte & 0xF)]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
