import CacheSemantics
import CacheStorage
import CacheSystem

/// A stored response as a cache serves it: status, fields and what of the stored body goes out.
///
/// The fields are the stored ones with `Age` (RFC 9111 §4, §5.1), the cache's `Cache-Status`
/// member appended (RFC 9211 §2; when the cache adds it) and a `Content-Length` that matches
/// what is sent. The client's own validators that match give `304` (RFC 9111 §4.3.2); a `Range`
/// gives `206` with one part, or `multipart/byteranges` for several (RFC 9110 §14.2, §14.6),
/// or `416` (§15.5.17).
public struct ServedResponse: Sendable {
    /// What of the body goes out.
    public enum Body: Sendable {
        /// Nothing: a `304`, a `416`, or any answer to `HEAD` (`Content-Length` says what a
        /// `GET` would carry).
        case none
        /// Bytes `range` of the stored body, opened before the response was chosen to go out,
        /// so it is this version to the end (all of it, or one range).
        case stored(any StoredBody, range: Range<Int64>)
        /// A body the cache made from the stored one (`multipart/byteranges`).
        case bytes([UInt8])

        /// How many bytes are sent.
        public var count: Int64 {
            switch self {
            case .none: 0
            case .stored(_, let range): Int64(range.count)
            case .bytes(let bytes): Int64(bytes.count)
            }
        }
    }

    /// The status: the stored one, or `304`, `206`, `416`.
    public var status: Int
    /// The fields as they go out: the stored ones, then those this answer adds (`Age`, the
    /// cache's `Cache-Status`). For a host that serializes stored fields itself they are kept
    /// apart until read, so that a plain hit does not copy the stored ones; set, they are all
    /// taken as stored.
    public var fields: HeaderFields {
        get {
            guard !addedFields.isEmpty else { return storedFields }
            var all = storedFields
            all.reserveCapacity(all.count + addedFields.count)
            for field in addedFields { all.append(field) }
            return all
        }
        set {
            storedFields = newValue
            addedFields = HeaderFields()
        }
    }
    /// For a host that serializes stored fields itself (``ExchangeDriver/Configuration/storedFieldsSerializer``),
    /// the fields every answer from this version of the entry starts with, shared with what the
    /// cache remembers of it (a plain hit does not copy them; the host writes ``serializedFields``
    /// and then ``addedFields``); for any other host, all of ``fields``.
    package internal(set) var storedFields: HeaderFields
    /// What this answer adds after ``storedFields`` when they are kept apart: `Age` and the
    /// cache's `Cache-Status`; empty otherwise.
    package internal(set) var addedFields: HeaderFields
    /// What of the body goes out.
    public var body: Body
    /// How the response was obtained.
    public var outcome: CacheOutcome
    /// The cache's `Cache-Status` member (also in ``fields`` when the cache adds the field).
    public var cacheStatus: CacheStatus
    /// Why this response was served (worked out when asked).
    public var reasons: [Reason] {
        get { use.reasons }
        set { use.reasons = newValue }
    }
    /// How the stored response is used; holds ``reasons``.
    var use: CachedUse
    /// The stored entry served (its `userInfo`, its URL).
    public var entry: StoredEntry {
        _read { yield candidate.entry }
        _modify { yield &candidate.entry }
    }
    /// Holds ``entry``: one retain per copy of the response.
    var candidate: StoredCandidate
    /// The request was sent to the origin first, and this replaces its answer (a stale
    /// response served after a `5xx`, a freshened response after a `304`): what the origin
    /// sent is dropped.
    public var replacesOriginResponse: Bool
    /// The stored fields as the host's serializer wrote them, when ``fields`` are those
    /// fields followed only by the ones each answer adds (`Age`, `Cache-Status`, a corrected
    /// `Content-Length`, which the serializer leaves out) and the whole stored body goes out:
    /// a host may send these bytes, then the fields after the first
    /// ``ServedResponse/SerializedFields/count``. `nil` otherwise (a `304`, a range, `HEAD`, a
    /// changed field); a host that changes ``fields`` drops it.
    public var serializedFields: SerializedFields?

