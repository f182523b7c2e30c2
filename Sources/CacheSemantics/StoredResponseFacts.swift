/// Where a stored response's freshness lifetime came from (RFC 9111 §4.2.1, §4.2.2).
public enum LifetimeSource: UInt8, Hashable, Sendable, CustomStringConvertible {
    /// `s-maxage`, in a shared cache.
    case sMaxAge = 1
    /// `max-age`.
    case maxAge = 2
    /// `Expires` minus `Date`.
    case expires = 3
    /// A fraction of the time since `Last-Modified` (§4.2.2).
    case heuristic = 4
    /// No explicit lifetime and no heuristic applies: the response is stale at once.
    case none = 5
    /// Invalid or conflicting freshness information: stale at once (§4.2.1).
    case invalid = 6

    public var description: String {
        switch self {
        case .sMaxAge: return "s-maxage"
        case .maxAge: return "max-age"
        case .expires: return "Expires"
        case .heuristic: return "heuristic (Last-Modified)"
        case .none: return "none"
        case .invalid: return "invalid freshness information"
        }
    }
}

/// The parsed, precomputed facts of one stored response, so that a lookup does arithmetic,
/// not parsing.
///
/// Computed once when a response is stored or freshened (``CacheEngine/storageDecision(for:response:requestTime:responseTime:)``),
/// serialized beside the entry with ``serialized()``, and read back with
/// ``init(serialized:)``, which rejects bytes of another format version so the store can
/// recompute them from the stored fields.
public struct StoredResponseFacts: Hashable, Sendable {
    /// The serialization format version; bump when the layout changes. Version 2 added
    /// ``integrity``; bytes of version 1 still read (without it).
    public static let formatVersion: UInt8 = 2

    /// Boolean facts, packed.
    public struct Flags: OptionSet, Hashable, Sendable {
        public let rawValue: UInt16
        public init(rawValue: UInt16) { self.rawValue = rawValue }

        /// Whether `flag` is set; `contains` without the generic `SetAlgebra` dispatch.
        @inlinable
        public func has(_ flag: Flags) -> Bool { rawValue & flag.rawValue == flag.rawValue }

        /// Unqualified `no-cache`: validate before every reuse (RFC 9111 §5.2.2.4).
        public static let noCache = Flags(rawValue: 1 << 0)
        /// `must-revalidate` (§5.2.2.2).
        public static let mustRevalidate = Flags(rawValue: 1 << 1)
        /// `proxy-revalidate` (§5.2.2.8).
        public static let proxyRevalidate = Flags(rawValue: 1 << 2)
        /// `s-maxage` was present (§5.2.2.10: no stale reuse by shared caches).
        public static let hasSMaxAge = Flags(rawValue: 1 << 3)
        /// `immutable` (RFC 8246).
        public static let immutable = Flags(rawValue: 1 << 4)
        /// `public` (§5.2.2.9).
        public static let isPublic = Flags(rawValue: 1 << 5)
        /// Unqualified `private` (§5.2.2.7).
        public static let isPrivate = Flags(rawValue: 1 << 6)
        /// The body was not received in full (§3.3).
        public static let incomplete = Flags(rawValue: 1 << 7)
        /// Marked invalid (§4.4) or found stale by a HEAD (§4.3.5): validate before reuse.
        public static let invalidated = Flags(rawValue: 1 << 8)
        /// The freshness came from a targeted field such as `CDN-Cache-Control` (RFC 9213).
        public static let targeted = Flags(rawValue: 1 << 9)
    }

    /// The stored values, kept in one box shared by copies (``box``).
    struct Values: Hashable, Sendable {
        var status: Int
        var requestTime: Timestamp
        var responseTime: Timestamp
        var date: Timestamp
        var ageValue: Double
        var freshnessLifetime: Double
        var lifetimeSource: LifetimeSource
        var staleWhileRevalidate: Int?
        var staleIfError: Int?
        var flags: Flags
        var entityTag: EntityTag?
        var lastModified: Timestamp?
        var vary: Vary
        var varyValues: [String?]
        var varyRawValues: [String?]
        var contentLength: Int64?
        var integrity: String?
    }

