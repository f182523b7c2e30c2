/// CRC-32C (Castagnoli, the iSCSI polynomial 0x1EDC6F41, reflected 0x82F63B78), computed
/// with slicing-by-8 tables. Used to verify every stored body block before it is handed out.
struct CRC32C {
    private static let tables: [[UInt32]] = {
        var tables = [[UInt32]](repeating: [UInt32](repeating: 0, count: 256), count: 8)
        for byte in 0..<256 {
            var crc = UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
            tables[0][byte] = crc
        }
        for byte in 0..<256 {
            for slice in 1..<8 {
                let previous = tables[slice - 1][byte]
                tables[slice][byte] = (previous >> 8) ^ tables[0][Int(previous & 0xFF)]
            }
        }
        return tables
    }()

    /// The running value; ``value`` is the checksum so far.
    private var state: UInt32 = 0xFFFF_FFFF

    /// The checksum of everything added so far.
    var value: UInt32 { state ^ 0xFFFF_FFFF }

    /// Adds `bytes`.
    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        var crc = state
        var index = 0
        let count = bytes.count
        Self.tables.withUnsafeBufferPointer { tables in
            let t0 = tables[0], t1 = tables[1], t2 = tables[2], t3 = tables[3]
            let t4 = tables[4], t5 = tables[5], t6 = tables[6], t7 = tables[7]
            while count - index >= 8 {
                let low =
                    crc
                    ^ (UInt32(bytes[index]) | UInt32(bytes[index + 1]) << 8
                        | UInt32(bytes[index + 2]) << 16 | UInt32(bytes[index + 3]) << 24)
                let high =
                    UInt32(bytes[index + 4]) | UInt32(bytes[index + 5]) << 8
                    | UInt32(bytes[index + 6]) << 16 | UInt32(bytes[index + 7]) << 24
                crc =
                    t7[Int(low & 0xFF)] ^ t6[Int((low >> 8) & 0xFF)] ^ t5[Int((low >> 16) & 0xFF)]
                    ^ t4[Int(low >> 24)] ^ t3[Int(high & 0xFF)] ^ t2[Int((high >> 8) & 0xFF)]
                    ^ t1[Int((high >> 16) & 0xFF)] ^ t0[Int(high >> 24)]
                index += 8
            }
            while index < count {
                crc = (crc >> 8) ^ t0[Int((crc ^ UInt32(bytes[index])) & 0xFF)]
                index += 1
            }
        }
        state = crc
    }

    /// Adds `bytes`.
    mutating func update(_ bytes: some Collection<UInt8>) {
        if let done: Void = bytes.withContiguousStorageIfAvailable({ update(UnsafeRawBufferPointer($0)) }) {
            return done
        }
        Array(bytes).withUnsafeBytes { update($0) }
    }

    /// The checksum of `bytes`.
    static func checksum(_ bytes: some Collection<UInt8>) -> UInt32 {
        var crc = CRC32C()
        crc.update(bytes)
        return crc.value
    }
}

/// Bodies are checksummed in blocks of this many bytes, so a range or a stream can be
/// verified without reading the whole body.
let checksumBlockSize = 64 * 1024

/// Per-block checksums of a body being written.
struct BlockChecksums {
    private(set) var blocks: [UInt32] = []
    private var current = CRC32C()
    private var filled = 0
    private(set) var totalBytes: Int64 = 0

    mutating func add(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let take = min(checksumBlockSize - filled, bytes.count - offset)
            current.update(bytes[offset..<(offset + take)])
            filled += take
            offset += take
            if filled == checksumBlockSize {
                blocks.append(current.value)
                current = CRC32C()
                filled = 0
            }
        }
        totalBytes += Int64(bytes.count)
    }

    /// The checksums, with the last partial block closed. Four little-endian bytes each.
    func finished() -> [UInt8] {
        var all = blocks
        if filled > 0 || all.isEmpty { all.append(current.value) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(all.count * 4)
        for value in all { withUnsafeBytes(of: value.littleEndian) { bytes += $0 } }
        return bytes
    }

    /// The checksum of block `index` from bytes written by ``finished()``.
    static func value(at index: Int, in bytes: [UInt8]) -> UInt32? {
        let start = index * 4
        guard start + 4 <= bytes.count else { return nil }
        return UInt32(bytes[start]) | UInt32(bytes[start + 1]) << 8 | UInt32(bytes[start + 2]) << 16
            | UInt32(bytes[start + 3]) << 24
    }
}