    /// The bytes a host made of a stored entry's fields once, kept for every answer from the
    /// same version of the entry (``ExchangeDriver/Configuration/storedFieldsSerializer``).
    public struct SerializedFields: Sendable {
        /// The fields' bytes, as the host sends them.
        public let bytes: [UInt8]
        /// How many of ``ServedResponse/fields`` the bytes stand for (the first ones).
        public let count: Int
    }
}

/// A response the cache makes itself, with no stored body: a `504` when nothing stored may
/// answer (RFC 9111 §5.2.1.7, §4.2.4).
public struct CacheAnswer: Sendable {
    public var status: Int
    /// `Content-Type`, `Cache-Control: no-store`, `Content-Length` and `Cache-Status`.
    public var fields: HeaderFields
    /// A line of plain text saying what happened.
    public var body: [UInt8]
    public var cacheStatus: CacheStatus
    public var reasons: [Reason]
    /// The request was sent to the origin first and its answer is dropped.
    public var replacesOriginResponse: Bool

    /// `504 Gateway Timeout`, saying why.
    static func gatewayTimeout(
        _ reasons: [Reason], cacheStatus: CacheStatus, addsCacheStatus: Bool, replacesOriginResponse: Bool
    ) -> CacheAnswer {
        let text =
            "504 Gateway Timeout: the cache could not answer: " + reasons.map(\.description).joined(separator: "; ")
            + "\n"
        let body = Array(text.utf8)
        var fields: HeaderFields = [
            "Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-store",
            "Content-Length": String(body.count),
        ]
        if addsCacheStatus { fields[.cacheStatus] = cacheStatus.fieldValue }
        return CacheAnswer(
            status: 504, fields: fields, body: body, cacheStatus: cacheStatus, reasons: reasons,
            replacesOriginResponse: replacesOriginResponse)
    }
}

/// The fields every answer from one version of a stored entry starts with (the stored fields
/// without `Age`, transformed by the host, e.g. with its `Via`), and what a hit checks of them:
/// made once per version (``CandidateReader`` keeps it with the candidate), so a hit costs a
/// few field appends. A class: a candidate carries it with one reference.
final class ServedBase: Sendable {
    let fields: HeaderFields
    let hasCacheStatus: Bool
    /// The stored `Content-Length`, when there is one: `nil` when absent, `-1` when it is
    /// not a number.
    let declaredLength: Int64?
    /// The same in ``fields`` (after the host's transform).
    let fieldsLength: Int64?
    /// ``fields`` as the host's serializer writes them.
    let serialized: ServedResponse.SerializedFields?

    /// The heap memory the base holds beyond the stored fields it was made of, whose strings
    /// its fields share: the object, its fields' array, the strings the transform added, the
    /// serialized bytes. Counted once, when made (a memo charges it for each entry and key).
    let memoryCost: Int

    init(
        fields: HeaderFields, storedFields: HeaderFields, declaredLength: Int64?,
        serialized: ServedResponse.SerializedFields?
    ) {
        self.fields = fields
        hasCacheStatus = fields.contains(.cacheStatus)
        self.declaredLength = declaredLength
        fieldsLength = fields[.contentLength].map { Int64($0) ?? -1 }
        self.serialized = serialized
        let strings = { (fields: HeaderFields) in
            MemoryCost.fields(fields) - MemoryCost.array(count: fields.count, stride: MemoryLayout<HeaderField>.stride)
        }
        memoryCost =
            MemoryCost.allocation(16 + MemoryLayout<HeaderFields>.stride + 2 * 9 + 2 * 9 + 8 + 8 + 16)
            + MemoryCost.array(count: fields.count, stride: MemoryLayout<HeaderField>.stride)
            + max(0, strings(fields) - strings(storedFields)) + (serialized.map { MemoryCost.bytes($0.bytes) } ?? 0)
    }
}

/// Builds ``ServedResponse``s. The fields every answer from one entry starts with are made
/// once per version of the entry (``base(_:)``, kept with its candidate by ``CandidateReader``),
/// and a plain hit's `Cache-Status` is written without the structured-field serializer.
final class ServedResponseBuilder: Sendable {
    private let engine: CacheEngine
    private let name: String
    private let addsCacheStatus: Bool
    private let transform: (@Sendable (HeaderFields) -> HeaderFields)?
    private let serializer: (@Sendable (HeaderFields) -> [UInt8])?
    /// `NAME; hit; ttl=` when the name is a token (serialized as is, RFC 9211 §2).
    private let hitStatusPrefix: String?

