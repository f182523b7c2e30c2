/// Reads the records of a WARC file (ISO 28500, WARC 1.0 and 1.1) one at a time, plain or gzip
/// (one member per record, or any other split into members: "record-at-time compression" is a
/// recommendation, not a rule).
///
/// The file is read in 64 KiB pieces and never held whole. ``next()`` holds the current record's
/// block in memory; ``nextHeader()`` and ``readBlock(maximum:)`` stream it, so records of any size
/// work (a block not read is skipped).
///
/// ```swift
/// var reader = try WARCReader(path: "pages.warc.gz")
/// while let record = try reader.next() {
///     if record.type == "response", let uri = record.targetURI { … }
/// }
/// ```
///
/// What it checks, with errors that name the record's offset:
/// - each record starts with `WARC/1.0` or `WARC/1.1` (a bare LF is tolerated in place of CRLF
///   in the header), has a `Content-Length`, and its block is followed by CRLF CRLF;
/// - the file does not end inside a record, and every gzip member is intact (CRC-32 and length);
/// - a `WARC-Block-Digest` with the `sha1` algorithm (base32, or hex as some tools write it)
///   matches the block; other algorithms are not checked, nor is `WARC-Payload-Digest` (whether
///   it covers a chunked payload before or after de-chunking differs between tools).
///
/// After an error about the file itself (truncated, corrupt, not WARC) every later `next()`
/// throws the same error: nothing after it can be trusted. After a digest mismatch the reader is
/// still in step and `next()` goes on with the following record.
///
/// A copy of a reader shares the same file and position. Not thread-safe.
public struct WARCReader {
    private let state: WARCReaderState

    /// Opens the WARC file at `path`; gzip is recognized by its magic bytes (`1f 8b`).
    public init(path: String) throws(WARCError) {
        state = try WARCReaderState(path: path)
    }

    /// Whether the file is gzip-compressed.
    public var isCompressed: Bool { state.bytes.isCompressed }

    /// The next record, or nil after the last one.
    public mutating func next() throws(WARCError) -> WARCRecord? {
        try state.next()
    }

    /// The next record's header, its `block` left empty, or nil after the last record. Its block
    /// is read with ``readBlock(maximum:)``; what is not read of it is skipped by the next call
    /// to `nextHeader()` or ``next()`` (unchecked: a block skipped is not compared with its
    /// digest).
    public mutating func nextHeader() throws(WARCError) -> WARCRecord? {
        try state.nextHeader()
    }

    /// The next bytes (at most `maximum`, at least 1) of the block of the record ``nextHeader()``
    /// returned; nil once it has all been read.
    ///
    /// The call that returns the block's last bytes has already checked the record's end and
    /// compared the block with its SHA-1 `WARC-Block-Digest`: on a mismatch it throws instead of
    /// returning them (the reader is still in step), so whoever stores the block as it streams
    /// never takes in the whole of a damaged one.
    public mutating func readBlock(maximum: Int = 1 << 16) throws(WARCError) -> [UInt8]? {
        try state.readBlock(maximum: max(1, maximum))
    }

    /// The bytes of the current record's block not read yet.
    public var unreadBlockBytes: Int { state.unreadBlockBytes }
}

/// The reader's state: a class so that the file closes when the last copy goes.
final class WARCReaderState {
    let bytes: WARCByteStream
    private var failure: WARCError?
    /// The most a record header may take (version line, fields, the empty line).
    static let headerLimit = 1 << 20

    init(path: String) throws(WARCError) {
        let input: WARCFileInput
        do { input = try WARCFileInput(path: path) } catch { throw WARCError(offset: 0, message: error.message) }
        do {
            while input.available < 2 {
                guard try input.refill() else { break }
            }
        } catch {
            throw WARCError(offset: 0, message: error.message)
        }
        if input.available >= 2 && input.buffer[input.start] == 0x1F && input.buffer[input.start + 1] == 0x8B {
            do { bytes = WARCByteStream(gzip: try GzipFileReader(input: input)) } catch {
                throw WARCError(offset: 0, message: error.message)
            }
        } else {
            bytes = WARCByteStream(plain: input)
        }
    }

    /// The block of the record whose header was read last, while some of it is unread.
    private struct OpenBlock {
        var record: WARCRecord
        var length: Int
        var remaining: Int
        /// Where the record starts within its gzip member's data (for error messages).
        var within: Int64
        /// The block's SHA-1 so far, when it has a SHA-1 digest to compare.
        var hash: SHA1?
    }

