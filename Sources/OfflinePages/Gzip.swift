import CZlibHTTPCache
import CacheZlib
import Foundation

/// gzip (RFC 1952) through zlib, as WARC files use it: each record compressed as a gzip member
/// of its own ("record-at-time compression", ISO 28500 / WARC 1.1 annex "Compression
/// recommendations"), the members concatenated into one `.warc.gz` file.
@_spi(Fuzzing) public enum Gzip {
    /// `bytes` compressed into one complete gzip member (deflate at zlib's default level, gzip
    /// header and CRC-32/length trailer).
    ///
    /// zlib fails only when memory runs out, which traps here as any Swift allocation would.
    public static func compress(_ bytes: [UInt8]) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count + bytes.count / 1000 + 64)
        let member = GzipMember()
        member.add(bytes) { output.append(contentsOf: $0) }
        member.finish { output.append(contentsOf: $0) }
        return output
    }
}

/// One gzip member (RFC 1952) made from input given in pieces, its compressed bytes handed out
/// as they are made: what a record too large to hold in memory whole is written with. Memory
/// stays zlib's own (about 256 KiB) plus one output buffer, whatever the input's size.
///
/// zlib fails only when memory runs out, which traps here as any Swift allocation would.
final class GzipMember {
    private let stream: UnsafeMutablePointer<z_stream>
    private var output = [UInt8](repeating: 0, count: 64 << 10)

    init() {
        stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        stream.initialize(to: z_stream())
        let initialized = httpcache_deflate_init_gzip(stream, Z_DEFAULT_COMPRESSION)
        precondition(initialized == Z_OK, "zlib's deflateInit2 failed (\(initialized)): out of memory")
    }

    deinit {
        deflateEnd(stream)
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    /// Compresses `bytes`, handing `sink` what zlib has made of them so far (maybe nothing).
    func add<E: Error>(_ bytes: [UInt8], to sink: ([UInt8]) throws(E) -> Void) throws(E) {
        try deflate(bytes, flush: Z_NO_FLUSH, to: sink)
    }

    /// Ends the member: the rest of the compressed bytes and the CRC-32/length trailer go to
    /// `sink`. Nothing may be added after.
    func finish<E: Error>(to sink: ([UInt8]) throws(E) -> Void) throws(E) {
        try deflate([], flush: Z_FINISH, to: sink)
    }

    private func deflate<E: Error>(_ bytes: [UInt8], flush: Int32, to sink: ([UInt8]) throws(E) -> Void) throws(E) {
        // zlib counts in 32-bit quantities: at most 1 GiB is given to it at a time.
        let piece = 1 << 30
        var consumed = 0
        while true {
            let inputCount = min(bytes.count - consumed, piece)
            let last = consumed + inputCount == bytes.count
            let (result, produced) = bytes.withUnsafeBytes { input in
                output.withUnsafeMutableBytes { out in
                    let next = input.baseAddress.map { $0.advanced(by: consumed).assumingMemoryBound(to: Bytef.self) }
                    stream.pointee.next_in = next.map { UnsafeMutablePointer(mutating: $0) }
                    stream.pointee.avail_in = uInt(inputCount)
                    stream.pointee.next_out = out.baseAddress!.assumingMemoryBound(to: Bytef.self)
                    stream.pointee.avail_out = uInt(out.count)
                    let result = CZlibHTTPCache.deflate(stream, last ? flush : Z_NO_FLUSH)
                    consumed += inputCount - Int(stream.pointee.avail_in)
                    let produced = out.count - Int(stream.pointee.avail_out)
                    // Leave no pointer into Swift memory behind in the stream.
                    stream.pointee.next_in = nil
                    stream.pointee.next_out = nil
                    return (result, produced)
                }
            }
            if produced > 0 { try sink(Array(output[..<produced])) }
            switch result {
            case Z_STREAM_END: return
            case Z_OK, Z_BUF_ERROR:
                // Without finishing, done once the input is all taken and zlib left output space
                // unused (what it holds back comes with later input or the finish); finishing
                // goes on until the member's end.
                if flush == Z_NO_FLUSH, consumed == bytes.count, produced < output.count { return }
            default: preconditionFailure("zlib's deflate failed (\(result))")
            }
        }
    }
}

/// A failure to read a gzip file: where (the compressed offset of the member being read), what,
/// and what to do.
public struct GzipError: Error, CustomStringConvertible, Sendable, Hashable {
    /// What went wrong.
    public enum Kind: Sendable, Hashable {
        /// The file ends inside a member.
        case truncated
        /// A member is not valid gzip/deflate data, or fails its CRC-32 or length check.
        case corrupt
        /// The file could not be opened or read.
        case unreadable
    }