    /// Facts are copied at every step of an exchange (the lookup, the answer, the update a `304`
    /// makes, the memos): one box, copied on write, makes each copy one retain instead of one per
    /// string and array they hold (five), and a revalidation copied them 19 times. Mutated only
    /// while uniquely referenced, so never shared while it changes, nor checked for exclusive
    /// access at run time.
    private final class Box: @unchecked Sendable {
        @exclusivity(unchecked) var values: Values
        init(_ values: Values) { self.values = values }
    }

    private var box: Box

    private var values: Values {
        _read { yield box.values }
        _modify {
            if !isKnownUniquelyReferenced(&box) { box = Box(box.values) }
            yield &box.values
        }
    }

    /// The bytes of the box the values are kept in (for memory accounting).
    package static let boxBytes = 16 + MemoryLayout<Values>.stride

    /// The response status code.
    public var status: Int {
        get { values.status }
        set { values.status = newValue }
    }
    /// `request_time` (RFC 9111 §4.2.3).
    public var requestTime: Timestamp {
        get { values.requestTime }
        set { values.requestTime = newValue }
    }
    /// `response_time` (§4.2.3).
    public var responseTime: Timestamp {
        get { values.responseTime }
        set { values.responseTime = newValue }
    }
    /// `date_value`: the `Date` field, or the response time when it is absent or invalid.
    public var date: Timestamp {
        get { values.date }
        set { values.date = newValue }
    }
    /// `age_value`: the `Age` field, or 0.
    public var ageValue: Double {
        get { values.ageValue }
        set { values.ageValue = newValue }
    }
    /// `freshness_lifetime` in seconds (§4.2.1, §4.2.2); may be negative for an `Expires`
    /// before `Date`.
    public var freshnessLifetime: Double {
        get { values.freshnessLifetime }
        set { values.freshnessLifetime = newValue }
    }
    /// Where ``freshnessLifetime`` came from.
    public var lifetimeSource: LifetimeSource {
        get { values.lifetimeSource }
        set { values.lifetimeSource = newValue }
    }
    /// `stale-while-revalidate` seconds (RFC 5861 §3).
    public var staleWhileRevalidate: Int? {
        get { values.staleWhileRevalidate }
        set { values.staleWhileRevalidate = newValue }
    }
    /// `stale-if-error` seconds (RFC 5861 §4).
    public var staleIfError: Int? {
        get { values.staleIfError }
        set { values.staleIfError = newValue }
    }
    /// Boolean facts.
    public var flags: Flags {
        get { values.flags }
        set { values.flags = newValue }
    }
    /// The `ETag`, when valid.
    public var entityTag: EntityTag? {
        get { values.entityTag }
        set { values.entityTag = newValue }
    }
    /// The `Last-Modified` time, when valid.
    public var lastModified: Timestamp? {
        get { values.lastModified }
        set { values.lastModified = newValue }
    }
    /// The stored `Vary`.
    public var vary: Vary {
        get { values.vary }
        set { values.vary = newValue }
    }
    /// The normalized values of the fields ``vary`` nominates, from the request that caused
    /// the response to be stored (RFC 9111 §4.1); `nil` where the field was absent.
    public var varyValues: [String?] {
        get { values.varyValues }
        set { values.varyValues = newValue }
    }

    /// Tells this response's variant apart from others under the same cache key, for
    /// ``CacheStorage``'s variant key: per field `Vary` nominates, `=` and its normalized value,
    /// or `-` when the field was absent (an absent field matches only an absent one, never an
    /// empty one: RFC 9111 §4.1), separated by U+0001; empty without `Vary`. Plain text, so
    /// every store keeps it byte for byte.
    package var variantKey: String {
        varyValues.map { $0.map { "=" + $0 } ?? "-" }.joined(separator: "\u{1}")
    }

