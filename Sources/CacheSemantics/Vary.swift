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
            if member == "*" {
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
            let members = request.listMembers(named: name)
            if members.isEmpty { return request.contains(name) ? "" : nil }
            return members.joined(separator: ",")
        }
    }
}
