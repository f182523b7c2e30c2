/// The `Vary` field of a response (RFC 9110 §12.5.5), which nominates the request fields a
/// stored response depends on (RFC 9111 §4.1).
public struct Vary: Hashable, Sendable {
    /// `true` when a member is `*`: the response never matches a later request.
    public var isAny: Bool
    /// The nominated request field names, lowered, without duplicates, in field order.
    public var fieldNames: [String]

    /// Parses every `Vary` line of `fields`.
    public init(fields: HeaderFields) {
        isAny = false
        fieldNames = []
        for member in fields.listMembers(named: .vary) {
            if member.utf8.elementsEqual("*".utf8) {
                isAny = true
            } else if ASCII.isToken(member) {
                let name = ASCII.lowercased(member)
                if !fieldNames.contains(name) { fieldNames.append(name) }
            }
        }
    }

    /// Creates a value from names.
    public init(fieldNames: [String], isAny: Bool = false) {
        self.fieldNames = fieldNames.map(ASCII.lowercased)
        self.isAny = isAny
    }

    /// Whether the response varies on nothing.
    public var isEmpty: Bool { !isAny && fieldNames.isEmpty }

    /// The request's value of each nominated field, normalized so that two requests match
    /// exactly when RFC 9111 §4.1 says they do ("by ... normalizing both header field values
    /// in a way that is known to have identical semantics"): lines combined, white space
    /// around commas and at the ends removed; for `Accept`, `Accept-Encoding` and
    /// `Accept-Language` also case and member order where they carry no meaning. `nil` for an
    /// absent field.
    public func requestValues(_ request: HeaderFields) -> [String?] {
        fieldNames.map { name in
            if let normalization = FieldNormalization(name) { return normalization.value(request, name) }
            var bytes: [UInt8] = []
            var present = false
            for field in request.storage where field.isNamed(name) {
                present = true
                _ = ASCII.withUTF8(field.value) { value in
                    ASCII.forEachListMember(value) { member in
                        if !bytes.isEmpty { bytes.append(UInt8(ascii: ",")) }
                        bytes += value[member]
                        return true
                    }
                }
            }
            return present ? String(decoding: bytes, as: UTF8.self) : nil
        }
    }

    /// Whether `request`'s nominated fields, normalized as ``requestValues(_:)`` does, equal
    /// `values` (RFC 9111 §4.1). Compares in place, without building the normalized values.
    ///
    /// - Parameters:
    ///   - request: The fields of the request being answered.
    ///   - values: The stored normalized values, one per nominated field (`nil`: absent).
    ///   - rawValues: The original request's values as sent (`request[name]`); a field sent
    ///     with exactly those bytes matches without normalizing.
    public func matches(_ request: HeaderFields, values: [String?], rawValues: [String?] = []) -> Bool {
        guard !isAny, values.count == fieldNames.count else { return false }
        for index in fieldNames.indices {
            let name = fieldNames[index]
            let expected = values[index]
            if index < rawValues.count, let raw = rawValues[index],
                request.combinedValue(lowercasedName: name) == raw
            {
                continue
            }
            guard let expected else {
                if request.storage.contains(where: { $0.isNamed(name) }) { return false }
                continue
            }
            if let normalization = FieldNormalization(name) {
                if normalization.value(request, name) != expected { return false }
                continue
            }
            let matched = ASCII.withUTF8(expected) { expected -> Bool in
                var position = 0
                var present = false
                for field in request.storage where field.isNamed(name) {
                    present = true
                    let same = ASCII.withUTF8(field.value) { value in
                        ASCII.forEachListMember(value) { member in
                            if position > 0 {
                                guard position < expected.count, expected[position] == UInt8(ascii: ",") else {
                                    return false
                                }
                                position += 1
                            }
                            guard position + member.count <= expected.count else { return false }
                            for offset in 0..<member.count
                            where value[member.lowerBound + offset] != expected[position + offset] {
                                return false
                            }
                            position += member.count
                            return true
                        }
                    }
                    if !same { return false }
                }
                return present && position == expected.count
            }
            if !matched { return false }
        }
        return true
    }
}

/// The nominated fields whose values are normalized beyond white space, in ways that keep
/// their meaning (RFC 9111 §4.1, RFC 9110 §12.5).
enum FieldNormalization {
    /// `Accept-Encoding` (RFC 9110 §12.5.3) and `Accept-Language` (§12.5.4): codings and
    /// language tags are case-insensitive, and preference is carried by the q-values, not by
    /// the order of the members, so members are lower-cased and sorted, each with its
    /// weight (`q=1` is the default and dropped, other q-values written in their shortest form).
    case unorderedCaseInsensitive
    /// `Accept-Language` (§12.5.4): as ``unorderedCaseInsensitive``, less the members that say
    /// nothing (``withoutVoidMembers(_:)``).
    case languageRanges
    /// `Accept` (RFC 9110 §12.5.1): the media range and parameter names are case-insensitive
    /// and their q-values normalized as above; parameter values and the order are kept.
    case mediaRanges

