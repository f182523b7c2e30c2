import Testing

@testable import CacheStorage

@Suite("CacheStorage: XXH64 block checksums")
struct ChecksumTests {
    @Test(
        "XXH64 matches the reference values",
        arguments: [
            ("", 0xEF46_DB37_51D8_E999 as UInt64), ("a", 0xD24E_C4F1_A98C_6E5B),
            ("abc", 0x44BC_2CF5_AD77_0999), ("Nobody inspects the spammish repetition", 0xFBCE_A83C_8A37_8BF1),
        ])
    func referenceValues(text: String, expected: UInt64) {
        #expect(XXH64.hash(Array(text.utf8)) == expected)
    }

    @Test(
        "a body smaller than a block, first in one chunk then grown, sums as if it came whole; the caller's chunk is untouched"
    )
    func firstChunkKeptAsItIs() {
        let first = (0..<16_384).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) }
        let second = (0..<60_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        var alone = BlockChecksums()
        alone.add(first)
        #expect(alone.finished() == withUnsafeBytes(of: XXH64.hash(first).littleEndian) { Array($0) })
        var grown = BlockChecksums()
        grown.add(first)
        grown.add(second)
        var whole = BlockChecksums()
        whole.add(first + second)
        #expect(grown.finished() == whole.finished())
        #expect(grown.totalBytes == 76_384)
        #expect(first == (0..<16_384).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) })
    }

    @Test("block checksums do not depend on how the body was chunked, and every byte counts")
    func chunkingAndSensitivity() {
        let body = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        var whole = BlockChecksums()
        whole.add(body)
        var pieces = BlockChecksums()
        var offset = 0
        for size in [1, 65_535, 65_536, 3, 70_000, 100_000] where offset < body.count {
            let end = min(body.count, offset + size)
            pieces.add(Array(body[offset..<end]))
            offset = end
        }
        #expect(pieces.finished() == whole.finished())
        #expect(whole.finished().count == 4 * 8)  // 200,000 bytes: 3 full blocks and a partial one
        #expect(whole.totalBytes == 200_000)
        var changed = body
        changed[150_000] ^= 1
        var other = BlockChecksums()
        other.add(changed)
        let (a, b) = (whole.finished(), other.finished())
        #expect(BlockChecksums.value(at: 2, in: a) != BlockChecksums.value(at: 2, in: b))
        #expect(BlockChecksums.value(at: 1, in: a) == BlockChecksums.value(at: 1, in: b))
        #expect(BlockChecksums.value(at: 4, in: a) == nil)
    }
}
