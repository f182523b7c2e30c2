/// Cache groups (RFC 9875): the `Cache-Groups` response field names the groups a response
/// belongs to; `Cache-Group-Invalidation` on a response to an unsafe request names groups
/// whose stored responses it invalidates. Two stored responses share a group when both list
/// the same String (compared case-sensitively) and their URIs have the same origin (§2.1).
public enum CacheGroups {
    /// More groups than this in one field are not kept: RFC 9875 §2 and §3 ask for at least
    /// 32; the bound keeps one response from adding unbounded index rows.
    public static let maximumGroups = 64
    /// Longer group names are ignored (RFC 9875 asks for at least 32 characters).
    public static let maximumLength = 256

    /// The groups a field lists: a Structured Field List of Strings (RFC 9651 §3.1, §3.3.3)
    /// over all of `name`'s lines, without duplicates, in order. Parameters are ignored;
    /// members that are not Strings are skipped; a field that does not parse lists none.
    public static func groups(_ fields: HeaderFields, name: String) -> [String] {
        groups(fields, name: HeaderField.Name(name))
    }

    /// The groups `name` (`Cache-Groups` unless given) lists: a Structured Field List of Strings
    /// (RFC 9651 §3.1, §3.3.3), as the `String`-taking form reads it.
    public static func groups(_ fields: HeaderFields, name: HeaderField.Name = .cacheGroups) -> [String] {
        let lines = fields.values(named: name)
        guard !lines.isEmpty, let list = StructuredFields.parseList(lines.joined(separator: ", ")) else { return [] }
        var groups: [String] = []
        for member in list {
            guard case .item(.string(let group), _) = member, group.utf8.count <= maximumLength,
                !groups.contains(group)
            else { continue }
            groups.append(group)
            if groups.count == maximumGroups { break }
        }
        return groups
    }

    /// `groups` as a `Cache-Groups` or `Cache-Group-Invalidation` field value: a List of
    /// Strings (RFC 9651 §4.1.1), such as `"news", "sport"`.
    public static func fieldValue(_ groups: [String]) -> String {
        groups.map { StructuredFields.serialize(.string($0)) }.joined(separator: ", ")
    }

    /// The index key of `group` within `origin` (`scheme://host[:port]`, as
    /// ``CacheGroups/origin(of:)`` gives it): what a store indexes an entry under.
    public static func tag(_ group: String, origin: String) -> String { "group " + origin + " " + group }

    /// The index key of `group` in every origin: an operator's purge by group alone.
    public static func tag(_ group: String) -> String { "group * " + group }

    /// The origin of `uri` (RFC 9110 §4.3.1): scheme, host and port, normalized; `nil` when
    /// it is not an absolute URI.
    public static func origin(of uri: String) -> String? { URIParts(uri)?.origin }

    /// The index keys of a stored response for `uri` with response `fields`: each group
    /// within the origin and in every origin (RFC 9875 §2.1).
    public static func tags(uri: String, fields: HeaderFields) -> [String] {
        guard fields.contains(.cacheGroups), let origin = origin(of: uri) else { return [] }
        return groups(fields).flatMap { [tag($0, origin: origin), tag($0)] }
    }
}

extension CacheEngine {
    /// The index keys of the groups whose stored responses a response invalidates (RFC 9875
    /// §3): those its `Cache-Group-Invalidation` lists, in the request's origin, when the
    /// request's method is unsafe (the field is ignored after a safe one) and the status is
    /// not an error, as for every other invalidation (RFC 9111 §4.4).
    public func invalidatedGroupTags(request: RequestHead, response: ResponseHead) -> [String] {
        guard !safeMethods.contains(request.method), (200..<400).contains(response.status),
            response.fields.contains(.cacheGroupInvalidation), let origin = CacheGroups.origin(of: request.uri)
        else { return [] }
        return CacheGroups.groups(response.fields, name: .cacheGroupInvalidation).map {
            CacheGroups.tag($0, origin: origin)
        }
    }
}