    /// What went wrong.
    public var kind: Kind
    /// The byte offset in the file where the member that failed starts (for `unreadable`, where
    /// reading was).
    public var memberOffset: Int64
    /// What happened and what to do.
    public var message: String

    /// Creates an error.
    public init(kind: Kind, memberOffset: Int64, message: String) {
        self.kind = kind
        self.memberOffset = memberOffset
        self.message = message
    }

    public var description: String { "gzip member at offset \(memberOffset): \(message)" }
}

/// Decompressed bytes from one gzip member, as `GzipFileReader.read(maxLength:)` returns them.
@_spi(Fuzzing) public struct GzipChunk: Sendable, Hashable {
    /// The decompressed bytes (empty only for a member that decompresses to nothing).
    public var bytes: [UInt8]
    /// The byte offset in the compressed file where the member these bytes belong to starts.
    public var memberOffset: Int64
    /// Whether these are the first bytes of their member.
    public var startsMember: Bool
    /// Whether the member ends with these bytes (its CRC-32 and length were checked).
    public var endsMember: Bool

    /// Creates a chunk.
    public init(bytes: [UInt8], memberOffset: Int64, startsMember: Bool, endsMember: Bool) {
        self.bytes = bytes
        self.memberOffset = memberOffset
        self.startsMember = startsMember
        self.endsMember = endsMember
    }
}

/// A streaming decompressor of a gzip file of any number of members (RFC 1952 §2.2: "a gzip file
/// consists of a series of members"), reading the file in 64 KiB pieces: it never holds more
/// than one piece of input and one chunk of output.
///
/// Each chunk comes from a single member and says at which compressed offset that member starts,
/// so a `.warc.gz` with one member per record yields each record's offset, and errors name the
/// member that failed. A file that is one member holding everything works the same way.
///
/// Not thread-safe: use one reader from one task at a time.
@_spi(Fuzzing) public final class GzipFileReader {
    let input: WARCFileInput
    private let inflater: ZlibInflater
    private var currentMemberOffset: Int64 = 0
    private var insideMember = false

    /// Opens the gzip file at `path`.
    public convenience init(path: String) throws(GzipError) {
        let input: WARCFileInput
        do { input = try WARCFileInput(path: path) } catch {
            throw GzipError(kind: .unreadable, memberOffset: 0, message: error.message)
        }
        try self.init(input: input)
    }

    /// Decompresses `input` from its current position (which must be a member's start).
    init(input: WARCFileInput) throws(GzipError) {
        self.input = input
        do {
            // A gzip member (RFC 1952): zlib checks its header, CRC-32 and length.
            inflater = try ZlibInflater(windowBits: 15 + 16)
        } catch {
            throw GzipError(
                kind: .unreadable, memberOffset: input.position,
                message: "zlib could not start decompressing (inflateInit2 returned \(error.result)): out of memory")
        }
    }

    /// Whether a member has started and its end (with its CRC-32 check) has not been reached.
    public var isInsideMember: Bool { insideMember }

    /// The compressed offset of the member being read, or of the last one read.
    public var memberOffset: Int64 { currentMemberOffset }

