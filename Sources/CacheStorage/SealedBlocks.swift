import CacheCrypto
import CacheSemantics

/// Bodies sealed in AES-256-GCM blocks: each ``blockSize`` bytes of plaintext (the last block
/// shorter, an empty body one empty block) become a random 12-byte nonce, the ciphertext and
/// the 16-byte tag. What each block authenticates besides its bytes (``additionalData(owner:block:isLast:)``)
/// binds it to its entry, its position and whether it ends the body, so a block cut off,
/// moved, or copied from another entry or another place in this one never opens.
package struct BodySealing: Sendable {
    let key: SymmetricKey

    /// Plaintext bytes per block: the checksum blocks' size, so a range reads the same blocks.
    package static let blockSize = checksumBlockSize
    /// What sealing adds to each block: its nonce and its tag.
    package static let overhead = AESGCM.overhead

    package init(key: SymmetricKey) { self.key = key }

    /// The blocks of a body of `size` bytes (an empty body has one).
    package static func blockCount(_ size: Int64) -> Int {
        max(1, Int((size + Int64(blockSize) - 1) / Int64(blockSize)))
    }

    /// The bytes a body of `size` bytes takes sealed.
    package static func sealedSize(_ size: Int64) -> Int64 { size + Int64(blockCount(size) * overhead) }

    /// Where block `block` starts in the sealed body.
    static func sealedOffset(ofBlock block: Int) -> Int64 { Int64(block) * Int64(blockSize + overhead) }

    /// The bytes block `block` of a body of `size` bytes holds in plaintext.
    static func plaintextCount(ofBlock block: Int, size: Int64) -> Int {
        Int(min(Int64(blockSize), size - Int64(block) * Int64(blockSize)))
    }

    /// The owner (an entry's identity or key name), the block's index (8 bytes, big-endian)
    /// and 1 when it is the body's last block.
    static func additionalData(owner: [UInt8], block: Int, isLast: Bool) -> [UInt8] {
        var data = owner
        withUnsafeBytes(of: UInt64(block).bigEndian) { data += $0 }
        data.append(isLast ? 1 : 0)
        return data
    }

    /// Block `block` of `owner`'s body, sealed: nonce, ciphertext, tag.
    func seal(_ plaintext: UnsafeRawBufferPointer, owner: [UInt8], block: Int, isLast: Bool) -> [UInt8] {
        Self.additionalData(owner: owner, block: block, isLast: isLast).withUnsafeBytes { aad in
            AESGCM.seal(plaintext, key: key, authenticating: aad)
        }
    }

    /// Opens blocks `blocks` of `owner`'s body of `size` bytes from `sealed`, which holds exactly
    /// those blocks as ``seal(_:owner:block:isLast:)`` wrote them, one after another.
    /// - Returns: The plaintext, or the first block that does not open.
    package func open(
        _ sealed: UnsafeRawBufferPointer, blocks: ClosedRange<Int>, size: Int64, owner: [UInt8]
    ) -> Result<[UInt8], BlockFailure> {
        let last = Self.blockCount(size) - 1
        guard size >= 0, blocks.lowerBound >= 0, blocks.upperBound <= last else {
            return .failure(BlockFailure(block: last + 1))
        }
        // Every block opens straight into its place in the plaintext: one buffer, no copy per block.
        let start = Int64(blocks.lowerBound) * Int64(Self.blockSize)
        let end = min(size, Int64(blocks.upperBound + 1) * Int64(Self.blockSize))
        var failed: Int?
        var input = 0
        let plaintext = [UInt8](unsafeUninitializedCapacity: max(1, Int(end - start))) { buffer, initialized in
            var output = 0
            for block in blocks {
                let count = Self.plaintextCount(ofBlock: block, size: size)
                guard input + count + Self.overhead <= sealed.count else {
                    failed = block
                    break
                }
                let box = UnsafeRawBufferPointer(rebasing: sealed[input..<(input + count + Self.overhead)])
                let room = UnsafeMutableRawBufferPointer(
                    UnsafeMutableBufferPointer(rebasing: buffer[output..<(output + count)]))
                let opened = Self.additionalData(owner: owner, block: block, isLast: block == last).withUnsafeBytes {
                    aad in AESGCM.open(box, key: key, authenticating: aad, into: room)
                }
                guard opened else {
                    failed = block
                    break
                }
                input += count + Self.overhead
                output += count
            }
            // Nothing of a body with a block that does not authenticate is handed out.
            initialized = failed == nil ? output : 0
        }
        if let failed { return .failure(BlockFailure(block: failed)) }
        // Bytes left over after the last block: the body does not end where it should.
        guard input == sealed.count else { return .failure(BlockFailure(block: blocks.upperBound)) }
        return .success(plaintext)
    }

    /// The whole body sealed in `sealed` (``BlockSealer``'s output), `nil` when any block
    /// does not open or bytes are missing or left over.
    package func openAll(_ sealed: [UInt8], size: Int64, owner: [UInt8]) -> [UInt8]? {
        guard size >= 0, Self.sealedSize(size) == Int64(sealed.count) else { return nil }
        return sealed.withUnsafeBytes { bytes in
            try? open(bytes, blocks: 0...(Self.blockCount(size) - 1), size: size, owner: owner).get()
        }
    }
}

/// A sealed block that did not authenticate: altered, cut short, moved, from another entry,
/// or sealed under another key.
package struct BlockFailure: Error {
    /// The block's index.
    package var block: Int
}

