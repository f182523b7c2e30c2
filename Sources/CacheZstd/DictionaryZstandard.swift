import CZstdHTTPCache

/// Why Zstandard could not compress or decompress: libzstd's error name, or what was wrong
/// with the `dcz` framing.
package struct ZstdError: Error, Sendable, Equatable, CustomStringConvertible {
    package var description: String

    package init(_ description: String) { self.description = description }

    /// The error of a libzstd result that `ZSTD_isError` says is one; `nil` otherwise.
    static func check(_ result: Int, _ what: String) -> ZstdError? {
        guard ZSTD_isError(result) != 0 else { return nil }
        return ZstdError("\(what): \(String(cString: ZSTD_getErrorName(result)))")
    }
}

/// The `dcz` content coding, Dictionary-Compressed Zstandard (RFC 9842 §5): a Zstandard frame
/// (RFC 8878) made with the whole dictionary as a raw-content prefix, after a 40-byte header
/// that names the dictionary: a skippable frame's 8 bytes (`5e 2a 4d 18 20 00 00 00`: magic
/// `0x184D2A5E`, 32 bytes of content) and the dictionary's SHA-256.
package enum DictionaryZstandard {
    /// The first 8 bytes of every `dcz` body (RFC 9842 §5).
    package static let magic: [UInt8] = [0x5e, 0x2a, 0x4d, 0x18, 0x20, 0x00, 0x00, 0x00]
    /// The magic and the 32-byte hash.
    package static let headerSize = 40

    /// The largest window a `dcz` body may need (RFC 9842 §5): 8 MiB or 1.25 times the
    /// dictionary, whichever is greater, and at most 128 MiB.
    package static func windowLimit(dictionarySize: Int) -> Int {
        min(128 << 20, max(8 << 20, dictionarySize + dictionarySize / 4))
    }

    /// The base-2 logarithm of the largest power of two within ``windowLimit(dictionarySize:)``:
    /// the window the compressor uses and the decoder accepts.
    static func windowLog(dictionarySize: Int) -> Int32 {
        let limit = windowLimit(dictionarySize: dictionarySize)
        return Int32(Int.bitWidth - 1 - limit.leadingZeroBitCount)
    }

    /// `content` as a `dcz` body: the header naming `dictionary` by `hash` (its SHA-256), then
    /// one frame compressed at `level` with `dictionary` as its prefix, a window as large as
    /// RFC 9842 §5 lets a client be asked for (so all of a dictionary up to 6.4 MiB is in reach,
    /// and more of a larger one), and a content checksum.
    /// - Throws: ``ZstdError`` when libzstd fails (out of memory).
    package static func compress(
        _ content: [UInt8], dictionary: [UInt8], hash: [UInt8], level: Int32 = 19
    ) throws(ZstdError) -> [UInt8] {
        precondition(hash.count == 32, "a dcz header holds a SHA-256 hash")
        guard let context = ZSTD_createCCtx() else { throw ZstdError("libzstd could not make a compression context") }
        defer { ZSTD_freeCCtx(context) }
        let parameters: [(ZSTD_cParameter, Int32)] = [
            (ZSTD_c_compressionLevel, level),
            (ZSTD_c_windowLog, windowLog(dictionarySize: dictionary.count)),
            (ZSTD_c_checksumFlag, 1),
        ]
        for (parameter, value) in parameters {
            if let error = ZstdError.check(ZSTD_CCtx_setParameter(context, parameter, value), "setting \(parameter)") {
                throw error
            }
        }
        let bound = ZSTD_compressBound(content.count)
        var output = [UInt8](repeating: 0, count: headerSize + bound)
        output.replaceSubrange(0..<magic.count, with: magic)
        output.replaceSubrange(magic.count..<headerSize, with: hash)
        // The prefix is referenced for the next frame only (zstd.h, ZSTD_CCtx_refPrefix).
        let written = dictionary.withUnsafeBytes { prefix in
            content.withUnsafeBytes { source in
                output.withUnsafeMutableBytes { destination in
                    let referenced = ZSTD_CCtx_refPrefix(context, prefix.baseAddress, prefix.count)
                    guard ZSTD_isError(referenced) == 0 else { return referenced }
                    return ZSTD_compress2(
                        context, destination.baseAddress! + headerSize, bound, source.baseAddress, source.count)
                }
            }
        }
        if let error = ZstdError.check(written, "compressing with the dictionary") { throw error }
        output.removeLast(bound - written)
        return output
    }
}

