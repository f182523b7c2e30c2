import CacheSemantics

/// Index keys the exchange derives from a stored response's URI, in the partition of the key
/// it is stored under (`CachePartition`).
enum PartitionedKeys {
    /// The cache-group tags of a response for `uri` with `fields` (RFC 9875 §2.1), stored under
    /// `primaryKey`: a group invalidated in one partition leaves the others' responses alone.
    static func groupTags(uri: String, fields: HeaderFields, primaryKey: String) -> [String] {
        let tags = CacheGroups.tags(uri: uri, fields: fields)
        guard !tags.isEmpty, let partition = CachePartition.split(primaryKey).partition else { return tags }
        return tags.map { CachePartition.key($0, in: partition) }
    }
}
