import CacheSemantics
import CacheStorage
import CacheSystem
import Foundation
import HTTPCacheCore

/// What `HTTPCache.importWARC(from:name:)` stored and refused.
public struct WARCImport: Sendable, Hashable {
    /// The pack made of the stored responses, without its list of resources (read it with
    /// `HTTPCache.pack(named:)`: a pack of a million records is not held in memory here).
    public var pack: OfflinePack
    /// Responses stored and listed in the pack (a URL recorded twice counts once).
    public var stored: Int
    /// Their body bytes.
    public var bytes: Int64
    /// `revisit` records stored with the payload they refer to.
    public var revisits: Int
    /// Response and revisit records not stored (request, metadata and warcinfo records are not
    /// counted).
    public var refused: Int
    /// The first ``listedLimit`` records not stored, with why; ``refused`` counts them all.
    public var skipped: [Skipped]
    /// How many records were not stored, by why.
    public var refusedByKind: [Skipped.Kind: Int]

    /// The most records ``skipped`` lists.
    public static let listedLimit = 1_000

    /// A record not stored.
    public struct Skipped: Sendable, Hashable {
        /// Where the record starts in the file.
        public var offset: Int64
        /// Why it was not stored.
        public var reason: String
        /// Why, in one word.
        public var kind: Kind

        /// Why a record was not stored.
        public enum Kind: String, Sendable, Hashable, CaseIterable {
            /// Its `WARC-Target-URI` is not an http(s) URL with a host.
            case notHTTP = "no http(s) target URI"
            /// Its block is not a well-formed HTTP response (or its payload was cut when archived).
            case malformed = "malformed HTTP response"
            /// Its block does not match its `WARC-Block-Digest`.
            case damaged = "block digest mismatch"
            /// Its payload does not match its SHA-1 `WARC-Payload-Digest`.
            case payloadDamaged = "payload digest mismatch"
            /// A `revisit` whose original is not in the file.
            case unresolved = "revisit of a record not in the file"
            /// The store did not keep it (over its size limit, a write failed).
            case notStored = "not kept by the store"
        }
    }
}

extension HTTPCache {
    /// Stores every HTTP `response` record of a WARC file (`.warc` or `.warc.gz`, WARC 1.0 or
    /// 1.1, from this or any other tool), pinned, and makes them a pack named `name` (default:
    /// the file's name). Chunked payloads are stored de-chunked; a `revisit` record of the
    /// identical-payload-digest profile is stored with the payload of the record it refers to.
    /// A later record for the same URL replaces an earlier one.
    ///
    /// Each payload streams from the file into the store as the store takes it: memory stays
    /// bounded whatever the file holds (a record that inflates to gigabytes is refused by the
    /// store at its size limit and the rest of it skipped; millions of records cost a few dozen
    /// bytes each, the pack's list being kept in a temporary file until it is written).
    ///
    /// A record that cannot be stored (no http(s) `WARC-Target-URI`, a malformed HTTP response,
    /// a block digest mismatch, a payload that fails its SHA-1 `WARC-Payload-Digest`, over the
    /// store's size limit) is skipped and the import goes on;
    /// the pack lists only what was stored, and names what was refused as its problems (so it is
    /// not complete). A truncated or corrupt file stops the import with a `WARCError` naming the
    /// offset of the bad record: the records before it are stored (not pinned, and no pack is
    /// made), nothing from it onward.
    public func importWARC(from path: String, name: String? = nil) async throws -> WARCImport {
        var reader = try WARCReader(path: path)
        let replayer = Replayer(self)
        let ledger = try ImportLedger()
        var result = WARCImport(
            pack: OfflinePack(name: name ?? (path as NSString).lastPathComponent, page: "", savedAt: 0, resources: []),
            stored: 0, bytes: 0, revisits: 0, refused: 0, skipped: [], refusedByKind: [:])
        while let record = try reader.nextHeader() {
            guard let type = record.type?.lowercased(), type == "response" || type == "revisit" else { continue }
            do {
                let imported = try await importRecord(record, type: type, from: &reader, ledger, replayer)
                if type == "revisit" { result.revisits += 1 }
                try ledger.add(imported, digest: record[field: "WARC-Payload-Digest"])
            } catch let refusal as RecordRefusal {
                result.refused += 1
                result.refusedByKind[refusal.kind, default: 0] += 1
                if result.skipped.count < WARCImport.listedLimit {
                    result.skipped.append(.init(offset: record.offset, reason: refusal.reason, kind: refusal.kind))
                }
            }
        }
        try ledger.eachStored { resource in
            if let url = URL(string: resource.url) { _ = pin(url) }
        }
        var pack = result.pack
        pack.page = ledger.firstHTML ?? ledger.first ?? ""
        pack.savedAt = Date().timeIntervalSince1970
        pack.problems = result.skipped.map {
            OfflinePack.Problem(url: "record at offset \($0.offset)", reason: $0.reason, isFailure: true)
        }
        if result.refused > result.skipped.count {
            pack.problems.append(
                OfflinePack.Problem(
                    url: "\(result.refused - result.skipped.count) more records",
                    reason: "not stored either (only the first \(WARCImport.listedLimit) are listed)",
                    isFailure: true))
        }
        // The list is written (and a URL recorded twice counted once) before the totals are read;
        // straight to disk, as the records were (see `Replayer`). It replaces a pack of the same
        // name, as a save does: what only the old one held is unpinned and removed.
        let previous = try PackRecord.read(pack.name, in: store)
        try PackRecord.write(pack, to: (store as? TieredStore)?.disk ?? store) { append throws(StorageError) in
            try ledger.resourceJSON(append)
        }
        if let previous { _ = try removeUnused(previous.resources.map(\.url)) }
        result.pack = pack
        result.stored = ledger.count
        result.bytes = ledger.bytes
        return result
    }

