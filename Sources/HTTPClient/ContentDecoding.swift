#if os(Linux)
import CBrotliHTTPCache
import CacheSemantics
import CacheZlib
import CacheZstd

/// A content coding (RFC 9110 §8.4.1) that ``ContentDecoder`` undoes, for apps: the proxy
/// never decodes, it passes bodies through as the origin sent them.
package enum ContentCoding: Sendable, Equatable {
    /// `gzip`, and `x-gzip`, its alias (RFC 9110 §8.4.1.3; the format is RFC 1952).
    case gzip
    /// `deflate` (RFC 9110 §8.4.1.2): a zlib stream (RFC 1950), or raw deflate data (RFC 1951)
    /// as some servers send it and curl and browsers accept.
    case deflate
    /// `br`, Brotli (RFC 7932).
    case brotli
    /// `dcz`, Dictionary-Compressed Zstandard (RFC 9842 §5): decoded only with the dictionary
    /// the request offered.
    case dictionaryZstandard

    /// The coding named `token`, compared without regard to case (RFC 9110 §8.4.1); nil for a
    /// coding not decoded here.
    package init?(token: some StringProtocol) {
        switch token.lowercased() {
        case "gzip", "x-gzip": self = .gzip
        case "deflate": self = .deflate
        case "br": self = .brotli
        case "dcz": self = .dictionaryZstandard
        default: return nil
        }
    }

    /// The codings the `Content-Encoding` fields of `fields` list, in the order they were
    /// applied (RFC 9110 §8.4: "listed in the order in which they were applied"); `identity`
    /// members are skipped (RFC 9110 §8.4.1: it means no coding).
    /// - Returns: `[]` when the content has no coding; `nil` when one of its codings is not one
    ///   decoded here: then nothing is decoded and the body stays as sent, as URLSession leaves it.
    package static func applied(in fields: HeaderFields) -> [ContentCoding]? {
        var codings: [ContentCoding] = []
        for member in fields.listMembers(named: .contentEncoding)
        where !ASCII.equalsIgnoringCase(member, "identity") {
            guard let coding = ContentCoding(token: member) else { return nil }
            codings.append(coding)
        }
        return codings
    }
}

/// Why a coded body could not be decoded: never a short body that looks complete.
package struct ContentDecodingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was wrong with the coded bytes.
    package enum Kind: Sendable, Equatable {
        /// Not data in that coding, a failed check (gzip's CRC-32 and length, zlib's Adler-32), or
        /// bytes after the coded data's end.
        case corrupt
        /// The body ended before the coded data did.
        case truncated
        /// The decoder could not get memory.
        case resources
    }

    package var kind: Kind
    /// What happened, e.g. `the gzip-coded body is corrupt (zlib: incorrect data check)`.
    package var description: String

    package init(kind: Kind, description: String) {
        self.kind = kind
        self.description = description
    }
}