    init?(_ lowercasedName: String) {
        switch lowercasedName {
        case "accept-encoding": self = .unorderedCaseInsensitive
        case "accept-language": self = .languageRanges
        case "accept": self = .mediaRanges
        default: return nil
        }
    }

    /// The normalized value of `name`'s lines in `request`; `nil` when absent.
    func value(_ request: HeaderFields, _ name: String) -> String? {
        var members: [String] = []
        var present = false
        for field in request.storage where field.isNamed(name) {
            present = true
            for member in ASCII.splitList(Substring(field.value)) { members.append(normalized(member)) }
        }
        guard present else { return nil }
        if self != .mediaRanges { members.sort() }
        if self == .languageRanges { members = Self.withoutVoidMembers(members) }
        return members.joined(separator: ",")
    }

    /// Sorted, normalized `Accept-Language` members less those that change nothing: a repeat
    /// of the member before it, and a range weighted `q=0` that no acceptable range (`*`,
    /// the same range, or a shorter one that matches it by basic filtering, RFC 4647 §3.3.1)
    /// covers, since a language no member mentions is unacceptable anyway (RFC 9110 §12.4.3).
    /// `en, fr;q=0` means what `en` means. All the members when every one would go.
    static func withoutVoidMembers(_ members: [String]) -> [String] {
        let ranges = members.map { member -> (range: Substring, acceptable: Bool) in
            let parts = member.split(separator: ";", maxSplits: 1)
            let weight = parts.count > 1 && parts[1].hasPrefix("q=") ? Self.weight(parts[1].dropFirst(2)) : nil
            return (parts.first ?? "", weight != 0)
        }
        var kept: [String] = []
        for (index, member) in members.enumerated() {
            if index > 0, members[index - 1] == member { continue }
            let range = ranges[index].range
            if !ranges[index].acceptable,
                !ranges.contains(where: { other in
                    other.acceptable
                        && (other.range == "*" || other.range == range || range.hasPrefix(other.range + "-"))
                })
            {
                continue
            }
            kept.append(member)
        }
        return kept.isEmpty ? members : kept
    }

    /// One list member with white space around `;` and `=` removed, names lower-cased and
    /// the weight in its shortest form.
    private func normalized(_ member: Substring) -> String {
        var parts: [String] = []
        for (index, part) in member.split(separator: ";", omittingEmptySubsequences: false).enumerated() {
            let trimmed = ASCII.trimmed(part)
            if index == 0 {
                parts.append(ASCII.lowercased(trimmed))
                continue
            }
            guard let equals = trimmed.firstIndex(of: "=") else {
                parts.append(ASCII.lowercased(trimmed))
                continue
            }
            let name = ASCII.lowercased(ASCII.trimmed(trimmed[..<equals]))
            let rawValue = ASCII.trimmed(trimmed[trimmed.index(after: equals)...])
            if name == "q", let weight = Self.weight(rawValue) {
                if weight < 1000 { parts.append("q=" + Self.format(weight)) }
                continue
            }
            parts.append(
                name + "=" + (self == .mediaRanges ? String(rawValue) : ASCII.lowercased(rawValue)))
        }
        return parts.joined(separator: ";")
    }

    /// A `qvalue` (RFC 9110 §12.4.2) in thousandths; `nil` when it is not one (then kept as sent).
    static func weight(_ text: Substring) -> Int? {
        let bytes = Array(text.utf8)
        guard let first = bytes.first, first == UInt8(ascii: "0") || first == UInt8(ascii: "1") else { return nil }
        var thousandths = Int(first - UInt8(ascii: "0")) * 1000
        guard bytes.count > 1 else { return thousandths }
        guard bytes[1] == UInt8(ascii: "."), bytes.count <= 5 else { return nil }
        var scale = 100
        for byte in bytes[2...] {
            guard ASCII.isDigit(byte) else { return nil }
            thousandths += Int(byte - UInt8(ascii: "0")) * scale
            scale /= 10
        }
        return thousandths <= 1000 ? thousandths : nil
    }

    /// `0.5`, `0.25`, `0`: the shortest text of a weight below 1.
    static func format(_ thousandths: Int) -> String {
        guard thousandths > 0 else { return "0" }
        var digits = String(thousandths + 1000).dropFirst()
        while digits.last == "0" { digits = digits.dropLast() }
        return "0." + digits
    }
}