/// Seals a body that arrives in chunks, block by block. The last block is known only at
/// ``finish()``, so up to one whole block is held back.
package struct BlockSealer {
    private let sealing: BodySealing
    private let owner: [UInt8]
    private var pending: [UInt8] = []
    private var next = 0
    /// The plaintext bytes added so far.
    package private(set) var totalBytes: Int64 = 0

    package init(_ sealing: BodySealing, owner: [UInt8]) {
        self.sealing = sealing
        self.owner = owner
    }

    /// Adds `bytes`; returns the blocks now sealed (none while at most one block is pending).
    package mutating func add(_ bytes: [UInt8]) -> [UInt8] {
        totalBytes += Int64(bytes.count)
        pending += bytes
        var sealed: [UInt8] = []
        var offset = 0
        while pending.count - offset > BodySealing.blockSize {
            sealed += pending.withUnsafeBytes { buffer in
                sealing.seal(
                    UnsafeRawBufferPointer(rebasing: buffer[offset..<(offset + BodySealing.blockSize)]), owner: owner,
                    block: next, isLast: false)
            }
            next += 1
            offset += BodySealing.blockSize
        }
        if offset > 0 { pending.removeFirst(offset) }
        return sealed
    }

    /// Seals what is pending as the last block.
    package mutating func finish() -> [UInt8] {
        defer { pending = [] }
        return pending.withUnsafeBytes { sealing.seal($0, owner: owner, block: next, isLast: true) }
    }

    /// All of `body` sealed at once.
    package static func seal(_ body: [UInt8], _ sealing: BodySealing, owner: [UInt8]) -> [UInt8] {
        var sealer = BlockSealer(sealing, owner: owner)
        return sealer.add(body) + sealer.finish()
    }
}

/// What a disk store seals with, derived from its ``EncryptionKey``: bodies, the index's heads,
/// and the keyed hashes its lookups go by.
struct StoreSealing: Sendable {
    let body: BodySealing
    let index: SymmetricKey
    let lookup: SymmetricKey

    init(_ key: EncryptionKey) {
        body = BodySealing(key: key.key.derived("body"))
        index = key.key.derived("index")
        lookup = key.key.derived("hmac")
    }

    /// The index's column value for `text` of kind `kind` (one letter, so a primary key and a
    /// tag with the same text differ): HMAC-SHA-256 in hex.
    func lookupKey(_ kind: Character, _ text: String) -> String {
        hex(lookup.authenticationCode(Array("\(kind)\0\(text)".utf8)))
    }

    /// The row's sealed head: nonce, then everything ``EntryHead`` holds sealed, bound to `id`.
    func seal(_ head: EntryHead, id: EntryID) -> [UInt8] {
        var plain: [UInt8] = []
        for part in [
            Array(head.primaryKey.utf8), Array(head.variantKey.utf8), Array(head.url.utf8), head.fields.serialized(),
            head.facts, head.userInfo ?? [], DiskStore.serialized(tags: head.tags),
        ] {
            appendLength(part.count, to: &plain)
            plain += part
        }
        appendLength(head.status, to: &plain)
        plain += [head.storagePolicy.rawValue, head.isComplete ? 1 : 0, head.userInfo == nil ? 0 : 1]
        let aad = Array("head \(id.rawValue)".utf8)
        return plain.withUnsafeBytes { plain in
            aad.withUnsafeBytes { AESGCM.seal(plain, key: index, authenticating: $0) }
        }
    }

    /// The head sealed in `sealed` for `id`; `nil` when it does not open or does not decode.
    func openHead(_ sealed: [UInt8], id: EntryID) -> EntryHead? {
        let aad = Array("head \(id.rawValue)".utf8)
        guard
            let plain = sealed.withUnsafeBytes({ box in
                aad.withUnsafeBytes { AESGCM.open(box, key: index, authenticating: $0) }
            })
        else { return nil }
        var offset = 0
        func length() -> Int? {
            guard offset + 4 <= plain.count else { return nil }
            defer { offset += 4 }
            return plain[offset..<(offset + 4)].reduce(0) { $0 << 8 | Int($1) }
        }
        var parts: [[UInt8]] = []
        for _ in 0..<7 {
            guard let count = length(), offset + count <= plain.count else { return nil }
            parts.append(Array(plain[offset..<(offset + count)]))
            offset += count
        }
        guard let status = length(), offset + 3 == plain.count, let fields = HeaderFields(serialized: parts[3]),
            let policy = StoragePolicy(rawValue: plain[offset])
        else { return nil }
        return EntryHead(
            primaryKey: String(decoding: parts[0], as: UTF8.self),
            variantKey: String(decoding: parts[1], as: UTF8.self),
            url: String(decoding: parts[2], as: UTF8.self), status: status, fields: fields, facts: parts[4],
            storagePolicy: policy, userInfo: plain[offset + 2] == 1 ? parts[5] : nil,
            isComplete: plain[offset + 1] == 1,
            tags: DiskStore.tags(serialized: parts[6]))
    }

    private func appendLength(_ count: Int, to bytes: inout [UInt8]) {
        let value = UInt32(clamping: count)
        bytes += [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    private func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes { text += [digits[Int(byte >> 4)], digits[Int(byte & 0xF)]] }
        return String(decoding: text, as: UTF8.self)
    }
}
