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
        for member in fields.listMembers(named: "Vary") {
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
    /// exactly when RFC 9111 §4.1 says they do: lines combined, white space around commas
    /// and at the ends removed; `nil` for an absent field.
    public func requestValues(_ request: HeaderFields) -> [String?] {
        fieldNames.map { name in
            var bytes: [UInt8] = []
            var present = false
            for field in request.storage where field.lowercasedName == name {
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
                if request.storage.contains(where: { $0.lowercasedName == name }) { return false }
                continue
            }
            let matched = ASCII.withUTF8(expected) { expected -> Bool in
                var position = 0
                var present = false
                for field in request.storage where field.lowercasedName == name {
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