    private var open: OpenBlock?

    var unreadBlockBytes: Int { open?.remaining ?? 0 }

    func next() throws(WARCError) -> WARCRecord? {
        guard var record = try nextHeader() else { return nil }
        var block: [UInt8] = []
        block.reserveCapacity(min(unreadBlockBytes, 1 << 26))
        while let piece = try readBlock(maximum: 1 << 20) { block += piece }
        record.block = block
        return record
    }

    func nextHeader() throws(WARCError) -> WARCRecord? {
        if let failure { throw failure }
        do {
            try skipBlock()
            return try readRecord()
        } catch {
            failure = error
            throw error
        }
    }

    func readBlock(maximum: Int) throws(WARCError) -> [UInt8]? {
        if let failure { throw failure }
        guard var current = open else { return nil }
        if current.remaining == 0 {
            try finishBlock()
            return nil
        }
        do throws(WARCError) { try buffer(current) } catch {
            failure = error
            throw error
        }
        let take = min(bytes.available, current.remaining, maximum)
        let piece = Array(bytes.buffer[bytes.start..<bytes.start + take])
        bytes.start += take
        current.remaining -= piece.count
        current.hash?.update(piece)
        open = current
        if current.remaining == 0 { try finishBlock() }
        return piece
    }

    /// Reads the rest of an open block without looking at it, and the record's end.
    private func skipBlock() throws(WARCError) {
        guard var current = open else { return }
        current.hash = nil
        while current.remaining > 0 {
            try buffer(current)
            let take = min(bytes.available, current.remaining)
            bytes.start += take
            current.remaining -= take
        }
        open = current
        try finishBlock()
    }

    /// Makes sure some of `current`'s block is in `bytes`; a file that ends first is cut.
    private func buffer(_ current: OpenBlock) throws(WARCError) {
        do throws(Failure) {
            if bytes.available == 0, try !fill() {
                throw Failure.truncated(
                    where:
                        "in its block: \(current.length - current.remaining) of its \(current.length) bytes are there")
            }
        } catch {
            throw warcError(for: error, recordOffset: current.record.offset, within: current.within)
        }
    }

    /// After the block: the CRLF CRLF that ends the record, the rest of its gzip member, then
    /// the block's digest. A digest mismatch leaves the reader in step: it is not remembered.
    private func finishBlock() throws(WARCError) {
        guard let current = open else { return }
        do throws(Failure) {
            while bytes.available < 4 {
                guard try fill() else { throw Failure.truncated(where: "before the CRLF CRLF that ends it") }
            }
            let end = bytes.buffer[bytes.start..<bytes.start + 4]
            guard end.elementsEqual([0x0D, 0x0A, 0x0D, 0x0A]) else {
                throw Failure.format(
                    "the block of Content-Length \(current.length) is followed by \(WARCSyntax.quoted(end)), not"
                        + " CRLF CRLF — Content-Length is wrong or the file is damaged; the records after it cannot be"
                        + " found")
            }
            bytes.start += 4
            do { try bytes.settle() } catch { throw Failure.source(error) }
        } catch {
            var reason = error
            if case .format = error, let corrupt = bytes.corruptionInCurrentMember() { reason = .source(corrupt) }
            let failed = warcError(for: reason, recordOffset: current.record.offset, within: current.within)
            failure = failed
            throw failed
        }
        open = nil
        if let hash = current.hash { try checkBlockDigest(of: current.record, digest: hash.finalize()) }
    }

    /// Why reading a record stopped, before it is placed at the record's offset.
    private enum Failure: Error {
        /// Reading or decompressing failed.
        case source(GzipError)
        /// The file ended: `where` says in which part of the record.
        case truncated(where: String)
        /// The bytes are not what WARC says they must be.
        case format(String)
    }