    /// Stores one `response` or `revisit` record whose header `reader` has just read.
    ///
    /// - Throws: ``RecordRefusal`` when it is not stored; `WARCError` only when the file itself is
    ///   damaged (then the reader throws it again at once).
    private func importRecord(
        _ record: WARCRecord, type: String, from reader: inout WARCReader, _ ledger: ImportLedger,
        _ replayer: Replayer
    ) async throws -> OfflinePack.Resource {
        guard let uri = record.targetURI, let url = URL(string: uri),
            ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host?.isEmpty == false,
            case .url = BrowserURL.parse(uri)
        else {
            throw RecordRefusal(
                .notHTTP, "not an http(s) response: \(record.targetURI.map { "\"\($0)\"" } ?? "no target")")
        }
        let refuse = { (kind: WARCImport.Skipped.Kind, reason: String) in RecordRefusal(kind, "\(uri): \(reason)") }
        // The HTTP head, read from the start of the block (at most 1 MiB).
        var start: [UInt8] = []
        var head: HTTPResponseBlock.Head?
        do {
            while head == nil {
                guard let piece = try reader.readBlock() else { break }
                start += piece
                head = try HTTPResponseBlock.parseHead(start[...])
                if head == nil, start.count > ImportLedger.headLimit {
                    throw HTTPBlockError(message: "the HTTP head is longer than 1 MiB without ending")
                }
            }
        } catch let error as WARCError {
            throw refuse(.damaged, error.message)
        } catch let error as HTTPBlockError {
            throw refuse(.malformed, error.message)
        }
        guard let head else {
            throw refuse(
                .malformed,
                start.isEmpty
                    ? "the block is empty — a response record's block starts with the HTTP status line"
                    : "the HTTP head does not end (no empty line after its fields) — the block is not an HTTP"
                        + " response, or it was cut")
        }
        let rest = Array(start[head.length...])
        start = []
        let framing: HTTPResponseBlock.Framing
        do {
            framing = try HTTPResponseBlock.framing(
                of: head, restLength: rest.count + reader.unreadBlockBytes, payloadMayBeOmitted: type == "revisit")
        } catch {
            throw refuse(.malformed, error.message)
        }
        var fields = head.fields.map { ($0.name, $0.value) }
        var status = head.statusCode
        let pump: PayloadPump
        var length: Int64?
        if type == "revisit" {
            // The identical-payload-digest profile refers to an earlier record's payload; this
            // block is read to its end first, so that its digest is checked.
            do {
                while try reader.readBlock(maximum: 1 << 20) != nil {}
            } catch {
                throw refuse(.damaged, error.message)
            }
            guard let digest = record[field: "WARC-Payload-Digest"], let earlier = try ledger.url(forDigest: digest),
                let earlierURL = URL(string: earlier),
                let entry = try entries(for: earlierURL).first(where: \.isComplete)
            else {
                throw RecordRefusal(.unresolved, "revisit of \(uri): the record it refers to is not in this file")
            }
            if head.statusCode == 304 || fields.isEmpty { fields = entry.fields.map { ($0.name, $0.value) } }
            if status == 304 { status = 200 }
            do {
                pump = PayloadPump(stored: try store.openBody(of: entry.id))
            } catch {
                throw RecordRefusal(.unresolved, "revisit of \(uri): the payload it refers to cannot be read: \(error)")
            }
            length = entry.bodySize
        } else {
            switch framing {
            case .empty: length = 0
            case .whole: length = Int64(rest.count + reader.unreadBlockBytes)
            case .chunked: length = nil
            }
            pump = PayloadPump(
                reader: reader, leftover: rest, chunked: framing == .chunked,
                payloadDigest: record[field: "WARC-Payload-Digest"])
        }
        var headers: [String: String] = [:]
        for (name, value) in fields
        where !["transfer-encoding", "content-length", "connection", "keep-alive"].contains(name.lowercased()) {
            headers[name] = headers[name].map { "\($0), \(value)" } ?? value
        }
        if let length { headers["Content-Length"] = String(length) }
        let refusal: String?
        do {
            refusal = try await replayer.store(url: url, status: status, fields: headers, body: pump.stream)
        } catch {
            // The payload's own failure, when it was the cause; else the cache's.
            if let failure = pump.failure { throw refuse(failure.kind, failure.reason) }
            throw refuse(.notStored, String(describing: error))
        }
        // The store's own words name the URL.
        if let refusal { throw RecordRefusal(.notStored, refusal) }
        return OfflinePack.Resource(
            url: uri, status: status, size: pump.delivered, contentType: headers["Content-Type"],
            etag: headers["ETag"], lastModified: headers["Last-Modified"], savedAt: Date().timeIntervalSince1970)
    }
}