    init(
        engine: CacheEngine, name: String, addsCacheStatus: Bool,
        transform: (@Sendable (HeaderFields) -> HeaderFields)?,
        serializer: (@Sendable (HeaderFields) -> [UInt8])?
    ) {
        self.engine = engine
        self.name = name
        self.addsCacheStatus = addsCacheStatus
        self.transform = transform
        self.serializer = serializer
        hitStatusPrefix = CacheStatus(cache: name).fieldValue.hasPrefix(name + ";") ? name + "; hit; ttl=" : nil
    }

    /// The stored fields as every answer starts: without `Age`, transformed (and serialized,
    /// when the host serializes).
    func base(_ entry: StoredEntry) -> ServedBase {
        var fields = entry.head.fields
        fields.removeAll(named: .age)
        if let transform { fields = transform(fields) }
        return ServedBase(
            fields: fields, storedFields: entry.head.fields,
            declaredLength: entry.head.fields[.contentLength].map { Int64($0) ?? -1 },
            serialized: serializer.map { ServedResponse.SerializedFields(bytes: $0(fields), count: fields.count) })
    }

    /// `prefix` followed by `number` in decimal, written at once (`+` on strings goes through
    /// the general append path, the largest cost of a hit's `Cache-Status`).
    static func joined(_ prefix: String, _ number: Int) -> String {
        String(unsafeUninitializedCapacity: prefix.utf8.count + 20) { buffer in
            var text = TextWriter(buffer)
            text.append(prefix)
            text.append(number)
            return text.count
        }
    }