    private func readRecord() throws(WARCError) -> WARCRecord? {
        do {
            while bytes.available == 0 {
                guard try bytes.fill() else { return nil }
            }
        } catch {
            throw warcError(for: .source(error), recordOffset: nil, within: 0)
        }
        let (offset, within) = bytes.memberOffset(at: bytes.position)
        let record: WARCRecord
        let length: Int
        do throws(Failure) {
            (record, length) = try readRecordHeader(offset: offset)
        } catch {
            var failure = error
            if case .format = error, let corrupt = bytes.corruptionInCurrentMember() { failure = .source(corrupt) }
            throw warcError(for: failure, recordOffset: offset, within: within)
        }
        let checksSHA1 = record.fields.contains {
            WARCSyntax.namesEqual($0.name, "WARC-Block-Digest") && DeclaredSHA1($0.value) != .otherAlgorithm
        }
        open = OpenBlock(
            record: record, length: length, remaining: length, within: within, hash: checksSHA1 ? SHA1() : nil)
        return record
    }

    /// The header of the record at `offset` and its block's length; the bytes after the header are
    /// left for the block.
    private func readRecordHeader(offset: Int64) throws(Failure) -> (WARCRecord, Int) {
        var budget = WARCReaderState.headerLimit
        // The version line ("WARC record header": `WARC/1.1` CRLF); look at its start first, so that a
        // file that is not WARC at all is named as such rather than as a too-long or cut line.
        while bytes.available < 5 {
            guard try fill() else {
                let start = bytes.buffer[bytes.start...]
                if Array("WARC/".utf8).starts(with: start) { throw .truncated(where: "in its version line") }
                throw .format(badVersionMessage(start))
            }
        }
        guard bytes.buffer[bytes.start..<bytes.start + 5].elementsEqual("WARC/".utf8) else {
            throw .format(badVersionMessage(bytes.buffer[bytes.start...]))
        }
        let versionLine = try readLine(budget: &budget, where: "in its version line")
        guard versionLine.elementsEqual("WARC/1.1".utf8) || versionLine.elementsEqual("WARC/1.0".utf8) else {
            throw .format(badVersionMessage(versionLine[...]))
        }
        // Named fields up to the empty line, with continuation lines (a line starting with SP or HT
        // continues the value before it).
        var fields: [WARCField] = []
        while true {
            let line = try readLine(budget: &budget, where: "in its header")
            if line.isEmpty { break }
            if WARCSyntax.isBlank(line[0]) {
                guard !fields.isEmpty else {
                    throw .format(
                        "the header's first field line starts with white space (\(WARCSyntax.quoted(line[...]))),"
                            + " which only a continuation line may — the header is malformed")
                }
                let more = WARCSyntax.trimmed(line[...])
                if !more.isEmpty {
                    let previous = fields[fields.count - 1].value
                    fields[fields.count - 1].value =
                        previous.isEmpty ? WARCSyntax.text(more) : previous + " " + WARCSyntax.text(more)
                }
                continue
            }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > 0,
                !line[..<colon].contains(where: { $0 <= 0x20 || $0 == 0x7F })
            else {
                throw .format(
                    "the header line \(WARCSyntax.quoted(line[...])) is not `Name: value` — the header is malformed")
            }
            fields.append(
                WARCField(
                    WARCSyntax.text(line[..<colon]), WARCSyntax.text(WARCSyntax.trimmed(line[(colon + 1)...]))))
        }
        let record = WARCRecord(fields: fields, block: [], offset: offset)
        guard let lengthText = record[field: "Content-Length"] else {
            throw .format(
                "the header has no Content-Length, which WARC requires (ISO 28500 \"Content-Length (mandatory)\")"
                    + " — the record's end cannot be found; the file was not written by a WARC writer or is damaged")
        }
        guard !lengthText.isEmpty, lengthText.utf8.count <= 18,
            lengthText.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            let length = Int(lengthText)
        else {
            throw .format(
                "Content-Length \"\(lengthText)\" is not a number of bytes — the record's end cannot be found;"
                    + " the file is damaged")
        }
        return (record, length)
    }

    private func fill() throws(Failure) -> Bool {
        do { return try bytes.fill() } catch { throw .source(error) }
    }

    /// One header line without its LF (and the CR before it, when there is one).
    private func readLine(budget: inout Int, where part: String) throws(Failure) -> [UInt8] {
        var scanned = 0
        while true {
            let from = bytes.start + scanned
            if let newline = bytes.buffer[from...].firstIndex(of: 0x0A) {
                let length = newline + 1 - bytes.start
                guard length <= budget else { throw .format(headerTooLongMessage) }
                budget -= length
                var end = newline
                if end > bytes.start && bytes.buffer[end - 1] == 0x0D { end -= 1 }
                let line = Array(bytes.buffer[bytes.start..<end])
                bytes.start = newline + 1
                return line
            }
            scanned = bytes.available
            guard scanned <= budget else { throw .format(headerTooLongMessage) }
            guard try fill() else { throw .truncated(where: part) }
        }
    }