/// Undoes a response's content codings as its body streams: several codings (`Content-Encoding:
/// gzip, br`) in the reverse of the order they were applied (RFC 9110 §8.4).
///
/// Memory stays bounded whatever the input: each coding's decoder writes into a buffer of
/// ``pieceSize`` bytes that is handed on as soon as it is full, so a small body that decodes
/// to gigabytes (a decompression bomb) comes out in pieces of at most that size, at the pace
/// the receiver takes them, and the receiver can stop at any piece. Brotli's decoder keeps its
/// window too (at most 16 MiB, RFC 7932 §9.1; large windows are not accepted).
///
/// Bodies that are not whole coded data are errors, never a shorter body: corrupt data, a
/// failed integrity check, data after the end of the coded stream (gzip may hold several
/// members, RFC 1952 §2.2; each must be whole) and a body that ends inside the coded data (see
/// ``finish(_:)``). An empty body decodes to nothing.
///
/// ```swift
/// guard let codings = ContentCoding.applied(in: head.fields), !codings.isEmpty else { … }
/// let decoder = try ContentDecoder(codings)
/// try decoder.decode(bodyBytes) { piece in deliver(piece) }   // as body bytes arrive
/// try decoder.finish { piece in deliver(piece) }              // at the body's end
/// ```
///
/// Not thread-safe: one decoder per body, fed from one thread at a time.
package final class ContentDecoder {
    /// What each stage hands on at most at once.
    package static let pieceSize = 64 * 1024

    /// The decoders, the last coding applied first.
    private let stages: [any DecodingStage]

    /// A decoder for content to which `codings` were applied, in that order; `dictionary` is
    /// the one a `dcz` coding was made with (RFC 9842 §5).
    /// - Throws: ``ContentDecodingError/Kind/resources`` when a decoder cannot be made;
    ///   ``ContentDecodingError/Kind/corrupt`` for `dcz` without a dictionary.
    package init(_ codings: [ContentCoding], dictionary: CompressionDictionary? = nil) throws(ContentDecodingError) {
        var stages: [any DecodingStage] = []
        for coding in codings.reversed() {
            switch coding {
            case .gzip: stages.append(try ZlibStage(coding: .gzip))
            case .deflate: stages.append(try ZlibStage(coding: .deflate))
            case .brotli: stages.append(try BrotliStage())
            case .dictionaryZstandard: stages.append(try DictionaryZstandardStage(dictionary))
            }
        }
        self.stages = stages
    }

    /// Decodes the next bytes of the body, handing the decoded bytes to `output` in pieces of
    /// at most ``pieceSize`` bytes.
    /// - Parameter output: Gets each piece; returns `false` to stop (nothing more is decoded).
    /// - Returns: `false` when `output` stopped.
    /// - Throws: ``ContentDecodingError`` when the bytes are not valid coded data.
    @discardableResult
    package func decode(
        _ input: UnsafeRawBufferPointer, _ output: (UnsafeRawBufferPointer) -> Bool
    ) throws(ContentDecodingError) -> Bool {
        try feed(stage: 0, input, output)
    }

    /// The body has ended: hands on what the decoders still hold, and checks that every coded
    /// stream ended.
    /// - Returns: `false` when `output` stopped.
    /// - Throws: ``ContentDecodingError/Kind/truncated`` when the body ended inside coded data.
    @discardableResult
    package func finish(_ output: (UnsafeRawBufferPointer) -> Bool) throws(ContentDecodingError) -> Bool {
        for index in stages.indices {
            let next = index + 1
            guard
                try stages[index].finish({ piece throws(ContentDecodingError) in try feed(stage: next, piece, output) })
            else { return false }
        }
        return true
    }

    private func feed(
        stage index: Int, _ input: UnsafeRawBufferPointer, _ output: (UnsafeRawBufferPointer) -> Bool
    ) throws(ContentDecodingError) -> Bool {
        guard index < stages.count else { return input.isEmpty || output(input) }
        let next = index + 1
        return try stages[index].decode(input) { piece throws(ContentDecodingError) in
            try feed(stage: next, piece, output)
        }
    }
}

@available(*, unavailable)
extension ContentDecoder: Sendable {}

/// Where a stage hands its output: the next stage or the receiver. `false`: stop.
private typealias StageOutput = (UnsafeRawBufferPointer) throws(ContentDecodingError) -> Bool

/// One coding's streaming decoder.
private protocol DecodingStage: AnyObject {
    /// Decodes all of `input`, handing on each full buffer; `false` when `output` stopped.
    func decode(_ input: UnsafeRawBufferPointer, _ output: StageOutput) throws(ContentDecodingError) -> Bool
    /// The input has ended: hands on what is left; throws when the coded data did not end.
    func finish(_ output: StageOutput) throws(ContentDecodingError) -> Bool
}

/// `gzip` and `deflate` through zlib.
private final class ZlibStage: DecodingStage {
    enum Coding { case gzip, deflate }

    private let coding: Coding
    /// The stream (for `deflate`, made once the first two bytes are in).
    private var inflater: ZlibInflater?
    private let buffer: UnsafeMutableRawBufferPointer
    /// For `deflate`: the first byte, kept until the second tells a zlib stream from raw data.
    private let firstByte: UnsafeMutableRawBufferPointer
    private var holdsFirstByte = false
    /// Whether any input arrived.
    private var started = false
    /// Whether the coded stream (for gzip: the last member so far) ended.
    private var ended = false

