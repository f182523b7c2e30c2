/// Compression Dictionary Transport (RFC 9842): what a response offers as a dictionary
/// (`Use-As-Dictionary`, §2.1), what a request says it holds (`Available-Dictionary`, §2.2;
/// `Dictionary-ID`, §2.3), and which URLs a dictionary may compress (§2.2.2).
///
/// Parsing never throws: a field that is not what §2 defines means no dictionary, which is
/// always safe (the response is sent without one).
public enum CompressionDictionaries {
    /// `Use-As-Dictionary`, `Available-Dictionary` and `Dictionary-ID` (RFC 9842 §2).
    public static let useAsDictionary: HeaderField.Name = "Use-As-Dictionary"
    public static let availableDictionary: HeaderField.Name = "Available-Dictionary"
    public static let dictionaryID: HeaderField.Name = "Dictionary-ID"

    /// The longest `id` (RFC 9842 §2.1.3, §2.3).
    public static let maximumIDLength = 1024

    /// The SHA-256 a request says its dictionary has (RFC 9842 §2.2: a Structured Field Byte
    /// Sequence), as its base64 text (RFC 9651 §3.3.5); `nil` when the field is absent,
    /// repeated, not a single Byte Sequence, or not 32 bytes long.
    public static func availableHash(in fields: HeaderFields) -> String? {
        let values = fields.values(named: availableDictionary)
        guard values.count == 1, let members = StructuredFields.parseList(values[0]), members.count == 1,
            case .item(.byteSequence(let base64), _) = members[0],
            base64.utf8.count == 44, base64.hasSuffix("=")
        else { return nil }
        return base64
    }

    /// Whether a client may use dictionaries for `url` (RFC 9842 §8: "only in secure contexts"):
    /// `https`, or a loopback host, which browsers count as secure (W3C Secure Contexts §3.2).
    public static func isSecureContext(_ url: String) -> Bool {
        URIParts(url).map(ClearSiteData.isPotentiallyTrustworthy) ?? false
    }

    /// Whether `fields` accept the content coding `coding` (RFC 9110 §12.5.3): named in
    /// `Accept-Encoding` without `q=0`.
    public static func accepts(_ coding: String, in fields: HeaderFields) -> Bool {
        for member in fields.listMembers(named: .acceptEncoding) {
            let parts = member.split(separator: ";")
            guard let name = parts.first, ASCII.equalsIgnoringCase(ASCII.trimmed(name), coding) else { continue }
            let refused = parts.dropFirst().contains { parameter in
                let pair = parameter.split(separator: "=", maxSplits: 1)
                guard pair.count == 2, ASCII.equalsIgnoringCase(ASCII.trimmed(pair[0]), "q") else { return false }
                return (Double(ASCII.trimmed(pair[1])) ?? 1) == 0
            }
            return !refused
        }
        return false
    }
}

/// A response's `Use-As-Dictionary` field (RFC 9842 §2.1): the URLs it may compress, the
/// request destinations, the server's `id` for it.
public struct DictionaryOffer: Sendable, Hashable {
    /// Which URLs the dictionary is for (§2.1.1), resolved against the dictionary's URL.
    public var pattern: DictionaryMatchPattern
    /// `match-dest` (§2.1.2): request destinations; empty matches all.
    public var destinations: [String]
    /// `id` (§2.1.3): echoed in `Dictionary-ID`; empty for none.
    public var id: String

    /// The offer of a response to `url` with `fields`; `nil` when there is none or it must not
    /// be used: no `match` String (§2.1.1: required), a `match` with regular expressions or
    /// one this cache cannot read, `match-dest` not an Inner List of Strings, an `id` longer
    /// than 1024 characters, or a `type` other than `raw` (§2.1.4: "MUST NOT use").
    public init?(fields: HeaderFields, url: String) {
        guard let value = fields[CompressionDictionaries.useAsDictionary],
            let members = StructuredFields.parseDictionary(value)
        else { return nil }
        var match: String?
        var destinations: [String] = []
        var id = ""
        for (key, member) in members {
            switch (key, member) {
            case ("match", .item(.string(let text), _)): match = text
            case ("match", _): return nil
            case ("match-dest", .innerList(let items, _)):
                destinations = []
                for (item, _) in items {
                    guard case .string(let destination) = item else { return nil }
                    destinations.append(destination)
                }
            case ("match-dest", _): return nil
            case ("id", .item(.string(let text), _)) where text.count <= CompressionDictionaries.maximumIDLength:
                id = text
            case ("id", _): return nil
            case ("type", .item(.token(let type), _)) where type == "raw": break
            case ("type", _): return nil
            default: break  // members not defined here are ignored (RFC 9651 §4.2.2)
            }
        }
        guard let match, let pattern = DictionaryMatchPattern(match, dictionaryURL: url) else { return nil }
        self.pattern = pattern
        self.destinations = destinations
        self.id = id
    }
}

