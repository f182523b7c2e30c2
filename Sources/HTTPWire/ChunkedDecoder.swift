// De-chunking a body as its bytes arrive (RFC 9112 §7.1): hex sizes with overflow checks,
// extensions skipped within a bound, strict CRLFs, trailer fields checked and dropped. The
// server decodes request bodies with it, the upstream client's `ResponseFramer` response bodies.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@_spi(Wire) public struct ChunkedDecoder {
    /// The longest chunk-size line accepted, extensions included.
    public static let maxSizeLineBytes = 4096

    public let maxBodyBytes: Int64
    public let maxTrailerBytes: Int
    public let maxTrailerFields: Int

    private enum State {
        case sizeLine
        case data(remaining: Int64)
        case dataEnd
        case trailer
        case done
    }

    private var state = State.sizeLine
    /// Bytes of the current, incomplete line already searched for its LF.
    private var scanned = 0
    private var trailerBytes = 0
    private var trailerFields = 0
    /// Chunk data decoded so far.
    private var decodedBytes: Int64 = 0

    public init(maxBodyBytes: Int64, maxTrailerBytes: Int, maxTrailerFields: Int) {
        self.maxBodyBytes = maxBodyBytes
        self.maxTrailerBytes = maxTrailerBytes
        self.maxTrailerFields = maxTrailerFields
    }

    public enum Outcome {
        case needMore
        case done
        case rejected(Rejection)
    }

    /// What one step of ``next(_:count:)`` found.
    public enum Step {
        /// Every byte given was used (or waits for the rest of its line): call again with more.
        case needMore
        /// Chunk data: these bytes of the input, at positions counted from `base`.
        case data(Range<Int>)
        /// The body ended with the empty line after the last chunk.
        case done
        case rejected(Rejection)
    }

    /// Decodes from the `count` bytes at `base`, appending chunk data to `body`. Returns how
    /// many bytes were consumed (the rest stays for the next call, or belongs to the next
    /// request once `.done`).
    public mutating func decode(_ base: UnsafePointer<UInt8>, count: Int, into body: inout [UInt8]) -> (Int, Outcome) {
        var position = 0
        while true {
            let (used, step) = next(base + position, count: count - position)
            switch step {
            case .data(let range):
                let start = base + position + range.lowerBound
                body.append(contentsOf: UnsafeBufferPointer(start: start, count: range.count))
                position += used
            case .needMore:
                return (position + used, .needMore)
            case .done:
                return (position + used, .done)
            case .rejected(let rejection):
                return (position + used, .rejected(rejection))
            }
        }
    }

    /// Decodes from the `count` bytes at `base` up to the next chunk data, the end of the
    /// body, or the need for more bytes. Returns how many bytes were consumed, data included;
    /// the bytes not consumed (a line not yet complete) must be given again, followed by more.
    public mutating func next(_ base: UnsafePointer<UInt8>, count: Int) -> (Int, Step) {
        var position = 0
        while true {
            switch state {
            case .done:
                return (position, .done)
            case .data(let remaining):
                let available = count - position
                guard available > 0 else { return (position, .needMore) }
                let take = Int(min(Int64(available), remaining))
                state = remaining == Int64(take) ? .dataEnd : .data(remaining: remaining - Int64(take))
                decodedBytes += Int64(take)
                return (position + take, .data(position..<position + take))
            case .dataEnd:
                guard count - position >= 2 else {
                    if count > position && base[position] != HTTPBytes.cr { return (position, .rejected(missingCRLF)) }
                    return (position, .needMore)
                }
                guard base[position] == HTTPBytes.cr, base[position + 1] == HTTPBytes.lf else {
                    return (position, .rejected(missingCRLF))
                }
                position += 2
                state = .sizeLine
            case .sizeLine, .trailer:
                let isTrailer: Bool
                if case .trailer = state { isTrailer = true } else { isTrailer = false }
                let limit = isTrailer ? maxTrailerBytes - trailerBytes : Self.maxSizeLineBytes
                let searchStart = position + scanned
                guard searchStart < count,
                    let found = memchr(base + searchStart, Int32(HTTPBytes.lf), count - searchStart)
                else {
                    scanned = count - position
                    if scanned > limit { return (position, .rejected(lineTooLong(isTrailer))) }
                    return (position, .needMore)
                }
                scanned = 0
                let lf = found.assumingMemoryBound(to: UInt8.self) - UnsafeMutablePointer(mutating: base)
                if lf + 1 - position > limit { return (position, .rejected(lineTooLong(isTrailer))) }
                guard lf > position, base[lf - 1] == HTTPBytes.cr else {
                    return (
                        position,
                        .rejected(
                            Rejection(
                                status: 400, reason: "a line of the chunked body ends in a bare LF (RFC 9112 §7.1)"))
                    )
                }
                let rejection = isTrailer ? trailerLine(base, position, lf - 1) : sizeLine(base, position, lf - 1)
                if let rejection { return (position, .rejected(rejection)) }
                if isTrailer { trailerBytes += lf + 1 - position }
                position = lf + 1
            }
        }
    }

    private var missingCRLF: Rejection {
        Rejection(status: 400, reason: "chunk data is not followed by CRLF (RFC 9112 §7.1)")
    }

    private func lineTooLong(_ isTrailer: Bool) -> Rejection {
        isTrailer
            ? Rejection(status: 431, reason: "the trailer section is larger than \(maxTrailerBytes) bytes")
            : Rejection(
                status: 400, reason: "a chunk-size line is longer than \(Self.maxSizeLineBytes) bytes (RFC 9112 §7.1.1)"
            )
    }

    /// `chunk-size [ chunk-ext ] CRLF`: the size in hex, extensions skipped (RFC 9112 §7.1.1).
    private mutating func sizeLine(_ base: UnsafePointer<UInt8>, _ start: Int, _ end: Int) -> Rejection? {
        var index = start
        var size: Int64 = 0
        while index < end, let digit = HTTPBytes.hexValue(base[index]) {
            guard size <= (Int64.max - 15) >> 4 else {
                return Rejection(status: 400, reason: "a chunk size overflows (RFC 9112 §7.1)")
            }
            size = size << 4 | Int64(digit)
            index += 1
        }
        guard index > start else {
            return Rejection(status: 400, reason: "a chunk does not start with a hex size (RFC 9112 §7.1)")
        }
        while index < end && HTTPBytes.isOWS(base[index]) { index += 1 }
        if index < end {
            guard base[index] == HTTPBytes.semicolon else {
                return Rejection(
                    status: 400,
                    reason: "a chunk size is followed by \(HTTPBytes.describe(base[index])) (RFC 9112 §7.1)")
            }
            for extensionIndex in index..<end where !HTTPBytes.isFieldValue(base[extensionIndex]) {
                return Rejection(
                    status: 400,
                    reason: "a chunk extension contains \(HTTPBytes.describe(base[extensionIndex])) (RFC 9112 §7.1.1)")
            }
        }
        if size == 0 {
            state = .trailer
        } else {
            guard size <= maxBodyBytes - decodedBytes else {
                return Rejection(
                    status: 413, reason: "the chunked body is larger than the limit of \(maxBodyBytes) bytes")
            }
            state = .data(remaining: size)
        }
        return nil
    }

    /// A trailer field line, checked and discarded; the empty line ends the body (RFC 9112 §7.1.2).
    private mutating func trailerLine(_ base: UnsafePointer<UInt8>, _ start: Int, _ end: Int) -> Rejection? {
        if end == start {
            state = .done
            return nil
        }
        if case .failure(let rejection) = RequestHeadParser.scanFieldLine(base, start, end) { return rejection }
        trailerFields += 1
        if trailerFields > maxTrailerFields {
            return Rejection(status: 431, reason: "the trailer section has more than \(maxTrailerFields) fields")
        }
        return nil
    }
}