    /// Up to `maxLength` more decompressed bytes, all from one member, or nil at the end of the
    /// file (which must fall between members).
    ///
    /// A chunk stops at its member's end, so the next one starts the next member. Throws
    /// `GzipError` when the file ends inside a member (`truncated`), when a member is not valid
    /// gzip data or fails its checks (`corrupt`), or when reading fails; every error names the
    /// offset of the member that failed.
    public func read(maxLength: Int = 65_536) throws(GzipError) -> GzipChunk? {
        precondition(maxLength > 0, "maxLength must be positive")
        var startsMember = false
        if !insideMember {
            if input.available == 0 {
                guard try refill() else { return nil }
            }
            currentMemberOffset = input.position
            guard inflater.reset() else {
                throw GzipError(
                    kind: .corrupt, memberOffset: currentMemberOffset,
                    message: "zlib could not restart for a new member")
            }
            insideMember = true
            startsMember = true
        }
        var output = [UInt8](repeating: 0, count: maxLength)
        var produced = 0
        var ended = false
        while produced < maxLength && !ended {
            if input.available == 0 {
                guard try refill() else {
                    throw GzipError(
                        kind: .truncated, memberOffset: currentMemberOffset,
                        message: "truncated: the file ends inside this gzip member (at offset \(input.position))"
                            + " — the file was cut short (an interrupted download or copy?); get a complete copy")
                }
            }
            let step = input.buffer.withUnsafeBytes { inputBytes in
                output.withUnsafeMutableBytes { outputBytes in
                    inflater.inflate(
                        UnsafeRawBufferPointer(rebasing: inputBytes[input.start...]),
                        into: UnsafeMutableRawBufferPointer(rebasing: outputBytes[produced...]))
                }
            }
            input.start += step.consumed
            produced += step.produced
            switch step.status {
            case .streamEnd:
                ended = true
            case .progress:
                continue
            case .stalled where step.consumed > 0 || step.produced > 0 || input.available == 0:
                continue
            case .stalled, .outOfMemory, .corrupt:
                throw GzipError(
                    kind: .corrupt, memberOffset: currentMemberOffset,
                    message:
                        "corrupt gzip data (zlib: \(step.status)) — the file is damaged or not gzip from this member"
                        + " on; get an intact copy")
            }
        }
        if ended { insideMember = false }
        output.removeSubrange(produced...)
        return GzipChunk(
            bytes: output, memberOffset: currentMemberOffset, startsMember: startsMember, endsMember: ended)
    }

    private func refill() throws(GzipError) -> Bool {
        do { return try input.refill() } catch {
            throw GzipError(kind: .unreadable, memberOffset: currentMemberOffset, message: error.message)
        }
    }
}

/// A file read in 64 KiB pieces, with the file offset of what is buffered.
final class WARCFileInput {
    /// A failure to open or read the file.
    struct Failure: Error {
        var message: String
    }

    static let pieceSize = 65_536

    private let handle: FileHandle
    /// Buffered bytes; `buffer[start...]` are not consumed yet.
    var buffer: [UInt8] = []
    var start = 0
    /// The file offset of `buffer[0]`.
    private var bufferOffset: Int64 = 0
    private var atEnd = false

    init(path: String) throws(Failure) {
        do {
            handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        } catch {
            throw Failure(
                message: "could not open \(path): \(error.localizedDescription) — check the path and permissions")
        }
    }

    deinit { try? handle.close() }

    /// Buffered bytes not consumed yet.
    var available: Int { buffer.count - start }

    /// The file offset of the next unconsumed byte.
    var position: Int64 { bufferOffset + Int64(start) }

    /// Reads the next piece of the file after what is buffered (keeping unconsumed bytes);
    /// false at the end of the file.
    func refill() throws(Failure) -> Bool {
        if atEnd { return false }
        let data: Data?
        do { data = try handle.read(upToCount: WARCFileInput.pieceSize) } catch {
            throw Failure(
                message: "could not read the file at offset \(bufferOffset + Int64(buffer.count)): "
                    + "\(error.localizedDescription) — check the disk and try again")
        }
        guard let data, !data.isEmpty else {
            atEnd = true
            return false
        }
        if start > 0 {
            bufferOffset += Int64(start)
            buffer.removeSubrange(0..<start)
            start = 0
        }
        buffer.append(contentsOf: data)
        return true
    }
}
