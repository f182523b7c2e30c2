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

    /// The tag every stored `QUERY` response for a URI carries, from the URI's `GET` key
    /// `getKey` (in its partition): a `QUERY`'s key holds its content, so what invalidates or
    /// purges the URI (RFC 9111 §4.4) finds its `QUERY` responses by this tag.
    static func queryTag(getKey: String) -> String {
        let (partition, key) = CachePartition.split(getKey)
        return CachePartition.key("query " + key, in: partition)
    }
}
