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

    /// The tag a response for a URI carries when it is stored under another key than the URI's
    /// `GET` key `getKey` (in its partition): a `QUERY`'s (its key holds its content), and a
    /// variant kept in a partition of its own (``ExchangeRequest/partitionHoldsVariants``: the
    /// proxy's dictionary-compressed deltas). What invalidates or purges the URI (RFC 9111 §4.4)
    /// finds them by this tag.
    static func aliasTag(getKey: String) -> String {
        let (partition, key) = CachePartition.split(getKey)
        return CachePartition.key("alias " + key, in: partition)
    }

    /// The tag a variant kept in a partition of its own carries for its origin, in the partition
    /// of the responses it is a variant of: `Clear-Site-Data` there (W3C Clear Site Data §4.2)
    /// removes it with them.
    static func originAliasTag(_ origin: String, in partition: String?) -> String {
        CachePartition.key("alias-origin " + origin, in: partition)
    }
}
