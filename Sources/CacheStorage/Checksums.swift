/// XXH64, the 64-bit xxHash (Yann Collet), written here from its specification: a
/// non-cryptographic checksum fast enough to verify every body block on every read (about
/// 8 GB/s here, against about 1.2 GB/s for a table-driven CRC-32C).
package enum XXH64 {
    private static let prime1: UInt64 = 0x9E37_79B1_85EB_CA87
    private static let prime2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
    private static let prime3: UInt64 = 0x1656_67B1_9E37_79F9
    private static let prime4: UInt64 = 0x85EB_CA77_C2B2_AE63
    private static let prime5: UInt64 = 0x27D4_EB2F_1656_67C5

    @inline(__always)
    private static func rotateLeft(_ value: UInt64, _ bits: UInt64) -> UInt64 {
        (value << bits) | (value >> (64 - bits))
    }

    @inline(__always)
    private static func round(_ accumulator: UInt64, _ input: UInt64) -> UInt64 {
        rotateLeft(accumulator &+ input &* prime2, 31) &* prime1
    }

    @inline(__always)
    private static func merge(_ accumulator: UInt64, _ value: UInt64) -> UInt64 {
        (accumulator ^ round(0, value)) &* prime1 &+ prime4
    }

    @inline(__always)
    private static func load64(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt64 {
        UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    /// The hash of `bytes` with `seed`.
    static func hash(_ bytes: UnsafeRawBufferPointer, seed: UInt64 = 0) -> UInt64 {
        let count = bytes.count
        var offset = 0
        var hash: UInt64
        if count >= 32 {
            var v1 = seed &+ prime1 &+ prime2
            var v2 = seed &+ prime2
            var v3 = seed
            var v4 = seed &- prime1
            while offset <= count - 32 {
                v1 = round(v1, load64(bytes, offset))
                v2 = round(v2, load64(bytes, offset + 8))
                v3 = round(v3, load64(bytes, offset + 16))
                v4 = round(v4, load64(bytes, offset + 24))
                offset += 32
            }
            hash = rotateLeft(v1, 1) &+ rotateLeft(v2, 7) &+ rotateLeft(v3, 12) &+ rotateLeft(v4, 18)
            hash = merge(merge(merge(merge(hash, v1), v2), v3), v4)
        } else {
            hash = seed &+ prime5
        }
        hash &+= UInt64(count)
        while offset + 8 <= count {
            hash = rotateLeft(hash ^ round(0, load64(bytes, offset)), 27) &* prime1 &+ prime4
            offset += 8
        }
        if offset + 4 <= count {
            let word = UInt64(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
            hash = rotateLeft(hash ^ (word &* prime1), 23) &* prime2 &+ prime3
            offset += 4
        }
        while offset < count {
            hash = rotateLeft(hash ^ (UInt64(bytes[offset]) &* prime5), 11) &* prime1
            offset += 1
        }
        hash ^= hash >> 33
        hash &*= prime2
        hash ^= hash >> 29
        hash &*= prime3
        hash ^= hash >> 32
        return hash
    }

    /// The hash of `bytes` with `seed`.
    package static func hash(_ bytes: [UInt8], seed: UInt64 = 0) -> UInt64 {
        bytes.withUnsafeBytes { hash($0, seed: seed) }
    }
}

/// Bodies are checksummed in blocks of this many bytes, so a range or a stream can be
/// verified without reading the whole body.
let checksumBlockSize = 64 * 1024

/// Per-block XXH64 checksums of a body being written.
struct BlockChecksums {
    private var sums: [UInt64] = []
    private var pending = GatheredBytes()
    private(set) var totalBytes: Int64 = 0

    mutating func add(_ bytes: [UInt8]) {
        totalBytes += Int64(bytes.count)
        var offset = 0
        while offset < bytes.count {
            let take = min(checksumBlockSize - pending.count, bytes.count - offset)
            if pending.isEmpty && take == checksumBlockSize {
                // A whole block straight from the chunk: no copy.
                sums.append(
                    bytes.withUnsafeBytes { XXH64.hash(UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + take)])) }
                )
            } else if pending.isEmpty && offset == 0 && take == bytes.count {
                // The whole chunk begins a block (a body smaller than a block, in one chunk):
                // kept as it is, shared with the caller's array, until more comes.
                pending.append(bytes)
            } else {
                pending.append(bytes[offset..<(offset + take)])
                if pending.count == checksumBlockSize {
                    sums.append(XXH64.hash(pending.bytes))
                    pending.removeAll()
                }
            }
            offset += take
        }
    }

    /// The checksums of a whole body (``finished()``).
    static func of(_ bytes: [UInt8]) -> [UInt8] {
        var checksums = BlockChecksums()
        checksums.add(bytes)
        return checksums.finished()
    }

    /// Counts `bytes` without checksumming them (an encrypted store's blocks authenticate
    /// themselves).
    mutating func count(_ bytes: [UInt8]) {
        totalBytes += Int64(bytes.count)
    }

    /// The checksums, with the last partial block closed: eight little-endian bytes each.
    func finished() -> [UInt8] {
        var all = sums
        if !pending.isEmpty || all.isEmpty { all.append(XXH64.hash(pending.bytes)) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(all.count * 8)
        for value in all { withUnsafeBytes(of: value.littleEndian) { bytes += $0 } }
        return bytes
    }

    /// Verifies `bytes`, which hold whole blocks `blocks` of a body (the last may be short),
    /// against `checksums` from ``finished()``; throws what `corrupted` makes of the first
    /// block that does not match.
    static func verify(
        _ bytes: [UInt8], blocks: ClosedRange<Int>, against checksums: [UInt8],
        _ corrupted: (String) -> StorageError
    ) throws(StorageError) {
        var offset = 0
        for block in blocks {
            let length = min(checksumBlockSize, bytes.count - offset)
            let actual = bytes.withUnsafeBytes { buffer in
                XXH64.hash(UnsafeRawBufferPointer(rebasing: buffer[offset..<(offset + length)]))
            }
            guard actual == value(at: block, in: checksums) else {
                throw corrupted("block \(block) does not match its checksum")
            }
            offset += length
        }
    }

    /// The checksum of block `index` from bytes written by ``finished()``.
    static func value(at index: Int, in bytes: [UInt8]) -> UInt64? {
        let start = index * 8
        guard start >= 0, start + 8 <= bytes.count else { return nil }
        return bytes.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: start, as: UInt64.self)) }
    }
}