    /// The same fields as the original request sent them (lines joined with ", "), so a
    /// later request that sends identical bytes matches without normalizing.
    public var varyRawValues: [String?] {
        get { values.varyRawValues }
        set { values.varyRawValues = newValue }
    }
    /// `Content-Length`, when valid.
    public var contentLength: Int64? {
        get { values.contentLength }
        set { values.contentLength = newValue }
    }
    /// What was checked of the body against the response's `Content-Digest` and `Repr-Digest`
    /// when it was stored (RFC 9530), in words for `explain` and `show` ("sha-256 verified when
    /// stored (Content-Digest)"); `nil` when the response sent no digest, or was stored before
    /// digests were checked. A body whose digest did not match is never stored, so there is no
    /// "failed" here.
    public var integrity: String? {
        get { values.integrity }
        set { values.integrity = newValue }
    }

    /// Creates facts from their parts; the engine normally computes them.
    public init(
        status: Int, requestTime: Timestamp, responseTime: Timestamp, date: Timestamp, ageValue: Double = 0,
        freshnessLifetime: Double, lifetimeSource: LifetimeSource, staleWhileRevalidate: Int? = nil,
        staleIfError: Int? = nil, flags: Flags = [], entityTag: EntityTag? = nil, lastModified: Timestamp? = nil,
        vary: Vary = Vary(fieldNames: []), varyValues: [String?] = [], varyRawValues: [String?]? = nil,
        contentLength: Int64? = nil
    ) {
        box = Box(
            Values(
                status: status,
                requestTime: requestTime,
                responseTime: responseTime,
                date: date,
                ageValue: ageValue,
                freshnessLifetime: freshnessLifetime,
                lifetimeSource: lifetimeSource,
                staleWhileRevalidate: staleWhileRevalidate,
                staleIfError: staleIfError,
                flags: flags,
                entityTag: entityTag,
                lastModified: lastModified,
                vary: vary,
                varyValues: varyValues,
                varyRawValues: varyRawValues ?? varyValues,
                contentLength: contentLength,
                integrity: nil))
    }

    /// `corrected_initial_age` (RFC 9111 §4.2.3):
    /// `max(apparent_age, age_value + response_delay)`.
    @inlinable
    public var correctedInitialAge: Double {
        let apparentAge = max(0, responseTime - date)
        let responseDelay = max(0, responseTime - requestTime)
        let correctedAgeValue = ageValue + responseDelay
        return max(apparentAge, correctedAgeValue)
    }

    /// `current_age` at `now` (RFC 9111 §4.2.3): `corrected_initial_age + resident_time`.
    /// A clock that went backwards counts as no resident time.
    @inlinable
    public func currentAge(at now: Timestamp) -> Double {
        correctedInitialAge + max(0, now - responseTime)
    }

    /// Whether the response has a validator: an entity tag or a Last-Modified time.
    public var hasValidator: Bool { entityTag != nil || lastModified != nil }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.box === rhs.box || lhs.values == rhs.values }

    public func hash(into hasher: inout Hasher) { values.hash(into: &hasher) }
}

extension StoredResponseFacts: CustomReflectable {
    /// The values, not the box they are kept in: what `print` and `dump` show.
    public var customMirror: Mirror {
        Mirror(self, children: Mirror(reflecting: values).children, displayStyle: .struct)
    }
}

// MARK: - Serialization