/// Decodes a `dcz` body as it streams (RFC 9842 §5): checks the header against the dictionary's
/// hash, then decompresses with the dictionary as prefix, handing on pieces of at most
/// `pieceSize` bytes, with a window no larger than the power of two at or above the limit of
/// RFC 9842 §5 (a body that needs more is refused, as §5 permits). A body is whole only if one frame ended exactly at its end.
///
/// Not thread-safe: one decoder per body.
package final class DictionaryZstandardDecoder {
    /// What was wrong with the body.
    package enum Failure: Error, Sendable, Equatable {
        /// Not a `dcz` body for this dictionary, or corrupt; the text says how.
        case corrupt(String)
        /// It ended inside the header or the frame.
        case truncated
    }

    private let context: OpaquePointer
    private let dictionary: [UInt8]
    private let hash: [UInt8]
    private var header: [UInt8] = []
    private let buffer: UnsafeMutableRawBufferPointer
    /// Whether the frame ended (then no byte may follow).
    private var ended = false

    /// A decoder for a body compressed with `dictionary`, whose SHA-256 is `hash`.
    package init(dictionary: [UInt8], hash: [UInt8], pieceSize: Int = 64 * 1024) throws(ZstdError) {
        guard let context = ZSTD_createDCtx() else { throw ZstdError("libzstd could not make a decompression context") }
        self.context = context
        self.dictionary = dictionary
        self.hash = hash
        buffer = .allocate(byteCount: pieceSize, alignment: 1)
        // libzstd limits the window by a power of two: the one at or above the limit, so that
        // every window within it is accepted (zstd's windows fall between powers of two too).
        let limit = DictionaryZstandard.windowLimit(dictionarySize: dictionary.count)
        let windowLog =
            DictionaryZstandard.windowLog(dictionarySize: dictionary.count) + (limit.nonzeroBitCount > 1 ? 1 : 0)
        if let error = ZstdError.check(
            ZSTD_DCtx_setParameter(context, ZSTD_d_windowLogMax, windowLog), "limiting the window")
        {
            throw error
        }
    }

    deinit {
        ZSTD_freeDCtx(context)
        buffer.deallocate()
    }

    /// Decodes the next bytes of the body; `output` gets each piece and returns `false` to stop.
    /// - Returns: `false` when `output` stopped.
    package func decode(
        _ input: UnsafeRawBufferPointer, _ output: (UnsafeRawBufferPointer) throws -> Bool
    ) throws -> Bool {
        var input = input
        if header.count < DictionaryZstandard.headerSize {
            let taken = min(DictionaryZstandard.headerSize - header.count, input.count)
            header += input.prefix(taken)
            input = UnsafeRawBufferPointer(rebasing: input[taken...])
            guard header.count == DictionaryZstandard.headerSize else { return true }
            guard header.prefix(8).elementsEqual(DictionaryZstandard.magic) else {
                throw Failure.corrupt("it does not start with the dcz header (RFC 9842 §5)")
            }
            guard header.suffix(32).elementsEqual(hash) else {
                throw Failure.corrupt("its header names another dictionary than the one offered")
            }
            let referenced = dictionary.withUnsafeBytes { ZSTD_DCtx_refPrefix(context, $0.baseAddress, $0.count) }
            if let error = ZstdError.check(referenced, "referencing the dictionary") {
                throw Failure.corrupt(error.description)
            }
        }
        guard !input.isEmpty else { return true }
        guard !ended else { throw Failure.corrupt("bytes follow the end of the Zstandard frame") }
        var source = ZSTD_inBuffer(src: input.baseAddress, size: input.count, pos: 0)
        while true {
            var destination = ZSTD_outBuffer(dst: buffer.baseAddress, size: buffer.count, pos: 0)
            let result = ZSTD_decompressStream(context, &destination, &source)
            if let error = ZstdError.check(result, "libzstd") { throw Failure.corrupt(error.description) }
            if destination.pos > 0, try !output(UnsafeRawBufferPointer(rebasing: buffer[..<destination.pos])) {
                return false
            }
            if result == 0 {
                ended = true
                guard source.pos == source.size else {
                    throw Failure.corrupt("bytes follow the end of the Zstandard frame")
                }
                return true
            }
            // A full buffer may leave output inside libzstd: go round again.
            if source.pos == source.size && destination.pos < destination.size { return true }
        }
    }

    /// The body ended: throws ``Failure/truncated`` unless the frame did.
    package func finish() throws(Failure) {
        guard ended else { throw Failure.truncated }
    }

    /// `body` decoded whole (for tests and benchmarks).
    package static func decode(_ body: [UInt8], dictionary: [UInt8], hash: [UInt8]) throws -> [UInt8] {
        let decoder = try DictionaryZstandardDecoder(dictionary: dictionary, hash: hash)
        var content: [UInt8] = []
        _ = try body.withUnsafeBytes { bytes in
            try decoder.decode(bytes) { piece in
                content += piece
                return true
            }
        }
        try decoder.finish()
        return content
    }
}

@available(*, unavailable)
extension DictionaryZstandardDecoder: Sendable {}
