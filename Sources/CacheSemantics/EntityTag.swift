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
        // Read in the bytes in place: through the UTF-8 view's general slicing, a tag cost
        // ~650 instructions (parsed twice a revalidation).
        guard let (weak, opaque) = ASCII.withUTF8(Substring(text), { Self.parse($0) }) else { return nil }
        isWeak = weak
        opaqueTag = opaque
    }

    /// `[W/] DQUOTE *etagc DQUOTE` between optional white space: whether it is weak, and the
    /// opaque tag.
    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> (weak: Bool, opaque: String)? {
        let trimmed = ASCII.trimmedRange(bytes, 0..<bytes.count)
        var start = trimmed.lowerBound
        let end = trimmed.upperBound
        let weak = end - start >= 2 && bytes[start] == UInt8(ascii: "W") && bytes[start + 1] == UInt8(ascii: "/")
        if weak { start += 2 }
        guard end - start >= 2, bytes[start] == UInt8(ascii: "\""), bytes[end - 1] == UInt8(ascii: "\"") else {
            return nil
        }
        let opaque = UnsafeBufferPointer(rebasing: bytes[(start + 1)..<(end - 1)])
        // etagc = %x21 / %x23-7E / obs-text
        guard opaque.allSatisfy({ $0 == 0x21 || ($0 >= 0x23 && $0 != 0x7F) }) else { return nil }
        return (weak, String(decoding: opaque, as: UTF8.self))
    }

    /// Strong comparison: both tags strong and equal (RFC 9110 §8.8.3.2).
    /// Opaque tags are compared octet by octet, not by Unicode canonical equivalence.
    public func strongMatches(_ other: EntityTag) -> Bool {
        !isWeak && !other.isWeak && weakMatches(other)
    }

    /// Weak comparison: the opaque tags are equal, weak or not (RFC 9110 §8.8.3.2).
    public func weakMatches(_ other: EntityTag) -> Bool {
        // The bytes in place (the UTF-8 views' general comparison cost ~1,000 instructions).
        opaqueTag.utf8.count == other.opaqueTag.utf8.count
            && ASCII.withUTF8(opaqueTag) { mine in ASCII.withUTF8(other.opaqueTag) { mine.elementsEqual($0) } }
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
