/// SHA-1 (FIPS 180-4, "Secure Hash Standard", §6.1; also RFC 3174), incremental.
///
/// WARC files name SHA-1 digests of record blocks and payloads (`WARC-Block-Digest`,
/// `WARC-Payload-Digest`, ISO 28500 / WARC 1.1 "Named fields"); SHA-1 is used here for that
/// interoperability only, not as a security measure.
///
/// ```swift
/// var hash = SHA1()
/// hash.update(Array("ab".utf8))
/// hash.update(Array("c".utf8))
/// let digest = hash.finalize()  // 20 bytes: a9 99 3e 36 …
/// ```
@_spi(Fuzzing) public struct SHA1: Sendable {
    /// The digest's length in bytes.
    public static let digestLength = 20

    private var h0: UInt32 = 0x6745_2301
    private var h1: UInt32 = 0xEFCD_AB89
    private var h2: UInt32 = 0x98BA_DCFE
    private var h3: UInt32 = 0x1032_5476
    private var h4: UInt32 = 0xC3D2_E1F0
    /// Bytes that do not yet make a whole 64-byte block (always fewer than 64).
    private var pending: [UInt8] = []
    /// The message length so far, in bytes.
    private var length: UInt64 = 0

    /// A hash of the empty message, ready for `update(_:)`.
    public init() {}

    /// The SHA-1 digest (20 bytes) of `bytes`.
    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        var hash = SHA1()
        hash.update(bytes)
        return hash.finalize()
    }

    /// Appends `bytes` to the message.
    public mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// Appends `bytes` to the message.
    public mutating func update(_ bytes: ArraySlice<UInt8>) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// Appends the bytes of `buffer` to the message.
    public mutating func update(_ buffer: UnsafeRawBufferPointer) {
        guard buffer.count > 0 else { return }
        length &+= UInt64(buffer.count)
        var rest = buffer
        if !pending.isEmpty {
            let take = min(64 - pending.count, rest.count)
            pending.append(contentsOf: rest.prefix(take))
            rest = UnsafeRawBufferPointer(rebasing: rest.dropFirst(take))
            guard pending.count == 64 else { return }
            let block = pending
            block.withUnsafeBytes { compress($0) }
            pending.removeAll(keepingCapacity: true)
        }
        let whole = rest.count - rest.count % 64
        if whole > 0 { compress(UnsafeRawBufferPointer(rebasing: rest.prefix(whole))) }
        if whole < rest.count { pending.append(contentsOf: rest.dropFirst(whole)) }
    }

    /// The digest (20 bytes, big-endian words as FIPS 180-4 specifies) of the message so far.
    ///
    /// The hash itself is not changed: more bytes can be added and `finalize()` called again.
    public func finalize() -> [UInt8] {
        var copy = self
        let bitLength = length &* 8
        // Padding (FIPS 180-4 §5.1.1): a 1 bit, zeros to 56 mod 64 bytes, the 64-bit length.
        var tail: [UInt8] = [0x80]
        let used = (copy.pending.count + 1) % 64
        tail.append(contentsOf: repeatElement(0, count: (56 - used + 64) % 64))
        for shift in stride(from: 56, through: 0, by: -8) { tail.append(UInt8(truncatingIfNeeded: bitLength >> shift)) }
        let savedLength = copy.length
        copy.update(tail)
        copy.length = savedLength
        var digest: [UInt8] = []
        digest.reserveCapacity(SHA1.digestLength)
        for word in [copy.h0, copy.h1, copy.h2, copy.h3, copy.h4] {
            for shift in stride(from: 24, through: 0, by: -8) {
                digest.append(UInt8(truncatingIfNeeded: word >> shift))
            }
        }
        return digest
    }

    /// The digest as WARC writes it: `sha1:` and the base32 of the 20 bytes (32 characters).
    public var warcDigest: String { "sha1:" + Base32.encode(finalize()) }

    /// `sha1:BASE32` of `bytes`, the form of `WARC-Block-Digest` and `WARC-Payload-Digest`.
    public static func warcDigest(_ bytes: [UInt8]) -> String {
        var hash = SHA1()
        hash.update(bytes)
        return hash.warcDigest
    }

    /// Processes whole 64-byte blocks (FIPS 180-4 §6.1.2).
    private mutating func compress(_ blocks: UnsafeRawBufferPointer) {
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 80) { w in
            var offset = 0
            while offset + 64 <= blocks.count {
                for t in 0..<16 {
                    w[t] = UInt32(bigEndian: blocks.loadUnaligned(fromByteOffset: offset + 4 * t, as: UInt32.self))
                }
                for t in 16..<80 { w[t] = rotateLeft(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1) }
                var (a, b, c, d, e) = (h0, h1, h2, h3, h4)
                for t in 0..<20 {
                    let temp = rotateLeft(a, 5) &+ ((b & c) | (~b & d)) &+ e &+ 0x5A82_7999 &+ w[t]
                    (e, d, c, b, a) = (d, c, rotateLeft(b, 30), a, temp)
                }
                for t in 20..<40 {
                    let temp = rotateLeft(a, 5) &+ (b ^ c ^ d) &+ e &+ 0x6ED9_EBA1 &+ w[t]
                    (e, d, c, b, a) = (d, c, rotateLeft(b, 30), a, temp)
                }
                for t in 40..<60 {
                    let temp = rotateLeft(a, 5) &+ ((b & c) | (b & d) | (c & d)) &+ e &+ 0x8F1B_BCDC &+ w[t]
                    (e, d, c, b, a) = (d, c, rotateLeft(b, 30), a, temp)
                }
                for t in 60..<80 {
                    let temp = rotateLeft(a, 5) &+ (b ^ c ^ d) &+ e &+ 0xCA62_C1D6 &+ w[t]
                    (e, d, c, b, a) = (d, c, rotateLeft(b, 30), a, temp)
                }
                h0 &+= a
                h1 &+= b
                h2 &+= c
                h3 &+= d
                h4 &+= e
                offset += 64
            }
        }
    }
}