    private var headerTooLongMessage: String {
        "the record header is longer than \(WARCReaderState.headerLimit / 1024) KiB without ending"
            + " — this is not a WARC file, or it is damaged"
    }

    private func badVersionMessage(_ bytes: ArraySlice<UInt8>) -> String {
        let line = bytes.prefix { $0 != 0x0A && $0 != 0x0D }
        return "bad version line \(WARCSyntax.quoted(line)): a record starts with WARC/1.0 or WARC/1.1"
            + " — this is not a WARC file (or not one this reader knows), or the record before it has a wrong"
            + " Content-Length"
    }

    /// Checks every `WARC-Block-Digest` that uses SHA-1 ("WARC-Block-Digest", "sha1:" and the
    /// base32 of the digest; hex is accepted too) against `computed`, the block's.
    private func checkBlockDigest(of record: WARCRecord, digest computed: [UInt8]) throws(WARCError) {
        for field in record.fields where WARCSyntax.namesEqual(field.name, "WARC-Block-Digest") {
            switch DeclaredSHA1(field.value) {
            case .otherAlgorithm:
                continue
            case .unreadable:
                throw WARCError(
                    offset: record.offset,
                    message: "block digest mismatch: WARC-Block-Digest \"\(field.value)\" is not"
                        + " a SHA-1 digest in base32 or hex (the block's is sha1:\(Base32.encode(computed)))"
                        + " — the header is damaged; do not trust this record")
            case .digest(let expected):
                guard expected == computed else {
                    throw WARCError(
                        offset: record.offset,
                        message: "block digest mismatch: WARC-Block-Digest says \(field.value) but"
                            + " the block's SHA-1 is sha1:\(Base32.encode(computed)) — the record was changed or"
                            + " damaged after it was written; do not trust it (the records after it can still be read)")
                }
            }
        }
    }

    /// The 20 bytes of a SHA-1 digest written in base32 (32 characters) or hex (40), or nil.
    static func digestBytes(_ text: String) -> [UInt8]? {
        if text.utf8.count == 32, let bytes = Base32.decode(text), bytes.count == 20 { return bytes }
        guard text.utf8.count == 40 else { return nil }
        var bytes: [UInt8] = []
        var high: UInt8?
        for character in text.utf8 {
            guard let value = WARCSyntax.hexValue(character) else { return nil }
            if let first = high {
                bytes.append(first << 4 | value)
                high = nil
            } else {
                high = value
            }
        }
        return bytes
    }

    private func warcError(for failure: Failure, recordOffset: Int64?, within: Int64) -> WARCError {
        let nothingMore = "nothing from this record on was read"
        let offset: Int64
        let message: String
        switch failure {
        case .truncated(let part):
            offset = recordOffset ?? bytes.position
            message =
                "truncated: the file ends inside the record (\(part)); \(nothingMore) — the file was cut short"
                + " (an interrupted download or copy?); get a complete copy, or keep the records before this offset"
        case .source(let error) where error.kind == .truncated:
            offset = recordOffset ?? error.memberOffset
            message =
                "truncated: the file ends inside the record (in its gzip member at offset \(error.memberOffset));"
                + " \(nothingMore) — the file was cut short (an interrupted download or copy?); get a complete"
                + " copy, or keep the records before this offset"
        case .source(let error) where error.kind == .corrupt:
            offset = error.memberOffset
            message = "\(error.message) (\(nothingMore))"
        case .source(let error):
            offset = recordOffset ?? error.memberOffset
            message = "\(error.message) (\(nothingMore))"
        case .format(let text):
            offset = recordOffset ?? bytes.position
            message = "\(text) (\(nothingMore))"
        }
        guard within > 0, offset == recordOffset else { return WARCError(offset: offset, message: message) }
        return WARCError(
            offset: offset,
            message: message
                + " [the record starts \(within) bytes into the decompressed data of the gzip member at this offset]")
    }
}

/// The decompressed (or plain) bytes of a WARC file, with the gzip member each comes from.
final class WARCByteStream {
    private enum Source {
        case plain(WARCFileInput)
        case gzip(GzipFileReader)
    }

