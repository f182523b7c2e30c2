/// One cache directive: a name (lowered; compared case-insensitively) and an optional
/// argument, unquoted (RFC 9111 §5.2).
public struct CacheDirective: Hashable, Sendable {
    /// The directive name, in lower case.
    public var name: String
    /// The argument with quotes and escapes removed, or `nil` when the directive has none.
    public var argument: String?

    /// Creates a directive; `name` is lowered.
    public init(name: String, argument: String? = nil) {
        self.name = ASCII.lowercased(name)
        self.argument = argument
    }
}

/// The directives of one or more `Cache-Control` (or targeted) field lines, in order,
/// including extensions this library does not know (RFC 9111 §5.2, §5.2.3).
///
/// Parsing never fails. A member whose name is not a token, or whose quoted argument is
/// malformed, is skipped and reported in ``notes``. An unquoted argument that is not a token
/// (`max-age=5 0`) is kept as text, so the directive that reads it judges it invalid (for
/// `max-age`: stale, RFC 9111 §4.2.1) rather than the directive vanishing.
public struct CacheControl: Hashable, Sendable {
    /// Every well-formed directive, in field order; repeated ones are kept.
    public var directives: [CacheDirective]
    /// What was skipped while parsing, for logs and `explain`.
    public var notes: [Reason]

    /// Parses every line of the field `name` in `fields`.
    public init(fields: HeaderFields, name: String) { self.init(fields: fields, name: HeaderField.Name(name)) }

    /// Parses every line of the field `name` (`Cache-Control` unless given) in `fields`.
    public init(fields: HeaderFields, name: HeaderField.Name = .cacheControl) {
        directives = []
        notes = []
        for member in fields.listMembers(named: name) { parse(member: member, field: name.rawName) }
    }

    /// Parses one field value.
    public init(_ value: String, field: String = HeaderField.Name.cacheControl.rawName) {
        directives = []
        notes = []
        for member in ASCII.splitList(Substring(value)) { parse(member: member, field: field) }
    }

    /// Creates a value from directives already parsed.
    public init(directives: [CacheDirective]) {
        self.directives = directives
        notes = []
    }

    private mutating func parse(member: Substring, field: String) {
        let name: Substring
        var argument: String?
        if let equals = ASCII.firstIndex(of: UInt8(ascii: "="), in: member) {
            name = ASCII.trimmed(member[..<equals])
            let raw = ASCII.trimmed(member[member.utf8.index(after: equals)...])
            if raw.utf8.first == UInt8(ascii: "\"") {
                guard let unquoted = ASCII.unquote(raw) else {
                    notes.append(.malformedDirective(field: field, text: String(member)))
                    return
                }
                argument = unquoted
            } else {
                argument = String(raw)
            }
        } else {
            name = member
        }
        guard ASCII.isToken(name) else {
            notes.append(.malformedDirective(field: field, text: String(member)))
            return
        }
        directives.append(CacheDirective(name: String(name), argument: argument))
    }

    /// The first directive named `name` (case-insensitive).
    public func first(_ name: String) -> CacheDirective? {
        directives.first { ASCII.equalsIgnoringCase($0.name, name) }
    }

    /// Whether a directive named `name` is present.
    public func contains(_ name: String) -> Bool { first(name) != nil }

    /// The directives as a field value, e.g. `max-age=60, no-cache="Set-Cookie"`.
    public var fieldValue: String {
        directives.map { directive in
            guard let argument = directive.argument else { return directive.name }
            return "\(directive.name)=\(ASCII.isToken(argument) ? argument : ASCII.quote(argument))"
        }.joined(separator: ", ")
    }
}

/// The largest delta-seconds value kept; larger ones, and overflows, become this
/// (2^31, RFC 9111 §1.2.2).
public let deltaSecondsLimit = 2_147_483_648

/// Parses delta-seconds (RFC 9111 §1.2.2): digits only, clamped to ``deltaSecondsLimit``.
func parseDeltaSeconds(_ text: String?) -> Int? {
    guard let text else { return nil }
    return ASCII.parseDigits(text, cap: deltaSecondsLimit)
}

