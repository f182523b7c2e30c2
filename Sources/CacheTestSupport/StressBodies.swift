import CacheSemantics
import CacheStorage

/// Bodies derived from their URL, so whoever reads an entry back can check every byte
/// without having kept a copy (crash and concurrency tests).
public enum StressBodies {
    /// The body of `size` bytes for `url`: a SplitMix64 stream seeded from the URL's bytes.
    public static func body(for url: String, size: Int) -> [UInt8] {
        // Not `Array(unsafeUninitializedCapacity: 0)`: see `Fixtures.bytes(count:_:)`.
        guard size > 0 else { return [] }
        var seed: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a of the URL
        for byte in url.utf8 { seed = (seed ^ UInt64(byte)) &* 0x100_0000_01b3 }
        var random = SplitMix64(seed: seed)
        // Each word's eight bytes, least significant first, copied whole: a byte-by-byte loop
        // takes seconds per megabyte in debug builds, and tests make hundreds of these bodies.
        return [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            let bytes = UnsafeMutableRawBufferPointer(buffer)
            var index = 0
            while index < bytes.count {
                var word = random.next().littleEndian
                let length = min(8, bytes.count - index)
                withUnsafeBytes(of: &word) { source in
                    UnsafeMutableRawBufferPointer(rebasing: bytes[index..<(index + length)])
                        .copyMemory(from: UnsafeRawBufferPointer(rebasing: source[0..<length]))
                }
                index += length
            }
            count = bytes.count
        }
    }

    /// The URL of stress entry `key` in generation `generation`; its body size is encoded in
    /// it so that the size, too, is checkable.
    public static func url(key: Int, generation: Int, size: Int) -> String {
        "https://stress.example/item/\(key)?generation=\(generation)&size=\(size)"
    }

    /// The size encoded in a stress URL.
    public static func size(inURL url: String) -> Int? {
        guard let marker = url.split(separator: "&size=", omittingEmptySubsequences: false).last,
            marker.count < url.count
        else { return nil }
        return Int(marker)
    }

    /// The primary key stress entry `key` uses (all generations share it, so writes replace).
    public static func primaryKey(key: Int) -> String { "https://stress.example/item/\(key)" }

    /// The head of stress entry `key`, generation `generation`, with a `size`-byte body.
    public static func head(key: Int, generation: Int, size: Int) -> EntryHead {
        EntryHead(
            primaryKey: primaryKey(key: key), url: url(key: key, generation: generation, size: size), status: 200,
            fields: ["Content-Length": "\(size)"], facts: [1])
    }

    /// Writes stress entry `key` (its content-derived body) into `store`, in 7,000-byte chunks.
    @discardableResult
    public static func write(into store: some CacheStore, key: Int, generation: Int, size: Int)
        throws(StorageError) -> StoredEntry
    {
        let head = head(key: key, generation: generation, size: size)
        return try writeEntry(store, head, body(for: head.url, size: size))
    }

    /// The body `entry` must have, from its URL; `nil` for a URL that is not a stress URL.
    public static func expectedBody(_ entry: StoredEntry) -> [UInt8]? {
        size(inURL: entry.head.url).map { body(for: entry.head.url, size: $0) }
    }
}

/// Writes `body` into `store` under `head` in chunks of `chunk` bytes, as a body arrives from
/// the network, and commits.
@discardableResult
public func writeEntry(_ store: some CacheStore, _ head: EntryHead, _ body: [UInt8], chunk: Int = 7_000)
    throws(StorageError) -> StoredEntry
{
    let writer = try store.makeWriter(for: head)
    var offset = 0
    repeat {
        let end = min(body.count, offset + chunk)
        try writer.append(Array(body[offset..<end]))
        offset = end
    } while offset < body.count
    return try writer.commit()
}

/// SplitMix64 (Steele, Lea and Flood): a tiny deterministic generator, so that stress runs,
/// crash tests and benchmarks replay from one printed seed.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator that starts from `seed`.
    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}