extension StoredResponseFacts {
    /// A compact binary form, starting with ``formatVersion``.
    public func serialized() -> [UInt8] {
        var writer = ByteWriter()
        writer.byte(Self.formatVersion)
        writer.varint(UInt64(max(0, status)))
        writer.double(requestTime.secondsSince1970)
        writer.double(responseTime.secondsSince1970)
        writer.double(date.secondsSince1970)
        writer.double(ageValue)
        writer.double(freshnessLifetime)
        writer.byte(lifetimeSource.rawValue)
        writer.optionalInt(staleWhileRevalidate)
        writer.optionalInt(staleIfError)
        writer.varint(UInt64(flags.rawValue))
        if let entityTag {
            writer.byte(entityTag.isWeak ? 2 : 1)
            writer.string(entityTag.opaqueTag)
        } else {
            writer.byte(0)
        }
        if let lastModified {
            writer.byte(1)
            writer.double(lastModified.secondsSince1970)
        } else {
            writer.byte(0)
        }
        writer.byte(vary.isAny ? 1 : 0)
        writer.varint(UInt64(vary.fieldNames.count))
        for (index, name) in vary.fieldNames.enumerated() {
            writer.string(name)
            for value in [varyValues, varyRawValues].map({ index < $0.count ? $0[index] : nil }) {
                if let value {
                    writer.byte(1)
                    writer.string(value)
                } else {
                    writer.byte(0)
                }
            }
        }
        writer.optionalInt(contentLength.map(Int.init))
        if let integrity {
            writer.byte(1)
            writer.string(integrity)
        } else {
            writer.byte(0)
        }
        return writer.bytes
    }

    /// Reads bytes written by ``serialized()`` (or by version 1, which had no ``integrity``);
    /// `nil` when they are of another format version, truncated or otherwise malformed.
    public init?(serialized bytes: some Collection<UInt8>) {
        var reader = ByteReader(Array(bytes))
        guard let version = reader.byte(), version == Self.formatVersion || version == 1,
            let status = reader.varint(), status < 1000,
            let requestTime = reader.double(), let responseTime = reader.double(), let date = reader.double(),
            let ageValue = reader.double(), let lifetime = reader.double(),
            let sourceByte = reader.byte(), let source = LifetimeSource(rawValue: sourceByte),
            let swr = reader.optionalInt(), let sie = reader.optionalInt(),
            let flagBits = reader.varint(), flagBits <= UInt64(UInt16.max),
            let tagKind = reader.byte()
        else { return nil }
        var entityTag: EntityTag?
        switch tagKind {
        case 0: break
        case 1, 2:
            guard let opaque = reader.string() else { return nil }
            entityTag = EntityTag(opaqueTag: opaque, isWeak: tagKind == 2)
        default: return nil
        }
        guard let hasLastModified = reader.byte(), hasLastModified <= 1 else { return nil }
        var lastModified: Timestamp?
        if hasLastModified == 1 {
            guard let seconds = reader.double() else { return nil }
            lastModified = Timestamp(secondsSince1970: seconds)
        }
        guard let isAny = reader.byte(), isAny <= 1, let count = reader.varint(), count <= 1024 else { return nil }
        var names: [String] = []
        var values: [String?] = []
        var rawValues: [String?] = []
        func optionalString(_ reader: inout ByteReader) -> String?? {
            guard let marker = reader.byte(), marker <= 1 else { return nil }
            if marker == 0 { return .some(nil) }
            return reader.string().map { .some($0) }
        }
        for _ in 0..<count {
            guard let name = reader.string(), let value = optionalString(&reader), let raw = optionalString(&reader)
            else { return nil }
            names.append(name)
            values.append(value)
            rawValues.append(raw)
        }
        guard let contentLength = reader.optionalInt() else { return nil }
        var integrity: String?
        if version == Self.formatVersion {
            switch reader.byte() {
            case 0: break
            case 1:
                guard let text = reader.string() else { return nil }
                integrity = text
            default: return nil
            }
        }
        guard reader.atEnd else { return nil }
        self.init(
            status: Int(status), requestTime: Timestamp(secondsSince1970: requestTime),
            responseTime: Timestamp(secondsSince1970: responseTime), date: Timestamp(secondsSince1970: date),
            ageValue: ageValue, freshnessLifetime: lifetime, lifetimeSource: source,
            staleWhileRevalidate: swr.map(Int.init), staleIfError: sie.map(Int.init),
            flags: Flags(rawValue: UInt16(flagBits)), entityTag: entityTag, lastModified: lastModified,
            vary: Vary(fieldNames: names, isAny: isAny == 1), varyValues: values, varyRawValues: rawValues,
            contentLength: contentLength.map(Int64.init))
        self.integrity = integrity
    }
}