/// Splits a `#field-name` argument (as used by qualified `no-cache` and `private`) into
/// lowered names.
func parseFieldNames(_ argument: String) -> [String] {
    ASCII.splitList(Substring(argument)).filter(ASCII.isToken).map(ASCII.lowercased)
}

/// The response directives of RFC 9111 §5.2.2, RFC 5861 and RFC 8246, interpreted.
///
/// Repeated and invalid values follow RFC 9111 §4.2.1: a `max-age` or `s-maxage` that is
/// not delta-seconds, or that appears twice with different values, makes the response
/// stale (the value becomes 0); for `stale-while-revalidate` and `stale-if-error` the
/// smaller of repeated values wins and an invalid one is ignored. Each such case is in
/// ``notes``.
public struct ResponseCacheControl: Hashable, Sendable {
    /// `max-age` (§5.2.2.1).
    public var maxAge: Int?
    /// `s-maxage` (§5.2.2.10); applies to shared caches only.
    public var sMaxAge: Int?
    /// Unqualified `no-cache` (§5.2.2.4): reuse only after validation.
    public var noCache = false
    /// Field names of a qualified `no-cache`, lowered; those fields are not stored (§3.1).
    public var noCacheFieldNames: [String] = []
    /// `no-store` (§5.2.2.5).
    public var noStore = false
    /// Unqualified `private` (§5.2.2.7).
    public var isPrivate = false
    /// Field names of a qualified `private`, lowered; a shared cache does not store them.
    public var privateFieldNames: [String] = []
    /// `public` (§5.2.2.9).
    public var isPublic = false
    /// `must-revalidate` (§5.2.2.2).
    public var mustRevalidate = false
    /// `proxy-revalidate` (§5.2.2.8); applies to shared caches only.
    public var proxyRevalidate = false
    /// `must-understand` (§5.2.2.3).
    public var mustUnderstand = false
    /// `no-transform` (§5.2.2.6).
    public var noTransform = false
    /// `immutable` (RFC 8246 §2).
    public var immutable = false
    /// `stale-while-revalidate` (RFC 5861 §3).
    public var staleWhileRevalidate: Int?
    /// `stale-if-error` (RFC 5861 §4).
    public var staleIfError: Int?
    /// Why a directive was ignored or made the response stale.
    public var notes: [Reason] = []

    /// No directives.
    public init() {}

    /// Interprets `cacheControl`'s directives as response directives; `field` names the
    /// field they came from in ``notes``.
    public init(_ cacheControl: CacheControl, field: String = HeaderField.Name.cacheControl.rawName) {
        notes = cacheControl.notes
        for directive in cacheControl.directives {
            switch directive.name {
            case "max-age":
                maxAge = Self.freshness(maxAge, directive, field: field, notes: &notes)
            case "s-maxage":
                sMaxAge = Self.freshness(sMaxAge, directive, field: field, notes: &notes)
            case "stale-while-revalidate":
                staleWhileRevalidate = Self.staleAllowance(staleWhileRevalidate, directive, field: field, notes: &notes)
            case "stale-if-error":
                staleIfError = Self.staleAllowance(staleIfError, directive, field: field, notes: &notes)
            case "no-cache":
                if let argument = directive.argument, !parseFieldNames(argument).isEmpty {
                    noCacheFieldNames += parseFieldNames(argument)
                } else {
                    noCache = true
                }
            case "private":
                if let argument = directive.argument, !parseFieldNames(argument).isEmpty {
                    privateFieldNames += parseFieldNames(argument)
                } else {
                    isPrivate = true
                }
            case "no-store": noStore = true
            case "public": isPublic = true
            case "must-revalidate": mustRevalidate = true
            case "proxy-revalidate": proxyRevalidate = true
            case "must-understand": mustUnderstand = true
            case "no-transform": noTransform = true
            case "immutable": immutable = true
            default: break  // extensions are kept in CacheControl and otherwise ignored (§5.2.3)
            }
        }
        if noCache { noCacheFieldNames = [] }
        if isPrivate { privateFieldNames = [] }
    }

    /// Parses and interprets the `Cache-Control` lines of `fields`.
    public init(fields: HeaderFields) {
        self.init(CacheControl(fields: fields))
    }