/// Why one record of a WARC file is not stored.
struct RecordRefusal: Error {
    var kind: WARCImport.Skipped.Kind
    var reason: String

    init(_ kind: WARCImport.Skipped.Kind, _ reason: String) {
        self.kind = kind
        self.reason = reason
    }
}

/// The payload of the record being imported, pulled by the store as it takes it in: the rest of
/// the record's block (de-chunked when chunked), or a stored body (a revisit's). Nothing is read
/// ahead, so memory holds one piece at a time.
///
/// A failure (a damaged block, a malformed chunked payload) ends the stream as a cancellation,
/// so that the cache abandons the entry rather than keeping the part as an incomplete response
/// to complete later (RFC 9111 §3.3): ``failure`` says what it was.
final class PayloadPump: Sendable {
    private enum Source {
        case block(WARCReader, leftover: [UInt8], decoder: ChunkedPayloadDecoder?, digests: PayloadDigests?)
        case stored(any StoredBody, offset: Int64)
        case finished
    }

    private struct State {
        var source: Source
        var failure: (kind: WARCImport.Skipped.Kind, reason: String)?
        var delivered: Int64 = 0
    }

    private let state: Locked<State>
    static let pieceSize = 256 * 1024

    /// The rest of `reader`'s current block, after `leftover` (read with the HTTP head),
    /// checked at its end against `payloadDigest` (the record's `WARC-Payload-Digest`) when that
    /// is a SHA-1 one.
    init(reader: WARCReader, leftover: [UInt8], chunked: Bool, payloadDigest: String? = nil) {
        state = Locked(
            State(
                source: .block(
                    reader, leftover: leftover, decoder: chunked ? ChunkedPayloadDecoder() : nil,
                    digests: payloadDigest.map { PayloadDigests($0, chunked: chunked) })))
    }

    init(stored body: any StoredBody) {
        state = Locked(State(source: .stored(body, offset: 0)))
    }

    /// Why the payload could not be read, when it could not.
    var failure: (kind: WARCImport.Skipped.Kind, reason: String)? { state.withLock { $0.failure } }
    /// Payload bytes handed over.
    var delivered: Int64 { state.withLock { $0.delivered } }