    private let source: Source
    /// Bytes read and not yet dropped; `buffer[start...]` are not consumed.
    var buffer: [UInt8] = []
    var start = 0
    /// The position in the (decompressed) byte stream of `buffer[0]`.
    private var bufferPosition: Int64 = 0
    /// Where gzip members start: the stream position of their first byte and their compressed
    /// offset, oldest first (only those that may still matter are kept).
    private var memberStarts: [(position: Int64, offset: Int64)] = []

    init(plain input: WARCFileInput) { source = .plain(input) }
    init(gzip reader: GzipFileReader) { source = .gzip(reader) }

    var isCompressed: Bool {
        if case .gzip = source { return true }
        return false
    }

    /// Bytes buffered and not consumed.
    var available: Int { buffer.count - start }

    /// The stream position of the next unconsumed byte (in a plain file, its file offset).
    var position: Int64 { bufferPosition + Int64(start) }

    /// Appends more bytes (possibly none, when a gzip member ends); false at the end of the file.
    func fill() throws(GzipError) -> Bool {
        if start > 0 && (start == buffer.count || start >= 1 << 20) {
            bufferPosition += Int64(start)
            buffer.removeSubrange(0..<start)
            start = 0
        }
        switch source {
        case .plain(let input):
            if input.available == 0 {
                do {
                    guard try input.refill() else { return false }
                } catch {
                    throw GzipError(kind: .unreadable, memberOffset: input.position, message: error.message)
                }
            }
            buffer.append(contentsOf: input.buffer[input.start...])
            input.start = input.buffer.count
        case .gzip(let reader):
            guard let chunk = try reader.read() else { return false }
            if chunk.startsMember {
                memberStarts.append((bufferPosition + Int64(buffer.count), chunk.memberOffset))
            }
            buffer.append(contentsOf: chunk.bytes)
        }
        return true
    }

    /// The file offset where the byte at stream `position` belongs: in a gzip file the offset of
    /// its member, and how far into the member's decompressed data it is. Members starting before
    /// it are forgotten.
    func memberOffset(at position: Int64) -> (offset: Int64, within: Int64) {
        guard isCompressed else { return (position, 0) }
        guard let index = memberStarts.lastIndex(where: { $0.position <= position }) else { return (0, position) }
        memberStarts.removeFirst(index)
        return (memberStarts[0].offset, position - memberStarts[0].position)
    }

    /// After a record: when nothing is buffered and the gzip member is not finished, reads on to
    /// its end (which checks its CRC-32) or to more of its bytes, so that a damaged or cut member
    /// is reported with the record in it rather than the next one.
    func settle() throws(GzipError) {
        guard case .gzip(let reader) = source else { return }
        while available == 0 && reader.isInsideMember { _ = try fill() }
    }

    /// When the stream is gzip: decompresses the rest of the current member (up to 64 MiB) to
    /// see whether it is corrupt, which explains malformed WARC data better than the format error.
    func corruptionInCurrentMember() -> GzipError? {
        guard case .gzip(let reader) = source else { return nil }
        var budget = 1 << 26
        while reader.isInsideMember && budget > 0 {
            do {
                guard let chunk = try reader.read() else { return nil }
                budget -= max(chunk.bytes.count, 1)
            } catch {
                return error.kind == .corrupt ? error : nil
            }
        }
        return nil
    }
}

/// What a WARC digest field (`WARC-Block-Digest`, `WARC-Payload-Digest`: `algorithm:digest`)
/// declares, for the SHA-1 digests this library checks.
enum DeclaredSHA1: Equatable {
    /// Another algorithm (or no `algorithm:` label): not checked.
    case otherAlgorithm
    /// SHA-1, but its digest is neither 32 base32 characters nor 40 hex digits.
    case unreadable
    /// The 20 bytes declared.
    case digest([UInt8])

    init(_ value: String) {
        guard let colon = value.firstIndex(of: ":") else {
            self = .otherAlgorithm
            return
        }
        let algorithm = WARCSyntax.text(WARCSyntax.trimmed(Array(value.utf8[..<colon])[...])).lowercased()
        guard algorithm == "sha1" || algorithm == "sha-1" else {
            self = .otherAlgorithm
            return
        }
        let text = WARCSyntax.text(WARCSyntax.trimmed(Array(value.utf8[value.index(after: colon)...])[...]))
        self = WARCReaderState.digestBytes(text).map(DeclaredSHA1.digest) ?? .unreadable
    }
}