    private static func freshness(_ current: Int?, _ directive: CacheDirective, field: String, notes: inout [Reason])
        -> Int?
    {
        guard let seconds = parseDeltaSeconds(directive.argument) else {
            notes.append(.invalidDirectiveValue(field: field, directive: directive.name, value: directive.argument))
            return 0
        }
        guard let current else { return seconds }
        if current != seconds {
            notes.append(.conflictingDirective(field: field, directive: directive.name))
            return 0
        }
        return current
    }

    private static func staleAllowance(
        _ current: Int?, _ directive: CacheDirective, field: String, notes: inout [Reason]
    ) -> Int? {
        guard let seconds = parseDeltaSeconds(directive.argument) else {
            notes.append(.invalidDirectiveValue(field: field, directive: directive.name, value: directive.argument))
            return current
        }
        return min(current ?? seconds, seconds)
    }
}

/// How much staleness a request's `max-stale` accepts (RFC 9111 §5.2.1.2).
public enum MaxStale: Hashable, Sendable {
    /// `max-stale` without a value: any staleness.
    case any
    /// `max-stale=N`.
    case seconds(Int)
}

/// The request directives of RFC 9111 §5.2.1 and RFC 5861 §4, interpreted.
///
/// Request directives are advisory (§5.2.1); an invalid value is ignored and noted. A
/// request with `Pragma: no-cache` and no `Cache-Control` field is treated as
/// `no-cache` (RFC 9111 §5.4, RFC 7234 §5.4).
public struct RequestCacheControl: Hashable, Sendable {
    /// `max-age` (§5.2.1.1): the oldest response the client accepts.
    public var maxAge: Int?
    /// `max-stale` (§5.2.1.2).
    public var maxStale: MaxStale?
    /// `min-fresh` (§5.2.1.3).
    public var minFresh: Int?
    /// `no-cache` (§5.2.1.4), or `Pragma: no-cache` without Cache-Control (§5.4).
    public var noCache = false
    /// `no-store` (§5.2.1.5).
    public var noStore = false
    /// `no-transform` (§5.2.1.6).
    public var noTransform = false
    /// `only-if-cached` (§5.2.1.7).
    public var onlyIfCached = false
    /// `stale-if-error` (RFC 5861 §4).
    public var staleIfError: Int?
    /// Why a directive was ignored.
    public var notes: [Reason] = []

    /// No directives.
    public init() {}

    /// Interprets `cacheControl`'s directives as request directives.
    public init(_ cacheControl: CacheControl) {
        notes = cacheControl.notes
        for directive in cacheControl.directives {
            switch directive.name {
            case "max-age": maxAge = seconds(directive, current: maxAge)
            case "min-fresh": minFresh = seconds(directive, current: minFresh)
            case "stale-if-error": staleIfError = seconds(directive, current: staleIfError)
            case "max-stale":
                if directive.argument == nil {
                    if maxStale == nil { maxStale = .any }  // a bounded max-stale is more restrictive
                } else if let value = seconds(directive, current: nil) {
                    if case .seconds(let existing)? = maxStale {
                        maxStale = .seconds(min(existing, value))
                    } else {
                        maxStale = .seconds(value)
                    }
                }
            case "no-cache": noCache = true
            case "no-store": noStore = true
            case "no-transform": noTransform = true
            case "only-if-cached": onlyIfCached = true
            default: break
            }
        }
    }

    /// Parses `Cache-Control` from request `fields`, falling back to `Pragma: no-cache`.
    public init(fields: HeaderFields) {
        if fields.contains(.cacheControl) {
            self.init(CacheControl(fields: fields))
        } else {
            self.init()
            if fields.listMembers(named: .pragma).contains(where: { ASCII.equalsIgnoringCase($0, "no-cache") }) {
                noCache = true
            }
        }
    }

    /// A repeated directive keeps the most restrictive (smallest) value.
    private mutating func seconds(_ directive: CacheDirective, current: Int?) -> Int? {
        guard let value = parseDeltaSeconds(directive.argument) else {
            notes.append(
                .invalidDirectiveValue(
                    field: HeaderField.Name.cacheControl.rawName, directive: directive.name, value: directive.argument))
            return current
        }
        return min(current ?? value, value)
    }
}