    var stream: AsyncThrowingStream<Data, any Error> {
        AsyncThrowingStream(unfolding: { [self] in try self.next() })
    }

    private func next() throws -> Data? {
        try state.withLock { state throws(CancellationError) -> Data? in
            do throws(RecordRefusal) {
                while true {
                    guard let piece = try Self.piece(&state.source) else { return nil }
                    if piece.isEmpty { continue }
                    state.delivered += Int64(piece.count)
                    return Data(piece)
                }
            } catch {
                state.source = .finished
                state.failure = (error.kind, error.reason)
                throw CancellationError()
            }
        }
    }

    /// The next payload bytes (possibly none, when a chunked piece held only framing), or nil at
    /// the end.
    private static func piece(_ source: inout Source) throws(RecordRefusal) -> [UInt8]? {
        switch source {
        case .finished:
            return nil
        case .stored(let body, let offset):
            guard offset < body.size else {
                source = .finished
                return nil
            }
            let last = min(body.size, offset + Int64(pieceSize)) - 1
            do {
                let bytes = try body.read(offset...last)
                guard !bytes.isEmpty else { throw StorageError(.corrupted, "the stored body ended at \(offset)") }
                source = .stored(body, offset: offset + Int64(bytes.count))
                return bytes
            } catch {
                throw RecordRefusal(.unresolved, "the payload it refers to could not be read: \(error)")
            }
        case .block(var reader, let leftover, var decoder, var digests):
            var raw = leftover
            if raw.isEmpty {
                let read: [UInt8]?
                do { read = try reader.readBlock(maximum: pieceSize) } catch {
                    throw RecordRefusal(.damaged, error.message)
                }
                guard let read else {
                    source = .finished
                    if var decoder {
                        do { _ = try decoder.finish() } catch { throw RecordRefusal(.malformed, error.message) }
                    }
                    return nil
                }
                raw = read
            }
            var output = raw
            if decoder != nil {
                output = []
                do { try decoder?.feed(raw[...], into: &output) } catch {
                    throw RecordRefusal(.malformed, error.message)
                }
            }
            digests?.update(raw: raw, payload: output)
            // Before the last bytes are handed over: the store commits a body once it has them
            // all, and a payload that fails its digest must not be stored.
            if reader.unreadBlockBytes == 0, let failure = digests?.mismatch {
                throw RecordRefusal(.payloadDamaged, failure)
            }
            source = .block(reader, leftover: [], decoder: decoder, digests: digests)
            return output
        }
    }
}

/// A record's SHA-1 `WARC-Payload-Digest` and the digests of its payload as it is read. Tools
/// differ on a chunked payload (WARC 1.1 names the entity body, some hash the bytes as sent):
/// either digest matching is a match.
struct PayloadDigests {
    private let field: String
    private let declared: DeclaredSHA1
    private var raw = SHA1()
    private var decoded = SHA1()
    /// Whether the payload is chunked, so that its de-chunked bytes are hashed too.
    private let chunked: Bool

    init(_ field: String, chunked: Bool) {
        self.field = field
        declared = DeclaredSHA1(field)
        self.chunked = chunked
    }

    mutating func update(raw bytes: [UInt8], payload: [UInt8]) {
        guard declared != .otherAlgorithm else { return }
        raw.update(bytes)
        if chunked { decoded.update(payload) }
    }

    /// Why the payload is not the one declared; nil when it is, or when the digest is not SHA-1.
    var mismatch: String? {
        let expected: [UInt8]
        switch declared {
        case .otherAlgorithm: return nil
        case .unreadable:
            return "WARC-Payload-Digest \"\(field)\" is not a SHA-1 digest in base32 or hex — the header is damaged"
        case .digest(let bytes): expected = bytes
        }
        let digests = chunked ? [raw.finalize(), decoded.finalize()] : [raw.finalize()]
        guard !digests.contains(expected) else { return nil }
        return "WARC-Payload-Digest says \(field) but the payload's SHA-1 is sha1:\(Base32.encode(digests[0]))"
            + " — the record was changed or damaged after it was written; it is not stored"
    }
}