@inline(__always)
private func rotateLeft(_ value: UInt32, _ count: UInt32) -> UInt32 {
    (value << count) | (value >> (32 - count))
}

/// Base32 (RFC 4648 §6): the alphabet `A`–`Z`, `2`–`7`, five bytes to eight characters, `=`
/// padding. WARC digests use it for SHA-1's 20 bytes, which need no padding (32 characters).
@_spi(Fuzzing) public enum Base32 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)

    /// The base32 text of `bytes`, uppercase, padded with `=` to a multiple of 8 characters.
    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 4) / 5 * 8)
        var index = 0
        while index < bytes.count {
            let group = bytes[index..<min(index + 5, bytes.count)]
            var bits: UInt64 = 0
            for (position, byte) in group.enumerated() { bits |= UInt64(byte) << UInt64(32 - 8 * position) }
            // 1, 2, 3, 4, 5 bytes give 2, 4, 5, 7, 8 significant characters.
            let characters = [0, 2, 4, 5, 7, 8][group.count]
            for position in 0..<8 {
                if position < characters {
                    out.append(alphabet[Int((bits >> UInt64(35 - 5 * position)) & 0x1F)])
                } else {
                    out.append(UInt8(ascii: "="))
                }
            }
            index += 5
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes of base32 `text` (either case; `=` padding optional), or nil when it is not
    /// base32.
    public static func decode(_ text: String) -> [UInt8]? {
        var values: [UInt8] = []
        var sawPadding = false
        for character in text.utf8 {
            if character == UInt8(ascii: "=") {
                sawPadding = true
                continue
            }
            if sawPadding { return nil }
            switch character {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): values.append(character - UInt8(ascii: "A"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): values.append(character - UInt8(ascii: "a"))
            case UInt8(ascii: "2")...UInt8(ascii: "7"): values.append(character - UInt8(ascii: "2") + 26)
            default: return nil
            }
        }
        // A final group of 2, 4, 5, 7 or 8 characters makes 1, 2, 3, 4 or 5 bytes.
        guard [0, 2, 4, 5, 7].contains(values.count % 8) else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(values.count * 5 / 8)
        var buffer: UInt32 = 0
        var bitCount = 0
        for value in values {
            buffer = (buffer << 5) | UInt32(value)
            bitCount += 5
            if bitCount >= 8 {
                bitCount -= 8
                out.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bitCount)))
                buffer &= (1 << UInt32(bitCount)) - 1
            }
        }
        // The leftover bits must be zero, or the text was not made by an encoder.
        guard buffer == 0 else { return nil }
        return out
    }
}
