/// One `range-spec` of a `Range: bytes=` field (RFC 9110 §14.1.1).
public enum ByteRangeSpec: Hashable, Sendable {
    /// `first-last`: bytes `first` through `last`, inclusive.
    case closed(first: Int64, last: Int64)
    /// `first-`: from `first` to the end.
    case from(Int64)
    /// `-length`: the final `length` bytes.
    case suffix(Int64)
}

/// A `Range` request field with the `bytes` unit (RFC 9110 §14.2).
///
/// Another unit, a syntax error, a `first > last` pair or more than ``maximumRanges``
/// ranges make the field invalid, and RFC 9110 §14.2 lets a recipient ignore it: parsing
/// returns `nil`.
public struct ByteRangeRequest: Hashable, Sendable {
    /// More ranges than this are treated as an attempt to exhaust the server (RFC 9110 §17.15).
    public static let maximumRanges = 100

    /// The requested ranges, in field order.
    public var ranges: [ByteRangeSpec]

    /// Creates a request for `ranges`.
    public init(ranges: [ByteRangeSpec]) { self.ranges = ranges }

    /// Parses a `Range` field value such as `bytes=0-499, -200`.
    public init?(_ value: some StringProtocol) {
        let text = ASCII.trimmed(Substring(value))
        guard let equals = text.utf8.firstIndex(of: UInt8(ascii: "=")),
            ASCII.equalsIgnoringCase(ASCII.trimmed(text[..<equals]), "bytes")
        else { return nil }
        let members = ASCII.splitList(text[text.utf8.index(after: equals)...])
        guard !members.isEmpty, members.count <= Self.maximumRanges else { return nil }
        var ranges: [ByteRangeSpec] = []
        for member in members {
            guard let dash = member.utf8.firstIndex(of: UInt8(ascii: "-")) else { return nil }
            let first = member[..<dash]
            let last = member[member.utf8.index(after: dash)...]
            let cap = Int(Int64.max / 2)
            if first.isEmpty {
                guard let length = ASCII.parseDigits(last, cap: cap) else { return nil }
                ranges.append(.suffix(Int64(length)))
            } else {
                guard let start = ASCII.parseDigits(first, cap: cap) else { return nil }
                if last.isEmpty {
                    ranges.append(.from(Int64(start)))
                } else {
                    guard let end = ASCII.parseDigits(last, cap: cap), end >= start else { return nil }
                    ranges.append(.closed(first: Int64(start), last: Int64(end)))
                }
            }
        }
        self.ranges = ranges
    }

    /// The satisfiable ranges for a representation of `length` bytes, as inclusive offsets,
    /// in request order (RFC 9110 §14.1.2). Empty when none is satisfiable (answer 416).
    public func satisfiableRanges(length: Int64) -> [ClosedRange<Int64>] {
        ranges.compactMap { spec in
            switch spec {
            case .closed(let first, let last):
                return first < length ? first...min(last, length - 1) : nil
            case .from(let first):
                return first < length ? first...(length - 1) : nil
            case .suffix(let count):
                return count > 0 && length > 0 ? max(0, length - count)...(length - 1) : nil
            }
        }
    }

    /// The field-value form.
    public var fieldValue: String {
        "bytes="
            + ranges.map { spec in
                switch spec {
                case .closed(let first, let last): return "\(first)-\(last)"
                case .from(let first): return "\(first)-"
                case .suffix(let count): return "-\(count)"
                }
            }.joined(separator: ", ")
    }
}

/// A `Content-Range` field with the `bytes` unit (RFC 9110 §14.4).
public struct ContentRange: Hashable, Sendable {
    /// The enclosed range, inclusive; `nil` for the unsatisfied form `bytes */length`.
    public var range: ClosedRange<Int64>?
    /// The complete length, or `nil` when unknown (`/*`).
    public var completeLength: Int64?

    /// Creates a value from its parts.
    public init(range: ClosedRange<Int64>?, completeLength: Int64?) {
        self.range = range
        self.completeLength = completeLength
    }

    /// Parses `bytes first-last/length`, `bytes first-last/*` or `bytes */length`; `nil`
    /// when invalid, including a range that ends at or past the complete length.
    public init?(_ value: some StringProtocol) {
        let text = ASCII.trimmed(Substring(value))
        guard let space = text.utf8.firstIndex(of: UInt8(ascii: " ")), ASCII.equalsIgnoringCase(text[..<space], "bytes")
        else {
            return nil
        }
        let rest = ASCII.trimmed(text[text.utf8.index(after: space)...])
        guard let slash = rest.utf8.firstIndex(of: UInt8(ascii: "/")) else { return nil }
        let rangePart = rest[..<slash]
        let lengthPart = rest[rest.utf8.index(after: slash)...]
        let cap = Int(Int64.max / 2)
        var length: Int64?
        if !lengthPart.utf8.elementsEqual("*".utf8) {
            guard let parsed = ASCII.parseDigits(lengthPart, cap: cap) else { return nil }
            length = Int64(parsed)
        }
        if rangePart.utf8.elementsEqual("*".utf8) {
            guard length != nil else { return nil }
            range = nil
        } else {
            guard let dash = rangePart.utf8.firstIndex(of: UInt8(ascii: "-")),
                let first = ASCII.parseDigits(rangePart[..<dash], cap: cap),
                let last = ASCII.parseDigits(rangePart[rangePart.utf8.index(after: dash)...], cap: cap),
                first <= last
            else { return nil }
            if let length, Int64(last) >= length { return nil }
            range = Int64(first)...Int64(last)
        }
        completeLength = length
    }

    /// The field-value form.
    public var fieldValue: String {
        let lengthText = completeLength.map(String.init) ?? "*"
        guard let range else { return "bytes */\(lengthText)" }
        return "bytes \(range.lowerBound)-\(range.upperBound)/\(lengthText)"
    }
}
