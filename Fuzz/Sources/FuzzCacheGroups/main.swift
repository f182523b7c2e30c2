import CacheSemantics
import FuzzSupport

/// Cache groups (RFC 9875): parsing never traps; every group kept is a String member of the
/// field (RFC 9651 §3.3.3), within the bounds, without duplicates; tags are per origin, and a
/// safe method never invalidates.
runFuzzer { data, size in
    let text = fuzzText(data, size)
    let groups = CacheGroups.groups(["Cache-Groups": text])
    precondition(groups.count <= CacheGroups.maximumGroups, "\(text.debugDescription): \(groups.count) groups")
    precondition(Set(groups).count == groups.count, "\(text.debugDescription): duplicates")
    let strings: [String]
    if let list = StructuredFields.parseList(text) {
        strings = list.compactMap { member in
            if case .item(.string(let value), _) = member { return value }
            return nil
        }
    } else {
        strings = []
    }
    for group in groups {
        precondition(strings.contains(group), "\(text.debugDescription): \(group.debugDescription) is no member")
        precondition(group.utf8.count <= CacheGroups.maximumLength)
    }
    let fields: HeaderFields = ["Cache-Groups": text, "Cache-Group-Invalidation": text]
    let tags = CacheGroups.tags(uri: "https://example.com/a", fields: fields)
    precondition(tags.count == 2 * groups.count)
    let engine = CacheEngine(configuration: .sharedCache)
    let response = ResponseHead(status: 200, fields: fields)
    precondition(
        engine.invalidatedGroupTags(
            request: RequestHead(method: "GET", uri: "https://example.com/a"), response: response
        )
        .isEmpty)
    let invalidated = engine.invalidatedGroupTags(
        request: RequestHead(method: "POST", uri: "https://example.com/a"), response: response)
    precondition(invalidated == groups.map { CacheGroups.tag($0, origin: "https://example.com") })
    return 0
}
