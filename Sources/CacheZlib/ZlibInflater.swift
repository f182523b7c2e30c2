import CZlibHTTPCache

/// One zlib inflate stream: the package's one call of zlib's `inflate`, under WARC's gzip
/// members (OfflinePages' `GzipFileReader`) and HTTP's `gzip` and `deflate` content codings
/// (HTTPClient's `ContentDecoder`), which differ only in what they do between calls.
///
/// Each ``inflate(_:into:)`` decodes as much of the input as fits in the output and says how
/// much of each it used; nothing of the caller's memory is left in zlib's stream between calls.
///
/// ```swift
/// let inflater = try ZlibInflater(windowBits: 15 + 16)   // a gzip member (RFC 1952)
/// let step = inflater.inflate(input, into: buffer)
/// if step.status == .streamEnd { … }
/// ```
///
/// Not thread-safe: one stream, used from one thread at a time.
package final class ZlibInflater {
    /// How a call ended (zlib's return codes, named); its description says it in words.
    package enum Status: Equatable, Sendable, CustomStringConvertible {
        /// Progress was made; call again with more input or more room (`Z_OK`).
        case progress
        /// The coded data ended (`Z_STREAM_END`); for gzip, this member did.
        case streamEnd
        /// No progress was possible: no input left, or no room (`Z_BUF_ERROR`).
        case stalled
        /// zlib could not get memory (`Z_MEM_ERROR`).
        case outOfMemory
        /// The data is not valid coded data, or failed its check; zlib's message says how.
        case corrupt(String)

        package var description: String {
            switch self {
            case .progress: "progress"
            case .streamEnd: "end of the coded data"
            case .stalled: "no progress possible"
            case .outOfMemory: "out of memory"
            case .corrupt(let message): message
            }
        }
    }

    /// What one call did.
    package struct Step: Sendable {
        package var status: Status
        /// Input bytes used.
        package var consumed: Int
        /// Output bytes written, at the start of the output buffer.
        package var produced: Int
    }

    private let stream: UnsafeMutablePointer<z_stream>

    /// A stream for `windowBits` as `inflateInit2` takes them: 15 + 16 a gzip member, 15 + 32
    /// a gzip or a zlib header, 15 a zlib stream (RFC 1950), -15 raw deflate data (RFC 1951).
    /// - Throws: ``ZlibError`` when zlib cannot start (it is out of memory).
    package init(windowBits: Int32) throws(ZlibError) {
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        let result = httpcache_inflate_init(stream, windowBits)
        guard result == Z_OK else {
            // Nothing to end: a failed inflateInit2 frees what it allocated.
            stream.deinitialize(count: 1)
            stream.deallocate()
            throw ZlibError(result: result)
        }
    }

    deinit {
        inflateEnd(stream)
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    /// Starts over for a new stream (the next gzip member) with the same window bits.
    /// - Returns: `false` when zlib refuses (never for a stream it made).
    package func reset() -> Bool { inflateReset(stream) == Z_OK }

    /// Decodes from `input` into `output` until one of them is used up or the coded data ends.
    package func inflate(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) -> Step {
        stream.pointee.next_in = input.baseAddress.map {
            UnsafeMutablePointer(mutating: $0.assumingMemoryBound(to: Bytef.self))
        }
        stream.pointee.avail_in = uInt(input.count)
        stream.pointee.next_out = output.baseAddress?.assumingMemoryBound(to: Bytef.self)
        stream.pointee.avail_out = uInt(output.count)
        let result = CZlibHTTPCache.inflate(stream, Z_NO_FLUSH)
        let step = Step(
            status: Self.status(result, message: stream.pointee.msg),
            consumed: input.count - Int(stream.pointee.avail_in),
            produced: output.count - Int(stream.pointee.avail_out))
        // Leave no pointer into memory zlib does not own behind.
        stream.pointee.next_in = nil
        stream.pointee.next_out = nil
        return step
    }

    private static func status(_ result: Int32, message: UnsafePointer<CChar>?) -> Status {
        switch result {
        case Z_OK: .progress
        case Z_STREAM_END: .streamEnd
        case Z_BUF_ERROR: .stalled
        case Z_MEM_ERROR: .outOfMemory
        default: .corrupt(message.map { String(cString: $0) } ?? "error \(result)")
        }
    }
}

@available(*, unavailable)
extension ZlibInflater: Sendable {}

/// zlib could not start a stream.
package struct ZlibError: Error, Sendable, CustomStringConvertible {
    /// What `inflateInit2` returned.
    package var result: Int32

    package var description: String { "zlib could not start (inflateInit2 returned \(result)): out of memory" }
}
