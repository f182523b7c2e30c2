/// An entity tag (RFC 9110 §8.8.3): an opaque validator, weak or strong.
public struct EntityTag: Hashable, Sendable, CustomStringConvertible {
    /// Whether the tag is weak (`W/` prefix).
    public var isWeak: Bool
    /// The characters between the quotes.
    public var opaqueTag: String

    /// Creates an entity tag from its parts.
    public init(opaqueTag: String, isWeak: Bool = false) {
        self.opaqueTag = opaqueTag
        self.isWeak = isWeak
    }

    /// Parses `[W/] DQUOTE *etagc DQUOTE`; `nil` for anything else.
    public init?(_ text: some StringProtocol) {
        var bytes = Substring(text).utf8[...]
        while let first = bytes.first, ASCII.isOWS(first) { bytes = bytes.dropFirst() }
        while let last = bytes.last, ASCII.isOWS(last) { bytes = bytes.dropLast() }
        var weak = false
        if bytes.count >= 2, bytes.first == UInt8(ascii: "W"), bytes.dropFirst().first == UInt8(ascii: "/") {
            weak = true
            bytes = bytes.dropFirst(2)
        }
        guard bytes.count >= 2, bytes.first == UInt8(ascii: "\""), bytes.last == UInt8(ascii: "\"") else {
            return nil
        }
        let opaque = bytes.dropFirst().dropLast()
        // etagc = %x21 / %x23-7E / obs-text
        guard opaque.allSatisfy({ $0 == 0x21 || ($0 >= 0x23 && $0 != 0x7F) }) else { return nil }
        isWeak = weak
        opaqueTag = String(decoding: opaque, as: UTF8.self)
    }

    /// Strong comparison: both tags strong and equal (RFC 9110 §8.8.3.2).
    /// Opaque tags are compared octet by octet, not by Unicode canonical equivalence.
    public func strongMatches(_ other: EntityTag) -> Bool {
        !isWeak && !other.isWeak && opaqueTag.utf8.elementsEqual(other.opaqueTag.utf8)
    }

    /// Weak comparison: the opaque tags are equal, weak or not (RFC 9110 §8.8.3.2).
    public func weakMatches(_ other: EntityTag) -> Bool {
        opaqueTag.utf8.elementsEqual(other.opaqueTag.utf8)
    }

    /// The field-value form, e.g. `W/"xyzzy"`.
    public var description: String { (isWeak ? "W/\"" : "\"") + opaqueTag + "\"" }
}

/// The value of `If-None-Match` or `If-Match`: `*` or a list of entity tags
/// (RFC 9110 §13.1.1, §13.1.2).
public enum EntityTagList: Hashable, Sendable {
    /// `*`: any current representation.
    case any
    /// The listed tags (invalid members skipped).
    case tags([EntityTag])

    /// Parses every line of field `name`; `nil` when absent or when no member is valid.
    public init?(fields: HeaderFields, name: String) { self.init(fields: fields, name: HeaderField.Name(name)) }

    /// Parses every line of field `name` (`.ifNoneMatch`, `.ifMatch`); `nil` when absent or when
    /// no member is valid.
    public init?(fields: HeaderFields, name: HeaderField.Name) {
        let members = fields.listMembers(named: name)
        if members.contains(where: { $0.utf8.elementsEqual("*".utf8) }) {
            self = .any
            return
        }
        let tags = members.compactMap { EntityTag($0) }
        guard !tags.isEmpty else { return nil }
        self = .tags(tags)
    }

    /// Whether `tag` matches a member by weak comparison (as If-None-Match uses).
    public func weakMatches(_ tag: EntityTag) -> Bool {
        switch self {
        case .any: return true
        case .tags(let tags): return tags.contains { $0.weakMatches(tag) }
        }
    }

    /// The field-value form.
    public var fieldValue: String {
        switch self {
        case .any: return "*"
        case .tags(let tags): return tags.map(\.description).joined(separator: ", ")
        }
    }
}