/// What an import has stored so far, kept in a temporary file rather than in memory: a line per
/// stored record (a 32-bit hash of its URL, its pack resource as JSON, its payload digest).
///
/// In memory: a set of those 32-bit hashes (about 8 bytes a record), the URLs whose hash was seen
/// before (a URL recorded twice, or the rare collision), and, only once a `revisit` record needs
/// it, an index from payload digests to lines. A URL recorded twice is listed once, from its
/// last record, when the pack is written.
final class ImportLedger {
    static let headLimit = 1 << 20
    private let handle: FileHandle
    private var pending: [UInt8] = []
    /// Bytes written to the file before `pending`.
    private var flushed: UInt64 = 0
    private var urlHashes = Set<UInt32>()
    /// URLs whose hash was already in `urlHashes` when they were added.
    private var maybeRepeated = Set<String>()
    private var byDigest: HashedIndex?
    /// Resources listed (a URL recorded twice counts once after ``resourceJSON(_:)``), and their
    /// bytes.
    private(set) var count = 0
    private(set) var bytes: Int64 = 0
    /// The first URL stored, and the first whose type is HTML (the pack's page).
    private(set) var first: String?
    private(set) var firstHTML: String?

    init() throws {
        let path = NSTemporaryDirectory() + "/httpcache-import-\(UUID().uuidString)"
        guard FileManager.default.createFile(atPath: path, contents: nil),
            let handle = FileHandle(forUpdatingAtPath: path)
        else {
            throw StorageError(
                .writeFailed,
                "cannot create a temporary file in \(NSTemporaryDirectory()) for the import's list of records;"
                    + " set TMPDIR to a writable directory")
        }
        self.handle = handle
        try? FileManager.default.removeItem(atPath: path)  // open, and gone when closed
    }

    deinit { try? handle.close() }

    static func hash(_ text: String) -> UInt32 {
        var hasher = Hasher()
        hasher.combine(text)
        return UInt32(truncatingIfNeeded: hasher.finalize())
    }

    /// One line: the URL's hash, the resource's JSON and the payload digest, tab-separated (JSON
    /// escapes tabs; a digest with one is not indexed).
    private struct Line {
        var urlHash: UInt32
        var json: ArraySlice<UInt8>
        var digest: String

        init(_ bytes: [UInt8]) {
            let fields = bytes.split(separator: 0x09, maxSplits: 2, omittingEmptySubsequences: false)
            urlHash = fields.first.flatMap { UInt32(String(decoding: $0, as: UTF8.self), radix: 16) } ?? 0
            json = fields.count > 1 ? fields[1] : []
            digest = fields.count > 2 ? String(decoding: fields[2], as: UTF8.self) : ""
        }

        static func bytes(_ resource: OfflinePack.Resource, digest: String?) throws -> [UInt8] {
            Array(String(ImportLedger.hash(resource.url), radix: 16).utf8) + [0x09]
                + (try PackRecord.encoded(resource, url: resource.url)) + [0x09] + Array((digest ?? "").utf8) + [0x0A]
        }

        func resource() throws -> OfflinePack.Resource {
            try JSONDecoder().decode(OfflinePack.Resource.self, from: Data(json))
        }
    }

    /// Lists `resource` (stored).
    func add(_ resource: OfflinePack.Resource, digest: String?) throws {
        let offset = flushed + UInt64(pending.count)
        if !urlHashes.insert(Self.hash(resource.url)).inserted { maybeRepeated.insert(resource.url) }
        // A digest is a token (ISO 28500 "labelled-digest"): one with a tab or a line break is
        // not one, and is not indexed.
        let digest = digest.flatMap { $0.utf8.contains { $0 == 0x09 || $0 == 0x0A || $0 == 0x0D } ? nil : $0 }
        if let digest, byDigest != nil { try byDigest?.set(digest, offset, reading: { try self.line(at: $0).digest }) }
        pending += try Line.bytes(resource, digest: digest)
        if pending.count >= 1 << 16 { try flush() }
        count += 1
        bytes += resource.size
        if first == nil { first = resource.url }
        if firstHTML == nil, resource.contentType.map(mediaType) == "text/html" { firstHTML = resource.url }
    }