    init(coding: Coding) throws(ContentDecodingError) {
        self.coding = coding
        buffer = .allocate(byteCount: ContentDecoder.pieceSize, alignment: 1)
        firstByte = .allocate(byteCount: 1, alignment: 1)
        // gzip: a gzip or a zlib header, as curl accepts (15 + 32). deflate waits for its first bytes.
        if coding == .gzip { try start(windowBits: 15 + 32) }
    }

    deinit {
        buffer.deallocate()
        firstByte.deallocate()
    }

    private var name: String { coding == .gzip ? "gzip" : "deflate" }

    private func start(windowBits: Int32) throws(ContentDecodingError) {
        do {
            inflater = try ZlibInflater(windowBits: windowBits)
        } catch {
            throw ContentDecodingError(
                kind: .resources,
                description:
                    "zlib could not start decoding the \(name)-coded body (inflateInit2 returned \(error.result))"
            )
        }
    }

    func decode(_ input: UnsafeRawBufferPointer, _ output: StageOutput) throws(ContentDecodingError) -> Bool {
        guard !input.isEmpty else { return true }
        started = true
        if let inflater { return try inflate(input, inflater, output) }
        guard holdsFirstByte else {
            firstByte[0] = input[0]
            holdsFirstByte = true
            return try decode(UnsafeRawBufferPointer(rebasing: input[1...]), output)
        }
        // deflate: a zlib header (RFC 1950 §2.2: CM 8, a window of at most 32 KiB, FCHECK making
        // the first two bytes a multiple of 31) means a zlib stream; anything else is taken for
        // raw deflate data, as curl and browsers do.
        let (first, second) = (firstByte[0], input[0])
        let zlib = first & 0x0F == 8 && first >> 4 <= 7 && (UInt16(first) << 8 | UInt16(second)) % 31 == 0
        try start(windowBits: zlib ? 15 : -15)
        holdsFirstByte = false
        guard let inflater, try inflate(UnsafeRawBufferPointer(firstByte), inflater, output) else { return false }
        return try inflate(input, inflater, output)
    }

    /// Runs zlib over all of `input`, handing on each buffer it fills.
    private func inflate(
        _ input: UnsafeRawBufferPointer, _ inflater: ZlibInflater, _ output: StageOutput
    ) throws(ContentDecodingError) -> Bool {
        var offset = 0
        while true {
            if ended {
                guard offset < input.count else { return true }
                // A gzip body may hold several members (RFC 1952 §2.2): the next one starts.
                guard coding == .gzip else { throw corrupt("bytes follow the end of the deflate stream") }
                guard inflater.reset() else { throw corrupt("zlib could not restart") }
                ended = false
            }
            let step = inflater.inflate(UnsafeRawBufferPointer(rebasing: input[offset...]), into: buffer)
            offset += step.consumed
            switch step.status {
            case .streamEnd: ended = true
            case .progress, .stalled: break  // stalled: no input left to make progress with
            case .outOfMemory:
                throw ContentDecodingError(kind: .resources, description: "zlib ran out of memory decoding \(name)")
            case .corrupt(let message): throw corrupt("zlib: " + message)
            }
            let made = step.produced
            if made > 0, try !output(UnsafeRawBufferPointer(rebasing: buffer[..<made])) { return false }
            // A full buffer may leave output pending inside zlib: go round again even without input.
            if ended || made == buffer.count { continue }
            if offset == input.count { return true }
            guard step.consumed > 0 else { throw corrupt("zlib made no progress") }
        }
    }

    func finish(_ output: StageOutput) throws(ContentDecodingError) -> Bool {
        guard started, !ended else { return true }
        throw ContentDecodingError(
            kind: .truncated,
            description: "the \(name)-coded body ends before its coded data does; it was cut short")
    }

    private func corrupt(_ reason: String) -> ContentDecodingError {
        ContentDecodingError(kind: .corrupt, description: "the \(name)-coded body is corrupt (\(reason))")
    }
}