/// Writes the compact binary forms the stores keep (varints, little-endian doubles,
/// length-prefixed strings); ``ByteReader`` reads them back and never traps on bad bytes.
package struct ByteWriter {
    package var bytes: [UInt8] = []

    package init() {}

    /// A writer whose array has room for `capacity` bytes.
    package init(capacity: Int) { bytes.reserveCapacity(capacity) }

    /// How many bytes ``varint(_:)`` writes for `value`.
    package static func varintSize(_ value: UInt64) -> Int { max(1, (64 - value.leadingZeroBitCount + 6) / 7) }

    package mutating func byte(_ value: UInt8) { bytes.append(value) }

    package mutating func varint(_ value: UInt64) {
        var remaining = value
        while remaining >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: remaining) | 0x80)
            remaining >>= 7
        }
        bytes.append(UInt8(remaining))
    }

    package mutating func double(_ value: Double) { fixed64(value.bitPattern) }

    package mutating func fixed64(_ value: UInt64) {
        withUnsafeBytes(of: value.littleEndian) { bytes += $0 }
    }

    package mutating func optionalInt(_ value: Int?) {
        if let value {
            byte(1)
            varint(UInt64(max(0, value)))
        } else {
            byte(0)
        }
    }

    package mutating func string(_ value: String) {
        varint(UInt64(value.utf8.count))
        // The bytes in place: appending the UTF-8 view went the general sequence way.
        ASCII.withUTF8(value) { bytes.append(contentsOf: $0) }
    }

    package mutating func blob(_ value: [UInt8]) {
        varint(UInt64(value.count))
        bytes += value
    }
}

package struct ByteReader {
    let bytes: [UInt8]
    var index = 0

    package init(_ bytes: [UInt8]) { self.bytes = bytes }

    package var atEnd: Bool { index == bytes.count }

    package mutating func byte() -> UInt8? {
        guard index < bytes.count else { return nil }
        defer { index += 1 }
        return bytes[index]
    }

    package mutating func varint() -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while let next = byte() {
            guard shift < 64 else { return nil }
            result |= UInt64(next & 0x7F) << shift
            if next & 0x80 == 0 { return result }
            shift += 7
        }
        return nil
    }

    package mutating func double() -> Double? {
        guard let bits = fixed64() else { return nil }
        let value = Double(bitPattern: bits)
        return value.isFinite ? value : nil
    }

    package mutating func fixed64() -> UInt64? {
        guard bytes.count - index >= 8 else { return nil }
        var bits: UInt64 = 0
        for offset in 0..<8 { bits |= UInt64(bytes[index + offset]) << (8 * UInt64(offset)) }
        index += 8
        return bits
    }

    package mutating func optionalInt() -> UInt64?? {
        guard let marker = byte() else { return nil }
        switch marker {
        case 0: return .some(nil)
        case 1:
            guard let value = varint(), value <= UInt64(Int64.max) else { return nil }
            return .some(value)
        default: return nil
        }
    }

    package mutating func string() -> String? {
        guard let count = varint(), count <= UInt64(bytes.count - index) else { return nil }
        let start = index
        index += Int(count)
        return bytes.withUnsafeBufferPointer { ASCII.validatedText(UnsafeBufferPointer(rebasing: $0[start..<index])) }
    }

    package mutating func blob() -> [UInt8]? {
        guard let count = varint(), count <= UInt64(bytes.count - index) else { return nil }
        let start = index
        index += Int(count)
        return Array(bytes[start..<index])
    }
}
