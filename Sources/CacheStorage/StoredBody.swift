#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A stored body opened for reading (``CacheStore/openBody(of:)``).
///
/// Every read sees the version of the body that was stored when it was opened, even when the
/// entry is replaced or removed meanwhile (by this process or another): a response that has
/// started going out is served whole, never cut off and never spliced with a newer version.
/// A disk body keeps its file open (an unlinked file stays readable until it is closed); a
/// body in memory keeps its bytes.
///
/// ```swift
/// let body = try store.openBody(of: entry.id)
/// var offset: Int64 = 0
/// while offset < body.size {
///     let chunk = try body.read(offset...min(body.size - 1, offset + 65_535))
///     send(chunk)
///     offset += Int64(chunk.count)
/// }
/// ```
public protocol StoredBody: AnyObject, Sendable {
    /// The body's length in bytes.
    var size: Int64 { get }
    /// Bytes `range` (offsets inclusive, clamped to the body), each block verified against
    /// its checksum. A block that does not match throws ``StorageError/Kind/corrupted`` and the
    /// store removes the entry.
    func read(_ range: ClosedRange<Int64>) throws(StorageError) -> [UInt8]
}

extension StoredBody {
    /// The whole body.
    public func readAll() throws(StorageError) -> [UInt8] {
        size == 0 ? [] : try read(0...(size - 1))
    }

    /// The body in chunks of up to 1 MiB (16 checksum blocks), each verified before it is
    /// handed out (one empty chunk for an empty body); `chunk` returns `false` to stop early.
    /// Its memory is one chunk's, whatever the body's size.
    public func stream(_ chunk: ([UInt8]) throws -> Bool) throws {
        var offset: Int64 = 0
        repeat {
            let bytes = try read(offset...(offset + Int64(streamChunkSize) - 1))
            guard try chunk(bytes), !bytes.isEmpty else { return }
            offset += Int64(bytes.count)
        } while offset < size
    }

    /// Appends bytes `range` of this body to `writer`, read in chunks of ``streamChunkSize``
    /// (a stored entry written again, or parts of one combined).
    package func copy(_ range: ClosedRange<Int64>, to writer: any EntryWriter) throws(StorageError) {
        var next = range.lowerBound
        while next <= range.upperBound {
            let bytes = try read(next...min(range.upperBound, next + Int64(streamChunkSize) - 1))
            guard !bytes.isEmpty else { return }  // past the end of the body
            try writer.append(bytes)
            next += Int64(bytes.count)
        }
    }
}

extension StoredBody {
    /// The whole body, taken without a copy, when its bytes are already in memory (the memory
    /// tier's bodies, small ones read from the index); `nil` for a body read from a file or
    /// another server as it is asked for.
    package var bytesInMemory: [UInt8]? { (self as? BytesBody)?.bytes }
}

/// A body whose bytes are in memory (the memory tier, or a small body inline in the index).
final class BytesBody: StoredBody {
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var size: Int64 { Int64(bytes.count) }

    func read(_ range: ClosedRange<Int64>) throws(StorageError) -> [UInt8] {
        let lower = Int(clamping: max(0, range.lowerBound))
        let upper = Int(clamping: min(range.upperBound, Int64(bytes.count) - 1))
        guard lower <= upper else { return [] }
        return lower == 0 && upper == bytes.count - 1 ? bytes : Array(bytes[lower...upper])
    }
}

/// A body in a file of the disk store, opened once and read with `pread`; each
/// ``checksumBlockSize`` block is verified (or, in an encrypted store, opened: ``BodySealing``)
/// before it is handed out, and a range reads only the blocks that cover it.
final class FileBody: StoredBody {
    /// How a body's blocks are checked.
    enum Blocks: Sendable {
        /// Against these checksums (``BlockChecksums``).
        case checksummed([UInt8])
        /// Sealed for `owner`: a block that does not authenticate is never handed out.
        case sealed(BodySealing, owner: [UInt8])
    }

    let size: Int64
    private let descriptor: Int32
    private let path: String
    private let blocks: Blocks
    /// Describes a corruption for the caller and removes the entry.
    private let corrupted: @Sendable (String) -> StorageError

    /// Takes ownership of `descriptor`, which it closes when released.
    init(
        descriptor: Int32, path: String, size: Int64, blocks: Blocks,
        corrupted: @escaping @Sendable (String) -> StorageError
    ) {
        self.descriptor = descriptor
        self.path = path
        self.size = size
        self.blocks = blocks
        self.corrupted = corrupted
    }

    deinit { close(descriptor) }

    func read(_ range: ClosedRange<Int64>) throws(StorageError) -> [UInt8] {
        let lower = max(0, range.lowerBound)
        let upper = min(range.upperBound, size - 1)
        guard lower <= upper else { return [] }
        let block = Int64(checksumBlockSize)
        let covering = Int(lower / block)...Int(upper / block)
        let (start, end): (Int64, Int64)
        switch blocks {
        case .checksummed:
            (start, end) = (Int64(covering.lowerBound) * block, min(size, Int64(covering.upperBound + 1) * block))
        case .sealed:
            start = BodySealing.sealedOffset(ofBlock: covering.lowerBound)
            end = min(BodySealing.sealedSize(size), BodySealing.sealedOffset(ofBlock: covering.upperBound + 1))
        }
        var bytes: [UInt8]
        do {
            bytes = try FileIO.read(descriptor, count: Int(end - start), at: start, path: path)
        } catch  where error.kind == .corrupted {
            throw corrupted(error.message)
        }
        switch blocks {
        case .checksummed(let checksums):
            try BlockChecksums.verify(bytes, blocks: covering, against: checksums, corrupted)
        case .sealed(let sealing, let owner):
            switch bytes.withUnsafeBytes({ sealing.open($0, blocks: covering, size: size, owner: owner) }) {
            case .success(let opened): bytes = opened
            case .failure(let failure):
                throw corrupted(
                    "block \(failure.block) does not authenticate: altered, moved or sealed with another key")
            }
        }
        let offset = Int(lower - Int64(covering.lowerBound) * block)
        let count = Int(upper - lower) + 1
        return offset == 0 && count == bytes.count ? bytes : Array(bytes[offset..<(offset + count)])
    }
}