/// `br` through Debian's libbrotli decoder.
private final class BrotliStage: DecodingStage {
    private let state: OpaquePointer
    private let buffer: UnsafeMutableRawBufferPointer
    private var started = false
    private var ended = false

    init() throws(ContentDecodingError) {
        guard let state = BrotliDecoderCreateInstance(nil, nil, nil) else {
            throw ContentDecodingError(kind: .resources, description: "libbrotli could not make a decoder")
        }
        self.state = state
        buffer = .allocate(byteCount: ContentDecoder.pieceSize, alignment: 1)
    }

    deinit {
        BrotliDecoderDestroyInstance(state)
        buffer.deallocate()
    }

    func decode(_ input: UnsafeRawBufferPointer, _ output: StageOutput) throws(ContentDecodingError) -> Bool {
        guard !input.isEmpty else { return true }
        started = true
        guard !ended else { throw corrupt("bytes follow the end of the Brotli stream") }
        var availableIn = input.count
        var nextIn: UnsafePointer<UInt8>? = input.baseAddress!.assumingMemoryBound(to: UInt8.self)
        while true {
            var availableOut = buffer.count
            var nextOut: UnsafeMutablePointer<UInt8>? = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
            let result = BrotliDecoderDecompressStream(state, &availableIn, &nextIn, &availableOut, &nextOut, nil)
            let made = buffer.count - availableOut
            if made > 0, try !output(UnsafeRawBufferPointer(rebasing: buffer[..<made])) { return false }
            switch result {
            case BROTLI_DECODER_RESULT_SUCCESS:
                ended = true
                guard availableIn == 0 else { throw corrupt("bytes follow the end of the Brotli stream") }
                return true
            case BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT:
                return true
            case BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT:
                continue
            default:
                let code = BrotliDecoderGetErrorCode(state)
                let reason = BrotliDecoderErrorString(code).map { String(cString: $0) } ?? "error \(code.rawValue)"
                throw corrupt("libbrotli: \(reason)")
            }
        }
    }

    func finish(_ output: StageOutput) throws(ContentDecodingError) -> Bool {
        guard started, !ended else { return true }
        throw ContentDecodingError(
            kind: .truncated, description: "the br-coded body ends before its Brotli stream does; it was cut short")
    }

    private func corrupt(_ reason: String) -> ContentDecodingError {
        ContentDecodingError(kind: .corrupt, description: "the br-coded body is corrupt (\(reason))")
    }
}
/// `dcz` through libzstd with the offered dictionary (RFC 9842 §5): the header must name it.
private final class DictionaryZstandardStage: DecodingStage {
    private let decoder: DictionaryZstandardDecoder
    private var started = false

    init(_ dictionary: CompressionDictionary?) throws(ContentDecodingError) {
        guard let dictionary else {
            throw ContentDecodingError(
                kind: .corrupt, description: "the dcz-coded body cannot be decoded: no dictionary was offered for it")
        }
        do {
            decoder = try DictionaryZstandardDecoder(
                dictionary: dictionary.content, hash: dictionary.hash, pieceSize: ContentDecoder.pieceSize)
        } catch {
            throw ContentDecodingError(kind: .resources, description: "libzstd could not make a decoder: \(error)")
        }
    }

    func decode(_ input: UnsafeRawBufferPointer, _ output: StageOutput) throws(ContentDecodingError) -> Bool {
        guard !input.isEmpty else { return true }
        started = true
        do {
            return try decoder.decode(input) { piece in try output(piece) }
        } catch let error as ContentDecodingError {
            throw error
        } catch let DictionaryZstandardDecoder.Failure.corrupt(reason) {
            throw ContentDecodingError(kind: .corrupt, description: "the dcz-coded body is corrupt (\(reason))")
        } catch {
            throw ContentDecodingError(kind: .corrupt, description: "the dcz-coded body is corrupt (\(error))")
        }
    }

    func finish(_ output: StageOutput) throws(ContentDecodingError) -> Bool {
        guard started else { return true }
        do { try decoder.finish() } catch {
            throw ContentDecodingError(
                kind: .truncated,
                description: "the dcz-coded body ends before its Zstandard frame does; it was cut short")
        }
        return true
    }
}
#endif