    /// The response for `answer` to `request` from `body`, its fields starting as `base` (made
    /// of the answer's entry by ``base(_:)``); `nil` when the stored response is damaged: its
    /// `Content-Length` disagrees with the body stored (the caller drops it), or a part of the
    /// body needed now (several ranges) cannot be read (the store has dropped it).
    func serve(
        _ answer: ExchangeStateMachine.StoredAnswer, base: ServedBase, body: any StoredBody, request: RequestHead
    ) -> ServedResponse? {
        let candidate = answer.candidate
        let use = answer.use
        let cacheStatus = answer.cacheStatus
        // An incomplete response holds fewer bytes than it declares; the lookup chose it for
        // a range it holds (RFC 9111 §3.4), so its length is the complete one it declares.
        let incomplete = candidate.facts.flags.has(.incomplete)
        if !incomplete, let declared = base.declaredLength, declared != body.size { return nil }
        // Age and Cache-Status go after the stored fields. A host that writes the stored fields
        // itself (it serializes them once per version) reads the two apart, so the stored ones
        // stay the base's own, not copied; for any other host they are put together now, once.
        let apart = base.serialized != nil
        var added = apart ? HeaderFields() : base.fields
        added.reserveCapacity(added.count + 2)
        added.append(HeaderField(name: .age, value: use.ageFieldValue))
        if addsCacheStatus && !base.hasCacheStatus {
            if let prefix = hitStatusPrefix, cacheStatus.hit, cacheStatus.detail == nil, let ttl = cacheStatus.ttl,
                cacheStatus.forward == nil, cacheStatus.collapsed == nil
            {
                added.append(HeaderField(name: .cacheStatus, value: Self.joined(prefix, ttl)))
            } else {
                added.append(HeaderField(name: .cacheStatus, value: cacheStatus.appended(to: nil)))
            }
        }
        let (stored, after) = apart ? (base.fields, added) : (added, HeaderFields())
        var served = ServedResponse(
            status: candidate.entry.head.status, storedFields: stored, addedFields: after,
            body: .stored(body, range: 0..<body.size), outcome: answer.outcome, cacheStatus: cacheStatus, use: use,
            candidate: candidate, replacesOriginResponse: answer.replacesOriginResponse)
        // A stored Cache-Status (another cache's members) gets this cache's member appended in place.
        if addsCacheStatus && base.hasCacheStatus {
            served.fields[.cacheStatus] = cacheStatus.appended(to: base.fields[.cacheStatus])
        }
        // Age and Cache-Status went after the stored fields, which are unchanged so far.
        if !base.hasCacheStatus { served.serializedFields = base.serialized }
        if use.notModified {
            // The client's own validators match (RFC 9111 §4.3.2): 304, no body, and of the
            // representation metadata only what RFC 9110 §15.4.5 lists: Content-Location,
            // ETag, Vary, Cache-Control, Expires (and Date), with Last-Modified only when
            // there is no ETag to guide the client's cache update.
            served.status = 304
            served.serializedFields = nil
            for name in ServedResponse.notModifiedOmits { served.fields.removeAll(named: name) }
            if served.fields.contains(.eTag) { served.fields.removeAll(named: .lastModified) }
            served.body = .none
            return served
        }
        // A part's bytes start at its offset in the representation (`StoredParts`).
        let size = incomplete ? candidate.facts.contentLength ?? body.size : body.size
        let offset = incomplete ? StoredParts.offset(candidate.entry.head.fields) : 0
        if incomplete { served.fields.removeAll(named: .contentRange) }
        let range = engine.rangeAnswer(
            method: request.method, request: request.fields, stored: candidate.facts, length: size)
        if range != .whole {
            // The stored Content-Digest is of the stored content; a 206's or 416's content is
            // other bytes (RFC 9530 §2). Repr-Digest, of the representation, still holds.
            served.fields.removeAll(named: .contentDigest)
        }
        switch range {
        case .whole:
            if incomplete { return nil }
        case .partial(let ranges) where ranges.count == 1:
            served.serializedFields = nil
            let range = ranges[0]
            served.status = 206
            served.fields[.contentRange] = ContentRange(range: range, completeLength: size).fieldValue
            served.body = .stored(body, range: (range.lowerBound - offset)..<(range.upperBound + 1 - offset))
        case .partial(let ranges):
            guard
                let parts = try? MultipartByteRanges(
                    body, ranges, offset: offset, completeLength: size, contentType: base.fields[.contentType])
            else {
                return nil
            }
            served.status = 206
            served.serializedFields = nil
            served.fields[.contentType] = "multipart/byteranges; boundary=\(parts.boundary)"
            served.body = .bytes(parts.bytes)
        case .unsatisfiable(let length):
            served.status = 416
            served.serializedFields = nil
            served.fields[.contentRange] = ContentRange(range: nil, completeLength: length).fieldValue
            served.body = .bytes([])
        }
        if base.fieldsLength != served.body.count { served.fields[.contentLength] = String(served.body.count) }
        if request.method == "HEAD" {
            served.body = .none
            served.serializedFields = nil
        }
        return served
    }
}

extension ServedResponse {
    /// Representation metadata (RFC 9110 §8) that a `304` does not carry (§15.4.5).
    static let notModifiedOmits: [HeaderField.Name] = [
        .contentLength, .contentType, .contentEncoding, .contentLanguage, .contentRange,
    ]
}

/// A `multipart/byteranges` body of ranges of a stored body (RFC 9110 §14.6).
struct MultipartByteRanges {
    let boundary: String
    let bytes: [UInt8]

    /// `ranges` of a representation of `completeLength` bytes, of which `body` holds those
    /// from `offset` on.
    init(
        _ body: any StoredBody, _ ranges: [ClosedRange<Int64>], offset: Int64, completeLength: Int64,
        contentType: String?
    ) throws(StorageError) {
        boundary = "httpcache-" + EntryID().rawValue
        var bytes: [UInt8] = []
        for range in ranges {
            var part = "--\(boundary)\r\n"
            if let contentType { part += "Content-Type: \(contentType)\r\n" }
            part += "Content-Range: \(ContentRange(range: range, completeLength: completeLength).fieldValue)\r\n\r\n"
            bytes += part.utf8
            bytes += try body.read((range.lowerBound - offset)...(range.upperBound - offset))
            bytes += "\r\n".utf8
        }
        bytes += "--\(boundary)--\r\n".utf8
        self.bytes = bytes
    }
}