    /// The URL of the latest stored record whose payload digest is `digest`. The index is made
    /// from the file the first time a revisit asks.
    func url(forDigest digest: String) throws -> String? {
        if byDigest == nil {
            var index = HashedIndex()
            try lines { offset, line in
                if !line.digest.isEmpty {
                    try index.set(line.digest, offset, reading: { try self.line(at: $0).digest })
                }
            }
            byDigest = index
        }
        return try byDigest?.offset(of: digest, reading: { try self.line(at: $0).digest }).map {
            try line(at: $0).resource().url
        }
    }

    /// Calls `body` with every resource stored (a URL recorded twice, twice), in order.
    func eachStored(_ body: (OfflinePack.Resource) throws -> Void) throws {
        try lines { _, line in try body(try line.resource()) }
    }

    /// Hands over the JSON of every resource to list, in the order stored: a URL recorded twice
    /// once, from its last record; ``count`` and ``bytes`` are then the list's.
    func resourceJSON(_ append: ([UInt8]) throws(StorageError) -> Void) throws(StorageError) {
        do {
            // How many times each URL that may be repeated is there (its hash alone may be).
            let suspects = Set(maybeRepeated.map(Self.hash))
            var left: [String: Int] = [:]
            if !suspects.isEmpty {
                try lines { _, line in
                    guard suspects.contains(line.urlHash) else { return }
                    let url = try line.resource().url
                    if maybeRepeated.contains(url) { left[url, default: 0] += 1 }
                }
            }
            try lines { _, line in
                if suspects.contains(line.urlHash) {
                    let resource = try line.resource()
                    if let remaining = left[resource.url] {
                        left[resource.url] = remaining - 1
                        guard remaining == 1 else {
                            count -= 1
                            bytes -= resource.size
                            return
                        }
                    }
                }
                try append(Array(line.json))
            }
        } catch let error as StorageError {
            throw error
        } catch {
            throw StorageError(.readFailed, "the import's list of records could not be read back: \(error)")
        }
    }

    private func flush() throws {
        guard !pending.isEmpty else { return }
        try handle.seekToEnd()
        try handle.write(contentsOf: pending)
        flushed += UInt64(pending.count)
        pending.removeAll(keepingCapacity: true)
    }

    private func line(at offset: UInt64) throws -> Line {
        if offset >= flushed {
            return Line(Array(pending[Int(offset - flushed)...].prefix { $0 != 0x0A }))
        }
        try handle.seek(toOffset: offset)
        var bytes: [UInt8] = []
        while let data = try handle.read(upToCount: 4096), !data.isEmpty {
            if let newline = data.firstIndex(of: 0x0A) {
                bytes += data[..<newline]
                break
            }
            bytes += data
        }
        return Line(bytes)
    }

    /// Calls `body` with each line and its offset, in order.
    private func lines(_ body: (UInt64, Line) throws -> Void) throws {
        try flush()
        try handle.seek(toOffset: 0)
        var offset: UInt64 = 0
        var partial: [UInt8] = []
        while let data = try handle.read(upToCount: 1 << 16), !data.isEmpty {
            partial += data
            var start = 0
            while let newline = partial[start...].firstIndex(of: 0x0A) {
                try body(offset, Line(Array(partial[start..<newline])))
                offset += UInt64(newline + 1 - start)
                start = newline + 1
            }
            partial.removeFirst(start)
        }
    }
}

/// Strings to file offsets by a 32-bit hash of each string; a collision (two strings, one hash)
/// sends the later string to a small exact table. `reading` gives the string a line holds.
struct HashedIndex {
    private var byHash: [UInt32: UInt64] = [:]
    private var collided: [String: UInt64] = [:]

    func offset(of key: String, reading: (UInt64) throws -> String) throws -> UInt64? {
        if let offset = collided[key] { return offset }
        guard let offset = byHash[ImportLedger.hash(key)], try reading(offset) == key else { return nil }
        return offset
    }

    mutating func set(_ key: String, _ offset: UInt64, reading: (UInt64) throws -> String) throws {
        if collided[key] != nil {
            collided[key] = offset
            return
        }
        let hash = ImportLedger.hash(key)
        if let existing = byHash[hash], try reading(existing) != key {
            collided[key] = offset
        } else {
            byHash[hash] = offset
        }
    }
}