/// A `match` URL pattern (RFC 9842 §2.1.1; WHATWG URL Pattern) resolved against the URL of its
/// dictionary: its origin, and patterns for the path and the query.
///
/// Read here: literal characters, `\` escapes, `*` (any run of characters) and `:name` (one
/// path segment), in a path (absolute, or relative to the dictionary's directory) or in an
/// absolute URL of the dictionary's origin, with an optional `?query` pattern (a pattern
/// without one matches any query). Regular expression groups make the pattern invalid
/// (§2.1.1); groups `{…}`, modifiers and wildcard hosts are not read, and a dictionary with
/// them is not used: never using a dictionary is always correct.
public struct DictionaryMatchPattern: Sendable, Hashable {
    /// The origin of the dictionary's URL (RFC 6454), which every matching URL has (§2.2.2).
    public let origin: String
    /// The pattern text as the response gave it.
    public let text: String
    private let path: [Piece]
    private let query: [Piece]?

    private enum Piece: Hashable, Sendable {
        case literal(UInt8)
        case anything
        case segment
    }

    /// `match` resolved against `dictionaryURL`; `nil` when it is not valid or not read here.
    public init?(_ match: String, dictionaryURL: String) {
        guard let base = URIParts(dictionaryURL), base.authority != nil else { return nil }
        origin = base.origin
        text = match
        var rest = Substring(match)
        if !rest.hasPrefix("/"), let parts = URIParts(rest), let authority = parts.authority {
            // An absolute URL: of the dictionary's origin, or never usable (§2.2.2).
            guard parts.origin == origin else { return nil }
            rest = rest.dropFirst(parts.scheme.utf8.count + 3 + authority.utf8.count)
        }
        if rest.contains("#") { return nil }
        var pathText = rest
        var queryText: Substring?
        if let question = Self.unescapedIndex(of: UInt8(ascii: "?"), in: rest) {
            pathText = rest[..<question]
            queryText = rest[rest.index(after: question)...]
        }
        if !pathText.hasPrefix("/") {
            // Relative to the dictionary's directory (URL Pattern resolves it against the base).
            let directory = base.path.split(separator: "/", omittingEmptySubsequences: false).dropLast()
                .joined(separator: "/")
            pathText = Substring(directory + "/" + pathText)
        }
        guard let path = Self.pieces(pathText) else { return nil }
        self.path = path
        if let queryText {
            guard let query = Self.pieces(queryText) else { return nil }
            self.query = query
        } else {
            query = nil
        }
    }

    /// Whether `url` matches (RFC 9842 §2.2.2): the same origin, and its path and query fit the
    /// patterns.
    public func matches(_ url: String) -> Bool {
        guard let parts = URIParts(url), parts.origin == origin else { return false }
        guard Self.fits(Array(parts.path.utf8), path) else { return false }
        guard let query else { return true }
        return Self.fits(Array((parts.query ?? "").utf8), query)
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.origin == rhs.origin && lhs.text == rhs.text }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(origin)
        hasher.combine(text)
    }

    /// The index of the first `byte` not escaped with `\`.
    private static func unescapedIndex(of byte: UInt8, in text: Substring) -> Substring.Index? {
        var escaped = false
        for index in text.utf8.indices {
            let current = text.utf8[index]
            if escaped {
                escaped = false
            } else if current == UInt8(ascii: "\\") {
                escaped = true
            } else if current == byte {
                return index
            }
        }
        return nil
    }

    /// The pieces of one component's pattern; `nil` for syntax not read here or invalid.
    private static func pieces(_ text: Substring) -> [Piece]? {
        var pieces: [Piece] = []
        let bytes = Array(text.utf8)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\\"):
                guard index < bytes.count else { return nil }
                pieces.append(.literal(bytes[index]))
                index += 1
            case UInt8(ascii: "*"):
                pieces.append(.anything)
            case UInt8(ascii: ":"):
                let start = index
                while index < bytes.count,
                    ASCII.isAlpha(bytes[index]) || ASCII.isDigit(bytes[index]) || bytes[index] == UInt8(ascii: "_")
                {
                    index += 1
                }
                guard index > start else { return nil }
                pieces.append(.segment)
            // A regular expression group makes the pattern invalid (§2.1.1); groups and
            // modifiers are not read here.
            case UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "{"), UInt8(ascii: "}"), UInt8(ascii: "+"),
                UInt8(ascii: "?"):
                return nil
            default:
                pieces.append(.literal(byte))
            }
        }
        return pieces
    }

    /// Whether `input` fits `pieces`: the positions each piece can end at, piece by piece.
    private static func fits(_ input: [UInt8], _ pieces: [Piece]) -> Bool {
        var reachable = [Bool](repeating: false, count: input.count + 1)
        reachable[0] = true
        for piece in pieces {
            var next = [Bool](repeating: false, count: input.count + 1)
            switch piece {
            case .literal(let byte):
                for position in 0..<input.count where reachable[position] && input[position] == byte {
                    next[position + 1] = true
                }
            case .anything:
                if let first = reachable.firstIndex(of: true) {
                    for position in first...input.count { next[position] = true }
                }
            case .segment:
                // One or more characters up to the next "/".
                var position = 0
                while position < input.count {
                    if reachable[position] {
                        var end = position
                        while end < input.count && input[end] != UInt8(ascii: "/") {
                            end += 1
                            next[end] = true
                        }
                    }
                    position += 1
                }
            }
            reachable = next
            guard reachable.contains(true) else { return false }
        }
        return reachable[input.count]
    }
}
